"""File helpers every layer uses (so none reaches up for them)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one (an interrupted run loses nothing)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# Confined workers run under user ids of their own where the grader is root: what the kit copies for them
# to read (a staged submission, the reference's and its mutants' copies) gets its mode from the kit, not
# from the grader's umask (027 or 077 on a hardened server hid every staged file: "<module>.py is missing").
# The folders above those copies are named at random and never listed: passed through (0711) only where a worker
# reaches its copy by its path, and closed (0700) where each sees it through a view of its own, since the random
# names show in /proc/<worker>/mountinfo, which any local user reads.
WORKERS_READ = {"file": 0o644, "folder": 0o755, "passed through": 0o711, "closed": 0o700}


def readable_by_workers(path: Path) -> Path:
    """``path``, a file or folder the kit made for its workers, made readable by them; returned."""
    path.chmod(WORKERS_READ["folder" if path.is_dir() else "file"])
    return path


def folder_for_workers(parent: Path | None = None, prefix: str | None = None, passed_through: bool = True) -> Path:
    """A new folder of a random name in ``parent`` (the system's temporary folder by default) above the workers'
    copies, which nobody else lists; ``passed_through``: workers reach their copies by its path."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    folder.chmod(WORKERS_READ["passed through" if passed_through else "closed"])
    return folder


def copy_modules(source: Path, target: Path) -> Path:
    """Copy the Python modules of ``source`` (a solution folder) into ``target``, readable by the workers
    (:func:`readable_by_workers`); return ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for module in source.glob("*.py"):
        readable_by_workers(Path(shutil.copyfile(module, target / module.name)))
    return readable_by_workers(target)


def what_went_wrong(exc: Exception) -> str:
    """What went wrong, without the path (the grader's, not the student's): "permission denied"."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return type(exc).__name__


def digest_files(*folders: Path, also: tuple[Path, ...] = ()) -> str:
    """One digest of every file under ``folders`` (names and bytes) and of ``also``; caches, hidden files
    and editors' backups left out (:func:`incidental`): a notebook's checkpoint is not a change of the kit."""
    digest = hashlib.sha256()
    for path in also:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not incidental(path.relative_to(folder)):
                digest.update(os.fsencode(path.relative_to(folder)) + b"\0" + path.read_bytes())
    return digest.hexdigest()


def incidental(path: Path) -> bool:
    """A file no grade depends on: under ``__pycache__`` or a hidden folder (``.ipynb_checkpoints``,
    ``.hypothesis``), hidden itself, or an editor's backup or swap file."""
    return (any(part == "__pycache__" or part.startswith(".") for part in path.parts)
            or path.name.endswith(("~", ".swp", ".swo", ".bak", ".orig", ".pyc")))
