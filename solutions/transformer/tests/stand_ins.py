"""Stand-ins: public code that answers for a sub-layer the student wrote, inside a layer built on it
(the encoder, the decoder), wherever the student's own raises or answers with the wrong shape or
dtype, so that layer is judged on its own wiring (lab.toml's ``stand_in``). PyTorch's layer norm and
the document's formulas over the module's own weights and dropout; never the reference solution.

Each runs in the worker beside the student's code, as ``f(module, *forward's arguments, **arguments)``.
"""

import math

import torch
import torch.nn.functional as F


def layer_norm(module, x, **_):
    return F.layer_norm(x, x.shape[-1:], module.weight, module.bias)


def feed_forward(module, x, **_):
    return module.linear2(module.dropout(torch.relu(module.linear1(x))))


def multi_head_attention(module, query, key, value, mask=None, *, num_heads, **_):
    """Document 001's multi-head attention: (B, T_q, d), (B, T_k, d), (B, T_k, d) -> (B, T_q, d);
    ``mask`` True = hidden."""
    (B, T_q, d), T_k = query.shape, key.shape[1]

    def project(linear, x, tokens):                                             # -> (B, H, tokens, d / H)
        return linear(x).view(B, tokens, num_heads, d // num_heads).transpose(1, 2)

    q, k, v = project(module.W_query, query, T_q), project(module.W_key, key, T_k), project(module.W_value, value, T_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // num_heads)                # (B, H, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(mask, -torch.inf)
    context = module.dropout(torch.softmax(scores, dim=-1)) @ v                 # (B, H, T_q, d / H)
    return module.out_proj(context.transpose(1, 2).reshape(B, T_q, d))
