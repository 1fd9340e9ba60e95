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
    queries = torch.matmul(x, W_query)  # (..., T, d_out)
    keys = torch.matmul(x, W_key)
    values = torch.matmul(x, W_value)
    return (queries, keys, values)


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
    keys_T = keys.transpose(-2, -1)  # (..., d_k, T_k)
    raw_scores = torch.matmul(queries, keys_T)  # (..., T_q, T_k)
    scaled = raw_scores / (d_k ** 0.5)
    weights = torch.softmax(scaled, dim=-1)
    return weights


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
        # random init, in the order query, key, value
        q_weights = torch.randn(d_in, d_out)
        k_weights = torch.randn(d_in, d_out)
        v_weights = torch.randn(d_in, d_out)
        self.W_query = nn.Parameter(q_weights)
        self.W_key = nn.Parameter(k_weights)
        self.W_value = nn.Parameter(v_weights)

    def forward(self, x):
        """Compute context vectors.

        Inputs:
        - x: tensor of shape (T, d_in) or (B, T, d_in).

        Returns:
        - tensor of shape (T, d_out) or (B, T, d_out):
          ``scaled_attention_weights(queries, keys) @ values``.
        """
        queries = torch.matmul(x, self.W_query)
        keys = torch.matmul(x, self.W_key)
        values = torch.matmul(x, self.W_value)
        attn_weights = scaled_attention_weights(queries, keys)  # (..., T, T)
        context = torch.matmul(attn_weights, values)  # (..., T, d_out)
        return context


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
        # same order as v1
        q_layer = nn.Linear(d_in, d_out, bias=qkv_bias)
        k_layer = nn.Linear(d_in, d_out, bias=qkv_bias)
        v_layer = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_query = q_layer
        self.W_key = k_layer
        self.W_value = v_layer

    def forward(self, x):
        """Compute context vectors.

        Inputs:
        - x: tensor of shape (T, d_in) or (B, T, d_in).

        Returns:
        - tensor of shape (T, d_out) or (B, T, d_out):
          ``scaled_attention_weights(queries, keys) @ values``.
        """
        q = self.W_query(x)  # Linear does x @ W^T + b
        k = self.W_key(x)
        attn_weights = scaled_attention_weights(q, k)  # (..., T, T)
        v = self.W_value(x)  # values only needed now
        context = torch.matmul(attn_weights, v)
        return context
