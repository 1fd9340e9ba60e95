"""Part ``decoder``: one transformer decoder layer (post-norm, as ``nn.TransformerDecoderLayer``).

Document 001 (In [250]) adds a second attention block to the encoder layer: the decoder
attends to its own past (causal self-attention), then to the encoder's output (``memory``,
cross-attention), then applies the feed-forward block.
"""
import torch
import torch.nn as nn

from attention import MultiHeadAttention
from feedforward import FeedForward
from layernorm import LayerNorm


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention and feed-forward, each a post-norm residual block.

    Submodules, created in this order:
    - self_attn, cross_attn: ``MultiHeadAttention(d_model, num_heads, dropout)``.
    - ff: ``FeedForward(d_model, d_ff, dropout)``.
    - norm1, norm2, norm3: ``LayerNorm(d_model)``.
    - dropout: ``nn.Dropout(dropout)`` on each block's output, before the residual sum
      (``dropout`` is the drop probability; training mode only).

    forward(x, memory): x (B, T, d_model) the decoder's stream, memory (B, S, d_model) the
    encoder's output -> (B, T, d_model):
    - ``x = norm1(x + dropout(self_attn(x, x, x, causal)))``, where ``causal`` (T, T) is True
      strictly above the diagonal: token t attends to tokens 0..t only;
    - ``x = norm2(x + dropout(cross_attn(x, memory, memory)))``: queries from the decoder,
      keys and values from the encoder, no mask;
    - ``x = norm3(x + dropout(ff(x)))``.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        for name in ("norm1", "norm2", "norm3"):
            setattr(self, name, LayerNorm(d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory):
        size = x.shape[1]
        causal = torch.full((size, size), True, device=x.device).triu(1)
        blocks = ((self.norm1, lambda h: self.self_attn(h, h, h, causal)),
                  (self.norm2, lambda h: self.cross_attn(h, memory, memory)),
                  (self.norm3, self.ff))
        for norm, block in blocks:
            x = norm(x + self.dropout(block(x)))
        return x
