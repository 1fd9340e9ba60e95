"""The private-internals shortcuts (autograder/shortcuts.py): each still does what it claims on the pinned
versions, each is taken only through the table, and AUTOGRADER_PLAIN=1 turns them all off with grades
unchanged."""

import json
import os
import re
import subprocess
import sys

import pytest

from autograder import shortcuts
from conftest import DEMO, KIT, LAB

PACKAGE = KIT / "autograder"


def run(code: str, plain: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(KIT)}
    env.pop("AUTOGRADER_PLAIN", None)
    if plain:
        env["AUTOGRADER_PLAIN"] = "1"
    return subprocess.run([sys.executable, "-c", code], cwd=KIT, capture_output=True, text=True, timeout=300, env=env)


def test_every_shortcut_is_declared_and_taken_through_the_table():
    taken = set()
    for path in PACKAGE.rglob("*.py"):
        taken |= set(re.findall(r"shortcuts\.on\(\"(\w+)\"\)", path.read_text()))
    assert taken == set(shortcuts.SHORTCUTS)  # none undeclared, none declared and never taken
    with pytest.raises(KeyError, match="declare it in SHORTCUTS"):
        shortcuts.on("something_new")


@pytest.mark.slow
def test_no_dynamo_keeps_torch_dynamo_unimported_and_plain_imports_it():
    """The first call under the ban's dispatch mode: without the shortcut torch imports torch._dynamo."""
    probe = ("import sys, torch; from autograder.harness.guards import ForbiddenOperators; "
             "x = torch.ones(2)\nwith ForbiddenOperators(frozenset()): x + 1\nprint('torch._dynamo' in sys.modules)")
    assert run(probe).stdout.strip() == "False"
    assert run(probe, plain=True).stdout.strip() == "True"  # what the shortcut saves is real on this torch


@pytest.mark.slow
def test_no_finalizing_ends_with_the_status_and_the_output_whole_either_way():
    probe = ("import atexit; from autograder.ending import end_without_finalizing; "
             "atexit.register(lambda: print('registered ran', flush=True)); print('said', end=''); "
             "end_without_finalizing(3)")
    for plain in (False, True):
        ended = run(probe, plain)
        assert (ended.returncode, ended.stdout) == (3, "saidregistered ran\n"), (plain, ended)


@pytest.mark.slow
def test_plain_grades_the_demo_cohort_as_the_shortcuts_do(course, tmp_path):
    env = {**os.environ, "AUTOGRADER_PLAIN": "1"}
    subprocess.run([sys.executable, "-m", "autograder", "grade", "--lab", LAB.name, "--submissions", str(DEMO),
                    "--out", str(tmp_path), "--jobs", "1"], cwd=KIT, env=env, check=True, capture_output=True,
                   timeout=900)
    fast = course[0] / LAB.name
    assert (tmp_path / LAB.name / "grades.csv").read_text() == (fast / "grades.csv").read_text()
    for student in (fast / "students").iterdir():
        def verdicts(folder):
            record = json.loads((folder / "summary.json").read_text())
            return [(c["name"], c["passed"], c["points"], c.get("failure")) for c in record["checks"]]
        assert verdicts(tmp_path / LAB.name / "students" / student.name) == verdicts(student), student.name
