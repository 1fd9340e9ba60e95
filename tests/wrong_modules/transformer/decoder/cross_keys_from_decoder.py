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
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory):
        T = x.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)  # (T, T), True = future
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, causal)))       # (B, T, d_model)
        x = self.norm2(x + self.dropout(self.cross_attn(x, x, memory)))    # queries from x
        return self.norm3(x + self.dropout(self.ff(x)))                         # (B, T, d_model)
