"""A grading lane: one judge process that grades submissions one after another, and the batch's
handle on it (:class:`Lane`, the client side; the server side is :func:`main`).

``python -m autograder.batch.lane`` reads one job per line on stdin (:class:`~autograder.batch.jobs.Job`),
runs every check on it in this process (pytest, the plugin, the checks: imported once; checks answered as
on an earlier passing run are replayed, see :mod:`autograder.judge.replay`) and answers one line per job on
stdout (:class:`~autograder.batch.jobs.Graded` or :class:`~autograder.batch.jobs.Failed`). Student code runs
in workers forked by the zygote, each in a sandbox of its own; the reference solution's worker is shared by
all jobs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from autograder.batch.jobs import Failed, Graded, Job, answer_from_line
from autograder.lab import Lab
from autograder.limits import Limits, add_options, amount, from_options


class Lane:
    """The batch's side of one lane: starts the judge process (:func:`main`), sends it a job at a
    time and reads its answer; restarts it if it ever stops. With ``log``, the process's standard error
    (each job's pytest output and timings, tracebacks, what its zygote said before it closed its streams)
    goes there, up to ``Limits.lane_log_bytes``; without, nowhere."""

    def __init__(self, lab: Lab, limits: Limits, replay: bool = True, files_required: bool = True,
                 log: Path | None = None, folders: Path | None = None):
        self.lab, self.limits, self.replay, self.files_required, self.log = lab, limits, replay, files_required, log
        self.folders = folders  # where its judge makes its folders (workers', mutants'): its batch removes it
        self.proc = None
        self.logged = 0  # bytes of the log written: the bound holds across restarts
        self.logging: threading.Thread | None = None

    def start(self):
        from autograder.harness.clean_start import start_clean

        self.proc = start_clean(
            "autograder.batch.lane", ["--checks", str(self.lab.checks), "--reference", str(self.lab.reference),
                                      *self.limits.argv(), *judging_argv(self.replay, self.files_required),
                                      *(["--debug"] if self.log else []),
                                      *(["--folders", str(self.folders)] if self.folders else [])],
            self.limits.judge_memory_bytes, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if self.log else subprocess.DEVNULL, text=True)
        if self.log:
            self.logging = threading.Thread(target=self.keep_log, args=(self.proc.stderr,), daemon=True)
            self.logging.start()

    def keep_log(self, stderr) -> None:
        """Copy the process's standard error into the log until it closes, at most ``lane_log_bytes``."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        cut = f"[the log is cut here: over {amount(self.limits.lane_log_bytes, 'bytes')}]\n"
        room = self.limits.lane_log_bytes - len(cut.encode())  # the cut's line counts too
        with open(self.log, "a", encoding="utf-8", errors="replace") as log:
            for line in stderr:  # read to the end, cut or not: a lane blocks on a full pipe
                if self.logged <= room:
                    self.logged += len(line.encode())
                    log.write(line if self.logged <= room else cut)
                    log.flush()

    def grade(self, staged: Path, results: Path) -> Graded | Failed:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.proc.stdin.write(Job(str(staged), str(results)).to_line())
        self.proc.stdin.flush()
        # The lane enforces each module's budget itself; this is only a backstop.
        timer = threading.Timer(self.limits.module_budget * len(self.lab.parts) * 2 + 120, self.proc.kill)
        timer.start()
        try:
            line = self.proc.stdout.readline()
        finally:
            timer.cancel()
        if not line:
            self.proc = None
            return Failed("the grading process stopped" + ("" if self.log else
                                                           " (make grade DEBUG=1 keeps each lane's log)"))
        return answer_from_line(line)

    def kill(self) -> None:
        """End its judge now, a grade in flight with it (an interrupt); its zygote and workers end with it."""
        proc = self.proc  # another thread may restart or drop it meanwhile
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.logging is not None:
            self.logging.join(10)  # the log whole when the run says where it is


def judging_argv(replay: bool, files_required: bool) -> list[str]:
    """The judge's options beyond the limits (a lane's and its pytest's alike)."""
    return [*([] if replay else ["--no-replay"]), *([] if files_required else ["--no-confinement"])]


# -- the lane's own process -----------------------------------------------------------------------
def grade_one(job: Job, checks: str, reference: str | None, limits: Limits, replay: bool = True,
              files_required: bool = True, debug: bool = False) -> Graded | Failed:
    import pytest  # the judge's side only: the batch that starts lanes never imports it

    from autograder.judge.plugin import checks_command_line, run_checks
    from autograder.judge.session import UNCONFINED_EXIT, refusal

    started, log = time.monotonic(), io.StringIO()
    args = checks_command_line(checks, job.submission, None, job.results, reference)
    args += [*limits.argv(), *judging_argv(replay, files_required),
             # Plugins a batch does not need and that cost a lane time on every submission.
             "-p", "no:unraisableexception", "-p", "no:logging", "-p", "no:warnings",
             # Each failure's traceback, drawn by pytest and then replaced by the kit's message (plugin's makereport),
             # is drawn only for a lane's log (--debug), the one reader of pytest's failures section: 4-7 % of the
             # judge's CPU on a cohort whose checks fail (profiled: TracebackException.format, ast.parse per line).
             *([] if debug else ["--tb=no"])]
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        code = run_checks(args)
    if debug:  # the lane's log (Lane.keep_log): which job, what pytest said, how long it took
        print(f"== {job.submission}: pytest exit code {int(code)} after {time.monotonic() - started:.2f} s\n"
              f"{log.getvalue()}", file=sys.stderr, flush=True)
    if code == UNCONFINED_EXIT:  # no student code ran: the batch refuses before grading (grade.refuse_unconfined)
        return Failed(refusal[-1])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return Failed(f"the checks could not run (pytest exit code {int(code)}):\n{log.getvalue()[-3000:]}")
    return Graded(job.results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.batch.lane")
    parser.add_argument("--checks", required=True)
    parser.add_argument("--reference")
    add_options(parser.add_argument)
    parser.add_argument("--no-replay", action="store_true", help="run every check in full (autograder.judge.replay)")
    parser.add_argument("--no-confinement", action="store_true", help="grade where student code's files are not confined")
    parser.add_argument("--debug", action="store_true", help="say each job's pytest output and timing on stderr")
    parser.add_argument("--folders", help="make the judge's folders here (its batch removes them, also when it kills "
                        "the lane)")
    options = parser.parse_args(argv)
    tempfile.tempdir = options.folders  # None: the system's
    limits = from_options(options)
    # The back-stop: what a submission makes the judge hold is bounded already (codec's frames, a
    # check's answers); this keeps one lane from taking the machine. A lane normally maps about 0.7 GiB.
    resource.setrlimit(resource.RLIMIT_AS, (limits.judge_memory_bytes, limits.judge_memory_bytes))
    from autograder.harness.clean_start import restart_clean

    # Before this process reads a job, so its zygote holds nothing of the lane's (a lane its batch started
    # clean, Lane.start, has its zygote already and the limit above from the start).
    restart_clean("autograder.batch.lane")
    answers = sys.stdout
    sys.stdout = sys.stderr  # only answers go to the orchestrator's pipe
    for line in sys.stdin:
        job = Job.from_line(line)
        try:
            answer = grade_one(job, options.checks, options.reference, limits, not options.no_replay,
                               not options.no_confinement, options.debug)
        except Exception:  # noqa: BLE001 - a judge-side failure is reported for this job, the lane goes on
            answer = Failed(traceback.format_exc()[-3000:])
            print(traceback.format_exc(), file=sys.stderr, flush=True)
        answers.write(answer.to_line())
        answers.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
