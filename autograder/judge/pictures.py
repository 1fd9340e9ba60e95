"""The matrix a failed comparison is about, as data a report can draw: the student's values and
the expected ones of the 2-D slice (last two dims) holding the first differing entry.

Taken by trusted code from tensors the check already holds; the plugin keeps it for public
checks only, so a hidden check's expected values never leave the judge.
"""

from __future__ import annotations

import math

import torch

LARGEST = 24  # rows and columns drawn at most: a window around the first difference


def _cell(value: float):
    """JSON has no infinities: non-finite values travel as their names."""
    return round(value, 4) if math.isfinite(value) else str(value)


def _window(size: int, around: int) -> range:
    start = max(0, min(around - LARGEST // 2, size - LARGEST))
    return range(start, min(size, start + LARGEST))


def matrix_picture(actual, expected, differ: torch.Tensor) -> dict | None:
    """``{"actual", "expected", "differ", "slice", "rows", "cols", "shape", "mask"}`` for two tensors of one
    shape with at least two dims, ``differ`` marking the entries that fail; else None."""
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)) or actual.shape != expected.shape \
            or actual.dim() < 2 or not bool(differ.any()):
        return None
    differ = differ.reshape(actual.shape)
    first = [int(i) for i in differ.nonzero()[0]]
    lead, row, col = tuple(first[:-2]), first[-2], first[-1]
    rows, cols = _window(actual.shape[-2], row), _window(actual.shape[-1], col)
    crop = (*lead, slice(rows.start, rows.stop), slice(cols.start, cols.stop))

    def values(t):
        return [[_cell(v) for v in line] for line in t[crop].detach().to(torch.float64).tolist()]

    return {"actual": values(actual), "expected": values(expected), "differ": differ[crop].int().tolist(),
            "slice": list(lead), "rows": [rows.start, rows.stop], "cols": [cols.start, cols.stop],
            "shape": list(actual.shape), "mask": expected.dtype == torch.bool}
