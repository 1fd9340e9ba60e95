"""Which submissions a run grades, and the copies it grades: each student's folder is *staged*, its
regular files copied into a private folder named by its position in the cohort, never by the student's
name (links that loop or leave the submission, entries that are not regular files, oversized,
unreadable or unexpected files, and files past the submission's total, ``Limits.submission_bytes``, are left out and
said so, in at most ``Limits.submission_notes`` notes).
Nothing a student's folder holds stops the batch: a folder that cannot be staged fails that student
alone. A student whose record already has this run's provenance is not graded again
(:mod:`autograder.batch.provenance`).

Layout in (nbgrader's): ``<submissions>/<student>/<lab>/``; a shard (:class:`Shard`) takes a slice of it.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from autograder.batch.outputs import FINGERPRINT, student_folder
from autograder.batch.provenance import changes, read_stamp, submission_digest
from autograder.files import folder_for_workers, readable_by_workers, what_went_wrong
from autograder.harness.sandbox import views_of_their_own
from autograder.lab import Lab
from autograder.limits import DEFAULTS, Limits, amount
from autograder.reports.records import EXTRA_FILE, bounded_notes
from autograder.results import read_record


@dataclass(frozen=True)
class Shard:
    """Slice ``index`` (from 1) of ``count`` of a cohort: a student's slice follows from their folder's name
    alone (a hash), so it is the same whatever else the cohort holds and whichever machine asks."""
    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"``; an argparse type, so a bad value is said in the command's words."""
        found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not found or not 1 <= int(found[1]) <= int(found[2]):
            raise argparse.ArgumentTypeError(f"a shard is i/N with 1 <= i <= N, as 2/4; not {text!r}")
        return cls(int(found[1]), int(found[2]))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, student: str) -> bool:
        digest = hashlib.sha256(os.fsencode(student)).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1


@dataclass(frozen=True)
class Chosen:
    """Some students of a cohort, by name (``verify``'s): graded from the cohort's folders as a shard's are."""
    students: frozenset[str]

    def holds(self, student: str) -> bool:
        return student in self.students


@dataclass
class Submission:
    student: str
    folder: Path
    # Why it cannot be graded at all: (what went wrong, where), as the status column groups them.
    problems: list[tuple[str, str]] = field(default_factory=list)
    handed_in: bool = True  # False: no <lab>/ folder, or nothing of the lab in it
    notes: list[str] = field(default_factory=list)  # what staging left out or noticed (notes column)


def student_folders(submissions: Path) -> list[Path]:
    return [entry for entry in sorted(submissions.iterdir()) if entry.is_dir() and not entry.name.startswith(".")]


def discover(lab: Lab, submissions: Path, strip_prefix: str = "") -> list[Submission]:
    """Every student folder, sorted; a student without ``<lab>/`` is still listed (and gets 0). With
    ``strip_prefix``, a folder named so is the student named by the rest (Classroom 50's ``gh teacher
    download`` clones each repository as ``<classroom>-<assignment>-<username>``)."""
    return [Submission(entry.name.removeprefix(strip_prefix) or entry.name, entry / lab.name)
            for entry in student_folders(submissions)]


def labs_submitted(labs: list[Lab], submissions: Path) -> list[Lab]:
    """The labs some student of ``submissions`` handed in a folder for."""
    folders = student_folders(submissions)
    # Whatever <lab> is (a link is refused when it is staged), never followed: where a student's link leads, or that
    # it cannot be followed (a 300-character name), must neither show nor stop the run.
    return [lab for lab in labs if any(os.path.lexists(entry / lab.name) for entry in folders)]


def stage(lab: Lab, submission: Submission, target: Path, limits: Limits = DEFAULTS,
          opener: Callable[[Lab, Submission], int | None] | None = None) -> list[str]:
    """Copy what may be graded into ``target``, a new folder; say what was left out and why: in
    ``submission.notes``, one printable line per file, at most ``Limits.submission_notes`` of ``Limits.note_characters``
    (the lab's modules first), then how many more. Raises only when the folder itself cannot be
    listed; an entry that cannot be staged is left out with a note. Returns the notes about the lab's own modules.
    ``opener`` opens the submission's folder or notes why not (:func:`open_in_cohort`, :func:`open_upload`)."""
    target.mkdir()
    readable_by_workers(target)
    # The folder is opened once and every entry is listed, looked at and read by its name in it: a link a local user
    # who owns the folder swaps in for a file at any moment is never followed, as root, to files outside it.
    folder = (opener or open_in_cohort)(lab, submission)
    if folder is None:
        return []
    said = []  # (not one of the lab's modules, note)
    try:
        room = limits.submission_bytes
        for name in sorted(os.listdir(folder), key=lambda name: (name not in lab.modules, name)):  # modules first
            why = stage_entry(lab, name, folder, target, limits, room)
            if why:
                said.append((name not in lab.modules, f"{name}: {why}"))
            room -= disk_cost(target / name)
    finally:
        os.close(folder)
    submission.notes += bounded_notes([note for _, note in sorted(said, key=lambda item: item[0])], limits)
    submission.handed_in = any(target.iterdir())  # an empty folder, or only files that are not the lab's
    return [note for extra, note in said if not extra]


def open_in_cohort(lab: Lab, submission: Submission) -> int | None:
    """A cohort's ``<student>/<lab>/`` opened by its path, never through a link (it could lead anywhere: the
    reference, another student): ``<student>/`` lies in the instructor's folder, ``<lab>/`` in the student's."""
    source = submission.folder
    if source.parent.is_symlink():  # <lab>/ itself: open_last
        submission.problems.append(linked(lab))
        return None
    return open_last(lab, submission, os.open(source.parent, os.O_RDONLY | os.O_DIRECTORY))


def open_upload(lab: Lab, submission: Submission) -> int | None:
    """An upload folder opened for ``check`` as root: the instructor's path to it, through links only where no other
    user could have made or changed them (:func:`open_trusted`), then the folder itself, never through a link."""
    try:
        above = open_trusted(submission.folder.parent)
    except OSError as exc:
        submission.problems.append((f"{submission.folder}: {what_went_wrong(exc)}", "not checked"))
        return None
    return open_last(lab, submission, above)


def open_last(lab: Lab, submission: Submission, above: int) -> int | None:
    """The submission's folder opened in ``above`` (closed here), never through a link; None, noted, if it is one
    or is not a folder."""
    try:
        return os.open(submission.folder.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=above)
    except OSError as exc:
        if is_link(submission.folder.name, above):
            submission.problems.append(linked(lab))
        elif exc.errno in (errno.ENOENT, errno.ENOTDIR):
            submission.handed_in = False
        else:
            raise
        return None
    finally:
        os.close(above)


def linked(lab: Lab) -> tuple[str, str]:
    return f"{lab.name}/ is a link, not a folder of the submission", "not graded"


def is_link(name: str, folder: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_trusted(path: Path) -> int:
    """``path`` opened as a folder one step at a time, each from the last, following a link only where the folder that
    holds it and the link belong to root or this user and nobody else may change the folder (or it is sticky): a local
    user who owns a folder on the way cannot lead root elsewhere, before or while it is opened. OSError (ELOOP) names
    the first link that is not so."""
    steps, hops = list(path.absolute().parts[1:]), 0
    folder = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        while steps:
            name = steps.pop(0)
            try:
                step = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            except OSError as exc:
                if not is_link(name, folder):
                    raise
                held, link, hops = os.fstat(folder), os.stat(name, dir_fd=folder, follow_symlinks=False), hops + 1
                mine = {0, os.geteuid()}
                if hops > 40 or not (held.st_uid in mine and link.st_uid in mine
                                     and (not held.st_mode & 0o022 or held.st_mode & stat.S_ISVTX)):
                    raise OSError(errno.ELOOP, f"{name} is a link another user could have made or changed") from exc
                target = Path(os.readlink(name, dir_fd=folder))
                steps[:0] = target.parts[1:] if target.is_absolute() else target.parts
                step = os.open("/", os.O_RDONLY | os.O_DIRECTORY) if target.is_absolute() else os.dup(folder)
            os.close(folder)
            folder = step
    except BaseException:
        os.close(folder)
        raise
    return folder


@contextlib.contextmanager
def private_copy(lab: Lab, folder: Path, limits: Limits) -> Iterator[Path]:
    """``folder`` staged as a cohort's submissions are (:func:`stage`, opened by :func:`open_upload`), in a folder of its
    own removed after; why a module of the lab was left out is said on stderr. For ``check`` as root: its workers then
    run as user ids of their own, which may not read the folder's files (an upload unpacked under umask 077 read as
    "<module>.py is missing")."""
    root = folder_for_workers(prefix="autograder-check-", passed_through=not views_of_their_own(limits))
    try:
        submission, staged = Submission("", folder.absolute()), folder_for_workers(root) / lab.name
        modules = stage(lab, submission, staged, limits, open_upload)
        # Only the lab's modules are noted: a release's Makefile, notebook and tests/ are no news.
        for note in [problem for problem, _ in submission.problems] + modules:
            print(f"note: {note}", file=sys.stderr)
        yield staged
    finally:
        shutil.rmtree(root, ignore_errors=True)


BLOCK = 4096  # a disk's unit: a file of 1 byte, or of 4,097, takes one, or two
LINK_HOPS = 8  # links followed from one entry, one to the next, beside it


def blocks(size: int) -> int:
    """What a file of ``size`` bytes counts against ``Limits.submission_bytes``: the disk it takes."""
    return max(1, -(-size // BLOCK)) * BLOCK


def disk_cost(staged: Path) -> int:
    """What a staged file counts against ``Limits.submission_bytes`` (0: not staged)."""
    return blocks(staged.stat().st_size) if staged.is_file() else 0


def beside(name: str, folder: int) -> tuple[str, str | None]:
    """The entry a link ``name`` of ``folder`` leads to by names of files beside it (a chain of them), and None; or
    why it is not followed. Only the link's own text is read: root never follows it to learn where it leads (what a
    note said would tell a student which files exist in folders only root reads)."""
    seen = [name]
    while True:
        text = os.readlink(name, dir_fd=folder).removeprefix("./")
        if not text or "/" in text or text in (".", ".."):
            return name, "a link to another folder's file (only a link to a file beside it is followed), left out"
        if text in seen:
            return name, "a link that loops (following it never reaches a file), left out"
        if len(seen) == LINK_HOPS:  # each entry's chain is followed anew: bounded, staging stays linear
            return name, f"a chain of more than {LINK_HOPS} links, left out"
        seen.append(text)
        try:
            led_to = os.stat(text, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return name, "a link to nothing (its target does not exist), left out"
        if not stat.S_ISLNK(led_to.st_mode):
            return text, None
        name = text


def stage_entry(lab: Lab, entry: str, folder: int, target: Path, limits: Limits, room: int) -> str | None:
    """Copy ``entry`` of a submission's folder (open as ``folder``) into ``target`` if it may be graded and its cost
    (:func:`disk_cost`) is within ``room``, the bytes left of ``Limits.submission_bytes``; return what to say about it
    (why it was left out, or what is odd about what was copied), or None."""
    name, path = entry, Path(entry)  # name: the entry read, itself or the file a link names beside it
    try:
        if is_link(entry, folder):
            name, why = beside(entry, folder)
            if why:
                return why
        status = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if stat.S_ISDIR(status.st_mode):  # __pycache__/, tests/: skipped unless named as a module
            return "a folder, not a file, left out" if lab.holds(path) else None
        if not lab.holds(path):
            return EXTRA_FILE
        if not stat.S_ISREG(status.st_mode):
            return "not a regular file (a FIFO, a socket or a device), left out"
        if status.st_size > limits.submission_file_bytes:
            return f"too large (over {amount(limits.submission_file_bytes, 'bytes')}), left out"
        if blocks(status.st_size) > room:
            return f"with it the submission's files would be over {amount(limits.submission_bytes, 'bytes')}, left out"
        data = read_regular(name, folder, min(limits.submission_file_bytes, room))
    except OSError as exc:
        return f"could not be read ({what_went_wrong(exc)}), left out"
    if data is None:
        return "changed while it was read, left out"
    (target / entry).write_bytes(data)
    readable_by_workers(target / entry)
    return unreadable(entry, data)


def read_regular(name: str, folder: int, most: int) -> bytes | None:
    """The bytes of the entry ``name`` of the open folder ``folder``, or None if it is no longer a regular file of at
    most ``most`` bytes (``Limits.submission_file_bytes`` or what is left of the submission's; it may have changed
    since it was listed). Never blocks: a
    FIFO put in its place opens at once and is refused unread; a link put in its place is not followed (OSError)."""
    with open(os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW, dir_fd=folder), "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None
        data = file.read(most + 1)
    return data if len(data) <= most else None


def unreadable(name: str, data: bytes) -> str | None:
    """Why a staged file cannot be what it claims to be (it is still staged and graded as it is)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if name.endswith(".ipynb"):
        try:
            json.loads(text)
        except ValueError as exc:
            return f"not a valid notebook (invalid JSON: {exc})"
        except RecursionError:  # 200,000 "[": nested deeper than the parser goes
            return "not a valid notebook (nested too deep to read)"
    return None


def stage_cohort(lab: Lab, cohort: list[Submission], staging: Path, out: Path, force: bool, provenance: dict,
                 limits: Limits = DEFAULTS
                 ) -> tuple[list[tuple[Submission, Path, dict]], dict[str, Path], dict[str, list[str]]]:
    """Stage every submission into ``staging``; return those to grade, each with its staged folder and
    the provenance its grade will have (not those whose record in ``out`` has it, unless ``force``), every
    staged folder, and for each student graded before, what changed since (:func:`provenance.changes`)."""
    todo, staged_folders, changed = [], {}, {}
    for submission in cohort:
        staged = staged_folders[submission.student] = folder_for_workers(staging) / lab.name
        try:
            stage(lab, submission, staged, limits)
        except Exception as exc:  # noqa: BLE001 - a folder that cannot be staged fails its student alone
            shutil.rmtree(staged, ignore_errors=True)  # nothing of it graded, nor left to fill the disk
            staged.mkdir(parents=True, exist_ok=True)
            submission.problems.append(("error", f"{lab.name}/ could not be read ({what_went_wrong(exc)}): not graded"))
        notes = [*(": ".join(problem) for problem in submission.problems), *submission.notes]
        stamp = {**provenance, "submission": submission_digest(staged, notes)}
        folder = student_folder(out, submission.student)
        if not (folder / FINGERPRINT).is_file():
            todo.append((submission, staged, stamp))
            continue
        # A record this kit cannot read (another format, or damaged) is graded again.
        differs = changes(read_stamp(folder / FINGERPRINT), stamp) if read_record(folder) is not None else ["format"]
        if differs:
            changed[submission.student] = differs
        if force or differs or not (folder / "results.json").is_file():
            todo.append((submission, staged, stamp))
    return todo, staged_folders, changed
