"""What every lab's companion notebook needs around the student's code, kept out of its cells.

``make release`` and ``make solutions`` copy this file into each lab's ``tests/``, which the
notebook puts on its path. Each section loads its own module (``load``), runs the student's
functions without ever stopping the notebook (``attempt``), says at a glance whether a result
is right (``compare``: a green ✓ or a red ✗, and a picture of what differs), gives a layer known
weights (``with_weights``) and draws matrices side by side on one colour scale (``heatmaps``).
Each section ends with its part's public checks (``checks``), the ones ``make check`` runs: a
section is green exactly when they pass.
"""

import html
import importlib
import sys
import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from IPython.display import display

RIGHT, WRONG, PENDING = "#1a7f37", "#cf222e", "#57606a"
TITLE_WIDTH = 34  # characters to a line of a picture's title


def load(name):
    """The student's module ``name``, or None with one line saying why, so that only its section stops.
    Read again from its file when a section runs again: what it compares is what its checks judge."""
    try:
        return importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)
    except Exception as error:  # a syntax error or a failing import stops only the section that needs it
        # a SyntaxError's traceback ends in importlib, not in the student's file
        line = error.lineno if isinstance(error, SyntaxError) else traceback.extract_tb(error.__traceback__)[-1].lineno
        print(f"{name}.py did not load ({type(error).__name__}: {error}, line {line}): this section is skipped")
    return None


def attempt(label, run):
    """``run()``'s result, or None with one line saying why, so the notebook goes on."""
    try:
        return run()
    except NotImplementedError:
        print(f"{label}: not implemented yet (the notebook goes on without it)")
    except Exception as error:  # a half-written function should not stop the notebook
        print(f"{label}: raised {type(error).__name__}: {error}")
    return None


def checks(part):
    """Run ``part``'s public checks on the modules beside the notebook, as ``make check PART=<part>`` runs
    them, and show each one's ✓ or ✗ with the first failure of each function written (nothing returned: the
    cell's last line, it would print again)."""
    root = next((folder for folder in (Path.cwd().parent, Path.cwd().parent.parent)  # where the lab's Makefile looks
                 if (folder / "autograder" / "__main__.py").is_file()), None)
    if root is None:
        print(f"{part}: the public checks are not here (no autograder/ one or two folders up): run make check")
        return
    if str(root) not in sys.path:
        sys.path.append(str(root))  # last: the student's modules and tests/ come first
    ran = importlib.import_module("autograder.platforms.notebook").run_part(Path.cwd(), part)
    if ran.refused:
        print(f"{part}: the public checks did not run: {ran.refused}")
        return
    written, stubs = ran.shown()
    if stubs and not written and not any(check.passed for check in ran.checks):
        print(f"{part}: not implemented yet: {counted(stubs)} (the public checks wait for them)")
        return
    display(PublicChecks(part, ran, written, stubs))


def counted(stubs):
    return ", ".join(f"{where} ({count} check{'s' * (count > 1)})" for where, count in stubs.items())


@dataclass(frozen=True)
class PublicChecks:
    """A part's public checks: ✓ when all pass, ✗ when a written function fails, neither while only
    stubs fail; one line per check, then what ``make check`` says of each failing function."""

    part: str
    ran: object  # autograder.platforms.notebook.PartChecks
    written: list
    stubs: dict

    def lines(self):
        checks = self.ran.checks
        passed = sum(check.passed for check in checks)
        mark = "✓ " if self.ran.passed else "✗ " if self.ran.written_fails else ""
        head = f"{mark}public checks of {self.part}: {passed} of {len(checks)} pass (make check PART={self.part})"
        rows = [f"{'✓' if check.passed else '✗'} {check.name}" for check in checks]
        said = [(f"failing check {check.name}:\n" + "\n".join(check.message.strip().split("\n")[:8])  # as make check
                 + (f"\nknown mistake: {check.diagnoses[0].title}" if check.diagnoses else "") + f"\nhint: {hint}")
                for check, hint in self.written]
        if self.stubs:
            said.append(f"not implemented yet: {counted(self.stubs)}")
        return head, rows, said

    def __repr__(self):
        head, rows, said = self.lines()
        return "\n".join([head, *(f"  {row}" for row in rows), *said])

    def _repr_html_(self):
        head, rows, said = self.lines()
        colour = RIGHT if self.ran.passed else WRONG if self.ran.written_fails else PENDING
        items = "".join(f'<li style="color: {RIGHT if row.startswith("✓") else WRONG}">{html.escape(row)}</li>'
                        for row in rows)
        notes = "".join(f'<pre style="white-space: pre-wrap; margin: 4px 0">{html.escape(text)}</pre>' for text in said)
        return (f'<div style="border-left: 6px solid {colour}; padding: 2px 10px; margin: 4px 0">'
                f'<div style="color: {colour}; font-weight: 600">{html.escape(head)}</div>'
                f'<ul style="list-style: none; padding-left: 8px; margin: 2px 0; font-size: 90%">{items}</ul>'
                f'{notes}</div>')


def with_weights(layer, state):
    """The student's ``layer`` holding the given weights (by name, as PyTorch's layers would load them), in eval mode."""
    layer.load_state_dict(state)
    return layer.eval()


@dataclass(frozen=True)
class Verdict:
    """One comparison's outcome: coloured with a mark in JupyterLab, plain text everywhere else."""

    label: str
    matches: bool
    reference: str

    def __repr__(self):
        return f"{'✓' if self.matches else '✗'} {self.label}: {'matches' if self.matches else 'does not match'} " \
               f"{self.reference}"

    def _repr_html_(self):
        colour = RIGHT if self.matches else WRONG
        return (f'<div style="border-left: 6px solid {colour}; padding: 2px 10px; margin: 4px 0; color: {colour}; '
                f'font-weight: 600">{html.escape(repr(self))}</div>')


def compare(label, run, expected, *, reference="the expected values", atol=1e-5, rtol=1e-4):
    """Run the student's code and judge its result against ``expected``.

    ``expected`` is a tensor, or a tensor a document printed (with ``.tensor``, ``.atol`` and
    ``.provenance``), which is then named as the reference. A wrong result is printed beside the
    expected one, and a wrong matrix (or vector) is drawn beside it, the differing cells outlined.
    Returns the student's result (None when the code did not run).
    """
    if hasattr(expected, "provenance"):
        reference, atol, rtol, expected = f"the document ({expected.provenance})", expected.atol, 0.0, expected.tensor
    mine = attempt(label, run)
    if mine is None:
        return None
    if not isinstance(mine, torch.Tensor):
        display(Verdict(label, False, reference))
        print(f"yours is a {type(mine).__name__}, not a tensor")
        return None
    mine = mine.detach()
    same_shape = tuple(mine.shape) == tuple(expected.shape)
    if not same_shape:
        matches = False
    elif expected.is_floating_point():  # any float precision will do; an integer or complex result will not
        matches = mine.is_floating_point() and torch.allclose(mine.to(expected.dtype), expected, atol=atol,
                                                              rtol=rtol, equal_nan=True)
    else:  # a mask or indices: the same values of the same dtype (0.5 is not True)
        matches = mine.dtype == expected.dtype and torch.equal(mine, expected)
    display(Verdict(label, matches, reference))
    if not matches:
        print(f"yours {tuple(mine.shape)}, {mine.dtype}:\n{mine}\n{reference} {tuple(expected.shape)}, {expected.dtype}:"
              f"\n{expected}")
        if same_shape and mine.dim() >= 1 and not mine.is_complex():
            differs = ~torch.isclose(mine.to(torch.float64), expected.to(torch.float64), atol=atol, rtol=rtol,
                                     equal_nan=True)
            if not differs.any():
                print(f"the same values, but {mine.dtype} instead of {expected.dtype}")
            else:
                index = first_differing_slice(differs)
                where = f"[{', '.join(map(str, index))}]" if index else ""
                heatmaps((f"yours{where}", mine[index]), (f"expected{where}", expected[index]),
                         outline=as_matrix(differs, index), xlabel="column", ylabel="row")
    return mine


def first_differing_slice(differs):
    """The index of the 2-D slice that holds the first difference (``()`` for a matrix or a vector)."""
    if differs.dim() <= 2:
        return ()
    first = differs.reshape(-1, *differs.shape[-2:]).flatten(1).any(1).nonzero()[0, 0]
    return tuple(int(i) for i in torch.unravel_index(first, differs.shape[:-2]))


def as_matrix(values, index=()):
    """``values[index]`` as a matrix (a vector becomes one row)."""
    values = values[index]
    return values.reshape(1, -1) if values.dim() == 1 else values


def as_picture(title, values):
    """``values`` as a float matrix to draw (leading dims of size 1 dropped, a vector as one row), or None:
    nothing to draw, or, with one line saying so, something that is not a vector or a matrix."""
    if values is None:
        return None
    if not isinstance(values, torch.Tensor) or values.is_complex():
        print(f"{title}: not drawn (a {type(values).__name__}, not a real tensor)")
        return None
    while values.dim() > 2 and values.shape[0] == 1:
        values = values[0]
    if values.dim() not in (1, 2) or values.numel() == 0:
        print(f"{title}: not drawn (shape {tuple(values.shape)}, not a vector or a matrix)")
        return None
    return as_matrix(values.detach().to(torch.float64))


def heatmaps(*panels, rows=None, columns=None, xlabel="key (attended to)", ylabel="query (attending)", outline=None,
             per_row=3):
    """Matrices side by side on one colour scale (``per_row`` to a line); panels that are None are skipped.

    ``rows`` and ``columns`` label the axes when their lengths fit; ``outline`` (a boolean matrix)
    frames the cells that differ. Booleans are drawn as 0 and 1, non-finite values as blank cells.
    """
    panels = [(title, drawable) for title, values in panels if (drawable := as_picture(title, values)) is not None]
    if not panels:
        return
    finite = torch.cat([values[values.isfinite()] for _, values in panels])
    low, high = (float(finite.min()), float(finite.max())) if finite.numel() else (0.0, 1.0)
    lines = -(-len(panels) // per_row)
    across = min(len(panels), per_row)
    figure, axes = plt.subplots(lines, across, figsize=(4.2 * across, 3.8 * lines), squeeze=False,
                                layout="constrained")
    for axis in axes.flat[len(panels):]:
        axis.set_visible(False)
    for axis, (title, values) in zip(axes.flat, panels):
        image = axis.imshow(values.where(values.isfinite(), torch.nan), cmap="viridis", vmin=low, vmax=high,
                            aspect="auto")
        # Wrapped to the panel's width (4.2 in holds about 34 characters at 10 pt): a long title would run
        # into its neighbour's; constrained layout makes room for its lines above the panel.
        axis.set_title(textwrap.fill(title, TITLE_WIDTH), fontsize=10)
        axis.set_xlabel(xlabel)
        axis.set_ylabel(ylabel)
        if columns is not None and len(columns) == values.shape[-1]:
            axis.set_xticks(range(len(columns)), columns, rotation=45, fontsize=8)
        if rows is not None and len(rows) == values.shape[-2]:
            axis.set_yticks(range(len(rows)), rows, fontsize=8)
        if outline is not None:
            for row, column in outline.nonzero().tolist():
                axis.add_patch(plt.Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="orange",
                                             linewidth=2))
    figure.colorbar(image, ax=list(axes.flat[:len(panels)]), fraction=0.03)
    plt.show()
