"""Stand-ins: public code that answers for a module the student wrote, inside a part built on it (the
heads wrapper's masking.CausalAttention heads), wherever the student's own raises or answers with the
wrong shape or dtype, so that part is judged on its own wiring (lab.toml's ``stand_in``). Document
003's causal attention over the module's own weights, mask and dropout; never the reference solution.

Each runs in the worker beside the student's code, as ``f(module, *forward's arguments)``.
"""

import math

import torch


def causal_attention(module, x):
    """Document 003's CausalAttention.forward: (B, T, d_in) -> (B, T, d_out)."""
    T = x.shape[1]
    queries, keys, values = module.W_query(x), module.W_key(x), module.W_value(x)
    scores = (queries @ keys.transpose(-2, -1)).masked_fill(module.mask.bool()[:T, :T], -torch.inf)
    return module.dropout(torch.softmax(scores / math.sqrt(keys.shape[-1]), dim=-1)) @ values
