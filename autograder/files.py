"""File helpers every layer uses (so none reaches up for them)."""

from __future__ import annotations

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
