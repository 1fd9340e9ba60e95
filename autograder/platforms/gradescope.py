"""Gradescope: its ``results.json`` format (:func:`results_json`), and finding a lab's files in an
upload (:func:`collect`).

Students upload in many shapes; before grading, the upload is searched for the lab's modules: at
the top, in a sub-folder, or inside a zip (unpacked with limits; entries that would land outside it
are skipped). Where several folders hold some of them, the one graded is chosen by a stated rule,
whatever the order the upload lists them in. What was found, where, and every file left out with
why, goes to the top of the feedback, as notes bounded like staging's and in the upload's own terms
(never the grader's folders). The run itself (what ``run_autograder`` calls) is
:mod:`autograder.batch.upload`.
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
import unicodedata
import zipfile
import zlib
from pathlib import Path

from autograder.files import what_went_wrong
from autograder.lab import Lab
from autograder.limits import DEFAULTS, Limits, amount
from autograder.reports.records import EXTRA_FILE, bounded_notes, hidden_line
from autograder.results import SubmissionResult

Note = tuple[str, str]  # (a file or folder, as the upload names it; what became of it)

# Files an upload may hold that are never graded, whatever folder they are in: files Python or pytest
# would run before any check, and the grader's own files (its points, results and declarations).
STARTUP_FILES = {"conftest.py", "sitecustomize.py", "usercustomize.py"}
GRADER_FILES = {"points.toml", "results.json", "lab.toml", "misconceptions.toml"}
RUNS_AT_START = "a file Python or pytest would run before the checks, not graded"
GRADERS_OWN = "a file of the grader's, not graded (the grader's own is used)"

# What an archive's error means, in the upload's terms: an exception's own message may name the
# grader's folders. The first class the error is an instance of says it (OSError: its strerror).
UNPACK_ERRORS = ((zipfile.BadZipFile, "not a zip archive, or a damaged one"),
                 (zlib.error, "damaged: its data does not decompress"),
                 (EOFError, "cut short"),
                 (RuntimeError, "encrypted: it asks for a password"),
                 (NotImplementedError, "compressed in a way the grader cannot read"))


def copy_regular_files(upload: Path, into: Path) -> list[Note]:
    """Copy the upload's regular files and folders; links and other entries are left out (and said
    so), so nothing below ``into`` leads outside it, whatever the upload holds."""
    notes = []
    for folder, subfolders, files in os.walk(upload):
        here = Path(folder)
        target = into / here.relative_to(upload)
        target.mkdir(parents=True, exist_ok=True)
        for name in [*subfolders, *files]:
            if (here / name).is_symlink():
                notes.append((str((here / name).relative_to(upload)), "a link, left out"))
        subfolders[:] = [d for d in subfolders if not (here / d).is_symlink()]
        for name in files:
            path = here / name
            if path.is_symlink():
                continue
            if path.is_file():
                shutil.copyfile(path, target / name)
            else:
                notes.append((str(path.relative_to(upload)), "not a regular file (a FIFO, a socket or a device), left out"))
    return notes


class ZipBudget:
    """What unpacking may still write, over all the upload's archives."""

    def __init__(self, limits: Limits):
        self.limits, self.bytes, self.archives = limits, limits.upload_unzipped_bytes, limits.upload_archives


def unpack_zips(folder: Path, limits: Limits) -> list[Note]:
    """Unpack each zip in ``folder`` next to it; zips found inside are unpacked too, down to
    ``Limits.upload_nested_zips`` levels, all within one budget of bytes and archives."""
    budget, opened, notes = ZipBudget(limits), set(), []
    for _ in range(limits.upload_nested_zips):
        archives = [a for a in sorted(folder.rglob("*.zip")) if a not in opened and a.is_file()]
        opened.update(archives)
        for archive in archives:
            outcome = unpack(archive, budget, notes, folder)
            notes.append((shown(archive, folder), outcome))
    notes += [(shown(archive, folder), f"a zip inside {limits.upload_nested_zips} levels of zips, not opened")
              for archive in sorted(folder.rglob("*.zip")) if archive not in opened and archive.is_file()]
    return notes


def unpack(archive: Path, budget: ZipBudget, notes: list[Note], root: Path) -> str:
    """Unpack ``archive`` into a new folder beside it, skipping entries that would land outside or
    cannot be written (each said in ``notes``); return what became of it."""
    if budget.archives <= 0:
        return "too many archives in the upload, not opened"
    budget.archives -= 1
    target = archive.with_name(archive.name + ".contents")
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = [m for m in bundle.infolist() if not m.is_dir()]
            size = sum(m.file_size for m in members)
            if size > budget.bytes:
                return (f"unpacks to more than the {amount(budget.limits.upload_unzipped_bytes, 'bytes')} allowed, "
                        "not opened")
            budget.bytes -= size
            target.mkdir()
            for member in members:
                destination = (target / member.filename).resolve()
                if not destination.is_relative_to(target.resolve()):
                    notes.append((shown(archive, root), f"{member.filename} points outside the archive, skipped"))
                    continue
                data = bundle.read(member)
                try:
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    destination.write_bytes(data)
                except OSError as exc:  # a name too long, a file where its folder should be
                    notes.append((shown(archive, root), f"{member.filename} could not be written "
                                  f"({what_went_wrong(exc)}), skipped"))
        return "unpacked"
    except Exception as exc:  # noqa: BLE001 - any unreadable archive (encrypted, corrupt, odd method) is the upload's
        why = next((words for kind, words in UNPACK_ERRORS if isinstance(exc, kind)), what_went_wrong(exc))
        return f"could not be unpacked ({why})"


def module_folders(lab: Lab, upload: Path, depth: int) -> list[tuple[Path, int]]:
    """The folders of the upload holding some of the lab's modules (``Limits.upload_depth`` deep at
    most, macOS's metadata aside), each with how many, the one graded first: the one holding the most,
    then the shallowest, then the first by name. The order the upload lists them in plays no part."""
    found = []
    for folder in [upload, *(p for p in upload.rglob("*") if p.is_dir())]:
        parts = folder.relative_to(upload).parts
        count = sum((folder / module).is_file() for module in lab.modules)
        if count and len(parts) <= depth and "__MACOSX" not in parts:
            found.append((folder, count))
    return sorted(found, key=lambda item: (-item[1], len(item[0].relative_to(upload).parts),
                                           item[0].relative_to(upload).parts))


def look_alike(lab: Lab, name: str) -> str | None:
    """The lab's module ``name`` is named like without being it (for ``norm.py``: "Norm.py",
    "norm (1).py", "norm.py.txt", "nоrm.py" with a Cyrillic "о"), if any."""
    if name in lab.modules:
        return None
    close = difflib.get_close_matches(unicodedata.normalize("NFKC", name).casefold(), lab.modules, n=1, cutoff=0.8)
    return close[0] if close else None


def left_out(lab: Lab, path: Path, upload: Path, graded: Path | None, depth: int) -> str:
    """Why ``path``, a file of the upload that is not graded, is not."""
    parts = path.relative_to(upload).parts
    if runs_at_start(path.name):
        return RUNS_AT_START
    if path.name in GRADER_FILES:
        return GRADERS_OWN
    if "__MACOSX" in parts:
        return "macOS's metadata of a zip, not graded"
    if len(parts) - 1 > depth:
        return f"deeper than {depth} folders, not searched for the lab's modules"
    if module := look_alike(lab, path.name):
        return f"named like {module} but not {module}, not graded (a module is graded under its own name)"
    if graded is None or path.parent == graded:
        return EXTRA_FILE
    return "not in the folder graded, not graded"


def shown(path: Path, upload: Path) -> str:
    """``path`` as the upload names it: a zip's contents inside the zip."""
    return str(path.relative_to(upload)).replace(".zip.contents", ".zip")


def where(folder: Path, upload: Path) -> str:
    return "at the top of the upload" if folder == upload else f"in {shown(folder, upload)}/"


def choose(lab: Lab, upload: Path, folders: list[tuple[Path, int]]) -> tuple[Path | None, list[Note]]:
    """The folder to grade, of ``folders`` (:func:`module_folders`), and what to say of the choice: the
    folders left aside, each with its count."""
    if not folders:
        notebooks = sorted(upload.rglob("*.ipynb"))
        return (notebooks[0].parent if notebooks else None), [("", (
            "none of the lab's modules (" + ", ".join(lab.modules) + ") was found in the upload"
            + ("; only a notebook: the points come from the modules, so upload them too" if notebooks else "")))]
    graded, aside = folders[0][0], folders[1:]
    if not aside:
        return graded, [] if graded == upload else [("", f"the modules were found {where(graded, upload)} and graded from there")]
    return graded, [("", f"the modules were found {where(graded, upload)} and graded from there: of the {len(folders)} "
                     "folders holding some of them, the one holding the most (on a tie the shallowest, then the first "
                     "by name); the others are left aside"),
                    *((shown(folder, upload) + "/", f"holds {count} of the lab's modules too, left aside")
                      for folder, count in aside)]


def collect(lab: Lab, upload: Path, into: Path, limits: Limits = DEFAULTS) -> list[str]:
    """Copy the upload's files of ``lab`` into ``into`` (a student's ``<lab>/``); return notes for the
    student: which folder was graded and why, then every file left out with why (the lab's modules,
    their look-alikes and the files that would change a run first), bounded as staging's are."""
    into.mkdir(parents=True, exist_ok=True)
    if upload.is_symlink() or not upload.is_dir():
        return ["nothing was uploaded"]
    with tempfile.TemporaryDirectory(prefix="autograder-upload-") as work:
        root = Path(work) / "upload"
        found = copy_regular_files(upload, root) + unpack_zips(root, limits)
        folders = module_folders(lab, root, limits.upload_depth)
        graded, choice = choose(lab, root, folders)
        taken = [path for path in sorted(graded.iterdir()) if path.is_file() and lab.holds(path)] if graded else []
        for path in taken:
            shutil.copyfile(path, into / path.name)
        aside = [folder for folder, _ in folders[1:]]
        found += [(shown(path, root), left_out(lab, path, root, graded, limits.upload_depth))
                  for path in sorted(root.rglob("*"))
                  if path.is_file() and path not in taken and path.suffix != ".zip" and path.parent not in aside]
    found.sort(key=lambda note: not telling(lab, Path(note[0]).name))
    return bounded_notes([f"{name}: {what}" if name else what for name, what in [*choice, *found]], limits)


def telling(lab: Lab, name: str) -> bool:
    """Is a note on the file ``name`` one to keep first when there are too many: one of the lab's
    modules, a look-alike, a file that would change a run or the grader's own?"""
    return name in lab.modules or runs_at_start(name) or name in GRADER_FILES or look_alike(lab, name) is not None


def runs_at_start(name: str) -> bool:
    return name in STARTUP_FILES or name.endswith(".pth")


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
