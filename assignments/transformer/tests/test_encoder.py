"""Checks for part ``encoder``: one post-norm encoder layer, compared with nn.TransformerEncoderLayer."""

from hypothesis import given, strategies as st

from autograder.judge.checks import (expect_children, expect_close, expect_gradient, expect_reused, load_weights,
                                     random_tensor)
from trusted import (D_FF, EMBEDDING_DIM, HEADS, SETUP, TOKENS, encoder, encoder_state, future_positions,
                     torch_encoder_output, with_dropout)

DROPOUT = "torch.nn.modules.dropout.Dropout"
STATE = encoder_state(61, EMBEDDING_DIM, D_FF)
X = random_tensor(62, 1, TOKENS, EMBEDDING_DIM)


def loaded(side, state=STATE, d_model=EMBEDDING_DIM, num_heads=HEADS, d_ff=D_FF, dropout=0.0):
    layer = side.encoder.EncoderLayer(d_model, num_heads, d_ff, dropout)
    load_weights(layer, state, f"EncoderLayer({d_model}, {num_heads}, {d_ff}, dropout={dropout:g})")
    return layer


def test_encoder_structure(student):
    """Contract: self_attn (attention.MultiHeadAttention), ff (feedforward.FeedForward), norm1, norm2
    (layernorm.LayerNorm) and dropout: the layer reuses this lab's modules."""
    layer = student.encoder.EncoderLayer(8, 2, 16, 0.1)
    info = layer.structure()
    expected = [["self_attn", "attention.MultiHeadAttention"], ["ff", "feedforward.FeedForward"],
                ["norm1", "layernorm.LayerNorm"], ["norm2", "layernorm.LayerNorm"], ["dropout", DROPOUT]]
    expect_children(info, expected, "EncoderLayer(8, 2, 16, 0.1)", ordered=False)  # weights load by name
    x = random_tensor(63, 2, 5, 8)
    for child, own, inputs in (("self_attn", student.attention.MultiHeadAttention(8, 2, 0.1), (x, x, x)),
                               ("ff", student.feedforward.FeedForward(8, 16, 0.1), (x,)),
                               ("norm1", student.layernorm.LayerNorm(8), (x,)),
                               ("norm2", student.layernorm.LayerNorm(8), (x,))):
        expect_reused(layer.submodule(child), own, inputs, f"EncoderLayer(8, 2, 16, 0.1).{child}")


def test_encoder_matches_torch_document_setup(student):
    """001 In [248]'s encoder layer in 001's set-up, as PyTorch's: nn.TransformerEncoderLayer(32, 2, 64,
    dropout=0.0, batch_first=True) with the same weights, on (1, 7, 32)."""
    expect_close(loaded(student)(X), torch_encoder_output(STATE, X, HEADS, D_FF),
                 f"EncoderLayer(32, 2, 64)(x) on x of shape (1, 7, 32) ({SETUP}), vs nn.TransformerEncoderLayer",
                 atol=1e-5, rtol=1e-4)


def test_encoder_with_mask_matches_torch(student):
    """Contract: the mask (True = hidden) goes to self-attention, as nn.TransformerEncoderLayer's src_mask; a
    batch of 3 sequences."""
    x = random_tensor(63, 3, TOKENS, EMBEDDING_DIM)
    causal = future_positions(TOKENS)
    expect_close(loaded(student)(x, causal), torch_encoder_output(STATE, x, HEADS, D_FF, causal),
                 "EncoderLayer(32, 2, 64)(x, mask) with a causal mask, on x of shape (3, 7, 32)", atol=1e-5, rtol=1e-4)


def test_encoder_output_is_normalised(student):
    """Contract: post-norm: the output is norm2's, so with norm2's weight 1 and bias 0 every token of the output
    has mean 0 and variance 1 (a pre-norm layer's output does not)."""
    state = {**STATE, "norm2.weight": STATE["norm2.weight"] * 0 + 1, "norm2.bias": STATE["norm2.bias"] * 0}
    out = loaded(student, state)(X)
    what = "EncoderLayer(32, 2, 64)(x) with norm2.weight = 1 and norm2.bias = 0"
    expect_close(out.mean(dim=-1), X.new_zeros(1, TOKENS), f"{what}: the mean of each output token", atol=1e-5)
    expect_close(out.var(dim=-1, unbiased=False), X.new_ones(1, TOKENS), f"{what}: the variance of each output token",
                 atol=1e-3)


def test_encoder_sequences_are_independent(student):
    """Contract: the sequences of a batch do not mix: changing sequence 1 leaves the output of sequence 0."""
    layer = loaded(student)
    x = random_tensor(64, 2, TOKENS, EMBEDDING_DIM)
    changed = x.clone()
    changed[1] = random_tensor(65, TOKENS, EMBEDDING_DIM)
    expect_close(layer(changed)[0], layer(x)[0], "EncoderLayer output of sequence 0 after changing only sequence 1",
                 atol=1e-6)


def test_encoder_gradients_reach_all_parameters(student):
    """Contract: gradients reach the input and every weight of the layer."""
    state = encoder_state(66, 8, 16)
    x, upstream = random_tensor(67, 2, 5, 8), random_tensor(68, 2, 5, 8)
    leaf = x.clone().requires_grad_(True)
    params = {k: v.clone().requires_grad_(True) for k, v in state.items()}
    encoder(leaf, params, 2).backward(upstream)
    answer = loaded(student, state, 8, 2, 16).grad(x, upstream=upstream)
    expect_gradient(answer["inputs"][0], leaf.grad, "gradient of EncoderLayer's output with respect to its input")
    for name, param in params.items():
        expect_gradient(answer["parameters"].get(name), param.grad, f"gradient with respect to {name}")


def test_encoder_dropout_only_in_training(student):
    """Contract: in training mode, dropout acts on the attention weights, on each block's output before the
    residual sum and inside the feed-forward, in the order the layer runs; in eval mode, nowhere."""
    layer = loaded(student.seeded(69), dropout=0.3)
    what = "EncoderLayer(32, 2, 64, dropout=0.3)(x)"
    layer.eval()
    expect_close(layer(X), encoder(X, STATE, HEADS), f"{what} in eval mode (dropout must be off)", atol=1e-5, rtol=1e-4)
    layer.train()
    expected = with_dropout(lambda drop: encoder(X, STATE, HEADS, drop=drop), 0.3, seed=69)
    expect_close(layer(X), expected, f"{what} in training mode, right after manual_seed(69): the draws in the order "
                 "self_attn's weights, dropout(self_attn(...)), ff's hidden activations, dropout(ff(x))",
                 atol=1e-5, rtol=1e-4)


