"""`make grade NBGRADER=1`: automatic points in nbgrader's gradebook, exported with the manual ones."""

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEMO, KIT, nbgrader_course, run_here, run_in_course

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast


def grade_into_gradebook(cohort: Path, out: Path, db_url: str, labs=("attention", "transformer")) -> None:
    only = ["--lab", labs[0]] if len(labs) == 1 else []
    run = run_here("grade", "--submissions", str(cohort), "--out", str(out), "--nbgrader", "--gradebook", db_url,
                   "--jobs", "1", *only)
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


def test_automatic_and_manual_points_export_together(tmp_path, empty_gradebook):
    from nbgrader.api import Gradebook  # 0.6 s to import: paid by this test, not by every worker's collection

    cohort = tmp_path / "cohort"
    for student in ("ada", "dara"):
        shutil.copytree(DEMO / student, cohort / student)
    (cohort / "eve").mkdir()  # handed nothing in: no submission in the gradebook
    db_url = f"sqlite:///{shutil.copy(empty_gradebook, tmp_path / 'gradebook.db')}"
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


def test_a_folder_name_that_is_not_utf8_is_refused_alone(tmp_path):
    """nbgrader stores a student's id as text: that student is refused, with why, and every other
    (dara sorts after it) recorded. The gradebook is new, made by nbgrader itself, as on a fresh clone."""
    cohort = tmp_path / "cohort"
    for student in ("ada", "dara"):
        shutil.copytree(DEMO / student / "attention", cohort / student / "attention")
    shutil.copytree(DEMO / "ada" / "attention", Path(os.fsdecode(cohort)) / os.fsdecode(b"b\xff") / "attention")
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    run = run_here("grade", "--submissions", str(cohort), "--out", str(tmp_path / "grades"), "--nbgrader",
                   "--gradebook", db_url, "--jobs", "1", "--lab", "attention")
    assert run.returncode == 1, run.stderr[-3000:]
    assert f"recorded the attention points of 2 students in {db_url}" in run.stdout
    assert "error: not recorded in the gradebook: attention: b\\xff: a folder name that is not UTF-8" in run.stderr
    exported = nbgrader_export(db_url, tmp_path)
    assert {student for _, student in exported} == {"ada", "dara"}
    assert (float(exported["attention", "ada"]["score"]), float(exported["attention", "dara"]["score"])) == (100, 45)


# A cell a student adds to the notebook: run as whoever runs it, it zeroes another student's
# automatic points and doubles its author's (the attack: 100 -> 0, and 110).
REWRITER = """
from nbgrader.api import Gradebook
with Gradebook({db_url!r}) as gb:
    for cell in gb.find_notebook("attention_lab", "attention").task_cells:
        gb.find_grade(cell.name, "attention_lab", "attention", "ada").manual_score = 0
        gb.find_grade(cell.name, "attention_lab", "attention", "mallory").extra_credit = 10
    gb.db.commit()
open({mark!r}, "w").close()
"""


def test_written_answers_procedure_runs_no_students_notebook_code(tmp_path, empty_gradebook):
    """docs/deploying.md's procedure: make grade NBGRADER=1, then nbgrader autograde in the course (its
    nbgrader_config.py) for the formgrader. mallory's notebook holds a cell that rewrites the
    gradebook: it never runs, ada keeps her points, and the notebooks are ready for the formgrader."""
    course = nbgrader_course(tmp_path / "course", empty_gradebook)
    db_url, mark = f"sqlite:///{course / 'gradebook.db'}", tmp_path / "the cell ran"
    notebook = json.loads((KIT / "assignments" / "attention" / "attention_lab.ipynb").read_text())
    for student in ("ada", "mallory"):
        folder = shutil.copytree(DEMO / "ada" / "attention", course / "submitted" / student / "attention")
        if student == "mallory":
            notebook["cells"].insert(0, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                         "source": REWRITER.format(db_url=db_url, mark=str(mark))})
        (folder / "attention_lab.ipynb").write_text(json.dumps(notebook))
    grade_into_gradebook(course / "submitted", tmp_path / "grades", db_url, labs=("attention",))
    run_in_course(course, "nbgrader", "autograde", "attention", f"--CourseDirectory.db_url={db_url}")
    assert not mark.exists()
    exported = nbgrader_export(db_url, tmp_path)
    assert float(exported["attention", "ada"]["score"]) == 100 == float(exported["attention", "mallory"]["score"])
    assert (course / "autograded" / "mallory" / "attention" / "attention_lab.ipynb").is_file()  # for the formgrader


def test_a_release_refuses_a_cell_graded_by_running_it(lab, tmp_path):
    """nbgrader here runs no notebook: a cell whose points come from running it would get them unrun."""
    from autograder.authoring.release import refuse_graded_by_running
    from autograder.lab import LabError

    source = lab.source / f"{lab.notebook}.ipynb"
    refuse_graded_by_running(source)  # the labs' own: written answers and the automatic points' task cells
    notebook = json.loads(source.read_text())
    notebook["cells"].append({"cell_type": "code", "execution_count": None, "outputs": [], "source": "assert True",
                              "metadata": {"nbgrader": {"grade": True, "solution": False, "grade_id": "runs", "points": 5}}})
    crafted = tmp_path / "crafted.ipynb"
    crafted.write_text(json.dumps(notebook))
    with pytest.raises(LabError, match="'runs' is graded by running it"):
        refuse_graded_by_running(crafted)
