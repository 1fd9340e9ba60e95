"""Part ``attention``: scaled dot-product attention with a mask, and multi-head attention.

Document 001 (In [246], In [247]) writes one attention function and runs several heads.
Here the heads are slices of one set of projections, as in ``nn.MultiheadAttention``, so
that a layer's weights load into PyTorch's own layer and back.
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
      the keys it may attend to. PyTorch's softmax may be used.
    """
    d_k = query.shape[-1]
    key_t = key.transpose(-2, -1)                    # (..., d_k, T_k)
    raw_scores = query.matmul(key_t)                 # (..., T_q, T_k)
    scale = math.sqrt(d_k)                           # typical size of a dot product
    scores = raw_scores / scale                      # (..., T_q, T_k)
    if mask is not None:
        # additive mask: 0 where the key may be seen, -inf where it is hidden
        additive = torch.zeros_like(scores).masked_fill(mask, float("-inf"))   # (..., T_q, T_k)
        scores = scores + additive                   # (..., T_q, T_k)
    weights = torch.softmax(scores, dim=-1)          # (..., T_q, T_k), rows sum to 1
    return weights


def scaled_dot_product_attention(query, key, value, mask=None):
    """Context vectors: the attention weights of :func:`attention_weights` applied to ``value``.

    Inputs:
    - query (..., T_q, d_k), key (..., T_k, d_k), value (..., T_k, d_v).
    - mask: as in :func:`attention_weights` (``True`` = hidden).

    Returns:
    - tensor of shape (..., T_q, d_v): row i is the weighted sum of the value rows, with the
      weights of query i.
    """
    weights = attention_weights(query, key, mask)    # (..., T_q, T_k)
    context = weights.matmul(value)                  # (..., T_q, d_v)
    return context


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
        # every head must get the same number of features
        if d_model % num_heads != 0:
            raise ValueError(f"cannot split d_model={d_model} into {num_heads} equal heads")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        # projections for all heads at once
        self.W_query = nn.Linear(d_model, d_model, bias=bias)
        self.W_key = nn.Linear(d_model, d_model, bias=bias)
        self.W_value = nn.Linear(d_model, d_model, bias=bias)
        # mixes the heads back together
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        # dropout on the attention weights
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        batch_size, len_q, _ = query.shape
        len_k = key.shape[1]
        H, D = self.num_heads, self.head_dim
        # 1. project
        projected_q = self.W_query(query)                                          # (B, T_q, d_model)
        projected_k = self.W_key(key)                                              # (B, T_k, d_model)
        projected_v = self.W_value(value)                                          # (B, T_k, d_model)
        # 2. cut the features into heads, head axis second
        heads_q = projected_q.reshape(batch_size, len_q, H, D).permute(0, 2, 1, 3)  # (B, H, T_q, D)
        heads_k = projected_k.reshape(batch_size, len_k, H, D).permute(0, 2, 1, 3)  # (B, H, T_k, D)
        heads_v = projected_v.reshape(batch_size, len_k, H, D).permute(0, 2, 1, 3)  # (B, H, T_k, D)
        # 3. attention weights of every head, then dropout on them
        weights = attention_weights(heads_q, heads_k, mask)                        # (B, H, T_q, T_k)
        weights = self.dropout(weights)                                            # (B, H, T_q, T_k)
        # 4. weighted sum of the values
        heads_out = weights.matmul(heads_v)                                        # (B, H, T_q, D)
        # 5. heads side by side again
        merged = heads_out.permute(0, 2, 1, 3).reshape(batch_size, len_q, self.d_model)  # (B, T_q, d_model)
        # 6. output projection
        output = self.out_proj(merged)                                             # (B, T_q, d_model)
        return output
