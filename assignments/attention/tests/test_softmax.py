"""Checks for part ``softmax``: sum-normalisation, a hand-written stable softmax, and context vectors."""

import math

import pytest
import torch

from autograder.checks import (expect_calls, expect_close, expect_document, expect_tensor, expect_zero_at, fail,
                               random_tensor)
from document_tensors import (D001, ALL_CONTEXTS, ALL_WEIGHTS, HELLO_SHINY_SUN, MINUS_1E10_MASKED, QUERY2_CONTEXT,
                              QUERY2_NAIVE_WEIGHTS, QUERY2_WEIGHTS, SHINY_CONTEXT, UNIFORM_CAUSAL_WEIGHTS8,
                              YOUR_JOURNEY)

INPUTS = torch.tensor(YOUR_JOURNEY)
QUERY2_EXACT_SCORES = INPUTS @ INPUTS[1]  # the judge's own scores, not the rounded printed ones
ALL_EXACT_SCORES = INPUTS @ INPUTS.T
# Students write softmax from exp and sum: while this part's calls run, PyTorch's softmaxes raise
# (by whatever name the code reaches them: getattr(torch, "soft" + "max") included).
LIBRARY_SOFTMAX = ("torch.softmax", "torch.log_softmax", "torch._softmax", "torch.Tensor.softmax",
                   "torch.Tensor.log_softmax", "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
                   "torch.nn.functional.softmin", "torch.special.softmax", "torch.special.log_softmax")
MULTIPLY = ("torch.Tensor.__mul__", "torch.Tensor.__rmul__", "torch.mul")


@pytest.fixture(autouse=True)
def no_library_softmax(student):
    with student.forbidding(*LIBRARY_SOFTMAX):
        yield


def test_query_weights_match_document(student):
    """000 In [3] (003 prints it again): the softmax of query x(2)'s scores, over dim 0."""
    weights = student.softmax.softmax(QUERY2_EXACT_SCORES, dim=0)
    expect_document(weights, QUERY2_WEIGHTS, "softmax(inputs @ inputs[1], dim=0)")


def test_naive_weights_match_document(student):
    """003 "A simple example (single query vector)": the same scores divided by their sum."""
    weights = student.softmax.normalize_sum(QUERY2_EXACT_SCORES, dim=0)
    expect_document(weights, QUERY2_NAIVE_WEIGHTS, "normalize_sum(inputs @ inputs[1], dim=0)")


def test_query_context_matches_document(student):
    """000 In [4] (003 prints it again): context vector z(2), from the judge's torch.softmax weights."""
    weights = torch.softmax(QUERY2_EXACT_SCORES, dim=0)
    expect_document(student.softmax.context_vector(INPUTS, weights), QUERY2_CONTEXT,
                    "context_vector(inputs, softmax(inputs @ inputs[1]))")


def test_context_vector_uses_a_loop(student):
    """Form: one weights[j] * inputs[j] per token, accumulated in a Python loop."""
    weights = torch.softmax(QUERY2_EXACT_SCORES, dim=0)
    _, counts = student.softmax.context_vector.counting(MULTIPLY, INPUTS, weights)
    expect_calls(counts, 6, "context_vector(inputs, weights)", "multiply each token's weight and embedding "
                 "(weights[j] * inputs[j]) in a Python loop over the 6 tokens")


def test_all_weights_match_document(student):
    """000 In [5] (003 "Normalized attention scores"): row-wise softmax of the 6x6 score matrix."""
    weights = student.softmax.softmax(ALL_EXACT_SCORES, dim=-1)
    expect_document(weights, ALL_WEIGHTS, "softmax(inputs @ inputs.T, dim=-1)")


def test_all_contexts_match_document(student):
    """000 In [6] (003 "Context vectors"): all context vectors as weights @ inputs."""
    weights = torch.softmax(ALL_EXACT_SCORES, dim=-1)
    expect_document(student.softmax.context_vectors(INPUTS, weights), ALL_CONTEXTS,
                    "context_vectors(inputs, softmax(inputs @ inputs.T))")


def test_shiny_context_matches_document(student):
    """004 "Step 3: Compute the Context Vector": the context vector of "shiny" in "Hello shiny sun!"."""
    # The page summed weighted embeddings it had rounded to 4 decimals by hand, so its result
    # differs from the exact [0.3990, 0.3854, 0.8610]; the catalog's atol of 5e-4 accepts both.
    tokens = torch.tensor(HELLO_SHINY_SUN)
    weights = torch.softmax(tokens @ tokens[1], dim=0)
    expect_document(student.softmax.context_vector(tokens, weights), SHINY_CONTEXT,
                    "context_vector(hello_shiny_sun, softmax of the scores of \"shiny\")")


def test_minus_1e10_masked_weights(student):
    """001 In [230]-[232]: softmax(M / sqrt(32), dim=1) of the 7x7 scores masked with -1e10 (rows sum to 1)."""
    scaled = torch.tensor(MINUS_1E10_MASKED) / math.sqrt(32)
    what = "softmax(masked / sqrt(32), dim=1) with -1e10 above the diagonal"
    weights = student.softmax.softmax(scaled, dim=1)
    expect_tensor(weights, what, shape=(7, 7))
    expect_close(weights.sum(dim=1), torch.ones(7), f"row sums of {what}", atol=1e-5,
                 source=f"{D001} In [232]")
    expect_zero_at(weights, torch.ones(7, 7, dtype=torch.bool).triu(1), f"entries above the diagonal of {what}",
                   below=1e-30)
    expect_close(weights[0], torch.eye(7)[0], f"first row of {what} (only one unmasked entry)", atol=1e-6)
    expect_close(weights, torch.softmax(scaled, dim=1), what, atol=1e-6, source="torch.softmax")


def test_softmax_is_numerically_stable(student):
    """softmax([1000., 1001., 1002.]) overflows without the max shift; it must equal softmax([0., 1., 2.])."""
    weights = student.softmax.softmax(torch.tensor([1000.0, 1001.0, 1002.0]), dim=-1)
    expect_tensor(weights, "softmax([1000., 1001., 1002.])", shape=(3,))
    if not bool(torch.isfinite(weights).all()):
        fail(f"softmax([1000., 1001., 1002.]): expected finite weights, got {weights.tolist()} "
             "(exp(1000.) overflows: subtract the maximum along dim before exponentiating)")
    # float32 resolves 1000 to about 6e-5, so an exp(x - logsumexp(x)) softmax is this far off, and correct.
    expect_close(weights, torch.softmax(torch.tensor([0.0, 1.0, 2.0]), dim=-1), "softmax([1000., 1001., 1002.])",
                 atol=1e-4, source="torch.softmax([0., 1., 2.])")
    # Each row needs its own maximum: one shift for the whole tensor underflows the second row.
    rows = torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0]])
    what = "softmax([[1000., 1001., 1002.], [-1000., -1001., -1002.]], dim=-1)"
    expect_close(student.softmax.softmax(rows, dim=-1), torch.softmax(rows, dim=-1), what, atol=1e-4,
                 source="torch.softmax")


def test_softmax_gives_minus_inf_zero_weight(student):
    """002 In [20]: softmax of zeros with -inf above the diagonal, dim=-1: uniform causal weights, exact zeros."""
    future = torch.ones(8, 8).tril() == 0
    scores = torch.zeros(8, 8).masked_fill(future, float("-inf"))
    what = "softmax(zeros masked with -inf above the diagonal, dim=-1)"
    weights = student.softmax.softmax(scores, dim=-1)
    expect_document(weights, UNIFORM_CAUSAL_WEIGHTS8, what)
    expect_zero_at(weights, future, f"-inf entries of {what}")


def test_softmax_and_normalize_sum_honour_dim(student):
    """Both normalisations work along the requested dim: dim=0 (columns) of a 4x6 matrix."""
    scores = random_tensor(11, 4, 6)
    expect_close(student.softmax.softmax(scores, dim=0), torch.softmax(scores, dim=0),
                 "softmax(scores, dim=0) on a (4, 6) tensor", atol=1e-6, source="torch.softmax(scores, dim=0)")
    positive = scores.abs() + 0.5
    expect_close(student.softmax.normalize_sum(positive, dim=0), positive / positive.sum(dim=0, keepdim=True),
                 "normalize_sum(scores, dim=0) on a (4, 6) tensor", atol=1e-6,
                 source="scores / scores.sum(dim=0, keepdim=True)")


def test_softmax_uses_no_library_softmax(student):
    """Contract: softmax is built from exp and sum; PyTorch's softmaxes raise while this part runs."""
    expect_close(student.softmax.softmax(ALL_EXACT_SCORES, dim=-1), torch.softmax(ALL_EXACT_SCORES, dim=-1),
                 "softmax(inputs @ inputs.T, dim=-1) with PyTorch's softmax unavailable")


