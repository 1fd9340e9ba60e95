"""The last step of ``nbgrader autograde`` (``nbgrader_config.py``): every Markdown or raw cell a student
wrote reaches the formgrader as its text in a code block, inert.

nbgrader 0.9.6 shows a student's text as the student wrote it. Its formgrader renders a Markdown cell
with nbconvert's ``markdown2html``, which lets raw HTML through (its template applies no ``clean_html``),
so an answer's ``<img onerror>``, ``<script>``, ``<svg onload>`` or ``<a href="javascript:">`` runs in the
grader's page, inside the instructor's Jupyter session and with its rights; ``generate_feedback`` builds
its pages from the same notebooks. A raw cell is bleached there, but keeps its ``class`` and ``id``.

Only the text of cells the instructor wrote renders as before: the gradebook's cells of the notebook
(a locked one's text is the gradebook's already: nbgrader's OverwriteCells restored it) and the cells of
the released notebook, each matched character for character. Running last, after SaveAutoGrades, leaves
nbgrader's scoring alone: an unchanged answer (its checksum that of the release) still gets 0, unread.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

TEXT_CELLS = ("markdown", "raw")


def as_code_block(text: str) -> str:
    """``text`` as a fenced code block that no line of it can close: Markdown shows it verbatim, escaped,
    and MathJax leaves it alone. No info string: nbconvert would render a ``mermaid`` one as raw HTML."""
    fence = "`" * max(3, 1 + max(map(len, re.findall("`+", text)), default=0))
    return f"{fence}\n{text}\n{fence}"


class InertStudentCells(NbGraderPreprocessor):
    """Shows a Markdown or raw cell that is not text of the instructor's as its text, in a code block."""

    def preprocess(self, nb, resources):
        instructors = self.instructors_text(**resources["nbgrader"])
        for cell in nb.cells:
            if cell.cell_type in TEXT_CELLS and (cell.cell_type, cell.source) not in instructors:
                cell.cell_type, cell.source = "markdown", as_code_block(cell.source)
        return nb, resources

    def instructors_text(self, db_url: str, assignment: str, notebook: str, **_) -> set[tuple[str, str]]:
        """(type, text) of each text cell in the gradebook's and the release's version of ``notebook``."""
        with Gradebook(db_url) as gradebook:
            texts = {(cell.cell_type, cell.source) for cell in gradebook.find_notebook(notebook, assignment).source_cells}
        coursedir = CourseDirectory(parent=self)
        released = Path(coursedir.format_path(coursedir.release_directory, ".", assignment)) / f"{notebook}.ipynb"
        if released.is_file():  # not every grader's machine keeps the release
            cells = json.loads(released.read_text(encoding="utf-8"))["cells"]
            texts |= {(cell["cell_type"], "".join(cell["source"])) for cell in cells}
        return {(kind, text) for kind, text in texts if kind in TEXT_CELLS}
