"""Checks for part ``decoder``: one post-norm decoder layer.

As the encoder's, the layer is judged on its own wiring, one block at a time, on what its own
submodules (called in the worker) got and gave; the checks of gradients and dropout compare with the
judge's composition of the same submodules; the comparison with nn.TransformerDecoderLayer end to
end holds a small, declared share (points.toml).
"""

from hypothesis import given, strategies as st

from autograder.judge.checks import (backpropagate, expect_children, expect_close, expect_random_only_in_training,
                                     expect_gradient, expect_gradients_reach, expect_reused, expect_wired, expect_wires,
                                     in_eval_mode, is_close, load_weights, random_tensor)
from trusted import (D_FF, DECODER_PARTS, DECODER_WIRES, EMBEDDING_DIM, HEADS, SETUP, TOKENS, decoder, decoder_state,
                     end_to_end_tolerance, own_parts, torch_decoder_output, trusted_parts, with_dropout,
                     with_stand_ins, wired_otherwise)

DROPOUT = "torch.nn.modules.dropout.Dropout"
STATE = decoder_state(71, EMBEDDING_DIM, D_FF)
X, MEMORY = random_tensor(72, 1, TOKENS, EMBEDDING_DIM), random_tensor(73, 1, TOKENS, EMBEDDING_DIM)
# Sizes other than the document's: 4 heads and d_ff = 1.5 * d_model (a layer must use its arguments).
OTHER_HEADS, OTHER_D_FF = 4, 48
OTHER_STATE = decoder_state(171, EMBEDDING_DIM, OTHER_D_FF)
TOLERANCE = {"atol": 1e-5, "rtol": 1e-4}


def loaded(side, state=STATE, d_model=EMBEDDING_DIM, num_heads=HEADS, d_ff=D_FF, dropout=0.0, end_to_end=False):
    """The student's layer with the weights ``state``; its sub-layers stood in for where they fail,
    except in an end-to-end check (lab.toml's `end_to_end`), which judges the whole."""
    layer = side.decoder.DecoderLayer(d_model, num_heads, d_ff, dropout)
    load_weights(layer, state, f"DecoderLayer({d_model}, {num_heads}, {d_ff}, dropout={dropout:g})")
    return layer if end_to_end else with_stand_ins(layer, DECODER_PARTS, num_heads)


def test_decoder_structure(student):
    """Contract: self_attn, cross_attn (attention.MultiHeadAttention), ff (feedforward.FeedForward), norm1, norm2,
    norm3 (layernorm.LayerNorm) and dropout."""
    layer = student.decoder.DecoderLayer(8, 4, 12, 0.1)
    info = layer.structure()
    expected = [["self_attn", "attention.MultiHeadAttention"], ["cross_attn", "attention.MultiHeadAttention"],
                ["ff", "feedforward.FeedForward"], ["norm1", "layernorm.LayerNorm"], ["norm2", "layernorm.LayerNorm"],
                ["norm3", "layernorm.LayerNorm"], ["dropout", DROPOUT]]
    expect_children(info, expected, "DecoderLayer(8, 4, 12, 0.1)", ordered=False)  # weights load by name
    x = random_tensor(74, 2, 5, 8)
    reused = [(attention, student.attention.MultiHeadAttention(8, 4, 0.1), (x, x, x))
              for attention in ("self_attn", "cross_attn")]
    reused.append(("ff", student.feedforward.FeedForward(8, 12, 0.1), (x,)))
    reused += [(norm, student.layernorm.LayerNorm(8), (x,)) for norm in ("norm1", "norm2", "norm3")]
    for child, own, inputs in reused:
        expect_reused(layer.submodule(child), own, inputs, f"DecoderLayer(8, 4, 12, 0.1).{child} (4 heads, d_ff 12)")


def setups(side, memory_tokens: int = 5):
    """The layers and inputs the wiring checks use: 001's set-up (a 7-token target and a 7-token encoder
    output); 4 heads, d_ff = 48, a batch of 2, 5 target tokens and ``memory_tokens`` of memory."""
    x, memory = random_tensor(74, 2, 5, EMBEDDING_DIM), random_tensor(75, 2, memory_tokens, EMBEDDING_DIM)
    return ((loaded(side), (X, MEMORY), STATE, HEADS, D_FF,
             f"DecoderLayer(32, 2, 64)(x, memory) on x and memory of shape (1, 7, 32) ({SETUP})"),
            (loaded(side, OTHER_STATE, num_heads=OTHER_HEADS, d_ff=OTHER_D_FF), (x, memory), OTHER_STATE, OTHER_HEADS,
             OTHER_D_FF, f"DecoderLayer(32, 4, 48)(x, memory) with x (2, 5, 32) and memory (2, {memory_tokens}, 32)"))


def expect_block_wired(side, block: str, memory_tokens: int = 5) -> None:
    """The wires of ``block`` (trusted.DECODER_WIRES) hold in both set-ups, judged on what the layer's own
    sub-layers got and gave."""
    for layer, inputs, state, num_heads, d_ff, what in setups(side, memory_tokens):
        expect_wires(layer, inputs, DECODER_WIRES[block], what,
                     reference=torch_decoder_output(state, *inputs, num_heads, d_ff),
                     composed=lambda layer=layer, inputs=inputs: decoder(*inputs, own_parts(layer, DECODER_PARTS)),
                     **TOLERANCE)


def test_decoder_self_attention_block(student):
    """Document 001, In [250], and the contract: x = norm1(x + self_attn(x, x, x, causal)): self-attention gets
    the layer's input as query, key and value, and the causal mask (True strictly above the diagonal: token t
    sees tokens 0..t); norm1 gets the residual sum; cross-attention's queries are norm1's output. In 001's
    set-up, and with 4 heads, d_ff = 48 (the layer's arguments) and a batch of 2."""
    expect_block_wired(student, "self_attention")


def test_decoder_cross_attention_block(student):
    """Document 001, In [250], and the contract: x = norm2(x + cross_attn(x, memory, memory)): keys and values
    from the encoder's output, no mask; norm2 gets the residual sum; the feed-forward block gets norm2's output.
    In 001's set-up, and with a memory of another length than the target (S = 9, T = 5)."""
    expect_block_wired(student, "cross_attention", memory_tokens=9)


def test_decoder_feed_forward_block(student):
    """Document 001, In [250], and the contract: x = norm3(x + ff(x)): norm3 gets ff's input plus ff's output,
    and the layer answers norm3's output. In the set-ups of the self-attention block's check."""
    expect_block_wired(student, "feed_forward")


def test_decoder_matches_torch_document_setup(student):
    """End to end (the declared share that depends on every sub-layer): 001's set-up, as PyTorch's
    nn.TransformerDecoderLayer(32, 2, 64, dropout=0.0, batch_first=True) with the same weights and a causal
    tgt_mask."""
    expected = torch_decoder_output(STATE, X, MEMORY, HEADS, D_FF)
    expect_close(loaded(student, end_to_end=True)(X, MEMORY), expected,
                 f"DecoderLayer(32, 2, 64)(x, memory) on x and memory of shape (1, 7, 32) ({SETUP}), vs "
                 "nn.TransformerDecoderLayer", **end_to_end_tolerance(expected))


def test_decoder_is_causal(student):
    """Contract: no output position depends on a later target token (the memory is seen in full)."""
    layer = loaded(student, end_to_end=True)
    for position in (0, 3, 5):
        changed = X.clone()
        changed[:, position + 1:] = random_tensor(76 + position, 1, TOKENS - position - 1, EMBEDDING_DIM)
        expect_close(layer(changed, MEMORY)[:, :position + 1], layer(X, MEMORY)[:, :position + 1],
                     f"DecoderLayer outputs for tokens 0..{position} after changing only target tokens {position + 1}.. "
                     "(no output may depend on a later target token)", atol=1e-6)


def test_decoder_gradients_reach_all_parameters(student):
    """Contract: gradients reach the target, the memory and every weight of the layer, through the layer's own
    wiring (the judge backpropagates through your own submodules wired as the docstring says). A layer wired
    otherwise (the block checks say where) is held to gradients that reach them all."""
    state = decoder_state(85, 8, 12)
    # A memory as long as the target: a cross-attention wired to the wrong stream raises where they differ,
    # which its block's check charges.
    x, memory, upstream = random_tensor(86, 2, 5, 8), random_tensor(87, 2, 5, 8), random_tensor(88, 2, 5, 8)
    layer = loaded(student, state, 8, 4, 12)
    answer = layer.grad(x, memory, upstream=upstream)
    leaves, expected = [x.clone().requires_grad_(True), memory.clone().requires_grad_(True)], {}
    composed = decoder(*leaves, own_parts(layer, DECODER_PARTS, gradients=expected))
    if wired_otherwise(layer, answer["output"], composed.detach(), (x, memory), TOLERANCE):
        expect_gradients_reach(answer, ("x", "memory"), state, "DecoderLayer")
        return
    backpropagate(composed, upstream)
    for name, got, leaf in zip(("x", "memory"), answer["inputs"], leaves):
        expect_gradient(got, leaf.grad, f"gradient of DecoderLayer's output with respect to {name}", wired=True)
    for name in state:
        expect_gradient(answer["parameters"].get(name), expected.get(name), f"gradient with respect to {name}",
                        wired=True)


def test_decoder_dropout_only_in_training(student):
    """Contract: in training mode, dropout acts as in the encoder, block by block in the order the layer runs
    (self-attention, cross-attention, feed-forward); in eval mode, nowhere. The judge replays your own
    submodules in that order, on the same random stream; a layer wired otherwise must answer in eval mode as
    with dropout=0, and otherwise in training mode."""
    layer = loaded(student, dropout=0.3)
    what = "DecoderLayer(32, 2, 64, dropout=0.3)(x, memory)"
    layer.eval()
    first, again = layer(X, MEMORY), layer.using(student.seeded(90))(X, MEMORY)
    composed = decoder(X, MEMORY, own_parts(layer, DECODER_PARTS))
    reference = decoder(X, MEMORY, trusted_parts(STATE, HEADS, DECODER_PARTS))
    if not (is_close(first, composed, equal_nan=True, **TOLERANCE) or is_close(first, reference, **TOLERANCE)):
        # Wired otherwise (the block checks say where), or zeroing in eval mode: what holds whatever the wiring.
        expect_random_only_in_training(first, loaded(student)(X, MEMORY),
                                        layer.train().using(student.seeded(89))(X, MEMORY),
                                        in_eval_mode(what, first, again), "the same layer with dropout=0", what)
        return
    layer.train()
    parts = own_parts(layer, DECODER_PARTS + ("dropout",), stream=student.stream(89))
    composed = decoder(X, MEMORY, parts, drop=parts["dropout"])
    reference = with_dropout(lambda drop: decoder(X, MEMORY, trusted_parts(STATE, HEADS, DECODER_PARTS, drop),
                                                  drop=drop), 0.3, seed=89)
    expect_wired(layer.using(student.seeded(89))(X, MEMORY), composed, f"{what} in training mode, right after "
                 "manual_seed(89): the draws in the order self_attn's weights, dropout(self_attn(...)), cross_attn's "
                 "weights, dropout(cross_attn(...)), ff's hidden activations, dropout(ff(x))", reference=reference,
                 **TOLERANCE)


### BEGIN HIDDEN TESTS
@given(seed=st.integers(0, 2**20), batch=st.integers(1, 3), tokens=st.integers(1, 8), sources=st.integers(1, 8),
       num_heads=st.integers(1, 4), head_dim=st.integers(1, 6), d_ff=st.integers(1, 24))
def test_decoder_random_sizes_wiring(student, seed, batch, tokens, sources, num_heads, head_dim, d_ff):
    """Contract: the layer's wiring (every block's wires) for other sizes."""
    d = num_heads * head_dim
    state = decoder_state(seed, d, d_ff)
    x, memory = random_tensor(seed + 10, batch, tokens, d), random_tensor(seed + 11, batch, sources, d)
    layer = loaded(student, state, d, num_heads, d_ff)
    expect_wires(layer, (x, memory), sum(DECODER_WIRES.values(), ()),
                 f"DecoderLayer({d}, {num_heads}, {d_ff}) on x {tuple(x.shape)}, memory {tuple(memory.shape)}",
                 reference=torch_decoder_output(state, x, memory, num_heads, d_ff),
                 composed=lambda: decoder(x, memory, own_parts(layer, DECODER_PARTS)), atol=1e-4, rtol=1e-3)


@given(seed=st.integers(0, 2**20), tokens=st.integers(2, 9), position=st.integers(0, 7))
def test_decoder_random_inputs_are_causal(student, seed, tokens, position):
    """Contract: the decoder is causal for other lengths and inputs."""
    position = position % (tokens - 1)
    layer = loaded(student, decoder_state(seed, EMBEDDING_DIM, D_FF), end_to_end=True)
    x, memory = random_tensor(seed + 1, 2, tokens, EMBEDDING_DIM), random_tensor(seed + 2, 2, 3, EMBEDDING_DIM)
    changed = x.clone()
    changed[:, position + 1:] = random_tensor(seed + 3, 2, tokens - position - 1, EMBEDDING_DIM)
    expect_close(layer(changed, memory)[:, :position + 1], layer(x, memory)[:, :position + 1],
                 f"DecoderLayer outputs for tokens 0..{position} of {tokens} after changing later target tokens",
                 atol=1e-6)
### END HIDDEN TESTS
