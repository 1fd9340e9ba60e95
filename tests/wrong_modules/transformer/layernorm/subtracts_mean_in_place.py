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
    x -= x.mean(dim=-1, keepdim=True)  # centre the features
    var = (x ** 2).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(var + eps) * weight + bias


class LayerNorm(nn.Module):
    """``nn.LayerNorm(d_model, eps)``, written with :func:`layer_norm`.

    Parameters (the names and shapes of ``nn.LayerNorm``'s, so its weights load as they are):
    - weight: shape (d_model,), initialised to ones.
    - bias: shape (d_model,), initialised to zeros.

    forward(x): (..., d_model) -> (..., d_model).
    """

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
