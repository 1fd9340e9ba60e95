"""Checks for part ``masking``: the causal mask, masked scores and weights, the running average, CausalAttention."""

import math

import torch

from autograder.checks import (expect_close, expect_document, expect_equal, expect_mask, expect_tensor,
                               expect_unmodified, fail, future_positions, random_tensor)
from document_tensors import (CAUSAL_ATTENTION_SEED123, CAUSAL_MASK7, CAUSAL_WEIGHTS, MASK6_INT, MASKED_SCORES,
                              MASKED_SOFTMAXED_WEIGHTS, MINUS_1E10_MASKED, SIMPLE_MASK6_INT, TRICK_AVERAGES, TRICK_B,
                              TRIL3, UNIFORM_CAUSAL_WEIGHTS8, V2_AFTER_V1_WEIGHTS, XBOW_CHANNEL1, XBOW_FIRST,
                              YOUR_JOURNEY, seed42_trick_input, seed123_v2_weights)

INPUTS = torch.tensor(YOUR_JOURNEY)
LINEAR = "torch.nn.modules.linear.Linear"
DROPOUT = "torch.nn.modules.dropout.Dropout"


# -- causal_mask ---------------------------------------------------------------------------------

def test_causal_mask_matches_document(student):
    """003 "Causal self-attention", Mask (for softmax): 1 strictly above the diagonal of a 6x6 matrix."""
    expect_mask(student.masking.causal_mask(6), MASK6_INT.tensor.bool(), "causal_mask(6)", MASK6_INT.provenance)


def test_simple_mask_is_its_complement(student):
    """003 "Causal self-attention", Simple mask: torch.tril(ones(6, 6)) is the negation of causal_mask(6)."""
    mask = expect_tensor(student.masking.causal_mask(6), "causal_mask(6)")
    expect_mask(torch.logical_not(mask), SIMPLE_MASK6_INT.tensor.bool(), "~causal_mask(6)",
                SIMPLE_MASK6_INT.provenance)


def test_causal_mask7_matches_document(student):
    """001 In [227]: the boolean 7x7 mask (True above the diagonal)."""
    expect_mask(student.masking.causal_mask(7), CAUSAL_MASK7.tensor, "causal_mask(7)", CAUSAL_MASK7.provenance)


def test_tril3_matches_document(student):
    """002 In [4]: a = torch.tril(torch.ones(3, 3)) marks the positions causal_mask(3) leaves visible."""
    mask = expect_tensor(student.masking.causal_mask(3), "causal_mask(3)")
    expect_mask(torch.logical_not(mask), TRIL3.tensor.bool(), "~causal_mask(3)", TRIL3.provenance)


def test_causal_mask_is_bool(student):
    """Contract: a bool tensor of shape (T, T), for any T (including 1)."""
    for size in (1, 2, 5, 9):
        mask = expect_tensor(student.masking.causal_mask(size), f"causal_mask({size})", shape=(size, size),
                             dtype=torch.bool)
        expect_equal(mask, future_positions(size), f"causal_mask({size})")


# -- mask_future -----------------------------------------------------------------------------------

def test_masked_scores_match_document(student):
    """000 In [14]: the simplified scores inputs @ inputs.T with -inf above the diagonal."""
    expect_document(student.masking.mask_future(INPUTS @ INPUTS.T), MASKED_SCORES, "mask_future(inputs @ inputs.T)")


def test_mask_future_custom_fill(student):
    """001 In [230]/[231]: masking with -1e10 instead of -inf writes exactly -1e10 above the diagonal and
    copies every other score unchanged (the document's masked matrix, then random scores)."""
    masked = torch.tensor(MINUS_1E10_MASKED)
    # Lower triangle from the document, arbitrary values where the mask must write -1e10.
    scores = torch.where(future_positions(7), random_tensor(11, 7, 7, scale=20.0), masked)
    expect_equal(student.masking.mask_future(scores, fill=-1e10), masked,
                 "mask_future(scores, fill=-1e10) on the scores of 001 In [231]")
    scores = random_tensor(12, 5, 5, scale=10.0)
    expect_equal(student.masking.mask_future(scores, fill=-1e10), scores.masked_fill(future_positions(5), -1e10),
                 "mask_future(scores, fill=-1e10) on random 5x5 scores")


def test_mask_future_leaves_input_untouched(student):
    """Contract: mask_future returns a new tensor; the scores passed in are not modified."""
    scores = random_tensor(13, 6, 6)
    result, (after, *_) = student.masking.mask_future.with_args(scores.clone())
    expect_tensor(result, "mask_future(scores)", shape=(6, 6), dtype=torch.float32)
    expect_unmodified(scores, after, "mask_future")


# -- causal_attention_weights ------------------------------------------------------------------------

def test_causal_weights_match_document(student):
    """000 In [15]: softmax(mask_future(inputs @ inputs.T) / sqrt(2))."""
    expect_document(student.masking.causal_attention_weights(INPUTS @ INPUTS.T, 2), CAUSAL_WEIGHTS,
                    "causal_attention_weights(inputs @ inputs.T, 2)")


def test_masked_softmaxed_weights_match_document(student):
    """003 "Causal self-attention", Attention weights masked and normalized: the page masks weights that
    were already softmaxed (those of SelfAttention_v2 built after V1 from manual_seed(123)) and applies
    softmax(masked / sqrt(2)) to them."""
    weights = seed123_v2_weights()
    expect_document(weights, V2_AFTER_V1_WEIGHTS, "the judge's own setup (not your code): softmax(q k^T / sqrt(2))")
    expect_document(student.masking.causal_attention_weights(weights, 2), MASKED_SOFTMAXED_WEIGHTS,
                    "causal_attention_weights(attn_weights, 2)")


# -- causal_average -----------------------------------------------------------------------------------

def test_trick_averages_match_document(student):
    """002 In [5]: c = (tril / row sums) @ b, the running means of b's rows."""
    expect_document(student.masking.causal_average(torch.tensor(TRICK_B)), TRICK_AVERAGES, "causal_average(b)")


def test_uniform_causal_weights_match_document(student):
    """002 In [20]: wei, the row-normalised tril(ones(8, 8)), is causal_average of the identity."""
    expect_document(student.masking.causal_average(torch.eye(8)), UNIFORM_CAUSAL_WEIGHTS8,
                    "causal_average(torch.eye(8))")


def test_xbow_channel1_matches_document(student):
    """002 In [20]: xbow[:, :, 1] for x = torch.randn(4, 8, 2) after manual_seed(42)."""
    xbow = expect_tensor(student.masking.causal_average(seed42_trick_input()), "causal_average(x)", shape=(4, 8, 2))
    expect_document(xbow[:, :, 1], XBOW_CHANNEL1, "causal_average(x)[:, :, 1]")


def test_xbow_first_matches_document(student):
    """002 In [22]: xbow[0] for the same x."""
    xbow = expect_tensor(student.masking.causal_average(seed42_trick_input()), "causal_average(x)", shape=(4, 8, 2))
    expect_document(xbow[0], XBOW_FIRST, "causal_average(x)[0]")


# -- CausalAttention ------------------------------------------------------------------------------------

def test_causal_attention_matches_document(student):
    """000 In [17]: CausalAttention(3, 2, 6, 0.0) built after manual_seed(123), on batch = stack((inputs, inputs))."""
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
    """000 In [17] with context_length 10 instead of 6: the mask is cut to the input's length, so 6 tokens
    give the document's output, and 4 tokens give its first 4 rows."""
    batch = torch.stack((INPUTS, INPUTS))
    attention = student.seeded(123).masking.CausalAttention(3, 2, 10, 0.0)
    expect_document(attention(batch), CAUSAL_ATTENTION_SEED123, "CausalAttention(3, 2, 10, 0.0)(batch) with 6 tokens")
    expect_close(attention(batch[:, :4]), CAUSAL_ATTENTION_SEED123.tensor[:, :4],
                 "CausalAttention(3, 2, 10, 0.0)(batch[:, :4]) with 4 tokens", atol=CAUSAL_ATTENTION_SEED123.atol,
                 source=f"{CAUSAL_ATTENTION_SEED123.provenance}, first 4 rows")


