"""`make grade NBGRADER=1`: automatic points in nbgrader's gradebook, exported with the manual ones."""

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEMO, KIT

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast


def grade_into_gradebook(cohort: Path, out: Path, db_url: str, labs=("attention", "transformer")) -> None:
    only = ["--lab", labs[0]] if len(labs) == 1 else []
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", "--submissions", str(cohort), "--out", str(out),
                          "--nbgrader", "--gradebook", db_url, "--jobs", "1", *only], cwd=KIT, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    for lab in labs:  # one nbgrader assignment per lab
        assert f"recorded the {lab} points of 2 students in {db_url}" in run.stdout


def nbgrader_export(db_url: str, tmp_path: Path) -> dict[tuple[str, str], dict]:
    """The real `nbgrader export` (CSV), by (assignment, student)."""
    target = tmp_path / "export.csv"
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / "nbgrader"), "export", f"--CourseDirectory.db_url={db_url}", "--to", str(target)],
                   cwd=KIT, check=True, capture_output=True, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    return {(row["assignment"], row["student_id"]): row for row in csv.DictReader(target.open())}


def test_automatic_and_manual_points_export_together(tmp_path):
    from nbgrader.api import Gradebook  # 1.7 s to import: paid by this test, not by every worker's collection

    cohort = tmp_path / "cohort"
    for student in ("ada", "dara"):
        shutil.copytree(DEMO / student, cohort / student)
    (cohort / "eve").mkdir()  # handed nothing in: no submission in the gradebook
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    grade_into_gradebook(cohort, tmp_path / "grades", db_url)
    with Gradebook(db_url) as gb:  # a grader marks one written answer in the formgrader
        grade = gb.find_grade("why_sqrt_dk", "attention_lab", "attention", "ada")
        grade.manual_score = 2
        gb.db.commit()
    exported = nbgrader_export(db_url, tmp_path)
    assert (float(exported["attention", "ada"]["score"]), float(exported["attention", "ada"]["max_score"])) == (102, 110)
    assert float(exported["attention", "dara"]["score"]) == 45
    # the second lab: automatic points out of 100, four written answers of 2 points not marked yet
    assert (float(exported["transformer", "ada"]["score"]), float(exported["transformer", "ada"]["max_score"])) == (100, 108)
    assert float(exported["transformer", "dara"]["score"]) == 83  # an unbiased layer norm: 55 before parts were judged on their wiring
    assert exported["attention", "eve"]["timestamp"] == "" == exported["transformer", "eve"]["timestamp"]  # missing
    with Gradebook(db_url) as gb:
        parts = {c.name: gb.find_grade(c.name, "attention_lab", "attention", "dara").score
                 for c in gb.find_notebook("attention_lab", "attention").task_cells}
    assert parts == {"auto_scores": 10, "auto_softmax": 15, "auto_projections": 20, "auto_masking": 0,
                     "auto_dropout": 0, "auto_heads": 0}
    # A regrade after dara finishes masking replaces her automatic points and keeps ada's manual ones.
    shutil.copy(KIT / "solutions" / "attention" / "masking.py", cohort / "dara" / "attention" / "masking.py")
    grade_into_gradebook(cohort, tmp_path / "grades", db_url, labs=("attention",))
    with Gradebook(db_url) as gb:  # what the export above reads
        assert gb.find_submission("attention", "ada").score == 102 and gb.find_submission("attention", "dara").score > 45
        assert gb.find_grade("auto_masking", "attention_lab", "attention", "dara").score == 20
