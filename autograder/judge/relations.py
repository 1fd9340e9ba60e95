"""Diagnoses beyond the catalogue: a wrong answer that equals the expected one under a simple
relation (transposed, scaled, normalised along another dim, a complemented or shifted mask,
dims permuted) is said in one sentence.

Trusted code on values a failed check already holds; nothing here calls student code. A relation
is only named when it tells something: never when the expected tensor is left unchanged by it
(a symmetric matrix is its own transpose), so the sentence cannot be a coincidence of the inputs.
"""

from __future__ import annotations

import itertools
import math

import torch

ATOL, RTOL = 1e-4, 1e-4


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, atol=ATOL, rtol=RTOL, equal_nan=False))


def factor_name(factor: float, constants: dict[str, float] | None = None) -> str:
    """A constant as a student would recognise it: by a name the check gave (``{"sqrt(d_k)": 2.0}``:
    sqrt(d_k) or 1/sqrt(d_k)), else 2, 0.5, sqrt(8), 1/sqrt(8), or its value."""
    for name, value in (constants or {}).items():
        inverse = f"1/({name})" if any(sign in name for sign in " +-*/") else f"1/{name}"
        for candidate, said in ((value, name), (1 / value if value else math.inf, inverse)):
            if math.isclose(factor, candidate, rel_tol=1e-3):
                return f"{factor:.4g} = {said}"
    for k in range(2, 1025):
        for value, name in ((k, f"{k}"), (1 / k, f"1/{k}"), (math.sqrt(k), f"sqrt({k})"), (1 / math.sqrt(k), f"1/sqrt({k})")):
            if math.isclose(factor, value, rel_tol=1e-3):
                return name if name == f"{k}" else f"{factor:.4g} = {name}"
    return f"{factor:.4g}"


def _varied(t) -> bool:
    """Does ``t`` hold at least two distinct values? Rearranging a constant tensor tells nothing."""
    return bool((t != t.reshape(-1)[0]).any())


def _reshaped(a, e):
    """The expected values in their order, in another shape (a view where a transpose was due)."""
    if a.shape != e.shape and a.numel() == e.numel() and _close(a, e.reshape(a.shape)):
        return (f"your answer holds the expected values in their order but in shape {tuple(a.shape)}: "
                f"reshaped (or viewed), not transposed or permuted, into {tuple(e.shape)}")
    return None


def _transposed(a, e):
    if e.dim() >= 2 and e.shape[-1] > 1 and e.shape[-2] > 1:
        swapped = e.transpose(-2, -1)
        if _close(a, swapped) and not _close(e, swapped):
            return "your answer is the expected one transposed (its last two dims swapped)"
    return None


def _scaled(a, e, constants):
    if a.shape != e.shape or not bool(torch.isfinite(a).all() & torch.isfinite(e).all()):
        return None
    norm = float((e * e).sum())
    if norm == 0:
        return None
    factor = float((a * e).sum()) / norm
    if abs(factor) < 1e-6 or math.isclose(factor, 1.0, rel_tol=1e-3) or not _close(a, factor * e):
        return None
    return f"your answer is the expected one multiplied by {factor_name(factor, constants)}"


def _normalised_elsewhere(a, e):
    """Both are distributions (non-negative, summing to 1) but along different dims."""
    if a.shape != e.shape or e.dim() < 2 or bool((a < 0).any()) or bool((e < 0).any()):
        return None

    def sums_to_one(t, dim):
        return bool(((t.sum(dim) - 1).abs() <= 1e-4).all())

    wanted = [d for d in range(e.dim()) if sums_to_one(e, d)]
    got = [d for d in range(a.dim()) if sums_to_one(a, d)]
    if wanted and got and not set(got) & set(wanted):
        negative = e.dim()
        return (f"your values sum to 1 along dim {got[0]} (= {got[0] - negative}); the expected ones along dim "
                f"{wanted[0]} (= {wanted[0] - negative}): normalised along another dim")
    return None


def _boolean(t) -> bool:
    return bool(((t == 0) | (t == 1)).all())


def _complement(a, e):
    if _boolean(a) and _boolean(e) and a.shape == e.shape and e.numel() > 1:
        if bool((a.bool() == ~e.bool()).all()):
            return "your mask is the complement of the expected one: True and False swapped"
    return None


def _diagonal_shift(a, e):
    """Triangular masks whose diagonal differs by one (triu(..., 1) vs triu(..., 0), tril likewise)."""
    if not (_boolean(a) and _boolean(e) and a.shape == e.shape and e.dim() >= 2 and e.shape[-1] == e.shape[-2]):
        return None
    size = e.shape[-1]
    ones = torch.ones(size, size, dtype=torch.bool)
    a2, e2 = a.bool().reshape(-1, size, size)[0], e.bool().reshape(-1, size, size)[0]
    for name, make in (("triu", torch.triu), ("tril", torch.tril)):
        for k in range(-size, size + 1):
            if torch.equal(e2, make(ones, k)):
                for shift in (-1, 1):
                    if torch.equal(a2, make(ones, k + shift)):
                        return (f"your mask is {name}(..., diagonal={k + shift}) where {name}(..., diagonal={k}) "
                                f"is expected: the diagonal is shifted by one")
    return None


def _permuted(a, e):
    if e.dim() < 2 or e.dim() > 5 or a.numel() != e.numel():
        return None
    for order in itertools.permutations(range(e.dim())):
        if list(order) == list(range(e.dim())):
            continue
        moved = e.permute(order)
        if moved.shape == a.shape and _close(a, moved) and not (moved.shape == e.shape and _close(e, moved)):
            return f"your answer holds the expected values with the dims in another order: expected.permute{order}"
    return None


RELATIONS = (_complement, _diagonal_shift, _reshaped, _transposed, _normalised_elsewhere, _permuted)


def relation(actual, expected, constants: dict[str, float] | None = None) -> str | None:
    """One sentence naming how ``actual`` relates to ``expected``, or None when no simple relation
    holds; ``constants`` names the scale factors the check knows (see :func:`factor_name`)."""
    if not isinstance(actual, torch.Tensor) or not isinstance(expected, torch.Tensor):
        return None
    if expected.numel() < 2 or expected.numel() > 1_000_000:
        return None
    a, e = actual.detach().to(torch.float64), expected.detach().to(torch.float64)  # masks become 0/1
    if actual.dtype != expected.dtype and _close(a, e):
        return f"the values are right but the dtype is {actual.dtype}, not {expected.dtype}"
    if not _varied(e):
        return None
    for check in RELATIONS:
        said = check(a, e)
        if said:
            return said
    return _scaled(a, e, constants)
