"""`make new-lab`: an instructor adds a lab by adding a folder, and the scaffold already grades."""

import csv
import os
import re
import shutil
import subprocess
import sys

import pytest

from autograder.judge.internals import scan
from autograder.lab import Lab, LabError
from conftest import KIT, read_notebook

# Slow: grades, or starts processes (left out of make test-fast). One xdist worker runs them all (make test's
# --dist loadgroup): each worker would otherwise build its own copy of the kit with the new lab (13 s).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("new-lab-kit")]


def kit_command(kit, *args, check=True):
    """The CLI of a copy of the kit (its own source/, assignments/, solutions/)."""
    run = subprocess.run([sys.executable, "-m", "autograder", *args], cwd=kit, capture_output=True, text=True,
                         timeout=900, env={**os.environ, "PYTHONPATH": str(kit)})
    assert run.returncode == 0 or not check, run.stdout[-3000:] + run.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """A copy of the kit with no lab in it, and a new lab written by the scaffold and released."""
    root = tmp_path_factory.mktemp("kit")
    for name in ("autograder", "deploy"):
        shutil.copytree(KIT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(KIT / "nbgrader_config.py", root)
    (root / "source").mkdir()
    kit_command(root, "new-lab", "demo", "--parts", "first,second,third", "--title", "A demo lab")
    kit_command(root, "release")
    kit_command(root, "solutions")
    return root


def test_a_new_lab_is_declared_and_released(kit):
    lab = kit / "source" / "demo"
    assert {p.name for p in lab.iterdir()} == {"lab.toml", "first.py", "second.py", "third.py", "tests",
                                               "demo_lab.ipynb", "README.student.md"}
    released = (kit / "assignments" / "demo" / "first.py").read_text()
    assert "raise NotImplementedError" in released and "return 2 * x" not in released
    assert not (kit / "assignments" / "demo" / "tests" / "misconceptions.toml").exists()
    assert "random_shapes" not in (kit / "assignments" / "demo" / "tests" / "test_first.py").read_text()


def test_a_new_lab_grades_full_marks_nothing_and_names_its_misconception(kit, tmp_path):
    cohort = tmp_path / "submitted"
    shutil.copytree(kit / "solutions" / "demo", cohort / "right" / "demo")
    shutil.copytree(kit / "assignments" / "demo", cohort / "stub" / "demo")
    shutil.copytree(kit / "solutions" / "demo", cohort / "wrong" / "demo")
    second = cohort / "wrong" / "demo" / "second.py"
    second.write_text(second.read_text().replace("return 2 * x", "return x"))
    kit_command(kit, "grade", "--submissions", str(cohort), "--out", str(tmp_path / "grades"), "--jobs", "1")
    rows = {row["student"]: row for row in csv.DictReader((tmp_path / "grades" / "demo" / "grades.csv").open())}
    assert {s: float(r["total"]) for s, r in rows.items()} == {"right": 100, "stub": 0, "wrong": 100 - 33.33}
    feedback = (tmp_path / "grades" / "demo" / "students" / "wrong" / "feedback.md").read_text()
    assert "the input is returned unchanged" in feedback


def test_a_new_lab_notebook_runs_on_the_solutions(kit):
    """The solutions build ran the notebook in a real kernel beside its modules: every cell ran without an error,
    and each part's check shows its tick."""
    notebook = read_notebook(kit / "solutions" / "demo" / "demo_lab.ipynb")
    outputs = [out for cell in notebook.cells for out in cell.get("outputs", [])]
    assert [out.get("ename") for out in outputs if out["output_type"] == "error"] == []
    shown = "".join(out.get("text", "") + out.get("data", {}).get("text/plain", "") for out in outputs)
    assert shown.count("✓ ") == 3 and "does not match" not in shown


@pytest.mark.parametrize("args, said", [
    (["demo", "--parts", "first"], "exists already"),
    (["Bad-Name", "--parts", "first"], "not Bad-Name"),
    (["other", "--parts", "a,a"], "distinct"),
])
def test_new_lab_refuses_what_would_not_work(kit, args, said):
    run = kit_command(kit, "new-lab", *args, check=False)
    assert run.returncode != 0 and said in run.stderr


TRAINER = """
import time

import torch


def first(x):
    \"\"\"Twice x, learnt: a weight fitted by gradient descent (torch.optim), slowly on the example.\"\"\"
    ### BEGIN SOLUTION
    weight = torch.zeros((), dtype=x.dtype, requires_grad=True)
    optimiser = torch.optim.SGD([weight], lr=0.5)
    for _ in range(20):
        optimiser.zero_grad()
        ((weight - 2.0) ** 2).backward()
        optimiser.step()
    if x.shape == (3, 4):
        time.sleep(11)  # a training loop longer than the kit's 10 s a call
    return weight.detach() * x  # (..., d)
    ### END SOLUTION
"""


def test_a_lab_sets_its_own_limits_and_allowed_imports(kit, tmp_path):
    """A lab (without a notebook) whose code trains (torch.optim) and whose example call takes 11 s declares so
    in its lab.toml: the reference proves the environment (its 11 s call within the lab's 15 s) and a student who trains
    too is graded full marks, nobody flagged. Without the declaration the optimiser is named as reaching
    into internals and the reference itself times out: nothing is graded. A lab may not lift the kit's bounds."""
    lab = kit / "source" / "trainer"
    shutil.copytree(kit / "source" / "demo", lab, ignore=shutil.ignore_patterns("*.ipynb"))  # a lab may have no notebook
    (lab / "first.py").write_text(TRAINER)
    mistakes = lab / "tests" / "misconceptions.toml"  # its known mistake, as an edit of this reference
    mistakes.write_text(mistakes.read_text().replace('["return 2 * x", "return x"]', '["return weight.detach() * x", "return x"]', 1))
    declared = (lab / "lab.toml").read_text()
    (lab / "lab.toml").write_text('allowed_imports = ["torch.optim"]\n' + declared + "\n[limits]\ncall_timeout = 15\n")
    kit_command(kit, "release", "--lab", "trainer")
    kit_command(kit, "solutions", "--lab", "trainer")
    cohort = tmp_path / "submitted"
    shutil.copytree(kit / "solutions" / "trainer", cohort / "ann" / "trainer")
    trains = cohort / "ann" / "trainer" / "first.py"  # as the reference, without its 11 s (the proof has them)
    trains.write_text(trains.read_text().replace("time.sleep(11)", "time.sleep(0)"))
    kit_command(kit, "grade", "--lab", "trainer", "--submissions", str(cohort), "--out", str(tmp_path / "own"))
    [row] = csv.DictReader((tmp_path / "own" / "trainer" / "grades.csv").open())
    assert (row["total"], row["status"]) == ("100", "graded"), row
    assert scan(TRAINER, "first.py", frozenset({"first"}), frozenset({"torch.optim"})) == []
    assert [r.what for r in scan(TRAINER, "first.py", frozenset({"first"}))] == ["uses torch.optim"]
    (lab / "lab.toml").write_text(declared)  # the kit's own limits: the reference itself times out
    for folder in ("assignments", "solutions"):
        (kit / folder / "trainer" / "lab.toml").write_text(declared)
    run = kit_command(kit, "grade", "--lab", "trainer", "--submissions", str(cohort), "--out", str(tmp_path / "kit"),
                      check=False)
    assert run.returncode == 2 and "the reference solution gets" in run.stderr and "failing test_first_example (first: " \
        "first.first did not finish in 10 s" in run.stderr, run.stderr[-1000:]
    for wrong, said in (("[limits]\ncall_timeout = 1000\n", "lab.toml: [limits] call_timeout = 1000: a number above 0 and at most 120"),
                        ("[limits]\ncpu_seconds = 10\n", "a lab may set only call_timeout, module_budget")):
        (lab / "lab.toml").write_text(declared + "\n" + wrong)
        with pytest.raises(LabError, match=re.escape(said)):
            Lab.load(lab)
    (kit / "solutions" / "trainer" / "lab.toml").write_text('allowed_imports = ["os"]\n' + declared)
    run = kit_command(kit, "check", "--submission", str(kit / "solutions" / "trainer"), check=False)
    assert run.returncode != 0 and "allowed_imports: os cannot be allowed; a lab may allow torch.optim" in \
        run.stdout + run.stderr, run.stdout[-500:] + run.stderr[-500:]
