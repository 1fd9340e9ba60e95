"""Part ``projections``: self-attention with trainable query, key and value maps.

You project the inputs into queries, keys and values, compute scaled
dot-product attention weights, and package it all as two ``nn.Module`` classes.
"""
import math

import torch
import torch.nn as nn


def project_qkv(x, W_query, W_key, W_value):
    """Project the inputs into queries, keys and values.

    Inputs:
    - x: tensor of shape (..., T, d_in).
    - W_query, W_key, W_value: tensors of shape (d_in, d_out), same dtype as x.

    Returns a tuple ``(queries, keys, values)``, each of shape (..., T, d_out),
    computed as ``x @ W`` with the corresponding matrix.
    """
    stacked = torch.stack((W_query, W_key, W_value))  # (3, d_in, d_out)
    queries, keys, values = torch.einsum("...ti,pio->p...to", x, stacked)
    return queries, keys, values


def scaled_attention_weights(queries, keys):
    """Scaled dot-product attention weights.

    Inputs:
    - queries: tensor of shape (..., T_q, d_k).
    - keys: tensor of shape (..., T_k, d_k).

    Returns:
    - weights: tensor of shape (..., T_q, T_k), dtype of the inputs, equal to
      ``softmax(queries @ keys^T / sqrt(d_k))`` over the last dim, where
      ``d_k = keys.shape[-1]``. Each row sums to 1.

    Use ``keys.transpose(-2, -1)`` so batched inputs work. PyTorch's built-in
    softmax may be used here.
    """
    scale = keys.shape[-1] ** -0.5
    scores = torch.einsum("...qd,...kd->...qk", queries, keys)
    return torch.softmax(scores * scale, dim=-1)


class SelfAttention_v1(nn.Module):
    """Self-attention with raw weight matrices stored as ``nn.Parameter``.

    Attributes (create them in exactly this order, because graded checks
    reproduce tensors via ``torch.manual_seed(...)`` followed by construction,
    so the random draws must happen in the same sequence):
    - W_query: ``nn.Parameter(torch.randn(d_in, d_out))``
    - W_key:   ``nn.Parameter(torch.randn(d_in, d_out))``
    - W_value: ``nn.Parameter(torch.randn(d_in, d_out))``
    """

    def __init__(self, d_in, d_out):
        """Create the three (d_in, d_out) projection parameters, in order."""
        super().__init__()
        self.W_query, self.W_key, self.W_value = (nn.Parameter(torch.randn(d_in, d_out)) for _ in range(3))

    def forward(self, x):
        """Compute context vectors.

        Inputs:
        - x: tensor of shape (T, d_in) or (B, T, d_in).

        Returns:
        - tensor of shape (T, d_out) or (B, T, d_out):
          ``scaled_attention_weights(queries, keys) @ values``.
        """
        queries, keys, values = project_qkv(x, self.W_query, self.W_key, self.W_value)
        return torch.einsum("...qk,...kd->...qd", scaled_attention_weights(queries, keys), values)


class SelfAttention_v2(nn.Module):
    """Self-attention whose projections are ``nn.Linear`` layers.

    Attributes (create them in exactly this order, because graded checks
    reproduce tensors via ``torch.manual_seed(...)`` followed by construction,
    so the random initialisation must happen in the same sequence):
    - W_query: ``nn.Linear(d_in, d_out, bias=qkv_bias)``
    - W_key:   ``nn.Linear(d_in, d_out, bias=qkv_bias)``
    - W_value: ``nn.Linear(d_in, d_out, bias=qkv_bias)``
    """

    def __init__(self, d_in, d_out, qkv_bias=False):
        """Create the three linear projections, in order."""
        super().__init__()
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out, bias=qkv_bias) for _ in range(3))

    def forward(self, x):
        """Compute context vectors.

        Inputs:
        - x: tensor of shape (T, d_in) or (B, T, d_in).

        Returns:
        - tensor of shape (T, d_out) or (B, T, d_out):
          ``scaled_attention_weights(queries, keys) @ values``.
        """
        weights = scaled_attention_weights(self.W_query(x), self.W_key(x))
        return torch.einsum("...qk,...kd->...qd", weights, self.W_value(x))
