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
        # sizes
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.p_drop = dropout
        # attention sub-layers: over the decoder's own tokens, then over the encoder's output
        self.self_attn = MultiHeadAttention(self.d_model, self.num_heads, self.p_drop)
        self.cross_attn = MultiHeadAttention(self.d_model, self.num_heads, self.p_drop)
        # position-wise feed-forward
        self.ff = FeedForward(self.d_model, self.d_ff, self.p_drop)
        # one LayerNorm per block
        self.norm1 = LayerNorm(self.d_model)
        self.norm2 = LayerNorm(self.d_model)
        self.norm3 = LayerNorm(self.d_model)
        # dropout on each block's output
        self.dropout = nn.Dropout(self.p_drop)

    def forward(self, x, memory):
        num_tokens = x.shape[1]
        # causal mask: True where the key comes after the query (its future)
        positions = torch.arange(num_tokens, device=x.device)                 # (T,)
        causal = positions.unsqueeze(0) > positions.unsqueeze(1)              # (T, T)
        # block 1: masked self-attention
        attended = self.self_attn(x, x, x, causal)           # (B, T, d_model)
        attended = self.dropout(attended)                    # (B, T, d_model)
        residual1 = x + attended                             # (B, T, d_model)
        out1 = self.norm1(residual1)                         # (B, T, d_model)
        # block 2: cross-attention, queries from the decoder, keys/values from the encoder
        crossed = self.cross_attn(out1, memory, memory)      # (B, T, d_model)
        crossed = self.dropout(crossed)                      # (B, T, d_model)
        residual2 = out1 + crossed                           # (B, T, d_model)
        out2 = self.norm2(residual2)                         # (B, T, d_model)
        # block 3: feed-forward
        transformed = self.ff(out2)                          # (B, T, d_model)
        transformed = self.dropout(transformed)              # (B, T, d_model)
        residual3 = out2 + transformed                       # (B, T, d_model)
        out3 = self.norm3(residual3)                         # (B, T, d_model)
        return out3
