"""Gradescope: its ``results.json`` format (:func:`results_json`), and finding a lab's files in an
upload (:func:`collect`).

Students upload in many shapes; before grading, the upload is searched for the lab's modules: at
the top, in a sub-folder, or inside a zip (unpacked with limits; entries that would land outside it
are skipped). What was found, and where, goes to the top of the feedback. The run itself (what
``run_autograder`` calls) is :mod:`autograder.batch.upload`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from autograder.lab import Lab
from autograder.limits import DEFAULTS
from autograder.reports.records import hidden_line
from autograder.results import SubmissionResult



def copy_regular_files(upload: Path, into: Path, notes: list[str]) -> None:
    """Copy the upload's regular files and folders; links are left out (and said so), so
    nothing below ``into`` leads outside it, whatever the upload holds."""
    for folder, subfolders, files in os.walk(upload):
        here = Path(folder)
        target = into / here.relative_to(upload)
        target.mkdir(parents=True, exist_ok=True)
        for name in [*subfolders, *files]:
            if (here / name).is_symlink():
                notes.append(f"{(here / name).relative_to(upload)}: a link, left out")
        subfolders[:] = [d for d in subfolders if not (here / d).is_symlink()]
        for name in files:
            path = here / name
            if not path.is_symlink() and path.is_file():
                shutil.copyfile(path, target / name)


class ZipBudget:
    """What unpacking may still write, over all the upload's archives."""

    def __init__(self):
        self.bytes, self.archives = DEFAULTS.upload_unzipped_bytes, DEFAULTS.upload_archives


def unpack_zips(folder: Path, notes: list[str]) -> None:
    """Unpack each zip in ``folder`` next to it; zips found inside are unpacked too, down to
    ``Limits.upload_nested_zips`` levels, all within one budget of bytes and archives."""
    budget, opened = ZipBudget(), set()
    for _ in range(DEFAULTS.upload_nested_zips):
        archives = [a for a in sorted(folder.rglob("*.zip")) if a not in opened and a.is_file()]
        opened.update(archives)
        for archive in archives:
            unpack(archive, budget, notes)


def unpack(archive: Path, budget: ZipBudget, notes: list[str]) -> None:
    """Unpack ``archive`` into a new folder beside it, skipping entries that would land outside."""
    if budget.archives <= 0:
        notes.append(f"{archive.name}: too many archives in the upload, not opened")
        return
    budget.archives -= 1
    target = archive.with_name(archive.name + ".contents")
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = [m for m in bundle.infolist() if not m.is_dir()]
            size = sum(m.file_size for m in members)
            if size > budget.bytes:
                notes.append(f"{archive.name}: unpacks to more than the {DEFAULTS.upload_unzipped_bytes // 2**20} MB allowed, "
                             "not opened")
                return
            budget.bytes -= size
            target.mkdir()
            for member in members:
                destination = (target / member.filename).resolve()
                if not destination.is_relative_to(target.resolve()):
                    notes.append(f"{archive.name}: {member.filename} points outside the archive, skipped")
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(bundle.read(member))
        notes.append(f"{archive.name}: unpacked")
    except Exception as exc:  # noqa: BLE001 - any unreadable archive (encrypted, corrupt, odd method) is the upload's
        notes.append(f"{archive.name}: could not be unpacked ({type(exc).__name__}: {exc})")


def find_modules(lab: Lab, upload: Path) -> Path | None:
    """The folder of the upload holding the most of the lab's modules (the shallowest on a tie)."""
    best, best_count = None, 0
    for folder in sorted([upload, *(p for p in upload.rglob("*") if p.is_dir())], key=lambda p: len(p.parts)):
        if len(folder.relative_to(upload).parts) > DEFAULTS.upload_depth or "__MACOSX" in folder.parts:
            continue
        count = sum((folder / module).is_file() for module in lab.modules)
        if count > best_count:
            best, best_count = folder, count
    return best


def shown(folder: Path, upload: Path) -> str:
    return str(folder.relative_to(upload)).replace(".zip.contents", ".zip")


def collect(lab: Lab, upload: Path, into: Path) -> list[str]:
    """Copy the upload's files of ``lab`` into ``into`` (a student's ``<lab>/``); return notes for the student."""
    notes: list[str] = []
    into.mkdir(parents=True, exist_ok=True)
    if upload.is_symlink() or not upload.is_dir():
        return ["nothing was uploaded"]
    work = Path(tempfile.mkdtemp(prefix="autograder-upload-"))
    try:
        copy_regular_files(upload, work / "upload", notes)
        unpack_zips(work / "upload", notes)
        folder = find_modules(lab, work / "upload")
        if folder is None:
            notebooks = sorted((work / "upload").rglob("*.ipynb"))
            notes.append("none of the lab's modules (" + ", ".join(lab.modules) + ") was found in the upload"
                         + ("; only a notebook: the points come from the modules, so upload them too"
                            if notebooks else ""))
            folder = notebooks[0].parent if notebooks else None
        elif folder != work / "upload":
            notes.append(f"the modules were found in {shown(folder, work / 'upload')}/ and graded from there")
        if folder is not None:
            for path in sorted(folder.iterdir()):
                if path.is_file() and lab.holds(path) and path.stat().st_size <= DEFAULTS.submission_file_bytes:
                    shutil.copyfile(path, into / path.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return notes


def results_json(lab: Lab, record: SubmissionResult) -> dict:
    """Gradescope's results.json. Hidden checks are tests visible after publication, each with one
    line saying what it checks; the top-level ``output`` (visible at once) holds the public
    feedback only. Gradescope hides the total while any test is hidden, so it reveals nothing."""
    from autograder.reports.feedback import feedback_markdown  # not before an upload's lane starts (jinja2, mistune)

    tests = [{"name": f"{check.part}: {check.name}", "score": check.earned,
              "max_score": check.points, "status": "passed" if check.passed else "failed",
              "visibility": "after_published" if check.hidden else "visible",
              "output": hidden_line(check) if check.hidden else check.message,
              "output_format": "text"}  # the student's own words, shown as they are, never as Markdown or HTML
             for check in record.checks]
    return {"score": record.total, "execution_time": round(record.seconds, 3),
            "output": feedback_markdown(lab, record, hidden=False), "output_format": "md", "test_output_format": "text",
            "visibility": "visible", "tests": tests}
