"""nbgrader configuration: the repository root is the course directory."""

import importlib.util
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

c.CourseDirectory.course_id = "attention-lab"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "assignments"
c.CourseDirectory.solution_directory = "solutions"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"  # local to each machine; not committed

# nbgrader copies non-notebook files verbatim, solutions and hidden tests included
# (jupyter/nbgrader issue 1237). The kit writes the modules and tests/ itself
# (autograder/authoring/release.py), so nbgrader must not copy them; lab.toml too. README.student.md is
# the student repository's README: the bundle puts it at the top (autograder/authoring/bundle.py).
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback",
    ".pytest_cache", ".hypothesis", "*.py", "tests", "lab.toml", "README.student.md",
]

# The stub that replaces each solution region is nbgrader's ClearSolutions.code_stub; set it
# here to change it, and autograder/authoring/release.py uses the same text for the modules.

# The fences, spelled out (nbgrader's defaults) so the grader reads them without importing nbgrader.
c.ClearSolutions.begin_solution_delimeter = "BEGIN SOLUTION"
c.ClearSolutions.end_solution_delimeter = "END SOLUTION"
c.ClearHiddenTests.begin_test_delimeter = "BEGIN HIDDEN TESTS"
c.ClearHiddenTests.end_test_delimeter = "END HIDDEN TESTS"

# `nbgrader autograde` would run every submitted notebook's code as the instructor, unconfined: one cell
# could rewrite gradebook.db (another student's points). The labs' notebooks have nothing to run for a
# grade (the automatic points come from `make grade`, sandboxed; written answers are graded by hand; a
# release refuses a notebook with an automatically graded cell), so autograde here executes nothing:
# it copies and sanitizes the notebooks and records the written answers for the formgrader.
c.Execute.enabled = False

# nbgrader's formgrader shows a student's Markdown as written: its raw HTML, scripts and `javascript:`
# links run in the instructor's Jupyter session. Autograde's last step shows every Markdown or raw cell a
# student wrote as its text in a code block (autograder/platforms/inert_answers.py). nbgrader runs in the
# course folder, the kit's root, without it on sys.path; the kit's own processes import it already.
if importlib.util.find_spec("autograder") is None:
    sys.path.append(str(Path(__file__).resolve().parent))
# nbgrader's own steps, spelled out: it reads this file twice, so an .append() would add the step twice.
c.Autograde.autograde_preprocessors = [
    "nbgrader.preprocessors.Execute", "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor", "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades", "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata", "autograder.platforms.inert_answers.InertStudentCells",
]

# `nbgrader export` writes beside the kit's reports (grades/), not at the course's root.
c.ExportPlugin.to = "grades/nbgrader-grades.csv"
