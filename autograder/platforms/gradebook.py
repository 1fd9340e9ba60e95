"""nbgrader's gradebook: the automatic points, recorded where the written answers are graded.

A lab is an nbgrader assignment; its companion notebook holds one locked nbgrader *task* cell
per part (``auto_<part>``, worth the part's weight). :func:`record` gives each student's
submission of the lab in the course gradebook the part's points as that cell's score, through nbgrader's own API, so the formgrader and
``nbgrader export`` show automatic and manual points together.
"""

from __future__ import annotations

import tempfile
import warnings

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy import create_engine, inspect
from sqlalchemy.exc import SAWarning

from autograder.course import KIT_ROOT, course_config, run_nbgrader
from autograder.lab import Lab
from autograder.results import SubmissionResult


def course_gradebook() -> str:
    """The course's gradebook URL; a relative SQLite path is made absolute (nbgrader resolves it
    from the course directory, SQLAlchemy from the current one)."""
    url = course_config().CourseDirectory.db_url
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/"):
        return prefix + str(KIT_ROOT / url.removeprefix(prefix))
    return url


def recorded_cells(lab: Lab, db_url: str) -> set[str]:
    """The names of the lab's notebook cells the gradebook holds; none where there is no database yet
    (nbgrader's API would create it by running ``alembic``, which its commands find and it may not)."""
    engine = create_engine(db_url)
    try:
        if not inspect(engine).get_table_names():
            return set()
    finally:
        engine.dispose()
    with Gradebook(db_url) as gb:
        try:
            return {cell.name for cell in gb.find_notebook(lab.notebook, lab.name).task_cells}
        except MissingEntry:
            return set()


def register_assignment(lab: Lab, db_url: str) -> None:
    """Have nbgrader record the lab's cells in the gradebook (a fresh clone has none).

    ``generate_assignment`` is what records them, the assignment and the database included; it
    writes into a throw-away folder here, so the committed release is left alone. Once they are
    recorded, no nbgrader command runs (each costs seconds of imports).
    """
    if recorded_cells(lab, db_url) >= {f"auto_{part}" for part in lab.part_ids}:
        return
    with tempfile.TemporaryDirectory(prefix="autograder-release-") as tmp:
        run_nbgrader("generate_assignment", lab.name, "--force", f"--CourseDirectory.release_directory={tmp}",
                     f"--CourseDirectory.db_url={db_url}")


# Why a student cannot be recorded: nbgrader stores a student's id as text, and the id must be the
# folder's very name (the formgrader finds the notebooks by it); an escaped form (\xff) could be
# another student's real name.
NOT_UTF8 = ("a folder name that is not UTF-8 cannot be a student id in nbgrader's gradebook: rename the "
            "folder (as the student is known to nbgrader) and record again")


def record(lab: Lab, records: list[SubmissionResult], db_url: str | None = None) -> tuple[int, dict[str, str]]:
    """Write each student's points per part of ``lab`` into the gradebook; return how many students
    handed it in (the others get no submission: nbgrader's own export says it is missing) and the
    students refused, each with why (they alone: the others are recorded)."""
    db_url = db_url or course_gradebook()
    register_assignment(lab, db_url)
    notebook = lab.notebook
    refused = {r.student: NOT_UTF8 for r in records if not utf8(r.student)}
    with Gradebook(db_url) as gb, warnings.catch_warnings():
        # nbgrader's add_submission builds its objects in a way SQLAlchemy warns about (upstream, harmless).
        warnings.simplefilter("ignore", SAWarning)
        for record in records:
            student = record.student
            if student in refused:
                continue
            gb.update_or_create_student(student)
            if not record.handed_in:
                continue
            try:
                gb.find_submission(lab.name, student)
            except MissingEntry:
                gb.add_submission(lab.name, student)
            for part in lab.part_ids:
                grade = gb.find_grade(f"auto_{part}", notebook, lab.name, student)
                grade.manual_score = record.parts[part].points
                grade.needs_manual_grade = False
            gb.db.commit()
    return sum(record.handed_in for record in records if record.student not in refused), refused


def utf8(name: str) -> bool:
    """Is ``name`` text? A folder name that is not UTF-8 reaches Python with lone surrogates."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
