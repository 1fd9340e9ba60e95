"""A grading lane: one judge process that grades submissions one after another.

``python -m autograder.batch.lane`` reads one JSON job per line on stdin
(``{"submission", "results"}``), runs every check on it in this process (pytest, the plugin,
the checks: imported once; checks answered as on an earlier passing run are replayed, see
:mod:`autograder.judge.replay`) and answers one JSON line per job on stdout
(``{"results": path}`` or ``{"error": text}``). Student code runs in workers forked by the
zygote, each in a sandbox of its own; the reference solution's worker is shared by all jobs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import resource
import sys
import traceback

import pytest

from autograder.harness.remote import CALL_TIMEOUT, MODULE_BUDGET
from autograder.judge.plugin import checks_command_line


def grade_one(job: dict, checks: str, reference: str | None, timeout: float, budget: float,
              replay: bool = True) -> dict:
    log = io.StringIO()
    args = checks_command_line(checks, job["submission"], None, job["results"], reference)
    args += ["--call-timeout", str(timeout), "--budget", str(budget),
             *([] if replay else ["--no-replay"]),
             # Plugins a batch does not need and that cost a lane time on every submission.
             "-p", "no:unraisableexception", "-p", "no:logging", "-p", "no:warnings"]
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        code = pytest.main(args)
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return {"error": f"the checks could not run (pytest exit code {int(code)}):\n{log.getvalue()[-3000:]}"}
    return {"results": job["results"]}


# The judge's own memory ceiling (address space): what a submission makes it hold is bounded
# already (codec.MAX_FRAME_BYTES, student.MAX_CHECK_BYTES); this is the back-stop, so one lane
# can never take the machine. A lane normally maps about 0.7 GiB.
JUDGE_MEMORY_BYTES = 4 * 1024**3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.batch.lane")
    parser.add_argument("--checks", required=True)
    parser.add_argument("--reference")
    parser.add_argument("--call-timeout", type=float, default=CALL_TIMEOUT)
    parser.add_argument("--budget", type=float, default=MODULE_BUDGET)
    parser.add_argument("--no-replay", action="store_true", help="run every check in full (autograder.judge.replay)")
    options = parser.parse_args(argv)
    resource.setrlimit(resource.RLIMIT_AS, (JUDGE_MEMORY_BYTES, JUDGE_MEMORY_BYTES))
    answers = sys.stdout
    sys.stdout = sys.stderr  # only answers go to the orchestrator's pipe
    for line in sys.stdin:
        job = json.loads(line)
        try:
            answer = grade_one(job, options.checks, options.reference, options.call_timeout,
                               options.budget, not options.no_replay)
        except Exception:  # noqa: BLE001 - a judge-side failure is reported for this job, the lane goes on
            answer = {"error": traceback.format_exc()[-3000:]}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
