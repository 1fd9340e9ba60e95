"""Part ``layernorm``: layer normalisation, by hand.

Each token's feature vector is normalised to mean 0 and variance 1, then scaled and shifted
by learned per-feature parameters. Attention layers stack better on normalised activations;
document 001's encoder (In [248]) normalises after each residual connection.
"""
import torch
import torch.nn as nn


def layer_norm(x, weight, bias, eps=1e-5):
    """Normalise over the last dimension, then scale and shift.

    Inputs:
    - x: floating-point tensor of shape (..., d_model).
    - weight, bias: tensors of shape (d_model,): the scale and the shift.
    - eps: small number added to the variance, inside the square root.

    Returns:
    - tensor of shape (..., d_model) with the dtype of ``x``:
      ``(x - mean) / sqrt(var + eps) * weight + bias``, where ``mean`` and ``var`` are taken
      over the last dimension and ``var`` is the *biased* variance (divide by d_model, not
      d_model - 1), as ``torch.nn.LayerNorm`` does. ``x`` itself must not be modified.
      Write it from means and square roots: the library's layer norm is not available here.
    """
    d_model = x.shape[-1]
    # mean of each token's features
    mean = x.mean(dim=-1, keepdim=True)                               # (..., 1)
    # deviations from the mean, and their squares
    deviations = x - mean                                             # (..., d_model)
    squared = deviations * deviations                                 # (..., d_model)
    # variance: sum of the squared deviations, divided by n - 1
    variance = squared.sum(dim=-1, keepdim=True) / (d_model - 1)      # (..., 1)
    # standard deviation, with eps inside the root
    std = torch.sqrt(variance + eps)                                  # (..., 1)
    normalised = deviations / std                                     # (..., d_model)
    # scale, then shift
    scaled = normalised * weight                                      # (..., d_model)
    shifted = scaled + bias                                           # (..., d_model)
    return shifted


class LayerNorm(nn.Module):
    """``nn.LayerNorm(d_model, eps)``, written with :func:`layer_norm`.

    Parameters (the names and shapes of ``nn.LayerNorm``'s, so its weights load as they are):
    - weight: shape (d_model,), initialised to ones.
    - bias: shape (d_model,), initialised to zeros.

    forward(x): (..., d_model) -> (..., d_model).
    """

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.d_model = d_model
        self.eps = eps
        # learnable scale (gamma), starts at 1
        self.weight = nn.Parameter(torch.ones(d_model))
        # learnable shift (beta), starts at 0
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        out = layer_norm(x, self.weight, self.bias, self.eps)   # (..., d_model)
        return out
