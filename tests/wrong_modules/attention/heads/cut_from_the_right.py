"""Mistake: the mask is cut from its top-right corner (mask[:T, -T:]): right when T equals
context_length, wrong for every shorter input."""
import math

import torch
import torch.nn as nn


def split_heads(x, num_heads):
    """Split the feature dimension into attention heads.

    Inputs:
    - x: tensor of shape (B, T, d_out).
    - num_heads: int H; must divide d_out.

    Returns:
    - tensor of shape (B, H, T, d_out // H); head h holds features
      ``h * head_dim : (h + 1) * head_dim`` of every token.

    Raises:
    - ValueError if ``d_out`` is not divisible by ``num_heads``.
    """
    B, T, d_out = x.shape
    if d_out % num_heads != 0:
        raise ValueError(f"d_out ({d_out}) must be divisible by num_heads ({num_heads})")
    head_dim = d_out // num_heads
    # Put heads before tokens so each head is an independent (T, head_dim) matrix.
    return x.view(B, T, num_heads, head_dim).transpose(1, 2)  # (B, H, T, head_dim)


def merge_heads(x):
    """Inverse of ``split_heads``.

    Inputs:
    - x: tensor of shape (B, H, T, h).

    Returns:
    - tensor of shape (B, T, H * h) with the heads concatenated along the last
      dim, head 0 first.
    """
    B, H, T, h = x.shape
    # transpose makes the memory non-contiguous; view needs it contiguous again.
    return x.transpose(1, 2).contiguous().view(B, T, H * h)  # (B, T, H*h)


class MultiHeadAttentionWrapper(nn.Module):
    """Multi-head attention as a stack of independent ``CausalAttention`` heads.

    Attributes (create them in exactly this order, because graded checks
    reproduce tensors via ``torch.manual_seed(...)`` followed by construction,
    so the random initialisation must happen in the same sequence):
    - heads: ``nn.ModuleList`` of ``num_heads`` modules
      ``CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)``,
      built one after the other.
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        """Create ``num_heads`` causal attention heads, in order."""
        super().__init__()
        # Imported here so a broken masking.py fails only the wrapper's checks, not all of heads.py.
        from masking import CausalAttention
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, x):
        """Run every head and concatenate the results.

        Inputs:
        - x: tensor of shape (B, T, d_in), T <= context_length.

        Returns:
        - tensor of shape (B, T, num_heads * d_out), head 0's output first.
        """
        return torch.cat([head(x) for head in self.heads], dim=-1)  # (B, T, H*d_out)


class MultiHeadAttention(nn.Module):
    """Efficient multi-head causal self-attention with an output projection.

    Attributes (create them in exactly this order, because graded checks
    reproduce tensors via ``torch.manual_seed(...)`` followed by construction,
    so the random initialisation must happen in the same sequence):
    - d_out, num_heads, head_dim (= d_out // num_heads): ints.
    - W_query, W_key, W_value: ``nn.Linear(d_in, d_out, bias=qkv_bias)``
    - out_proj: ``nn.Linear(d_out, d_out)``
    - dropout: ``nn.Dropout(dropout)``; ``dropout`` is the probability of
      dropping an attention weight.
    - buffer ``mask``: float (context_length, context_length), 1.0 strictly
      above the diagonal (future positions), 0.0 elsewhere.

    Raises:
    - ValueError from the constructor, before anything is created, if
      ``d_out`` is not divisible by ``num_heads``.

    PyTorch's fused attention may be used: ``torch.nn.functional.scaled_dot_product_attention``
    with ``is_causal=True`` and ``dropout_p`` set to the dropout probability in training
    mode only gives the same numbers, dropout included (the checks allow it). Writing the
    masking yourself is the exercise.
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        """Validate the sizes, then create the submodules and buffer in order."""
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out ({d_out}) must be divisible by num_heads ({num_heads})")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes information across heads
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1)
        )

    def forward(self, x):
        """Compute multi-head causal context vectors.

        Inputs:
        - x: tensor of shape (B, T, d_in), T <= context_length.

        Returns:
        - tensor of shape (B, T, d_out): queries, keys and values are projected,
          split into heads, attended causally per head (scores scaled by
          ``1 / sqrt(head_dim)``, dropout on the weights), merged back and
          passed through ``out_proj``.
        """
        B, T, _ = x.shape
        queries = split_heads(self.W_query(x), self.num_heads)  # (B, H, T, hd)
        keys = split_heads(self.W_key(x), self.num_heads)       # (B, H, T, hd)
        values = split_heads(self.W_value(x), self.num_heads)   # (B, H, T, hd)

        scores = queries @ keys.transpose(-2, -1)  # (B, H, T, T)
        # (T, T) mask broadcasts over batch and heads.
        scores = scores.masked_fill(self.mask.bool()[:T, -T:], float("-inf"))
        weights = torch.softmax(scores / math.sqrt(self.head_dim), dim=-1)  # (B, H, T, T)
        weights = self.dropout(weights)

        context = merge_heads(weights @ values)  # (B, T, d_out)
        return self.out_proj(context)
