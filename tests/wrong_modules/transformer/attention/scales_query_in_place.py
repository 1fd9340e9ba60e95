"""Part ``attention``: scaled dot-product attention with a mask, and multi-head attention.

Document 001 (In [246], In [247]) writes one attention function and runs several heads.
Here the heads are slices of one set of projections, as in ``nn.MultiheadAttention``, so
that a layer's weights load into PyTorch's own layer and back.

This part is attention itself: PyTorch's fused attention
(``torch.nn.functional.scaled_dot_product_attention``, ``nn.MultiheadAttention``) raises
while its checks run; its softmax may be used.
"""
import math

import torch
import torch.nn as nn


def attention_weights(query, key, mask=None):
    """Attention weights: ``softmax(query @ key^T / sqrt(d_k))`` over the keys.

    Inputs:
    - query: tensor of shape (..., T_q, d_k).
    - key: tensor of shape (..., T_k, d_k).
    - mask: None, or a bool tensor broadcastable to (..., T_q, T_k). ``True`` marks a key
      the query must NOT attend to (it gets weight exactly 0), ``False`` one it may. This is
      lab 1's convention and ``nn.MultiheadAttention``'s ``attn_mask``; it is the opposite of
      the boolean mask of ``torch.nn.functional.scaled_dot_product_attention``.

    Returns:
    - weights of shape (..., T_q, T_k) with the dtype of ``query``; each row sums to 1 over
      the keys it may attend to. A query whose keys are all hidden has no weights defined:
      its row may hold anything (a softmax over -inf alone gives NaN; PyTorch's own layers
      give NaN or 0 depending on the path), and the other rows are unaffected.
      PyTorch's softmax may be used.
    """
    query /= math.sqrt(query.shape[-1])                                   # scale once, before the product
    scores = query @ key.transpose(-2, -1)                                # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))                   # hidden keys: -inf
    return torch.softmax(scores, dim=-1)


def scaled_dot_product_attention(query, key, value, mask=None):
    """Context vectors: the attention weights of :func:`attention_weights` applied to ``value``.

    Inputs:
    - query (..., T_q, d_k), key (..., T_k, d_k), value (..., T_k, d_v).
    - mask: as in :func:`attention_weights` (``True`` = hidden).

    Returns:
    - tensor of shape (..., T_q, d_v): row i is the weighted sum of the value rows, with the
      weights of query i.
    """
    return attention_weights(query, key, mask) @ value   # (..., T_q, d_v)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with ``num_heads`` heads of size ``d_model // num_heads``.

    Raises ValueError when ``d_model`` is not divisible by ``num_heads``.

    Submodules, created in this order (each ``nn.Linear(d_model, d_model, bias=bias)``):
    - W_query, W_key, W_value: the projections of all heads at once; head h uses features
      ``h * head_dim .. (h + 1) * head_dim - 1`` of each projection.
    - out_proj: mixes the heads' concatenated context vectors.
    - dropout: ``nn.Dropout(dropout)`` on the attention weights (``dropout`` is the
      probability of dropping a weight; training mode only).

    forward(query, key, value, mask=None):
    - query (B, T_q, d_model); key and value (B, T_k, d_model).
    - mask: None or bool, broadcastable to (B, num_heads, T_q, T_k), ``True`` = hidden (a
      (T_q, T_k) causal mask applies to every sequence and head).
    - returns (B, T_q, d_model).
    """

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, d_model, bias=bias)
        self.W_value = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        B, T_q, d_model = query.shape
        T_k = key.shape[1]
        q = self.W_query(query).view(B, T_q, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T_q, hd)
        k = self.W_key(key).view(B, T_k, self.num_heads, self.head_dim).transpose(1, 2)      # (B, H, T_k, hd)
        v = self.W_value(value).view(B, T_k, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T_k, hd)
        weights = self.dropout(attention_weights(q, k, mask))                               # (B, H, T_q, T_k)
        context = (weights @ v).transpose(1, 2).reshape(B, T_q, d_model)                    # heads side by side
        return self.out_proj(context)                                                       # (B, T_q, d_model)
