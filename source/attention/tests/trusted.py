"""Trusted computations the checks compare with: the judge runs them on its own inputs and weights."""

import math

import torch


def future_positions(num_tokens: int) -> torch.Tensor:
    """The judge's own causal mask: True strictly above the diagonal (a query's future keys)."""
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1)


def causal_weights(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """softmax((queries @ keys^T, -inf strictly above the diagonal) / sqrt(d_k)) over the last dim.

    queries (..., T, d_k), keys (..., T, d_k) -> weights (..., T, T).
    """
    scores = queries @ keys.transpose(-2, -1)                              # (..., T, T)
    scores = scores.masked_fill(future_positions(scores.shape[-1]), -torch.inf)
    return torch.softmax(scores / math.sqrt(keys.shape[-1]), dim=-1)


def dropped_out(weights: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """``nn.Dropout(p)`` in training mode applied to ``weights`` as the first random draw after
    ``manual_seed(seed)``, as in a call made through ``student.seeded(seed)``: the judge draws the
    same keep-pattern on the same machine, so no platform's random pattern is baked in."""
    with torch.random.fork_rng(devices=[]):  # the judge's own random state is left as it was
        torch.manual_seed(seed)
        return torch.nn.functional.dropout(weights, p, training=True)
