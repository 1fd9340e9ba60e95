"""Part ``encoder``: one transformer encoder layer (post-norm, as ``nn.TransformerEncoderLayer``).

Document 001 (In [248]) assembles attention, a residual connection and a LayerNorm into an
encoder layer. Here both blocks, self-attention and feed-forward, are residual blocks with a
LayerNorm after the sum.
"""
import torch.nn as nn

from attention import MultiHeadAttention
from feedforward import FeedForward
from layernorm import LayerNorm


class EncoderLayer(nn.Module):
    """Self-attention block, then feed-forward block, each ``x = norm(x + dropout(block(x)))``.

    Submodules, created in this order:
    - self_attn: ``MultiHeadAttention(d_model, num_heads, dropout)``.
    - ff: ``FeedForward(d_model, d_ff, dropout)``.
    - norm1, norm2: ``LayerNorm(d_model)``.
    - dropout: ``nn.Dropout(dropout)`` on each block's output, before the residual sum
      (``dropout`` is the drop probability; training mode only).

    forward(x, mask=None): x (B, T, d_model), mask as in ``MultiHeadAttention`` (``True`` =
    hidden) -> (B, T, d_model):
    ``x = norm1(x + dropout(self_attn(x, x, x, mask)))``, then ``x = norm2(x + dropout(ff(x)))``.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = x + self.norm1(self.dropout(self.self_attn(x, x, x, mask)))   # (B, T, d_model)
        return self.norm2(x + self.dropout(self.ff(x)))                   # (B, T, d_model)
