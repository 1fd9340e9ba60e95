"""What the kit hands to the platforms: the student bundle and the Gradescope autograder.

``make student-bundle`` writes ``dist/attention-student/`` and ``dist/attention-student.zip``:
the release (stubs, notebook, public checks), the harness that runs ``make check``
(``autograder/``, pinned requirements) and the files in ``platforms/student/`` (README,
Makefile, the GitHub Classroom workflow). Nothing from ``solutions/`` or the hidden checks.

``make gradescope`` writes ``dist/attention-gradescope.zip`` with ``setup.sh`` and
``run_autograder`` at its root (``platforms/gradescope/``), the harness, every check and
the reference modules, laid out as in the kit so the grader finds them where it always does.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

from autograder.grade import CHECKS, REFERENCE, copy_modules
from autograder.release import ASSIGNMENT, KIT_ROOT, directory

PLATFORMS = KIT_ROOT / "platforms"
DIST = KIT_ROOT / "dist"
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".ipynb_checkpoints", "gradebook.db")
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed, so the same kit gives the same bytes


def copy_harness(into: Path) -> None:
    """The grader itself: the package, the pinned requirements, the course config (its fences)."""
    shutil.copytree(KIT_ROOT / "autograder", into / "autograder", ignore=SKIP)
    for name in ("requirements.txt", "nbgrader_config.py"):
        shutil.copy(KIT_ROOT / name, into / name)


def zip_folder(folder: Path, archive: Path, prefix: str = "") -> Path:
    """Zip ``folder``'s files under ``prefix``, sorted, with fixed dates and their permissions."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            entry = zipfile.ZipInfo(str(Path(prefix, path.relative_to(folder))), ZIP_DATE)
            entry.external_attr = (path.stat().st_mode & 0o777 | 0o100000) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            bundle.writestr(entry, path.read_bytes())
    return archive


def student_bundle(dist: Path = DIST) -> Path:
    root = dist / "attention-student"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(directory("release") / ASSIGNMENT, root / ASSIGNMENT, ignore=SKIP)
    copy_harness(root)
    student = PLATFORMS / "student"
    for source, target in (("README.md", "README.md"), ("Makefile", "Makefile"), ("gitignore", ".gitignore"),
                           ("classroom.yml", ".github/workflows/classroom.yml")):
        (root / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(student / source, root / target)
    return zip_folder(root, dist / "attention-student.zip", root.name)


def gradescope_zip(dist: Path = DIST) -> Path:
    with tempfile.TemporaryDirectory(prefix="attention-gradescope-") as tmp:
        root = Path(tmp)
        copy_harness(root)
        shutil.copytree(CHECKS, root / CHECKS.relative_to(KIT_ROOT), ignore=SKIP)
        copy_modules(REFERENCE, root / REFERENCE.relative_to(KIT_ROOT))
        for name in ("setup.sh", "run_autograder"):
            shutil.copy(PLATFORMS / "gradescope" / name, root / name)
        return zip_folder(root, dist / "attention-gradescope.zip")
