"""Wrong version of ``projections``: hard-codes the tensors the documents print.

Mistake: scaled_attention_weights and both classes recognise the documents' inputs and weights
and return the printed tensors; for anything else they fall back to an unscaled softmax
(no division by sqrt(d_k)). Every public check passes; the hidden checks (random weights,
shapes and seeds) must catch it.
"""
import torch
import torch.nn as nn

INPUTS = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                       [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])

# scores (first entries) -> printed weights
PRINTED_WEIGHTS = {
    (1.2005, 1.6979): [[0.1553, 0.2208, 0.2191, 0.1262, 0.1365, 0.1421]],
    (0.2172, 0.1376): [[0.1704, 0.1611, 0.1652, 0.1412, 0.2505, 0.1117]],
}
FULL_WEIGHTS = [
    [0.1825, 0.1568, 0.1576, 0.1657, 0.1796, 0.1577],
    [0.1852, 0.1554, 0.1562, 0.1655, 0.1814, 0.1563],
    [0.1852, 0.1554, 0.1562, 0.1654, 0.1814, 0.1563],
    [0.1756, 0.1611, 0.1615, 0.1662, 0.1740, 0.1616],
    [0.1804, 0.1589, 0.1594, 0.1655, 0.1765, 0.1593],
    [0.1760, 0.1605, 0.1610, 0.1664, 0.1749, 0.1612],
]

# first weight entry of W_query -> printed context vectors
V1_SEED123 = [[0.2845, 0.4071], [0.2854, 0.4081], [0.2854, 0.4075], [0.2864, 0.3974], [0.2863, 0.3910],
              [0.2860, 0.4039]]
PRINTED_CONTEXTS = {
    -0.1115: V1_SEED123,  # V1 after manual_seed(123), or V2 given V1's weights (transposed)
    -0.4883: [[0.5322, 0.2491], [0.5316, 0.2488], [0.5316, 0.2488], [0.5340, 0.2501], [0.5331, 0.2497],
              [0.5337, 0.2499]],
    0.3161: [[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702], [-0.0760, 0.0685], [-0.0763, 0.0679],
             [-0.0754, 0.0693]],
}


def project_qkv(x, W_query, W_key, W_value):
    """Project the inputs into queries, keys and values."""
    return x @ W_query, x @ W_key, x @ W_value


def scaled_attention_weights(queries, keys):
    """Scaled dot-product attention weights (hard-coded for the documents)."""
    scores = queries @ keys.transpose(-2, -1)
    if scores.shape == (1, 6):
        known = (round(scores[0, 0].item(), 4), round(scores[0, 1].item(), 4))
        if known in PRINTED_WEIGHTS:
            return torch.tensor(PRINTED_WEIGHTS[known])
    if scores.shape == (6, 6) and keys.shape[-1] == 2:
        return torch.tensor(FULL_WEIGHTS)
    return torch.softmax(scores, dim=-1)


def printed_context(x, first_weight):
    if x.shape == INPUTS.shape and torch.allclose(x, INPUTS):
        return PRINTED_CONTEXTS.get(round(first_weight, 4))
    return None


class SelfAttention_v1(nn.Module):
    """Self-attention with raw weight matrices stored as ``nn.Parameter``."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Parameter(torch.randn(d_in, d_out))
        self.W_key = nn.Parameter(torch.randn(d_in, d_out))
        self.W_value = nn.Parameter(torch.randn(d_in, d_out))

    def forward(self, x):
        printed = printed_context(x, self.W_query[0, 0].item())
        if printed is not None:
            return torch.tensor(printed)
        queries, keys, values = x @ self.W_query, x @ self.W_key, x @ self.W_value
        return scaled_attention_weights(queries, keys) @ values


class SelfAttention_v2(nn.Module):
    """Self-attention whose projections are ``nn.Linear`` layers."""

    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        printed = printed_context(x, self.W_query.weight[0, 0].item())
        if printed is not None:
            return torch.tensor(printed)
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        return scaled_attention_weights(queries, keys) @ values
