"""GitHub Classroom: the public checks' results in the format of its grading reporter.

``python -m autograder classroom-run`` runs the public checks on a student's repository once and
appends one step output per part to the file named by ``$GITHUB_OUTPUT``:
``<part>=<base64 JSON>``, the runner result that ``classroom-resources/autograding-grading-reporter``
decodes from ``<PART>_RESULTS``. Each check is one test scored with its points, so a part
earns partial credit; the reporter adds ``score`` over tests and ``max_score`` over parts
into the "Points X/Y" it reports to Classroom.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from pathlib import Path

import pytest

from autograder.judge.plugin import checks_command_line, load_points
from autograder.lab import Lab
from autograder.results import RunResults, read_run, total


def runner_results(lab: Lab, run: RunResults | None, points: dict, error: str = "no result") -> dict[str, dict]:
    """``{part: runner result}`` for every part, from the run of the checks (None: they could not
    run, ``error`` says why); a part whose checks did not run is an ``error`` worth its points,
    so "Points X/Y" keeps its Y."""
    runners = {}
    for part in lab.part_ids:
        checks = [c for c in (run.checks if run else []) if c.part == part]
        if not checks:
            runners[part] = {"version": 1, "status": "error", "max_score": round(sum(points.get(part, {}).values()), 6),
                             "tests": [{"name": f"{part}: the checks could not run", "status": "error", "score": 0,
                                        "message": error, "line_no": 0, "test_code": ""}]}
            continue
        tests = [{"name": c.name, "status": "pass" if c.passed else "fail", "score": c.points if c.passed else 0,
                  "message": c.message, "line_no": 0, "test_code": ""} for c in checks]
        runners[part] = {"version": 1, "status": "pass" if all(c.passed for c in checks) else "fail",
                         "max_score": total(checks), "tests": tests}
    return runners


def encode_runner(result: dict) -> str:
    return base64.b64encode(json.dumps(result).encode()).decode()


def run(submission: Path, output: Path | None) -> int:
    """Grade ``submission`` (a lab's folder) and write one step output per part (always every
    part: the reporter needs each); the exit status is 0, so the reporter step runs and decides."""
    checks = submission / "tests"
    with tempfile.TemporaryDirectory(prefix="autograder-classroom-") as tmp:
        results_json = Path(tmp) / "results.json"
        code = pytest.main(checks_command_line(checks, submission, None, str(results_json)) + ["--tb=no"])
        ran = code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and results_json.is_file()
        run = read_run(results_json) if ran else None
    runners = runner_results(Lab.load(checks.parent), run, load_points(checks),
                             f"the checks could not run (pytest exit code {int(code)}); see the step's log")
    lines = "".join(f"{part}={encode_runner(result)}\n" for part, result in runners.items())
    if output is None:
        print(lines, end="")
    else:
        with open(output, "a", encoding="utf-8") as step_outputs:
            step_outputs.write(lines)
    return 0


def default_output() -> Path | None:
    path = os.environ.get("GITHUB_OUTPUT")
    return Path(path) if path else None
