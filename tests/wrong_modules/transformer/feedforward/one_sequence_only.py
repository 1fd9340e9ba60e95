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
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        tokens = x.view(x.shape[-2], x.shape[-1])     # (T, d_model): one sequence, as in the notebook
        hidden = torch.relu(self.linear1(tokens))     # (T, d_ff)
        return self.linear2(self.dropout(hidden)).view(x.shape)
