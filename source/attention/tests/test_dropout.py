"""Checks for part ``dropout``: inverted dropout written by hand.

Which entries a document's dropout kept depends on the platform's random stream, so no check
bakes a random pattern in: the document checks inject each printed tensor's keep-pattern (its
non-zero positions) through ``keep_mask``, and the student's own randomness is judged by its
statistics only.
"""

import math

import torch

from autograder.judge.checks import (expect_close, expect_document, expect_equal, expect_gradient, expect_student_error,
                                     expect_tensor, expect_unmodified, fail, random_tensor)
from autograder.harness.codec import GeneratorSpec
from document_tensors import (DROPOUT_CAUSAL_WEIGHTS, DROPOUT_MASKED_WEIGHTS, DROPOUT_ONES, YOUR_JOURNEY,
                              seed123_v2_weights)
from trusted import future_positions

INPUTS = torch.tensor(YOUR_JOURNEY)
ABOVE_DIAGONAL = future_positions(6)


def causal_weights_000():
    """Document 000, In [15]: softmax(masked(inputs @ inputs.T) / sqrt(2)), i.e. the catalog's CAUSAL_WEIGHTS."""
    scores = (INPUTS @ INPUTS.T).masked_fill(ABOVE_DIAGONAL, -torch.inf)
    return torch.softmax(scores / math.sqrt(2), dim=-1)


def masked_weights_003():
    """Document 003, "Causal self-attention": the catalog's MASKED_SOFTMAXED_WEIGHTS, recomputed exactly.

    The page masks V2's already-softmaxed weights with -inf and softmaxes again with 1/sqrt(2).
    """
    weights = seed123_v2_weights()
    return torch.softmax(weights.masked_fill(ABOVE_DIAGONAL, -torch.inf) / math.sqrt(2), dim=-1)


def random_mask(seed: int, *shape: int, keep: float = 0.5) -> torch.Tensor:
    """A bool keep-mask drawn by the judge from a private generator."""
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) < keep


def expect_inverted_dropout(out, x, p, what: str) -> torch.Tensor:
    """Every entry of ``out`` is 0 (dropped) or x / (1 - p) (kept); returns the kept positions."""
    out = expect_tensor(out, what, shape=x.shape, dtype=x.dtype)
    if bool(torch.isnan(out).any()):
        fail(f"{what}: expected no NaN, got {int(torch.isnan(out).sum())} NaN entries")
    scaled = x / (1 - p)
    kept = out != 0
    wrong = kept & ~torch.isclose(out, scaled, rtol=1e-5, atol=1e-6)
    if bool(wrong.any()):
        first = tuple(int(i) for i in wrong.nonzero()[0])
        fail(f"{what}: every entry must be 0 (dropped) or x / (1 - p) = x * {1 / (1 - p):.4f} (kept); "
             f"{int(wrong.sum())} of {out.numel()} entries are neither; first at {list(first)}: x is "
             f"{x[first].item():.4f}, expected 0 or {scaled[first].item():.4f}, got {out[first].item():.4f}")
    return kept


def expect_kept_fraction(kept: torch.Tensor, p: float, what: str, sds: float) -> None:
    """About 1 - p of the entries survive: within ``sds`` standard deviations of a binomial."""
    n = kept.numel()
    fraction = kept.float().mean().item()
    spread = sds * math.sqrt(p * (1 - p) / n)
    if abs(fraction - (1 - p)) > spread:
        fail(f"{what}: p = {p} is the probability of DROPPING an entry, so about {1 - p:.3f} of the {n} entries "
             f"should be kept (within +-{spread:.4f}); got {fraction:.4f} kept")


# -- the documents' tensors, with each document's keep-pattern injected -----------------------------

# A wrong answer off by one of these factors is told so by name (p = 0.5: 1 - p and 1/(1 - p) are 0.5 and 2).
SCALES_AT_HALF = {"1 - p": 0.5}


def test_dropout_causal_weights_match_document(student):
    """Document 000, In [16]: dropout(p=0.5) of In [15]'s causal weights, kept where the printed tensor is non-zero."""
    keep = DROPOUT_CAUSAL_WEIGHTS.tensor != 0
    out = student.dropout.dropout(causal_weights_000(), 0.5, keep_mask=keep)
    what = "dropout(causal weights of document 000, In [15], 0.5, keep_mask=printed != 0)"
    expect_tensor(out, what, shape=(6, 6), dtype=torch.float32)
    expect_document(out, DROPOUT_CAUSAL_WEIGHTS, what, constants=SCALES_AT_HALF)


def test_dropout_ones_match_document(student):
    """Document 003, "Dropout: Masking additional attention weights", first Dropout: a 6x6 matrix of ones, p=0.5."""
    keep = DROPOUT_ONES.tensor != 0
    out = student.dropout.dropout(torch.ones(6, 6), 0.5, keep_mask=keep)
    expect_document(out, DROPOUT_ONES, "dropout(torch.ones(6, 6), 0.5, keep_mask=printed != 0)", constants=SCALES_AT_HALF)


def test_dropout_masked_weights_match_document(student):
    """Document 003, "Dropout: Masking additional attention weights", second Dropout: the masked-and-normalized
    weights of "Causal self-attention" (recomputed by the judge), p=0.5."""
    keep = DROPOUT_MASKED_WEIGHTS.tensor != 0
    out = student.dropout.dropout(masked_weights_003(), 0.5, keep_mask=keep)
    expect_document(out, DROPOUT_MASKED_WEIGHTS, "dropout(masked and normalized weights of 003, 0.5, "
                                                 "keep_mask=printed != 0)", constants=SCALES_AT_HALF)


# -- the contract of the docstring -------------------------------------------------------------------

def test_dropout_p_one_gives_zeros(student):
    """Docstring: p == 1 drops everything, all zeros, no division by zero and no NaN."""
    x = random_tensor(11, 5, 7)
    expect_close(student.dropout.dropout(x, 1.0), torch.zeros(5, 7), "dropout(x, 1.0)", atol=0.0)
    expect_close(student.dropout.dropout(x, 1.0, keep_mask=random_mask(12, 5, 7)), torch.zeros(5, 7),
                 "dropout(x, 1.0, keep_mask=...) (p == 1 gives zeros even with a keep_mask)", atol=0.0)


def test_dropout_eval_mode_is_identity(student):
    """Docstring: with training=False dropout returns x unchanged (no dropping, no scaling), for any shape."""
    for shape in ((3, 4, 5), (2, 1, 4, 5), (1, 3, 2, 5)):
        x = random_tensor(21, *shape)
        expect_close(student.dropout.dropout(x, 0.5, training=False), x,
                     f"dropout(x, 0.5, training=False) on shape {shape}", atol=0.0)
        expect_close(student.dropout.dropout(x, 0.5, keep_mask=random_mask(22, *shape), training=False), x,
                     f"dropout(x, 0.5, keep_mask=..., training=False) on shape {shape}", atol=0.0)


def test_dropout_p_zero_is_identity(student):
    """Docstring: with p == 0 nothing is dropped and nothing is scaled."""
    x = random_tensor(31, 4, 6)
    expect_close(student.dropout.dropout(x, 0.0), x, "dropout(x, 0.0)", atol=0.0)


def test_dropout_rejects_p_outside_unit_interval(student):
    """Docstring: ValueError if p is not within [0, 1]."""
    x = torch.ones(3, 3)
    expect_student_error(lambda: student.dropout.dropout(x, -0.1), "ValueError", "dropout(x, -0.1)")
    expect_student_error(lambda: student.dropout.dropout(x, 1.5), "ValueError", "dropout(x, 1.5)")


def test_dropout_statistics(student):
    """Docstring: each entry kept with probability 1 - p and scaled by 1/(1 - p), so the mean is unchanged.

    x = ones(400, 500), p = 0.3, the student's own random mask (200,000 draws: 5 standard
    deviations is +-0.005 on the kept fraction).
    """
    x = torch.ones(400, 500)
    p = 0.3
    what = "dropout(torch.ones(400, 500), 0.3, generator=Generator().manual_seed(2024))"
    out = student.dropout.dropout(x, p, generator=GeneratorSpec(2024))
    kept = expect_inverted_dropout(out, x, p, what)
    expect_kept_fraction(kept, p, what, sds=5)
    mean = out.double().mean().item()
    if abs(mean - 1.0) > 0.01:
        fail(f"{what}: inverted dropout keeps the mean of x, expected about 1.0 (+-0.01), got {mean:.4f}")


def test_dropout_generator_reproducible(student):
    """Docstring: the random mask is drawn from ``generator``: the same seed gives the same output (whatever
    the global seed), and different seeds give different masks."""
    x = torch.ones(40, 50)
    first = student.seeded(1).dropout.dropout(x, 0.5, generator=GeneratorSpec(7))
    again = student.seeded(2).dropout.dropout(x, 0.5, generator=GeneratorSpec(7))
    expect_tensor(first, "dropout(x, 0.5, generator=Generator().manual_seed(7))", shape=(40, 50))
    expect_equal(again, first, "dropout(x, 0.5, generator=Generator().manual_seed(7)) a second time, under "
                               "another global seed (the mask must come from the generator)")
    other = student.dropout.dropout(x, 0.5, generator=GeneratorSpec(8))
    expect_tensor(other, "dropout(x, 0.5, generator=Generator().manual_seed(8))", shape=(40, 50))
    if torch.equal(other != 0, first != 0):
        fail("dropout(x, 0.5, generator=...): expected different keep-patterns for generators seeded 7 and 8, "
             "got the same pattern (is the generator passed to the random draw?)")


def test_dropout_gradients_flow(student):
    """Contract: gradients flow back to the input through the kept entries."""
    x = random_tensor(41, 5, 6, dtype=torch.float64)
    mask = random_mask(42, 5, 6)
    upstream = random_tensor(43, 5, 6, dtype=torch.float64)
    grad = student.dropout.dropout.grad(x, 0.25, keep_mask=mask, upstream=upstream)["inputs"][0]
    expect_gradient(grad, upstream * mask / 0.75, "gradient of dropout(x, 0.25, keep_mask=...) with respect to x "
                    "(expected upstream * keep_mask / (1 - p))", atol=1e-12, rtol=1e-9, constants={"1 - p": 0.75})
    grad = student.dropout.dropout.grad(x, 0.25, training=False, upstream=upstream)["inputs"][0]
    expect_gradient(grad, upstream, "gradient of dropout(x, 0.25, training=False) with respect to x", atol=1e-12)


def test_dropout_keeps_float64(student):
    """Contract: the output keeps the input's dtype (float64 in, float64 out)."""
    x = random_tensor(51, 4, 5, dtype=torch.float64)
    mask = random_mask(52, 4, 5)
    calls = {
        "dropout(x, 0.4, keep_mask=...)": lambda: student.dropout.dropout(x, 0.4, keep_mask=mask),
        "dropout(x, 0.4, generator=...)": lambda: student.dropout.dropout(x, 0.4, generator=GeneratorSpec(53)),
        "dropout(x, 1.0)": lambda: student.dropout.dropout(x, 1.0),
        "dropout(x, 0.0)": lambda: student.dropout.dropout(x, 0.0),
        "dropout(x, 0.4, training=False)": lambda: student.dropout.dropout(x, 0.4, training=False),
    }
    for what, call in calls.items():
        expect_tensor(call(), f"{what} on float64 input", shape=(4, 5), dtype=torch.float64)
    expect_close(student.dropout.dropout(x, 0.4, keep_mask=mask), torch.where(mask, x / 0.6, 0.0),
                 "dropout(x, 0.4, keep_mask=...) on float64 input", atol=1e-12, rtol=1e-12)


def test_dropout_leaves_inputs_untouched(student):
    """Contract: the input tensor is not modified in place."""
    x = random_tensor(61, 2, 6, 7)
    mask = random_mask(62, 2, 6, 7)
    _, after = student.dropout.dropout.with_args(x.clone(), 0.5, mask.clone())
    expect_unmodified(x, after[0], "dropout(x, 0.5, keep_mask)")
    expect_unmodified(mask, after[2], "dropout(x, 0.5, keep_mask) (on keep_mask)")
    _, after = student.dropout.dropout.with_args(x.clone(), 0.5)  # a random mask (a generator cannot be echoed back)
    expect_unmodified(x, after[0], "dropout(x, 0.5)")
    _, after = student.dropout.dropout.with_args(x.clone(), 1.0)
    expect_unmodified(x, after[0], "dropout(x, 1.0)")


def test_dropout_statistics_several_p(student):
    """Contract: without a mask, about a fraction p of entries is dropped and the mean is kept, for several p."""
    # 200,000 entries: 6 standard deviations is at most +-0.0068 on the kept fraction.
    for p, generator in ((0.1, GeneratorSpec(71)), (0.5, None), (0.9, GeneratorSpec(73))):
        x = random_tensor(70, 400, 500)
        shown = "None" if generator is None else f"Generator().manual_seed({generator.seed})"
        what = f"dropout(x of shape (400, 500), {p}, generator={shown})"
        kept = expect_inverted_dropout(student.dropout.dropout(x, p, generator=generator), x, p, what)
        expect_kept_fraction(kept, p, what, sds=6)


### BEGIN HIDDEN TESTS
from hypothesis import given, strategies as st


@given(seed=st.integers(0, 2**20), shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
       p=st.floats(0.05, 0.95), keep=st.floats(0.1, 0.9))
def test_dropout_random_shapes_with_mask(student, reference, seed, shape, p, keep):
    """Contract: with a keep_mask, kept entries are scaled by 1/(1-p) and dropped ones are 0, for any shape."""
    x = random_tensor(seed, *shape, scale=2.0)
    mask = random_mask(seed + 1, *shape, keep=keep)
    what = f"dropout(x, {p:.3f}, keep_mask=...) on shape {tuple(shape)}"
    expected = reference.dropout.dropout(x, p, keep_mask=mask)
    expect_close(student.dropout.dropout(x, p, keep_mask=mask), expected, what, atol=1e-6, rtol=1e-5)


def test_dropout_keeps_with_probability_one_minus_p(student):
    """Contract: each entry is kept with probability 1 - p (p is the drop probability)."""
    x = torch.ones(200, 250)
    what = "dropout(torch.ones(200, 250), 0.2, generator=Generator().manual_seed(81))"
    out = expect_tensor(student.dropout.dropout(x, 0.2, generator=GeneratorSpec(81)), what, shape=(200, 250))
    expect_kept_fraction(out != 0, 0.2, what, sds=6)
### END HIDDEN TESTS
