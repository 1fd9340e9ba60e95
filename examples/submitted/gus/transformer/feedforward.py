"""Part ``feedforward``: the position-wise feed-forward block of a transformer layer.

The same two-layer network is applied to every token on its own: widen to ``d_ff``
features, ReLU, narrow back to ``d_model``. Document 001 uses ``d_ff = 2 * EMBEDDING_DIM``.
"""
import torch
import torch.nn as nn


class FeedForward(nn.Module):
    """``linear2(dropout(relu(linear1(x))))``, on every token independently.

    Submodules, created in this order:
    - linear1: ``nn.Linear(d_model, d_ff)``.
    - dropout: ``nn.Dropout(dropout)``; ``dropout`` is the probability of *dropping* a value,
      applied in training mode only, between the ReLU and ``linear2``.
    - linear2: ``nn.Linear(d_ff, d_model)``.

    forward(x): (..., d_model) -> (..., d_model), the dtype of ``x``.
    """

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.d_model = d_model
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x):
        flat = x.reshape(-1, self.d_model)                  # (N, d_model), N = all tokens
        h = self.linear1(flat)
        h = torch.where(h > 0, h, torch.zeros_like(h))      # ReLU
        out = self.linear2(self.dropout(h))
        return out.view(*x.shape[:-1], self.d_model)
