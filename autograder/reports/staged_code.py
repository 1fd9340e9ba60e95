"""The code the similarity compares (:mod:`autograder.reports.similarity`), read from the staged
copies of the submissions (regular files the batch already checked), never the students' folders.

Apart from the similarity, which imports copydetect and numpy: a run reads the code before any
student's code runs, and compares it meanwhile.
"""

from __future__ import annotations

from pathlib import Path

from autograder.lab import Lab
from autograder.text import printable

REFERENCE = None  # the reference solution's key among the students': no folder name can be None


def read_module(path: Path) -> str:
    """A module's text with one kind of line ending (a Windows editor's CRLF must neither hide a copy
    nor make the given lines the student's), control characters spelled out."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    return printable(text.replace("\r\n", "\n").replace("\r", "\n"))


def module_texts(lab: Lab, staged: dict[str, Path]) -> dict[str, list[tuple[str | None, str]]]:
    """``{module: [(student, text), ...]}``: each staged submission's module, by student name, then the
    reference solution's (key :data:`REFERENCE`); a student without that module is left out."""
    texts = {}
    for module in lab.modules:
        sources = [(student, folder / module) for student, folder in sorted(staged.items())]
        sources.append((REFERENCE, lab.reference / module))
        texts[module] = [(key, read_module(path)) for key, path in sources if path.is_file() and not path.is_symlink()]
    return texts
