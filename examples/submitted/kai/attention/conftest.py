"""Kai's scratch helpers (not part of the lab)."""


def close_enough(a, b, tol=1e-4):
    """True when two floats differ by at most tol."""
    return abs(a - b) <= tol
