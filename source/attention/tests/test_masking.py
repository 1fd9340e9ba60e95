"""Checks for part ``masking``: the causal mask, masked scores and weights, the running average, CausalAttention."""

import math

import torch
import torch.nn.functional as F

from autograder.judge.checks import (backpropagate, expect_close, expect_document, expect_equal, expect_finite, expect_gradient,
                                     expect_mask, expect_tensor, expect_unmodified, fail, in_eval_mode,
                                     random_tensor)
from document_tensors import (CAUSAL_ATTENTION_SEED123, CAUSAL_MASK7, CAUSAL_WEIGHTS, MASK6_INT, MASKED_SCORES,
                              MASKED_SOFTMAXED_WEIGHTS, MINUS_1E10_MASKED, SIMPLE_MASK6_INT, TRICK_AVERAGES, TRICK_B,
                              TRIL3, UNIFORM_CAUSAL_WEIGHTS8, V2_AFTER_V1_WEIGHTS, XBOW_CHANNEL1, XBOW_FIRST,
                              YOUR_JOURNEY, seed42_trick_input, seed123_v2_weights)
from trusted import causal_weights, dropped_out, future_positions

INPUTS = torch.tensor(YOUR_JOURNEY)
LINEAR = "torch.nn.modules.linear.Linear"
DROPOUT = "torch.nn.modules.dropout.Dropout"
QKV = ("W_query", "W_key", "W_value")


# -- causal_mask ---------------------------------------------------------------------------------

def test_causal_mask_matches_document(student):
    """Document 003, "Causal self-attention", Mask (for softmax): 1 strictly above the diagonal of a 6x6 matrix."""
    expect_mask(student.masking.causal_mask(6), MASK6_INT.tensor.bool(), "causal_mask(6)", MASK6_INT.provenance)


def test_simple_mask_is_its_complement(student):
    """Document 003, "Causal self-attention", Simple mask: torch.tril(ones(6, 6)) is the negation of causal_mask(6)."""
    mask = expect_tensor(student.masking.causal_mask(6), "causal_mask(6)")
    expect_mask(torch.logical_not(mask), SIMPLE_MASK6_INT.tensor.bool(), "~causal_mask(6)",
                SIMPLE_MASK6_INT.provenance)


def test_causal_mask7_matches_document(student):
    """Document 001, In [227]: the boolean 7x7 mask (True above the diagonal)."""
    expect_mask(student.masking.causal_mask(7), CAUSAL_MASK7.tensor, "causal_mask(7)", CAUSAL_MASK7.provenance)


def test_tril3_matches_document(student):
    """Document 002, In [4]: a = torch.tril(torch.ones(3, 3)) marks the positions causal_mask(3) leaves visible."""
    mask = expect_tensor(student.masking.causal_mask(3), "causal_mask(3)")
    expect_mask(torch.logical_not(mask), TRIL3.tensor.bool(), "~causal_mask(3)", TRIL3.provenance)


def test_causal_mask_any_size(student):
    """Contract: a bool tensor of shape (T, T), True strictly above the diagonal, for any T (including 1)."""
    for size in (1, 2, 5, 9):
        mask = expect_tensor(student.masking.causal_mask(size), f"causal_mask({size})", shape=(size, size),
                             dtype=torch.bool)
        expect_equal(mask, future_positions(size), f"causal_mask({size})")


# -- mask_future -----------------------------------------------------------------------------------

def test_masked_scores_match_document(student):
    """Document 000, In [14]: the simplified scores inputs @ inputs.T with -inf above the diagonal."""
    expect_document(student.masking.mask_future(INPUTS @ INPUTS.T), MASKED_SCORES, "mask_future(inputs @ inputs.T)")


def test_mask_future_custom_fill(student):
    """Document 001, In [230]/[231]: masking with -1e10 instead of -inf writes exactly -1e10 above the diagonal and
    copies every other score unchanged (the document's masked matrix; then random scores, with -1e9)."""
    masked = torch.tensor(MINUS_1E10_MASKED)
    # Lower triangle from the document, arbitrary values where the mask must write -1e10.
    scores = torch.where(future_positions(7), random_tensor(11, 7, 7, scale=20.0), masked)
    expect_equal(student.masking.mask_future(scores, fill=-1e10), masked,
                 "mask_future(scores, fill=-1e10) on the scores of document 001, In [231]")
    scores = random_tensor(12, 5, 5, scale=10.0)
    expect_equal(student.masking.mask_future(scores, fill=-1e9), scores.masked_fill(future_positions(5), -1e9),
                 "mask_future(scores, fill=-1e9) on random 5x5 scores")


def test_mask_future_leaves_input_untouched(student):
    """Contract: mask_future returns a new tensor; the scores passed in are not modified."""
    scores = random_tensor(13, 6, 6)
    result, (after, *_) = student.masking.mask_future.with_args(scores.clone())
    expect_tensor(result, "mask_future(scores)", shape=(6, 6), dtype=torch.float32)
    expect_unmodified(scores, after, "mask_future")


# -- causal_attention_weights ------------------------------------------------------------------------

def test_causal_weights_match_document(student):
    """Document 000, In [15]: softmax(mask_future(inputs @ inputs.T) / sqrt(2))."""
    expect_document(student.masking.causal_attention_weights(INPUTS @ INPUTS.T, 2), CAUSAL_WEIGHTS,
                    "causal_attention_weights(inputs @ inputs.T, 2)")


def test_masked_softmaxed_weights_match_document(student):
    """Document 003, "Causal self-attention", Attention weights masked and normalized: the page masks weights that
    were already softmaxed (those of SelfAttention_v2 built after V1 from manual_seed(123)) and applies
    softmax(masked / sqrt(2)) to them."""
    weights = seed123_v2_weights()
    expect_document(weights, V2_AFTER_V1_WEIGHTS, "the judge's own setup (not your code): softmax(q k^T / sqrt(2))")
    expect_document(student.masking.causal_attention_weights(weights, 2), MASKED_SOFTMAXED_WEIGHTS,
                    "causal_attention_weights(attn_weights, 2)")


# -- causal_average -----------------------------------------------------------------------------------

def test_trick_averages_match_document(student):
    """Document 002, In [5]: c = (tril / row sums) @ b, the running means of b's rows."""
    expect_document(student.masking.causal_average(torch.tensor(TRICK_B)), TRICK_AVERAGES, "causal_average(b)")


def test_uniform_causal_weights_match_document(student):
    """Document 002, In [20]: wei, the row-normalised tril(ones(8, 8)), is causal_average of the identity."""
    expect_document(student.masking.causal_average(torch.eye(8)), UNIFORM_CAUSAL_WEIGHTS8,
                    "causal_average(torch.eye(8))")


def test_xbow_channel1_matches_document(student):
    """Document 002, In [20]: xbow[:, :, 1] for x = torch.randn(4, 8, 2) after manual_seed(42)."""
    xbow = expect_tensor(student.masking.causal_average(seed42_trick_input()), "causal_average(x)", shape=(4, 8, 2))
    expect_document(xbow[:, :, 1], XBOW_CHANNEL1, "causal_average(x)[:, :, 1]")


def test_xbow_first_matches_document(student):
    """Document 002, In [22]: xbow[0] for the same x."""
    xbow = expect_tensor(student.masking.causal_average(seed42_trick_input()), "causal_average(x)", shape=(4, 8, 2))
    expect_document(xbow[0], XBOW_FIRST, "causal_average(x)[0]")


# -- CausalAttention ------------------------------------------------------------------------------------

def test_causal_attention_matches_document(student):
    """Document 000, In [17]: CausalAttention(3, 2, 6, 0.0) built after manual_seed(123), on batch = stack((inputs, inputs))."""
    attention = student.seeded(123).masking.CausalAttention(3, 2, 6, 0.0)
    expect_document(attention(torch.stack((INPUTS, INPUTS))), CAUSAL_ATTENTION_SEED123,
                    "CausalAttention(3, 2, 6, 0.0)(batch)")


def test_causal_attention_structure(student):
    """Contract: W_query, W_key, W_value (nn.Linear) then dropout (nn.Dropout), in that order; the mask is a
    registered buffer of shape (context_length, context_length), set strictly above the diagonal."""
    for d_in, d_out, context, bias in ((3, 2, 6, False), (5, 4, 9, True)):
        call = f"CausalAttention({d_in}, {d_out}, {context}, 0.1, qkv_bias={bias})"
        attention = student.masking.CausalAttention(d_in, d_out, context, 0.1, bias)
        found = attention.structure()
        children = [tuple(child) for child in found["children"]]
        wanted = [("W_query", LINEAR), ("W_key", LINEAR), ("W_value", LINEAR), ("dropout", DROPOUT)]
        if children != wanted:
            fail(f"{call}: expected the submodules {wanted} in this order, got {children}")
        parameters = [(name, tuple(shape)) for name, shape in found["all_parameters"]]
        kinds = ("weight", "bias") if bias else ("weight",)
        wanted = [(f"{layer}.{kind}", (d_out, d_in) if kind == "weight" else (d_out,))
                  for layer in ("W_query", "W_key", "W_value") for kind in kinds]
        if sorted(parameters) != sorted(wanted):
            fail(f"{call}: expected the parameters {wanted}, got {parameters}")
        buffers = {name: tuple(shape) for name, _, shape in found["buffers"]}
        if buffers.get("mask") != (context, context):
            fail(f"{call}: expected a buffer `mask` of shape ({context}, {context}) registered with register_buffer, "
                 f"got buffers {found['buffers']}")
        mask = attention.state_dict().get("mask")
        if mask is None:
            fail(f"{call}: the buffer `mask` is missing from state_dict() (register it as a persistent buffer)")
        expect_mask(mask, future_positions(context), f"{call}.mask (nonzero strictly above the diagonal)")


def test_causal_attention_shorter_input(student):
    """Document 000, In [17] with context_length 10 instead of 6: the mask is cut to the input's length, so 6 tokens
    give the document's output, and 4 tokens give its first 4 rows."""
    batch = torch.stack((INPUTS, INPUTS))
    attention = student.seeded(123).masking.CausalAttention(3, 2, 10, 0.0)
    expect_document(attention(batch), CAUSAL_ATTENTION_SEED123, "CausalAttention(3, 2, 10, 0.0)(batch) with 6 tokens")
    expect_close(attention(batch[:1, :4]), CAUSAL_ATTENTION_SEED123.tensor[:1, :4],
                 "CausalAttention(3, 2, 10, 0.0)(batch[:1, :4]) with 1 sequence of 4 tokens",
                 atol=CAUSAL_ATTENTION_SEED123.atol, source=f"{CAUSAL_ATTENTION_SEED123.provenance}, first 4 rows")


def set_projections(attention, seed, d_in, d_out, bias):
    """Load judge-chosen projections into the student's module; return them as {layer: (weight, bias)}."""
    state = attention.state_dict()
    chosen = {}
    for index, layer in enumerate(QKV):
        weight = random_tensor(seed + index, d_out, d_in, scale=0.7)
        offset = random_tensor(seed + 10 + index, d_out, scale=0.3) if bias else None
        chosen[layer] = (weight, offset)
        for kind, value in (("weight", weight), ("bias", offset)):
            if value is None:
                continue
            key = f"{layer}.{kind}"
            if key not in state:
                fail(f"CausalAttention: expected `{key}` in state_dict(), got keys {sorted(state)}")
            state[key] = value
    attention.load_state_dict(state)
    return chosen


def test_causal_attention_is_causal(student):
    """Changing the tokens after position t leaves the outputs at positions 0..t unchanged."""
    attention = student.seeded(5).masking.CausalAttention(4, 3, 8, 0.0)
    x = random_tensor(21, 2, 7, 4)
    what = "CausalAttention(4, 3, 8, 0.0) on shape (2, 7, 4)"
    base = expect_finite(expect_tensor(attention(x), what, shape=(2, 7, 3)), what)
    for t in (0, 2, 5):
        changed = x.clone()
        changed[:, t + 1:] = random_tensor(22 + t, 2, 6 - t, 4, scale=3.0)
        expect_close(attention(changed)[:, :t + 1], base[:, :t + 1],
                     f"CausalAttention outputs 0..{t} after changing tokens {t + 1}..6 (they must not look ahead)",
                     atol=1e-6, rtol=1e-6)


def test_causal_weights_are_causal(student):
    """Every weight is finite (the causal mask hides no whole row: each token sees itself), rows sum to 1,
    entries above the diagonal are exactly 0, and scores or tokens from the future change nothing in earlier
    rows."""
    x = random_tensor(31, 7, 4)
    what = "causal_attention_weights(x @ x.T, 4)"
    weights = expect_finite(expect_tensor(student.masking.causal_attention_weights(x @ x.T, 4), what, shape=(7, 7)),
                            what)
    expect_close(weights.sum(-1), torch.ones(7), "row sums of causal_attention_weights", atol=1e-5)
    expect_close(weights[future_positions(7)], torch.zeros(int(future_positions(7).sum())),
                 "causal_attention_weights above the diagonal", atol=0.0)
    scrambled = torch.where(future_positions(7), random_tensor(32, 7, 7, scale=50.0), x @ x.T)
    expect_close(student.masking.causal_attention_weights(scrambled, 4), weights,
                 "causal_attention_weights after changing only the scores above the diagonal", atol=1e-6)
    for t in (0, 3):
        changed = x.clone()
        changed[t + 1:] = random_tensor(33 + t, 6 - t, 4, scale=3.0)
        expect_close(student.masking.causal_attention_weights(changed @ changed.T, 4)[:t + 1], weights[:t + 1],
                     f"causal_attention_weights rows 0..{t} after changing tokens {t + 1}..6", atol=1e-6)


def test_causal_average_batched(student):
    """Running means over the token dimension for inputs with one and two batch dimensions."""
    for shape in ((3, 6, 4), (2, 3, 5, 2), (3, 1, 4, 2), (1, 1, 3)):
        x = random_tensor(41, *shape)
        counts = torch.arange(1, shape[-2] + 1, dtype=x.dtype).unsqueeze(-1)
        expect_close(student.masking.causal_average(x), x.cumsum(-2) / counts,
                     f"causal_average on shape {shape} (mean of tokens 0..t)", atol=1e-5, rtol=1e-5)


def test_functions_keep_float64(student):
    """Contract: the functions keep the input's dtype (float64 in, float64 out), for scores with two batch dims."""
    for seed, shape in ((51, (3, 2, 5, 5)), (53, (2, 1, 4, 4))):
        scores, hidden = random_tensor(seed, *shape, dtype=torch.float64), future_positions(shape[-1])
        what = f"on float64 scores of shape {shape}"
        masked = expect_tensor(student.masking.mask_future(scores), f"mask_future {what}", dtype=torch.float64)
        expect_close(masked, scores.masked_fill(hidden, -math.inf), f"mask_future {what}", atol=0.0)
        weights = expect_tensor(student.masking.causal_attention_weights(scores, 3),
                                f"causal_attention_weights {what}", dtype=torch.float64)
        expect_close(weights, torch.softmax(scores.masked_fill(hidden, -math.inf) / math.sqrt(3), dim=-1),
                     f"causal_attention_weights {what}", atol=1e-12)
    x = random_tensor(52, 2, 5, 3, dtype=torch.float64)
    average = expect_tensor(student.masking.causal_average(x), "causal_average on float64 input", dtype=torch.float64)
    expect_close(average, x.cumsum(-2) / torch.arange(1, 6, dtype=torch.float64).unsqueeze(-1),
                 "causal_average on float64 input", atol=1e-12)


def test_gradients_flow(student):
    """Gradients reach the scores, the input and the three projections."""
    scores = random_tensor(61, 5, 5, dtype=torch.float64)
    upstream = random_tensor(62, 5, 5, dtype=torch.float64)
    grad = student.masking.mask_future.grad(scores, upstream=upstream)["inputs"][0]
    expect_gradient(grad, upstream.masked_fill(future_positions(5), 0.0), "gradient of mask_future with respect to the scores",
                    atol=1e-12)
    trusted = scores.clone().requires_grad_(True)
    backpropagate(torch.softmax(trusted.masked_fill(future_positions(5), -math.inf) / math.sqrt(2), dim=-1), upstream)
    grad = student.masking.causal_attention_weights.grad(scores, 2, upstream=upstream)["inputs"][0]
    expect_gradient(grad, trusted.grad, "gradient of causal_attention_weights with respect to the scores", atol=1e-9)
    x = random_tensor(63, 5, 3, dtype=torch.float64)
    upstream = random_tensor(64, 5, 3, dtype=torch.float64)
    averaging = torch.tril(torch.ones(5, 5, dtype=torch.float64))
    averaging = averaging / averaging.sum(-1, keepdim=True)
    grad = student.masking.causal_average.grad(x, upstream=upstream)["inputs"][0]
    expect_gradient(grad, averaging.T @ upstream, "gradient of causal_average with respect to its input", atol=1e-9)

    attention = student.masking.CausalAttention(4, 3, 6, 0.0, True)
    chosen = set_projections(attention, 65, 4, 3, True)
    leaves = {layer: [t.clone().requires_grad_(True) for t in pair] for layer, pair in chosen.items()}
    x = random_tensor(68, 2, 6, 4).requires_grad_(True)
    upstream = random_tensor(69, 2, 6, 3)
    q, k, v = (F.linear(x, *leaves[layer]) for layer in QKV)
    backpropagate(causal_weights(q, k) @ v, upstream)
    got = attention.grad(x.detach(), upstream=upstream)
    expect_gradient(got["inputs"][0], x.grad, "gradient of CausalAttention with respect to its input")
    for layer, (weight, offset) in leaves.items():
        for name, leaf in ((f"{layer}.weight", weight), (f"{layer}.bias", offset)):
            if name not in got["parameters"]:
                fail(f"CausalAttention: expected a parameter `{name}`, got {sorted(got['parameters'])}")
            expect_gradient(got["parameters"][name], leaf.grad, f"gradient of CausalAttention's {name}")


def test_causal_attention_dropout_only_in_training(student):
    """Contract: with dropout 0.5, in eval mode the output is the dropout-free one, every call alike; in
    training mode the attention weights, after the softmax, go through the module's nn.Dropout."""
    call = "CausalAttention(4, 3, 6, 0.5)"
    attention = student.seeded(8).masking.CausalAttention(4, 3, 6, 0.5)
    chosen = set_projections(attention, 70, 4, 3, False)
    x = random_tensor(71, 2, 6, 4)
    q, k, v = (F.linear(x, *chosen[layer]) for layer in QKV)
    weights = causal_weights(q, k)                                           # (2, 6, 6)
    attention.eval()
    first, again = attention(x), attention.using(student.seeded(9))(x)
    expect_close(first, weights @ v, in_eval_mode(call, first, again), atol=1e-5, rtol=1e-5)
    expect_close(again, first, f"{call} in eval mode, called after another random seed", atol=0.0)
    attention.train()
    expect_close(attention(x), dropped_out(weights, 0.5, seed=8) @ v,
                 f"{call} in training mode, called right after manual_seed(8) (the attention weights, after the "
                 "softmax, through the module's nn.Dropout: its first random draw)", atol=1e-5, rtol=1e-5)


def test_functions_leave_inputs_untouched(student):
    """Contract: no input tensor is modified in place."""
    scores = random_tensor(81, 2, 5, 5)
    _, (after, _) = student.masking.causal_attention_weights.with_args(scores.clone(), 3)
    expect_unmodified(scores, after, "causal_attention_weights")
    _, (after, _) = student.masking.mask_future.with_args(scores.clone(), -1e10)
    expect_unmodified(scores, after, "mask_future")
    x = random_tensor(82, 2, 5, 3)
    _, (after,) = student.masking.causal_average.with_args(x.clone())
    expect_unmodified(x, after, "causal_average")


### BEGIN HIDDEN TESTS
from hypothesis import example, given, strategies as st


def test_causal_attention_matches_sdpa(student):
    """Known projections loaded with load_state_dict: the output equals
    F.scaled_dot_product_attention(q, k, v, is_causal=True) on the judge's own q, k, v."""
    for seed, (batch, tokens, d_in, d_out, context, bias) in enumerate(
            ((2, 6, 3, 2, 6, False), (3, 5, 4, 3, 8, True), (1, 1, 2, 2, 4, False), (2, 9, 6, 5, 9, True))):
        attention = student.masking.CausalAttention(d_in, d_out, context, 0.0, bias)
        chosen = set_projections(attention, 100 * seed, d_in, d_out, bias)
        x = random_tensor(100 * seed + 50, batch, tokens, d_in)
        q, k, v = (F.linear(x, *chosen[layer]) for layer in QKV)
        expect_close(attention(x), F.scaled_dot_product_attention(q, k, v, is_causal=True),
                     f"CausalAttention({d_in}, {d_out}, {context}, 0.0, qkv_bias={bias}) on shape {tuple(x.shape)} "
                     "vs F.scaled_dot_product_attention(..., is_causal=True)", atol=1e-5, rtol=1e-5)


@given(seed=st.integers(0, 2**20), tokens=st.integers(1, 8), extra=st.integers(0, 4), d_in=st.integers(1, 6),
       d_out=st.integers(1, 5), batch=st.integers(1, 3), bias=st.booleans())
@example(seed=9, tokens=6, extra=0, d_in=3, d_out=2, batch=2, bias=False)  # the document's shapes
@example(seed=10, tokens=4, extra=6, d_in=3, d_out=2, batch=2, bias=False)
def test_causal_attention_random_shapes(student, reference, seed, tokens, extra, d_in, d_out, batch, bias):
    """Contract: CausalAttention gives the right output for other shapes and weights."""
    context = tokens + extra
    x = random_tensor(seed, batch, tokens, d_in)
    call = f"CausalAttention({d_in}, {d_out}, {context}, 0.0, qkv_bias={bias})"
    got = student.seeded(seed).masking.CausalAttention(d_in, d_out, context, 0.0, bias)(x)
    want = reference.seeded(seed).masking.CausalAttention(d_in, d_out, context, 0.0, bias)(x)
    expect_close(got, want, f"{call} built after manual_seed({seed}), on shape {tuple(x.shape)}", atol=1e-5, rtol=1e-5)


@given(seed=st.integers(0, 2**20), tokens=st.integers(1, 9), d_k=st.integers(1, 16), channels=st.integers(1, 5),
       batch=st.lists(st.integers(1, 3), max_size=2), fill=st.floats(-1e6, 1e6))
@example(seed=1, tokens=6, d_k=2, channels=2, batch=[], fill=-1e10)  # the documents' shapes, other values
@example(seed=2, tokens=3, d_k=3, channels=2, batch=[], fill=0.0)
@example(seed=3, tokens=8, d_k=2, channels=8, batch=[], fill=1.0)
@example(seed=4, tokens=8, d_k=2, channels=2, batch=[4], fill=-1.0)
def test_functions_random_shapes(student, reference, seed, tokens, d_k, channels, batch, fill):
    """Contract: the masking functions give the right results for other sizes and batched scores."""
    scores = random_tensor(seed, *batch, tokens, tokens, scale=3.0)
    shape = tuple(scores.shape)
    expect_close(student.masking.mask_future(scores), reference.masking.mask_future(scores),
                 f"mask_future on shape {shape}", atol=0.0)
    expect_close(student.masking.mask_future(scores, fill=fill), reference.masking.mask_future(scores, fill=fill),
                 f"mask_future(scores, fill={fill!r}) on shape {shape}", atol=0.0)
    expect_close(student.masking.causal_attention_weights(scores, d_k),
                 reference.masking.causal_attention_weights(scores, d_k),
                 f"causal_attention_weights(scores, {d_k}) on shape {shape}", atol=1e-6, rtol=1e-5)
    x = random_tensor(seed + 1, *batch, tokens, channels)
    expect_close(student.masking.causal_average(x), reference.masking.causal_average(x),
                 f"causal_average on shape {tuple(x.shape)}", atol=1e-5, rtol=1e-5)


### END HIDDEN TESTS
