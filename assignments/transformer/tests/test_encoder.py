"""Checks for part ``encoder``: one post-norm encoder layer.

The layer is judged on its own wiring, one block at a time: each block's check judges its wires on
what the layer's *own* submodules (self_attn, ff, norm1, norm2, called in the worker) got and gave,
so a mistake inside layernorm.py or attention.py is not charged again here, and a wrong wire costs
its block's check. The checks of gradients and dropout compare with the judge's composition of the
same submodules. The comparison with nn.TransformerEncoderLayer end to end holds a small, declared
share (points.toml).
"""

from hypothesis import given, strategies as st

from autograder.judge.checks import (backpropagate, expect_children, expect_close, expect_random_only_in_training,
                                     expect_gradient, expect_gradients_reach, expect_reused, expect_wired, expect_wires,
                                     in_eval_mode, is_close, load_weights, random_tensor)
from trusted import (D_FF, EMBEDDING_DIM, ENCODER_PARTS, ENCODER_WIRES, HEADS, SETUP, TOKENS, encoder, encoder_state,
                     end_to_end_tolerance, future_positions, own_parts, torch_encoder_output, trusted_parts,
                     with_dropout, with_stand_ins, wired_otherwise)

DROPOUT = "torch.nn.modules.dropout.Dropout"
STATE = encoder_state(61, EMBEDDING_DIM, D_FF)
X = random_tensor(62, 1, TOKENS, EMBEDDING_DIM)
# Sizes other than the document's: 4 heads and d_ff = 1.5 * d_model (a layer must use its arguments).
OTHER_HEADS, OTHER_D_FF = 4, 48
OTHER_STATE = encoder_state(161, EMBEDDING_DIM, OTHER_D_FF)
TOLERANCE = {"atol": 1e-5, "rtol": 1e-4}


def loaded(side, state=STATE, d_model=EMBEDDING_DIM, num_heads=HEADS, d_ff=D_FF, dropout=0.0, end_to_end=False):
    """The student's layer with the weights ``state``; its sub-layers stood in for where they fail,
    except in an end-to-end check (lab.toml's `end_to_end`), which judges the whole."""
    layer = side.encoder.EncoderLayer(d_model, num_heads, d_ff, dropout)
    load_weights(layer, state, f"EncoderLayer({d_model}, {num_heads}, {d_ff}, dropout={dropout:g})")
    return layer if end_to_end else with_stand_ins(layer, ENCODER_PARTS, num_heads)


def test_encoder_structure(student):
    """Contract: self_attn (attention.MultiHeadAttention), ff (feedforward.FeedForward), norm1, norm2
    (layernorm.LayerNorm) and dropout: the layer reuses this lab's modules."""
    layer = student.encoder.EncoderLayer(8, 4, 12, 0.1)
    info = layer.structure()
    expected = [["self_attn", "attention.MultiHeadAttention"], ["ff", "feedforward.FeedForward"],
                ["norm1", "layernorm.LayerNorm"], ["norm2", "layernorm.LayerNorm"], ["dropout", DROPOUT]]
    expect_children(info, expected, "EncoderLayer(8, 4, 12, 0.1)", ordered=False)  # weights load by name
    x = random_tensor(63, 2, 5, 8)
    for child, own, inputs in (("self_attn", student.attention.MultiHeadAttention(8, 4, 0.1), (x, x, x)),
                               ("ff", student.feedforward.FeedForward(8, 12, 0.1), (x,)),
                               ("norm1", student.layernorm.LayerNorm(8), (x,)),
                               ("norm2", student.layernorm.LayerNorm(8), (x,))):
        expect_reused(layer.submodule(child), own, inputs, f"EncoderLayer(8, 4, 12, 0.1).{child} (4 heads, d_ff 12)")


def setups(side):
    """The layers and inputs the wiring checks use: 001's set-up on (1, 7, 32) without a mask; 4 heads,
    d_ff = 48, a batch of 3 and a causal mask."""
    return ((loaded(side), (X, None), STATE, HEADS, D_FF,
             f"EncoderLayer(32, 2, 64)(x) on x of shape (1, 7, 32) ({SETUP})"),
            (loaded(side, OTHER_STATE, num_heads=OTHER_HEADS, d_ff=OTHER_D_FF),
             (random_tensor(63, 3, TOKENS, EMBEDDING_DIM), future_positions(TOKENS)), OTHER_STATE, OTHER_HEADS,
             OTHER_D_FF, "EncoderLayer(32, 4, 48)(x, mask) with a causal mask, on x of shape (3, 7, 32)"))


def expect_block_wired(side, block: str) -> None:
    """The wires of ``block`` (trusted.ENCODER_WIRES) hold in both set-ups, judged on what the layer's own
    sub-layers got and gave."""
    for layer, inputs, state, num_heads, d_ff, what in setups(side):
        x, mask = inputs
        expect_wires(layer, inputs, ENCODER_WIRES[block], what,
                     reference=torch_encoder_output(state, x, num_heads, d_ff, mask),
                     composed=lambda layer=layer, x=x, mask=mask: encoder(x, own_parts(layer, ENCODER_PARTS), mask),
                     **TOLERANCE)


def test_encoder_attention_block(student):
    """Document 001, In [248], and the contract: x = norm1(x + self_attn(x, x, x, mask)): self-attention gets
    the layer's input as query, key and value, and its mask (True = hidden, as nn.TransformerEncoderLayer's
    src_mask); norm1 gets the residual sum; the feed-forward block gets norm1's output. In 001's set-up, and with
    4 heads, d_ff = 48 (the layer's arguments), a causal mask and a batch of 3."""
    expect_block_wired(student, "attention")


def test_encoder_feed_forward_block(student):
    """Document 001, In [248], and the contract: x = norm2(x + ff(x)): norm2 gets ff's input plus ff's output,
    and the layer answers norm2's output. In the same two set-ups."""
    expect_block_wired(student, "feed_forward")


def test_encoder_matches_torch_document_setup(student):
    """End to end (the declared share that depends on every sub-layer): 001's set-up, as PyTorch's
    nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True) with the same weights."""
    expected = torch_encoder_output(STATE, X, HEADS, D_FF)
    expect_close(loaded(student, end_to_end=True)(X), expected,
                 f"EncoderLayer(32, 2, 64)(x) on x of shape (1, 7, 32) ({SETUP}), vs nn.TransformerEncoderLayer",
                 **end_to_end_tolerance(expected))


def test_encoder_output_is_normalised(student):
    """Contract: post-norm: the output is norm2's. With norm2's weight 0, norm2 gives the same for every input
    (its bias), so the layer's output must be exactly what its own norm2 gives (a pre-norm layer adds its input
    back after the norm)."""
    state = {**STATE, "norm2.weight": STATE["norm2.weight"] * 0}
    layer = loaded(student, state)
    expect_wired(layer(X), layer.submodule("norm2")(X), "EncoderLayer(32, 2, 64)(x) with norm2.weight = 0: every "
                 "output token must be what norm2 gives (norm2.bias)", reference=state["norm2.bias"].expand_as(X),
                 atol=1e-5)


def test_encoder_gradients_reach_all_parameters(student):
    """Contract: gradients reach the input and every weight of the layer, through the layer's own wiring
    (the judge backpropagates through your own submodules wired as the docstring says); with a (5, 5) mask.
    A layer wired otherwise (the block checks say where) is held to gradients that reach them all."""
    state = encoder_state(66, 8, 12)
    x, upstream, causal = random_tensor(67, 2, 5, 8), random_tensor(68, 2, 5, 8), future_positions(5)
    layer = loaded(student, state, 8, 4, 12)
    answer = layer.grad(x, causal, upstream=upstream)
    leaf, expected = x.clone().requires_grad_(True), {}
    composed = encoder(leaf, own_parts(layer, ENCODER_PARTS, gradients=expected), causal)
    if wired_otherwise(layer, answer["output"], composed.detach(), (x, causal), TOLERANCE):
        expect_gradients_reach(answer, ("its input",), state, "EncoderLayer")
        return
    backpropagate(composed, upstream)
    expect_gradient(answer["inputs"][0], leaf.grad, "gradient of EncoderLayer's output with respect to its input",
                    wired=True)
    for name in state:
        expect_gradient(answer["parameters"].get(name), expected.get(name), f"gradient with respect to {name}",
                        wired=True)


def test_encoder_dropout_only_in_training(student):
    """Contract: in training mode, dropout acts on each block's output before the residual sum, and the
    sub-layers' own dropout (attention weights, feed-forward activations) runs, in the order the layer runs;
    in eval mode, nowhere. The judge replays your own submodules in that order, on the same random stream; a
    layer wired otherwise must answer in eval mode as with dropout=0, and otherwise in training mode."""
    layer = loaded(student, dropout=0.3)
    what = "EncoderLayer(32, 2, 64, dropout=0.3)(x)"
    layer.eval()
    first, again = layer(X), layer.using(student.seeded(70))(X)
    composed, reference = encoder(X, own_parts(layer, ENCODER_PARTS)), encoder(X, trusted_parts(STATE, HEADS, ENCODER_PARTS))
    if not (is_close(first, composed, equal_nan=True, **TOLERANCE) or is_close(first, reference, **TOLERANCE)):
        # Wired otherwise (the block checks say where), or zeroing in eval mode: what holds whatever the wiring.
        expect_random_only_in_training(first, loaded(student)(X), layer.train().using(student.seeded(69))(X),
                                        in_eval_mode(what, first, again), "the same layer with dropout=0", what)
        return
    layer.train()
    stream = student.stream(69)
    parts = own_parts(layer, ENCODER_PARTS + ("dropout",), stream=stream)
    composed = encoder(X, parts, drop=parts["dropout"])
    reference = with_dropout(lambda drop: encoder(X, trusted_parts(STATE, HEADS, ENCODER_PARTS, drop), drop=drop), 0.3,
                             seed=69)
    expect_wired(layer.using(student.seeded(69))(X), composed, f"{what} in training mode, right after manual_seed(69): "
                 "the draws in the order self_attn's weights, dropout(self_attn(...)), ff's hidden activations, "
                 "dropout(ff(x))", reference=reference, **TOLERANCE)


