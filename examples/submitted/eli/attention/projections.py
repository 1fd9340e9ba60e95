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
    # Multiply the inputs by each of the three projection matrices.
    projected_queries = x.matmul(W_query)
    projected_keys = x.matmul(W_key)
    projected_values = x.matmul(W_value)
    return projected_queries, projected_keys, projected_values


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
    # Step 1: the key dimension, used for the scaling.
    key_dimension = keys.shape[-1]
    # Step 2: unscaled scores, one row per query and one column per key.
    unscaled_scores = torch.matmul(queries, torch.transpose(keys, -2, -1))
    # Step 3: scale by 1 / sqrt(d_k) so the softmax does not saturate.
    scaled_scores = unscaled_scores / math.sqrt(key_dimension)
    # Step 4: normalise every row with the softmax.
    attention_weights = torch.softmax(scaled_scores, dim=-1)
    return attention_weights


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
        # The three projection matrices, created in the order query, key, value.
        self.W_query = nn.Parameter(torch.randn(d_in, d_out), requires_grad=True)
        self.W_key = nn.Parameter(torch.randn(d_in, d_out), requires_grad=True)
        self.W_value = nn.Parameter(torch.randn(d_in, d_out), requires_grad=True)

    def forward(self, x):
        """Compute context vectors.

        Inputs:
        - x: tensor of shape (T, d_in) or (B, T, d_in).

        Returns:
        - tensor of shape (T, d_out) or (B, T, d_out):
          ``scaled_attention_weights(queries, keys) @ values``.
        """
        # Step 1: project the inputs.
        projected_queries = x.matmul(self.W_query)
        projected_keys = x.matmul(self.W_key)
        projected_values = x.matmul(self.W_value)
        # Step 2: attention weights from the queries and keys.
        attention_weights = scaled_attention_weights(projected_queries, projected_keys)
        # Step 3: mix the values with the weights.
        return attention_weights.matmul(projected_values)


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
        # The three linear layers, created in the order query, key, value.
        self.W_query = nn.Linear(in_features=d_in, out_features=d_out, bias=qkv_bias)
        self.W_key = nn.Linear(in_features=d_in, out_features=d_out, bias=qkv_bias)
        self.W_value = nn.Linear(in_features=d_in, out_features=d_out, bias=qkv_bias)

    def forward(self, x):
        """Compute context vectors.

        Inputs:
        - x: tensor of shape (T, d_in) or (B, T, d_in).

        Returns:
        - tensor of shape (T, d_out) or (B, T, d_out):
          ``scaled_attention_weights(queries, keys) @ values``.
        """
        # Step 1: project the inputs with the linear layers.
        projected_queries = self.W_query(x)
        projected_keys = self.W_key(x)
        projected_values = self.W_value(x)
        # Step 2: attention weights, then the weighted sum of the values.
        attention_weights = scaled_attention_weights(projected_queries, projected_keys)
        return attention_weights.matmul(projected_values)
