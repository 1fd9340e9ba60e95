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
        self.d_model = d_model     # features of each token
        self.d_ff = d_ff           # width of the hidden layer
        # widen: d_model -> d_ff
        self.linear1 = nn.Linear(self.d_model, self.d_ff)
        # drops hidden activations, in training mode only
        self.dropout = nn.Dropout(dropout)
        # narrow back: d_ff -> d_model
        self.linear2 = nn.Linear(self.d_ff, self.d_model)

    def forward(self, x):
        hidden = self.linear1(x)             # (..., d_ff)
        activated = torch.maximum(hidden, torch.zeros_like(hidden))   # (..., d_ff), ReLU: max(h, 0)
        dropped = self.dropout(activated)    # (..., d_ff)
        output = self.linear2(dropped)       # (..., d_model)
        return output
