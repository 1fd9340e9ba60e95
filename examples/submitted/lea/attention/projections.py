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
    xe = x.unsqueeze(-1)  # (..., T, d_in, 1) broadcasts against W (d_in, d_out)
    return (xe * W_query).sum(-2), (xe * W_key).sum(-2), (xe * W_value).sum(-2)


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
    scores = (queries.unsqueeze(-2) * keys.unsqueeze(-3)).sum(-1)  # (..., T_q, T_k)
    return torch.softmax(scores / math.sqrt(keys.shape[-1]), dim=-1)


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
        self.register_parameter("W_query", nn.Parameter(torch.randn(d_in, d_out)))
        self.register_parameter("W_key", nn.Parameter(torch.randn(d_in, d_out)))
        self.register_parameter("W_value", nn.Parameter(torch.randn(d_in, d_out)))

    def forward(self, x):
        """Compute context vectors.

        Inputs:
        - x: tensor of shape (T, d_in) or (B, T, d_in).

        Returns:
        - tensor of shape (T, d_out) or (B, T, d_out):
          ``scaled_attention_weights(queries, keys) @ values``.
        """
        q, k, v = project_qkv(x, self.W_query, self.W_key, self.W_value)
        w = scaled_attention_weights(q, k)
        return (w.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)


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
        self.add_module("W_query", nn.Linear(d_in, d_out, bias=qkv_bias))
        self.add_module("W_key", nn.Linear(d_in, d_out, bias=qkv_bias))
        self.add_module("W_value", nn.Linear(d_in, d_out, bias=qkv_bias))

    def forward(self, x):
        """Compute context vectors.

        Inputs:
        - x: tensor of shape (T, d_in) or (B, T, d_in).

        Returns:
        - tensor of shape (T, d_out) or (B, T, d_out):
          ``scaled_attention_weights(queries, keys) @ values``.
        """
        w = scaled_attention_weights(self.W_query(x), self.W_key(x))
        v = self.W_value(x)
        return (w.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)
