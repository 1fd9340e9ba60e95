"""The code the similarity compares (:mod:`autograder.reports.similarity`), read from the staged
copies of the submissions (regular files the batch already checked), never the students' folders.

A module of its own because it imports no copydetect or numpy: a run reads the code before any
student's code runs, and the similarity compares it while the lanes grade.
"""

from __future__ import annotations

from pathlib import Path

from autograder.lab import Lab
from autograder.text import printable

REFERENCE = None  # the reference solution's key among the students': no folder name can be None


def module_sources(lab: Lab, staged: dict[str, Path]) -> dict[str, list[tuple[str | None, bytes]]]:
    """``{module: [(student, its bytes), ...]}``: each staged submission's module, by student name, then
    the reference solution's (key :data:`REFERENCE`); a student without that module is left out."""
    sources = {}
    for module in lab.modules:
        paths = [(student, folder / module) for student, folder in sorted(staged.items())]
        paths.append((REFERENCE, lab.reference / module))
        sources[module] = [(key, path.read_bytes()) for key, path in paths if path.is_file() and not path.is_symlink()]
    return sources


def module_text(source: bytes) -> str:
    """A module's text with one kind of line ending (a Windows editor's CRLF must neither hide a copy
    nor make the given lines the student's), control characters spelled out."""
    text = source.decode("utf-8", errors="replace")
    return printable(text.replace("\r\n", "\n").replace("\r", "\n"))
