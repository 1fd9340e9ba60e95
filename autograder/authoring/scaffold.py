"""``make new-lab LAB=<name> PARTS=<a,b,...>``: a new lab folder in ``source/`` that already grades.

Every file "Writing a lab" (README) asks for is written, with one placeholder exercise per part
(``<part>(x)`` returns ``2 * x``) that its checks, points, misconception and notebook section
use, so that ``make release solutions LAB=<name>`` and ``make check`` work at once; the
instructor then replaces each placeholder by the part's real contract, solution and checks.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.course import directory
from autograder.lab import DECLARATION

NAME = re.compile(r"[a-z][a-z0-9_]*")

MODULE = '''"""Part ``{part}``: TODO one sentence on the mechanism this part teaches."""
import torch


def {part}(x):
    """TODO the contract. The placeholder exercise: twice the input.

    Inputs:
    - x: floating-point tensor of shape (..., d).

    Returns:
    - tensor of the shape and dtype of ``x``: ``2 * x``. ``x`` itself must not be modified.
    """
    ### BEGIN SOLUTION
    return 2 * x  # (..., d)
    ### END SOLUTION
'''

CHECKS = '''"""Checks for part ``{part}``. Each check takes the ``student`` fixture; hidden checks (inside the
fence) may also take ``reference`` and only vary the inputs of a public check."""

import torch

from autograder.judge.checks import expect_close, expect_unmodified, random_tensor


def test_{part}_example(student):
    """Contract: {part}(x) on an example of shape (3, 4) is twice x."""
    x = random_tensor(1, 3, 4)
    expect_close(student.{part}.{part}(x), 2 * x, "{part}(x) on x of shape (3, 4)")


def test_{part}_keeps_dtype_and_input(student):
    """Contract: float64 in, float64 out, and x is left as it was."""
    x = random_tensor(2, 2, 5, dtype=torch.float64)
    original = x.clone()
    expect_close(student.{part}.{part}(x), 2 * original, "{part}(x) on float64 x of shape (2, 5)", atol=1e-12)
    expect_unmodified(original, x, "x after {part}(x)")


### BEGIN HIDDEN TESTS
def test_{part}_random_shapes(student, reference):
    """Hidden: the example's contract on other shapes."""
    for seed, shape in enumerate([(1, 1), (4, 2, 7)]):
        x = random_tensor(10 + seed, *shape)
        expect_close(student.{part}.{part}(x), reference.{part}.{part}(x), f"{part}(x) on x of shape {{shape}}")
### END HIDDEN TESTS
'''

MISCONCEPTION = '''
[{part}.identity]
title = "the input is returned unchanged"
hint = "TODO the concept behind the mistake, never the code. (The placeholder exercise doubles its input.)"
replace = [
    ["return 2 * x", "return x"],
]
'''

STUDENT_README = '''# {title}: the lab

TODO what this lab builds and why. Everything you edit is in `{lab}/`:

| part | module | what you write | points |
|---|---|---|---|
{rows}

## Check your work

```
make setup                 # once: creates .venv with the pinned packages
make check PART={first}    # one part
make check                 # every part
make lab                   # the companion notebook
```
'''


def declaration(title: str, parts: list[str], weights: list[float]) -> str:
    tables = "".join(f'\n[[parts]]\nid = "{part}"\ntitle = "TODO what {part} teaches"\nweight = {weight:g}\n'
                     for part, weight in zip(parts, weights))
    return (f'# A lab, as the kit reads it (see "Writing a lab" in the README). Points per check:\n'
            f'# tests/points.toml (they add up to each weight).\ntitle = "{title}"\n\n'
            f"# The parts in teaching order; each id is its module (<id>.py), pytest marker and PART=.\n{tables}")


def points(parts: list[str], weights: list[float]) -> str:
    """Per part: the two public checks share 80% of its weight, the hidden one has the rest."""
    sections = []
    for part, weight in zip(parts, weights):
        public = round(weight * 0.4, 2)
        sections.append(f"[{part}]\ntest_{part}_example = {public:g}\ntest_{part}_keeps_dtype_and_input = {public:g}\n"
                        f"### BEGIN HIDDEN TESTS\ntest_{part}_random_shapes = {round(weight - 2 * public, 2):g}\n"
                        f"### END HIDDEN TESTS\n")
    return ("# Points per check, one table per part, summing to the part's weight in ../lab.toml.\n"
            "# Hidden checks' lines sit inside the fence, so the release lists public checks only.\n\n"
            + "\n".join(sections))


def notebook(title: str, parts: list[str], weights: list[float]) -> nbformat.NotebookNode:
    def cell(factory, text, grade_id, locked=True, **nbgrader):
        made = factory(text)
        made.id = grade_id.replace("_", "-")
        if locked:  # nbgrader's read-only cells; the sections' code is the student's to play with
            made.metadata["nbgrader"] = {"grade": False, "grade_id": grade_id, "locked": True, "schema_version": 3,
                                         "solution": False, "task": False, **nbgrader}
        return made

    cells = [cell(new_markdown_cell, f"# {title}: the lab notebook\n\nTODO what the notebook shows. Each section "
                                     "loads only its own module, so *Run All* always reaches the end.", "intro"),
             cell(new_code_cell, SETUP, "setup")]
    for number, part in enumerate(parts, start=1):
        cells.append(cell(new_markdown_cell, f"## {number}. {part}\n\nTODO the idea, in a few lines.",
                          f"section_{part}", locked=False))
        cells.append(cell(new_code_cell, f'{part} = load("{part}")\nif {part} is not None:\n'
                                         f'    x = torch.arange(6.0).view(2, 3)\n'
                                         f'    compare("{part}(x)", lambda: {part}.{part}(x), 2 * x)',
                          f"run_{part}", locked=False))
    cells.append(cell(new_markdown_cell, "## Automatic points\n\nThe parts are graded from your modules; the "
                                         "cells below hold their points in nbgrader's gradebook.",
                      "automatic_points_intro"))
    cells += [cell(new_markdown_cell, f"**Part `{part}`** ({weight:g} points): the checks of `{part}.py`.",
                   f"auto_{part}", points=weight, task=True) for part, weight in zip(parts, weights)]
    return new_notebook(cells=cells, metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                                              "name": "python3"}, "language_info": {"name": "python"}})


SETUP = '''%matplotlib inline
import sys

import torch

sys.path.insert(0, "tests")  # the notebook's helpers: make release and make solutions put them there
from notebook_helpers import compare, load'''


def new_lab(name: str, parts: list[str], title: str | None = None, source: Path | None = None) -> Path:
    """Write ``source/<name>/``; refuse names that are not Python identifiers and existing folders."""
    bad = [n for n in (name, *parts) if not NAME.fullmatch(n)]
    if bad or not parts or len(set(parts)) != len(parts):
        raise ValueError(f"a lab and its parts need distinct lower-case Python names (a-z, 0-9, _), at least "
                         f"one part: not {', '.join(bad) or 'these parts'}")
    folder = (source or directory("source")) / name
    if folder.exists():
        raise ValueError(f"{folder} exists already: a new lab needs a new folder")
    title = title or f"TODO the title of {name}"
    weights = [round(100 / len(parts), 2)] * len(parts)
    weights[-1] = round(100 - sum(weights[:-1]), 2)  # the weights add up to 100
    (folder / "tests").mkdir(parents=True)
    (folder / DECLARATION).write_text(declaration(title, parts, weights), encoding="utf-8")
    for part in parts:
        (folder / f"{part}.py").write_text(MODULE.format(part=part), encoding="utf-8")
        (folder / "tests" / f"test_{part}.py").write_text(CHECKS.format(part=part), encoding="utf-8")
    (folder / "tests" / "points.toml").write_text(points(parts, weights), encoding="utf-8")
    (folder / "tests" / "misconceptions.toml").write_text(
        "# Known mistakes as edits of the reference (instructor-only; see the README).\n"
        + "".join(MISCONCEPTION.format(part=part) for part in parts), encoding="utf-8")
    rows = "\n".join(f"| `{p}` | `{p}.py` | TODO | {w:g} |" for p, w in zip(parts, weights))
    (folder / "README.student.md").write_text(
        STUDENT_README.format(title=title, lab=name, rows=rows, first=parts[0]), encoding="utf-8")
    nbformat.write(notebook(title, parts, weights), folder / f"{name}_lab.ipynb")
    return folder
