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
    # Start from a square matrix of True values ...
    square_of_trues = torch.ones(num_tokens, num_tokens, dtype=torch.bool)
    # ... and keep only the part strictly above the main diagonal: the future keys.
    future_positions = torch.triu(square_of_trues, diagonal=1)
    return future_positions


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
    # Step 1: the causal mask for this number of tokens, on the same device as the scores.
    number_of_tokens = scores.shape[-1]
    future_positions = causal_mask(number_of_tokens).to(scores.device)
    # Step 2: a tensor filled with the fill value, of the same shape and dtype as the scores.
    filled_scores = torch.full_like(scores, fill)
    # Step 3: take the fill value where the mask is True and the original score elsewhere.
    masked_scores = torch.where(future_positions, filled_scores, scores)
    return masked_scores


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
    # Step 1: hide the future positions.
    masked_scores = mask_future(scores)
    # Step 2: scale by 1 / sqrt(d_k).
    scaled_masked_scores = masked_scores / math.sqrt(d_k)
    # Step 3: softmax over the keys (the -inf entries get weight 0).
    attention_weights = torch.softmax(scaled_masked_scores, dim=-1)
    return attention_weights


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
    number_of_tokens = x.shape[-2]
    # Step 1: lower triangular matrix of ones (row t has ones in columns 0..t).
    lower_triangle = torch.tril(torch.ones(number_of_tokens, number_of_tokens, dtype=x.dtype, device=x.device))
    # Step 2: divide every row by its number of ones, so that each row sums to 1.
    ones_per_row = torch.sum(lower_triangle, dim=1, keepdim=True)
    averaging_matrix = lower_triangle / ones_per_row
    # Step 3: the matrix product averages the tokens 0..t for every position t.
    running_averages = torch.matmul(averaging_matrix, x)
    return running_averages


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
        # The projections, in the order query, key, value.
        self.W_query = nn.Linear(in_features=d_in, out_features=d_out, bias=qkv_bias)
        self.W_key = nn.Linear(in_features=d_in, out_features=d_out, bias=qkv_bias)
        self.W_value = nn.Linear(in_features=d_in, out_features=d_out, bias=qkv_bias)
        # Dropout on the attention weights.
        self.dropout = nn.Dropout(dropout)
        # The mask: 1.0 strictly above the diagonal, registered as a buffer.
        future_positions_as_floats = torch.triu(torch.ones(context_length, context_length), diagonal=1)
        self.register_buffer("mask", future_positions_as_floats)

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
        batch_size, number_of_tokens, input_dimension = x.shape
        # Step 1: project the inputs.
        projected_queries = self.W_query(x)
        projected_keys = self.W_key(x)
        projected_values = self.W_value(x)
        # Step 2: unscaled scores between every query and every key.
        attention_scores = torch.matmul(projected_queries, torch.transpose(projected_keys, 1, 2))
        # Step 3: the part of the mask for this many tokens, as booleans.
        future_positions = self.mask[:number_of_tokens, :number_of_tokens] == 1
        # Step 4: put -inf on the future positions (torch.where does not modify anything in place).
        attention_scores = torch.where(future_positions, torch.full_like(attention_scores, float("-inf")), attention_scores)
        # Step 5: scale, softmax, dropout.
        key_dimension = projected_keys.shape[-1]
        attention_weights = torch.softmax(attention_scores / math.sqrt(key_dimension), dim=-1)
        attention_weights = self.dropout(attention_weights)
        # Step 6: weighted sum of the values.
        return torch.matmul(attention_weights, projected_values)
