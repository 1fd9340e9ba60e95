"""Shared paths and the one way the kit's tests grade a folder: the real command line."""

import contextlib
import csv
import gc
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from filelock import FileLock

from autograder.lab import Lab, all_labs

KIT = Path(__file__).resolve().parent.parent
LABS = all_labs()
# The lab the boundary, fairness, replay and platform tests grade; what holds for every lab is
# tested on each (the `lab` fixture).
LAB = Lab.load(KIT / "source" / "attention")
SOURCE, CHECKS, RELEASE, SOLUTIONS = LAB.source, LAB.checks, LAB.release, LAB.reference
PARTS = LAB.part_ids
DEMO = KIT / "examples" / "submitted"  # the demo course: <student>/<lab>/, both labs
WRONG_MODULES = Path(__file__).resolve().parent / "wrong_modules"  # <lab>/<part>/: wrong modules, mistakes.toml


def pytest_collection_finish(session):
    """What collection loaded (torch among it) lives as long as the worker: frozen out of the collector's way,
    so that a full collection no longer walks it (about 2 of a worker's 12-17 CPU-seconds in make test)."""
    gc.freeze()


def grade(submission: Path, results: Path, part: str | None = None, lab: Lab = LAB) -> dict:
    """Run every check (hidden ones included) on ``submission``; return the results JSON."""
    command = [sys.executable, "-m", "autograder", "check", "--submission", str(submission),
               "--checks", str(lab.checks), "--reference", str(lab.reference), "--results-json", str(results)]
    if part:
        command += ["--part", part]
    run = subprocess.run(command, cwd=KIT, capture_output=True, text=True, timeout=900)
    assert results.is_file(), f"the checks wrote no results:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return json.loads(results.read_text())


def run_here(*argv: str) -> types.SimpleNamespace:
    """``python -m autograder <argv>`` run in this test process (its ``main``: the same command line and code), its
    lanes forked by this process's judge server (one a test worker, shared by its tests), not by a new process that
    imports torch again (1.5 CPU-s a grade). What a ``subprocess.run`` would give: ``returncode`` (a usage error's
    too), and in ``stdout`` and ``stderr`` what the command prints; not what a process says beside it (a warning,
    another thread's traceback, the exit's own handling): a test that reads all of that runs the command as a process."""
    from autograder.__main__ import main

    printed, said = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(said):
        try:
            code = main(list(argv))
        except SystemExit as usage:  # argparse's error, said on stderr already
            code = usage.code
    return types.SimpleNamespace(returncode=code, stdout=printed.getvalue(), stderr=said.getvalue())


def hang(indent: str = "    ") -> str:
    """Lines that hang as an endless loop does, asleep: a call's time-out (the judge's clock) ends them as it ends a
    busy loop (test_check, test_sandbox and test_fairness's loop_at_import show busy loops interrupted), without a core
    spinning through the time-out while the other tests wait for it."""
    return textwrap.indent("import time\nwhile True:\n    time.sleep(1)\n", indent)


def submission_with(tmp_path: Path, replacements: dict[str, str | None], lab: Lab = LAB,
                    name: str = "submission") -> Path:
    """``tmp_path / name``: the reference modules, with some replaced by the given text (None: deleted)."""
    folder = tmp_path / name
    folder.mkdir(parents=True)
    for module in lab.reference.glob("*.py"):
        shutil.copy(module, folder / module.name)
    for name, text in replacements.items():
        target = folder / f"{name}.py"
        if text is None:
            target.unlink()
        else:
            target.write_text(text, encoding="utf-8")
    return folder


def read_notebook(path: Path):
    """The notebook at ``path``. nbformat costs a second to import (jsonschema's format checkers build a
    grammar): imported by the tests that read notebooks, not by every xdist worker's collection."""
    import nbformat

    return nbformat.read(path, as_version=4)


def nbgrader_course(folder: Path, gradebook: Path, lab: Lab = LAB) -> Path:
    """An nbgrader course in ``folder``: the kit's nbgrader_config.py, a copy of ``gradebook``, ``lab``'s source and
    released notebook, and the kit's code beside the config, where it finds it (in the kit, its root)."""
    folder.mkdir(parents=True)
    shutil.copy(KIT / "nbgrader_config.py", folder / "nbgrader_config.py")
    shutil.copy(gradebook, folder / "gradebook.db")
    (folder / "autograder").symlink_to(KIT / "autograder")
    shutil.copytree(lab.source, folder / "source" / lab.name)
    (folder / "assignments" / lab.name).mkdir(parents=True)
    shutil.copy(lab.release / f"{lab.notebook}.ipynb", folder / "assignments" / lab.name)
    return folder


def run_in_course(course: Path, *command: str) -> None:
    """``command``, a tool of this venv (nbgrader: it runs ``alembic``), run in ``course`` (its configuration)."""
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / command[0]), *command[1:]], cwd=course, check=True, capture_output=True, timeout=900,
                   env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})


def executed_notebook(path: Path):
    """The notebook at ``path`` run top to bottom in a real Jupyter kernel, in its folder, as make solutions runs one."""
    from autograder.authoring.release import executed

    return executed(path)


def once_per_run(tmp_path_factory, name: str, build) -> Path:
    """A folder ``build(folder)`` fills once per test run, whichever xdist worker asks first: the
    others wait on its lock and reuse it (pytest-xdist's recipe for session data computed once)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name  # the run's, not the worker's
    with FileLock(f"{folder}.lock"):
        if not (folder / ".built").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            (folder / ".built").touch()
    return folder


@pytest.fixture(scope="session")
def empty_gradebook(tmp_path_factory) -> Path:
    """A gradebook as nbgrader makes a new one (its tables, stamped with its migrations' head), made once per run
    and copied where a test's nbgrader would make its own: nbgrader stamps each new gradebook by running `alembic
    heads`, a process that imports all of nbgrader again (0.65 CPU-s; 2 before the jsonschema pin, when ten were 24
    CPU-s of make test). A gradebook nbgrader makes itself, as on a fresh clone, is still made by test_new_lab,
    test_gradebook's not-UTF-8 test and make bench's course."""
    def build(folder):
        run_in_course(KIT, "nbgrader", "db", "student", "list", f"--CourseDirectory.db_url=sqlite:///{folder / 'gradebook.db'}")

    return once_per_run(tmp_path_factory, "empty-gradebook", build) / "gradebook.db"


@pytest.fixture(scope="session", params=LABS, ids=lambda lab: lab.name)
def lab(request) -> Lab:
    return request.param


def graded_once(tmp_path_factory, name: str, submission: Path, lab: Lab) -> dict:
    """Every check run on ``submission`` (the results JSON), once per test run across workers."""
    folder = once_per_run(tmp_path_factory, name, lambda shared: grade(submission, shared / "results.json", lab=lab))
    return json.loads((folder / "results.json").read_text())


@pytest.fixture(scope="session")
def solution_results(lab, tmp_path_factory):
    return graded_once(tmp_path_factory, f"solution-results-{lab.name}", lab.reference, lab)


@pytest.fixture(scope="session")
def stub_results(lab, tmp_path_factory):
    return graded_once(tmp_path_factory, f"stub-results-{lab.name}", lab.release, lab)


def grades_table(folder: Path) -> dict[str, dict]:
    """``folder/grades.csv`` (a lab's reports) by student."""
    return {row["student"]: row for row in csv.DictReader(io.StringIO((folder / "grades.csv").read_text()))}


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """`make grade` on the demo cohort: every lab it holds; its reports and what it printed (stdout,
    stderr), once per test run."""
    def build(shared):
        run = subprocess.run([sys.executable, "-m", "autograder", "grade", "--submissions", str(DEMO), "--out",
                              str(shared / "grades"), "--jobs", "2"], cwd=KIT, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        (shared / "stdout").write_text(run.stdout)
        (shared / "stderr").write_text(run.stderr)

    shared = once_per_run(tmp_path_factory, "demo-course", build)
    printed = types.SimpleNamespace(stdout=(shared / "stdout").read_text(), stderr=(shared / "stderr").read_text())
    return shared / "grades", printed
