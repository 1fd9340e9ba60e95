"""What the kit hands to the platforms, per lab: the student bundle and the Gradescope autograder.

``make student-bundle LAB=<lab>`` writes ``dist/<lab>-student/`` and ``dist/<lab>-student.zip``:
the release (stubs, notebook, public checks), the harness that runs ``make check``
(``autograder/``), the lab's student README and the files in ``deploy/student/``: the
Makefile, the CI files (``ci/``: GitHub Actions, GitLab CI) and the student's pinned
requirements, which leave out what only the grader uses (nbgrader above all: its JupyterLab
menus are the instructor's). Beside it, ``dist/<lab>-classroom50/``: what a teacher puts in Classroom
50's ``CLASSROOM/autograders/ASSIGNMENT/`` (``deploy/classroom50/autograder.py`` and the bundle's
harness, public checks, Makefile and CI pins).
Nothing from ``solutions/`` or the hidden checks.

``make gradescope-zip LAB=<lab>`` writes ``dist/<lab>-gradescope.zip`` with ``setup.sh`` and
``run_autograder`` at its root (``deploy/gradescope/``), the harness, the lab's declaration,
every check and the reference modules, laid out as in the kit so the grader finds them where it
always does.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

from autograder.files import copy_modules
from autograder.course import KIT_ROOT
from autograder.lab import DECLARATION, Lab

DEPLOY = KIT_ROOT / "deploy"  # what the kit ships besides the lab and its harness
DIST = KIT_ROOT / "dist"
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".ipynb_checkpoints", "gradebook.db")
STUDENT_README = "README.student.md"  # in source/<lab>/: what the student's repository opens with


# What a student's commands run: `make check` (the command line, the judge's plugin, the workers it
# starts, the lab's checks), the notebook's checks (platforms/notebook.py) and the Classroom step. The student
# bundle ships these and what they import when loaded, nothing else: no batch grading, reports, gradebook or
# release builder, whose libraries (copydetect, nbgrader, SQLAlchemy) a student does not install.
PACKAGE = KIT_ROOT / "autograder"
STUDENT_ENTRY_POINTS = [PACKAGE / "__main__.py", PACKAGE / "judge" / "plugin.py", PACKAGE / "platforms" / "ci.py",
                        PACKAGE / "platforms" / "notebook.py", PACKAGE / "harness" / "zygote.py",
                        PACKAGE / "harness" / "clean_start.py"]


def module_file(dotted: str) -> Path | None:
    """``autograder.x.y``'s file in the kit (a package's ``__init__.py``); None for a name in a module."""
    path = KIT_ROOT.joinpath(*dotted.split("."))
    return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.is_file()), None)


def loaded_with(files: list[Path]) -> set[Path]:
    """The kit's files that ``files`` import when they are loaded: their module-level imports, and
    those of what they import, with every package's ``__init__.py``. Imports inside functions are
    commands a student does not run."""
    todo: list[Path | None] = list(files)
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path is None or path in seen:
            continue
        seen.add(path)
        if path.is_relative_to(PACKAGE):
            todo += [KIT_ROOT / parent / "__init__.py" for parent in path.relative_to(KIT_ROOT).parents[:-1]]
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            todo += [module_file(name) for name in names if name.split(".")[0] == "autograder"]
    return {path for path in seen if path.is_relative_to(PACKAGE)}


def copy_harness(into: Path, requirements: Path = KIT_ROOT / "requirements.txt", lab: Lab | None = None) -> None:
    """The grader itself (for a student of ``lab``: only what their commands and the lab's checks
    load), pinned requirements, the course config (its folders and fences)."""
    if lab is not None:
        for path in loaded_with([*STUDENT_ENTRY_POINTS, *sorted((lab.release / "tests").glob("*.py"))]):
            target = into / path.relative_to(KIT_ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
        templates = PACKAGE / "reports" / "templates"  # the feedback's pages, which ci-run writes in Markdown
        shutil.copytree(templates, into / templates.relative_to(KIT_ROOT))
    else:
        shutil.copytree(PACKAGE, into / "autograder", ignore=SKIP)
    shutil.copy(requirements, into / "requirements.txt")
    shutil.copy(KIT_ROOT / "nbgrader_config.py", into / "nbgrader_config.py")


def release_date(lab: Lab) -> int:
    """When the release was made (a Unix time), which every file of its bundles carries: a date that
    says something (1980 read "modified 46 years ago" in JupyterLab) and the same for the same kit, so
    the same kit gives the same bytes. ``SOURCE_DATE_EPOCH`` when set (reproducible builds' convention),
    else the last commit of what the bundles are made of, else the newest of the release's files."""
    if os.environ.get("SOURCE_DATE_EPOCH", "").isdigit():
        return int(os.environ["SOURCE_DATE_EPOCH"])
    try:
        committed = subprocess.run(["git", "log", "-1", "--format=%ct", "--", str(lab.release), "autograder", "deploy"],
                                   cwd=KIT_ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:  # no git: a kit unpacked from an archive
        committed = ""
    if committed.isdigit():
        return int(committed)
    return int(max(path.stat().st_mtime for path in lab.release.rglob("*") if path.is_file()))


def zip_folder(folder: Path, archive: Path, date: int, prefix: str = "") -> Path:
    """Zip ``folder``'s files under ``prefix``, sorted, with their permissions, each dated ``date`` (a
    Unix time; the folder's files too)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    stamp = max(time.gmtime(date)[:6], (1980, 1, 1, 0, 0, 0))  # the earliest date a zip can hold
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            entry = zipfile.ZipInfo(str(Path(prefix, path.relative_to(folder))), stamp)
            entry.external_attr = (path.stat().st_mode & 0o777 | 0o100000) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(entry, path.read_bytes())
            os.utime(path, (date, date))
    return archive


def student_bundle(lab: Lab, dist: Path = DIST) -> Path:
    root = dist / f"{lab.name}-student"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(lab.release, root / lab.name, ignore=SKIP)
    student = DEPLOY / "student"
    copy_harness(root, student / "requirements.txt", lab)
    shutil.copy(lab.source / STUDENT_README, root / "README.md")
    shutil.copy(student / "gitignore", root / ".gitignore")
    shutil.copy(student / "requirements-ci.txt", root / "requirements-ci.txt")
    (root / "Makefile").write_text((student / "Makefile").read_text().replace("LAB := <lab>", f"LAB := {lab.name}"))
    # CI where students are: GitHub Actions and GitLab CI run the public checks on every push.
    (root / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(student / "ci" / "github-checks.yml", root / ".github" / "workflows" / "checks.yml")
    shutil.copy(student / "ci" / "gitlab-ci.yml", root / ".gitlab-ci.yml")
    archive = zip_folder(root, dist / f"{lab.name}-student.zip", release_date(lab), root.name)
    classroom50_autograder(lab, root, dist / f"{lab.name}-classroom50")  # copied with the release's date
    return archive


def classroom50_autograder(lab: Lab, bundle: Path, target: Path) -> Path:
    """What a teacher puts in Classroom 50's ``CLASSROOM/autograders/ASSIGNMENT/``: its ``autograder.py`` and
    the bundle's own harness, public checks, Makefile and pins (no student module, no hidden check: the
    folder is readable by URL), laid over the student's checkout before the checks run."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    shutil.copy(DEPLOY / "classroom50" / "autograder.py", target / "autograder.py")
    for name in ("Makefile", "requirements-ci.txt", "nbgrader_config.py", "autograder", f"{lab.name}/tests",
                 f"{lab.name}/lab.toml"):
        source = bundle / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target / name)
    return target


def gradescope_zip(lab: Lab, dist: Path = DIST) -> Path:
    with tempfile.TemporaryDirectory(prefix="autograder-gradescope-") as tmp:
        root = Path(tmp)
        copy_harness(root)
        shutil.copytree(lab.checks, root / lab.checks.relative_to(KIT_ROOT), ignore=SKIP)
        shutil.copy(lab.source / DECLARATION, root / lab.source.relative_to(KIT_ROOT) / DECLARATION)
        copy_modules(lab.reference, root / lab.reference.relative_to(KIT_ROOT))
        for name in ("setup.sh", "run_autograder"):
            shutil.copy(DEPLOY / "gradescope" / name, root / name)
        return zip_folder(root, dist / f"{lab.name}-gradescope.zip", release_date(lab))
