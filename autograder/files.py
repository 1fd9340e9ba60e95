"""File helpers every layer uses (so none reaches up for them)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one (an interrupted run loses nothing)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def copy_modules(source: Path, target: Path) -> Path:
    """Copy the Python modules of ``source`` (a solution folder) into ``target``; return ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for module in source.glob("*.py"):
        shutil.copy(module, target / module.name)
    return target


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
