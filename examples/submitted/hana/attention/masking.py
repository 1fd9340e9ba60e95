"""Part ``masking``: causal (look-ahead) masking for self-attention.

You hide future tokens from each query, check the effect with a running-average
toy example, and assemble a causal self-attention module with dropout.
"""
import math

import torch
import torch.nn as nn


def causal_mask(num_tokens):
    """Boolean causal mask.

    Inputs:
    - num_tokens: int T.

    Returns:
    - mask: bool tensor of shape (T, T); ``True`` marks a position that must be
      hidden (a future key, strictly above the diagonal), ``False`` a position
      the query may attend to.
    """
    idx = torch.arange(num_tokens)
    return (idx.reshape(1, -1) - idx.reshape(-1, 1)) > 0


def mask_future(scores, fill=float("-inf")):
    """Replace the scores of future positions by ``fill``.

    Inputs:
    - scores: tensor of shape (..., T, T).
    - fill: value written where the causal mask is ``True`` (default -inf, so
      that a softmax gives those positions zero weight).

    Returns:
    - a NEW tensor of shape (..., T, T) with the dtype of ``scores``; entries
      strictly above the diagonal equal ``fill``, the rest are copied.
      ``scores`` itself must not be modified.
    """
    T = scores.shape[-1]
    flat = scores.reshape(-1, T, T)  # all batch dims in one
    out = torch.where(causal_mask(T).to(scores.device), scores.new_tensor(fill), flat)
    return out.reshape(scores.shape)


def causal_attention_weights(scores, d_k):
    """Causally masked, scaled attention weights.

    Inputs:
    - scores: unscaled scores ``queries @ keys^T`` of shape (..., T, T).
    - d_k: key dimension used for the ``1 / sqrt(d_k)`` scaling.

    Returns:
    - weights: tensor of shape (..., T, T) equal to
      ``softmax(mask_future(scores) / sqrt(d_k))`` over the last dim. Each row
      sums to 1 and every entry above the diagonal is exactly 0. PyTorch's
      built-in softmax may be used here.
    """
    masked = mask_future(scores)
    return torch.softmax(torch.div(masked, math.sqrt(d_k)), dim=-1)


def causal_average(x):
    """Running mean over the token dimension via a triangular matrix product.

    Inputs:
    - x: floating-point tensor of shape (..., T, C).

    Returns:
    - out: tensor of shape (..., T, C) with the dtype of ``x``, where
      ``out[..., t, :]`` is the mean of ``x[..., 0:t+1, :]``.

    Implementation notes: build ``torch.tril(ones(T, T))``, normalise each row
    to sum to 1, and multiply it with ``x``; no Python loop over tokens.
    """
    T, C = x.shape[-2:]
    flat = x.reshape(-1, T, C)
    tri = torch.ones(T, T, dtype=x.dtype, device=x.device).tril()
    tri = torch.div(tri, tri.sum(dim=-1).reshape(T, 1))
    return torch.matmul(tri, flat).reshape(x.shape)


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the attention weights.

    Attributes (create them in exactly this order, because graded checks
    reproduce tensors via ``torch.manual_seed(...)`` followed by construction,
    so the random initialisation must happen in the same sequence):
    - W_query, W_key, W_value: ``nn.Linear(d_in, d_out, bias=qkv_bias)``
    - dropout: ``nn.Dropout(dropout)``; ``dropout`` is the probability of
      dropping an attention weight.
    - buffer ``mask``: float tensor (context_length, context_length) holding
      1.0 strictly above the diagonal and 0.0 elsewhere, registered with
      ``register_buffer`` so it follows ``.to()`` and appears in state_dict.
    """

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        """Create the projections, dropout layer and mask buffer, in order."""
        super().__init__()
        self.W_query = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = torch.nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones((context_length, context_length)), 1))

    def forward(self, x):
        """Compute causal context vectors.

        Inputs:
        - x: tensor of shape (B, T, d_in) with T <= context_length.

        Returns:
        - tensor of shape (B, T, d_out). Query t only attends to tokens 0..t:
          scores ``q @ k^T`` are filled with -inf where ``mask[:T, :T]`` is set
          (out of place), scaled by ``1 / sqrt(d_k)``, softmaxed over the last
          dim, passed through dropout, and multiplied with the values.
        """
        T = x.shape[1]
        qkv = torch.cat([self.W_query(x), self.W_key(x), self.W_value(x)], dim=-1)  # (B, T, 3 * d_out)
        queries, keys, values = qkv.split(qkv.shape[-1] // 3, dim=-1)
        scores = torch.matmul(queries, keys.permute(0, 2, 1))  # (B, T, T)
        mask = self.mask[:T, :T]
        bias = torch.zeros_like(mask).masked_fill(mask.bool(), float("-inf"))  # 0 or -inf
        weights = torch.softmax(torch.div(scores + bias, math.sqrt(keys.shape[-1])), dim=-1)
        return torch.matmul(self.dropout(weights), values)
