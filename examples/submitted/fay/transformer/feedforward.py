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
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = nn.ReLU()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.pipeline()(x)

    def pipeline(self):
        # the submodules themselves, chained (no copies: the weights stay linear1's and linear2's)
        return nn.Sequential(self.linear1, self.activation, self.dropout, self.linear2)
