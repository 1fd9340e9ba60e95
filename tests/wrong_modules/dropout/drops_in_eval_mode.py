"""Mistake: ``training`` is ignored, so dropout keeps dropping (and scaling) at inference time."""
import torch


def dropout(x, p, keep_mask=None, generator=None, training=True):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability p must be in [0, 1], got {p}")
    if p == 0:
        return x
    if p == 1:
        return torch.zeros_like(x)
    if keep_mask is None:
        keep_mask = torch.rand(x.shape, generator=generator, dtype=x.dtype) >= p
    return torch.where(keep_mask.bool(), x / (1 - p), torch.zeros_like(x))
