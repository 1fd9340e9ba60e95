"""Gradescope: grade ``/autograder/submission`` and write ``/autograder/results/results.json``.

``run_autograder`` (in the zip ``make gradescope`` writes) calls ``python -m autograder
gradescope --root /autograder``. Students upload in many shapes; before grading, the upload
is searched for the lab's modules: at the top, in a sub-folder, or inside a zip (unpacked
with limits; entries that would land outside it are skipped). What was found, and where,
goes to the top of the feedback. The grading itself is :func:`autograder.grade.grade` on a
cohort of one, with the hidden checks, so Gradescope and ``make grade`` give the same score.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import zipfile
from pathlib import Path

from autograder import reports
from autograder.grade import MAX_FILE_BYTES, MODULES, grade
from autograder.release import ASSIGNMENT

MAX_UNZIPPED_BYTES = 20 * 1024 * 1024
MAX_DEPTH = 4
MAX_NESTED_ZIPS = 3


def unpack_zips(folder: Path, notes: list[str]) -> None:
    """Unpack each zip in ``folder`` next to it, within size limits; zips found inside are
    unpacked too, down to ``MAX_NESTED_ZIPS`` levels."""
    opened: set[Path] = set()
    for _ in range(MAX_NESTED_ZIPS):
        archives = [a for a in sorted(folder.rglob("*.zip")) if a not in opened]
        opened.update(archives)
        for archive in archives:
            unpack(archive, notes)


def unpack(archive: Path, notes: list[str]) -> None:
    """Unpack ``archive`` into a folder of its name; entries that would land outside it are skipped."""
    target = archive.with_suffix("")
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = [m for m in bundle.infolist() if not m.is_dir()]
            if sum(m.file_size for m in members) > MAX_UNZIPPED_BYTES:
                notes.append(f"{archive.name}: unpacks to more than {MAX_UNZIPPED_BYTES // 2**20} MB, not opened")
                return
            for member in members:
                destination = (target / member.filename).resolve()
                if not destination.is_relative_to(target.resolve()):
                    notes.append(f"{archive.name}: {member.filename} points outside the archive, skipped")
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(bundle.read(member))
        notes.append(f"{archive.name}: unpacked")
    except (zipfile.BadZipFile, OSError) as exc:
        notes.append(f"{archive.name}: not a readable zip ({exc})")


def find_modules(upload: Path) -> Path | None:
    """The folder of the upload holding the most of the lab's modules (the shallowest on a tie)."""
    best, best_count = None, 0
    for folder in sorted([upload, *(p for p in upload.rglob("*") if p.is_dir())], key=lambda p: len(p.parts)):
        if len(folder.relative_to(upload).parts) > MAX_DEPTH or "__MACOSX" in folder.parts:
            continue
        count = sum((folder / module).is_file() for module in MODULES)
        if count > best_count:
            best, best_count = folder, count
    return best


def collect(upload: Path, into: Path) -> list[str]:
    """Copy the upload's lab files into ``into`` (a student's ``attention/``); return notes for the student."""
    notes: list[str] = []
    work = Path(tempfile.mkdtemp(prefix="attention-upload-"))
    try:
        shutil.copytree(upload, work / "upload", symlinks=True)
        unpack_zips(work / "upload", notes)
        folder = find_modules(work / "upload")
        into.mkdir(parents=True, exist_ok=True)
        if folder is None:
            notebooks = sorted((work / "upload").rglob("*.ipynb"))
            notes.append("none of the lab's modules (" + ", ".join(MODULES) + ") was found in the upload"
                         + ("; only a notebook: the points come from the modules, so upload them too"
                            if notebooks else ""))
            folder = notebooks[0].parent if notebooks else None
        elif folder != work / "upload":
            notes.append(f"the modules were found in {folder.relative_to(work / 'upload')}/ and graded from there")
        if folder is not None:
            for path in sorted(folder.iterdir()):
                if path.is_file() and not path.is_symlink() and (path.name in MODULES or path.suffix == ".ipynb") \
                        and path.stat().st_size <= MAX_FILE_BYTES:
                    shutil.copy(path, into / path.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return notes


def run(root: Path, jobs: int = 1) -> dict:
    """Grade ``root/submission`` into ``root/results/results.json``; return what was written."""
    with tempfile.TemporaryDirectory(prefix="attention-gradescope-") as tmp:
        cohort = Path(tmp) / "cohort"
        notes = collect(root / "submission", cohort / "submission" / ASSIGNMENT)
        grade(cohort, Path(tmp) / "out", jobs=jobs, force=True, stream=io.StringIO())
        record = reports.load_record(Path(tmp) / "out" / "submission")
    results = reports.gradescope(record)
    if notes:
        results["output"] = "**About your upload:** " + "; ".join(notes) + "\n\n" + results["output"]
    out = root / "results"
    out.mkdir(parents=True, exist_ok=True)
    reports.write_atomically(out / "results.json", json.dumps(results, indent=1))
    return results
