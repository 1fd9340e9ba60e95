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


def runner_results(lab: Lab, results: dict, points: dict) -> dict[str, dict]:
    """``{part: runner result}`` for every part, from the checks' results JSON; a part whose
    checks did not run is an ``error`` worth its points, so "Points X/Y" keeps its Y."""
    runners = {}
    for part in lab.part_ids:
        checks = [c for c in results.get("checks", []) if c["part"] == part]
        if not checks:
            runners[part] = {"version": 1, "status": "error", "max_score": round(sum(points.get(part, {}).values()), 6),
                             "tests": [{"name": f"{part}: the checks could not run", "status": "error", "score": 0,
                                        "message": results.get("error", "no result"), "line_no": 0, "test_code": ""}]}
            continue
        tests = [{"name": c["check"], "status": "pass" if c["passed"] else "fail",
                  "score": c["points"] if c["passed"] else 0, "message": c["message"], "line_no": 0,
                  "test_code": ""} for c in checks]
        runners[part] = {"version": 1, "status": "pass" if all(c["passed"] for c in checks) else "fail",
                         "max_score": round(sum(c["points"] for c in checks), 6), "tests": tests}
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
        if code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and results_json.is_file():
            results = json.loads(results_json.read_text())
        else:
            results = {"error": f"the checks could not run (pytest exit code {int(code)}); see the step's log"}
    runners = runner_results(Lab.load(checks.parent), results, load_points(checks))
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
