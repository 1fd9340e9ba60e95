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
        # sizes
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.p_drop = dropout
        # sub-layers
        self.self_attn = MultiHeadAttention(self.d_model, self.num_heads, self.p_drop)  # attention over the tokens
        self.ff = FeedForward(self.d_model, self.d_ff, self.p_drop)                     # position-wise feed-forward
        # one LayerNorm after each residual sum
        self.norm1 = LayerNorm(self.d_model)
        self.norm2 = LayerNorm(self.d_model)
        # dropout on each block's output
        self.dropout = nn.Dropout(self.p_drop)

    def forward(self, x, mask=None):
        # block 1: self-attention
        attended = self.self_attn(x, x, x, mask)     # (B, T, d_model)
        attended = self.dropout(attended)            # (B, T, d_model)
        residual1 = x + attended                     # (B, T, d_model)
        out1 = self.norm1(residual1)                 # (B, T, d_model)
        # block 2: feed-forward
        transformed = self.ff(out1)                  # (B, T, d_model)
        transformed = self.dropout(transformed)      # (B, T, d_model)
        residual2 = out1 + transformed               # (B, T, d_model)
        out2 = self.norm2(residual2)                 # (B, T, d_model)
        return out2
