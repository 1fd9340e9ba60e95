"""`make new-lab`: an instructor adds a lab by adding a folder, and the scaffold already grades."""

import csv
import os
import shutil
import subprocess
import sys

import pytest

from conftest import KIT, executed_notebook

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast


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
    notebook = executed_notebook(kit / "solutions" / "demo" / "demo_lab.ipynb")
    shown = "".join(out.get("text", "") + out.get("data", {}).get("text/plain", "")
                    for cell in notebook.cells for out in cell.get("outputs", []))
    assert shown.count("✓ ") == 3 and "does not match" not in shown


@pytest.mark.parametrize("args, said", [
    (["demo", "--parts", "first"], "exists already"),
    (["Bad-Name", "--parts", "first"], "not Bad-Name"),
    (["other", "--parts", "a,a"], "distinct"),
])
def test_new_lab_refuses_what_would_not_work(kit, args, said):
    run = kit_command(kit, "new-lab", *args, check=False)
    assert run.returncode != 0 and said in run.stderr
