"""Mistake: p read as the probability of KEEPING an entry (mask = rand < p), so 1 - p of them are kept
only when p == 0.5. The scaling by 1 / (1 - p) and the injected keep_mask path are right."""
import torch


def dropout(x, p, keep_mask=None, generator=None, training=True):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability p must be in [0, 1], got {p}")
    if not training or p == 0:
        return x
    if p == 1:
        return torch.zeros_like(x)
    if keep_mask is None:
        keep_mask = torch.rand(x.shape, generator=generator, dtype=x.dtype) < p
    return torch.where(keep_mask.bool(), x / (1 - p), torch.zeros_like(x))
