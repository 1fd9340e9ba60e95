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
    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool), diagonal=1)


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
    mask = causal_mask(scores.shape[-1]).to(scores.device)  # (T, T), broadcasts
    return scores.masked_fill(mask, fill)  # out of place: input untouched


def causal_attention_weights(scores, d_k):
    """Causally masked, scaled attention weights.

    Inputs:
    - scores: unscaled scores ``queries @ keys^T`` of shape (..., T, T).
    - d_k: key dimension used for the ``1 / sqrt(d_k)`` scaling.

    Returns:
    - weights: tensor of shape (..., T, T) equal to
      ``softmax(mask_future(scores) / sqrt(d_k))`` over the last dim. Each row
      sums to 1 and every entry above the diagonal is exactly 0. The causal
      mask never hides a whole row (each token sees itself), so no row is a
      softmax of -inf alone: every weight is finite. PyTorch's built-in softmax
      may be used here.
    """
    masked = mask_future(scores)  # (..., T, T), -inf above the diagonal
    return torch.softmax(masked / math.sqrt(d_k), dim=-1)


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
    T = x.shape[-2]
    tril = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))  # (T, T)
    avg = tril / tril.sum(dim=-1, keepdim=True)  # row t has 1/(t+1) on 0..t
    return avg @ x  # (T, T) @ (..., T, C) -> (..., T, C)


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

    PyTorch's fused attention may be used: ``torch.nn.functional.scaled_dot_product_attention``
    with ``is_causal=True`` and ``dropout_p`` set to the dropout probability in training
    mode only gives the same numbers, dropout included (the checks allow it). Writing the
    masking yourself is the exercise.
    """

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        """Create the projections, dropout layer and mask buffer, in order."""
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # A buffer, not a parameter: saved and moved with the module, never trained.
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1)
        )

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
        B, T, _ = x.shape
        queries = self.W_query(x)  # (B, T, d_out)
        keys = self.W_key(x)       # (B, T, d_out)
        values = self.W_value(x)   # (B, T, d_out)

        scores = queries @ keys.T  # (B, T, T)
        # Cut the mask to the actual sequence length; inputs may be shorter.
        scores = scores.masked_fill(self.mask.bool()[:T, :T], float("-inf"))
        weights = torch.softmax(scores / math.sqrt(keys.shape[-1]), dim=-1)  # (B, T, T)
        weights = self.dropout(weights)
        return weights @ values  # (B, T, d_out)
