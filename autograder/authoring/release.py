"""Build a lab's student release (``assignments/<lab>/``) and reference (``solutions/<lab>/``)
from ``source/<lab>/``.

The notebook goes through the real ``nbgrader generate_assignment`` / ``generate_solution``.
nbgrader copies every other file verbatim (upstream issue 1237), which would hand students
the solutions inside the ``.py`` modules and the hidden checks inside ``tests/``; so
``nbgrader_config.py`` tells nbgrader to leave ``*.py`` and ``tests`` alone and this module
writes them, using nbgrader's own preprocessors (and the course's configuration of them)
to cut the fenced regions.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from autograder.course import KIT_ROOT, course_config, directory, run_nbgrader, solution_fences
from autograder.lab import DECLARATION, Lab, LabError

# Whole files students never get: the known mistakes are edits of the reference solution.
INSTRUCTOR_ONLY = {Path("tests/misconceptions.toml")}
# Every lab folder's own Makefile (make check, make lab): the same for all labs, so not theirs to copy.
LAB_MAKEFILE = KIT_ROOT / "deploy" / "lab" / "Makefile"
# What every companion notebook imports from tests/ (load, compare, heatmaps): the kit's, like the Makefile.
NOTEBOOK_HELPERS = KIT_ROOT / "deploy" / "lab" / "notebook_helpers.py"


def stub_solutions(text: str) -> str:
    """Replace each solution region with the course's code stub (nbgrader's own logic)."""
    from nbformat.v4 import new_code_cell
    from nbgrader.preprocessors import ClearSolutions

    cell = new_code_cell(text)
    ClearSolutions(config=course_config())._replace_solution_region(cell, "python")
    return cell.source


def keep_solutions(text: str) -> str:
    """Keep the solution code and drop the fence lines around it."""
    begin_end = solution_fences()
    return "\n".join(line for line in text.split("\n") if not any(f in line for f in begin_end))


def strip_hidden_tests(text: str) -> str:
    """Remove each hidden-tests region (nbgrader's own logic)."""
    from nbformat.v4 import new_code_cell
    from nbgrader.preprocessors import ClearHiddenTests

    cell = new_code_cell(text)
    ClearHiddenTests(config=course_config())._remove_hidden_test_region(cell)
    return cell.source


def kit_files(source: Path) -> list[Path]:
    """The source files this module writes (the ones nbgrader is told to skip)."""
    candidates = [source / DECLARATION, *source.glob("*.py"), *(source / "tests").rglob("*")]
    return sorted(p for p in candidates if p.is_file() and not any(
        part.startswith(".") or part == "__pycache__" for part in p.relative_to(source).parts))


def transform(kind: str, relative: Path, text: str) -> str:
    if relative.name == DECLARATION:
        return text
    if relative.parts[0] == "tests":
        return strip_hidden_tests(text) if kind == "release" else text
    return stub_solutions(text) if kind == "release" else keep_solutions(text)


def refuse_graded_by_running(notebook: Path) -> None:
    """A notebook cell graded by running it (nbgrader's "autograder tests") would get its points
    unrun: the course's nbgrader executes no notebook (``nbgrader_config.py``). Code is graded by
    the lab's checks, written answers by hand."""
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        marks = cell.get("metadata", {}).get("nbgrader", {})
        if marks.get("grade") and not marks.get("solution"):
            raise LabError(f"{notebook}: cell {marks.get('grade_id')!r} is graded by running it, and nbgrader here runs "
                           "no student notebook (its code would run as you, unconfined): grade code with the lab's "
                           "checks, written answers by hand")


def build(kind: str, lab: Lab, out_dir: Path | None = None, run_notebook: bool = True) -> Path:
    """Write the ``release`` or ``solution`` version of ``lab``; return its folder. The solution's notebook (a
    lab may have none) is run to show its outputs (:func:`run_beside_its_modules`), unless ``run_notebook`` is
    False (the staleness test compares what source/ decides, not outputs, and saves a kernel's run)."""
    command = {"release": "generate_assignment", "solution": "generate_solution"}[kind]
    out_root = Path(out_dir) if out_dir else directory(kind)
    # A build elsewhere (the staleness test) keeps its own gradebook, not the course's.
    database = [f"--CourseDirectory.db_url=sqlite:///{out_root / 'gradebook.db'}"] if out_dir else []
    source = directory("source") / lab.name
    target = out_root / lab.name
    if lab.notebook:
        if kind == "solution":  # generate_solution wants the assignment in the gradebook (a fresh clone has none);
            run_nbgrader("db", "assignment", "add", lab.name, *database)  # generate_assignment records it itself
        if kind == "release":
            refuse_graded_by_running(lab.source / f"{lab.notebook}.ipynb")
        run_nbgrader(command, lab.name, "--force", f"--CourseDirectory.{kind}_directory={out_root}", *database)
    else:  # nbgrader makes only notebooks (it refuses a folder without one): the modules are the lab
        shutil.rmtree(target, ignore_errors=True)  # as nbgrader's --force leaves no earlier build's files
    for path in kit_files(source):
        relative = path.relative_to(source)
        if kind == "release" and relative in INSTRUCTOR_ONLY:
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8")
        destination.write_text(transform(kind, relative, text), encoding="utf-8")
        shutil.copymode(path, destination)
    shutil.copy(LAB_MAKEFILE, target / "Makefile")
    shutil.copy(NOTEBOOK_HELPERS, target / "tests" / NOTEBOOK_HELPERS.name)
    if lab.notebook and kind == "solution" and run_notebook:
        run_beside_its_modules(target / f"{lab.notebook}.ipynb")
    for cache_dir in target.rglob("__pycache__"):
        shutil.rmtree(cache_dir)
    return target


def run_beside_its_modules(notebook: Path) -> None:
    """Run the reference's notebook top to bottom in a fresh kernel, in its built folder, and keep its outputs.
    Not by nbgrader's Execute: it runs before the modules and tests/notebook_helpers.py are written beside the
    notebook (every import failed), and keeps a cell's error as an output where the build should stop. The
    course's nbgrader_config.py runs no notebook (a student's would run unconfined); this one is the instructor's."""
    import nbformat  # with nbclient, 0.25 s to import: only for a build that runs the notebook
    from nbclient.exceptions import CellExecutionError

    try:
        ran = executed(notebook)
    except CellExecutionError as error:
        raise LabError(f"{notebook}: a cell raised when run on the reference solution:\n{error}") from None
    nbformat.write(ran, notebook)


def executed(notebook: Path):
    """The notebook at ``notebook`` run top to bottom in a fresh kernel in its folder (nbclient); a cell that
    raises raises CellExecutionError. No timings are kept: the same run writes the same file."""
    import nbformat
    from nbclient import NotebookClient

    ran = nbformat.read(notebook, as_version=4)
    NotebookClient(ran, timeout=600, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(notebook.parent)}}).execute()
    return ran

