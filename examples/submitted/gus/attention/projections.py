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
    outs = []
    for W in [W_query, W_key, W_value]:
        outs.append(x @ W)
    return outs[0], outs[1], outs[2]


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
    d_k = keys.shape[-1]
    s = queries @ keys.transpose(-1, -2)
    s = s / math.sqrt(d_k)
    return torch.softmax(s, dim=-1)


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
        params = []
        for i in range(3):
            params.append(nn.Parameter(torch.randn(d_in, d_out)))
        self.W_query = params[0]
        self.W_key = params[1]
        self.W_value = params[2]

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
        return w @ v


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
        layers = [nn.Linear(d_in, d_out, bias=qkv_bias) for i in range(3)]
        self.W_query = layers[0]
        self.W_key = layers[1]
        self.W_value = layers[2]

    def forward(self, x):
        """Compute context vectors.

        Inputs:
        - x: tensor of shape (T, d_in) or (B, T, d_in).

        Returns:
        - tensor of shape (T, d_out) or (B, T, d_out):
          ``scaled_attention_weights(queries, keys) @ values``.
        """
        q, k, v = [layer(x) for layer in [self.W_query, self.W_key, self.W_value]]
        w = scaled_attention_weights(q, k)
        return w @ v
