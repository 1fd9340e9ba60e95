"""Checks for part ``softmax``: sum-normalisation, a hand-written stable softmax, and context vectors."""

import math

import pytest
import torch
from hypothesis import given, strategies as st

from autograder.judge.checks import (backpropagate, expect_calls, expect_close, expect_document, expect_tensor, expect_zero_at, fail,
                               expect_unmodified, random_tensor)
from document_tensors import (D001, ALL_CONTEXTS, ALL_WEIGHTS, HELLO_SHINY_SUN, MINUS_1E10_MASKED, QUERY2_CONTEXT,
                              QUERY2_NAIVE_WEIGHTS, QUERY2_WEIGHTS, SHINY_CONTEXT, UNIFORM_CAUSAL_WEIGHTS8,
                              YOUR_JOURNEY)

INPUTS = torch.tensor(YOUR_JOURNEY)
QUERY2_EXACT_SCORES = INPUTS @ INPUTS[1]  # the judge's own scores, not the rounded printed ones
ALL_EXACT_SCORES = INPUTS @ INPUTS.T
# Students write softmax from exp and sum: while this part's calls run, PyTorch's softmaxes raise,
# by the names students call (getattr(torch, "soft" + "max") included; the message names them) and
# as operators (whatever reaches them: torch.ops.aten, a wrapper's __wrapped__, nn.Softmax, and the
# attention kernels that compute a softmax inside: F.scaled_dot_product_attention, nn.MultiheadAttention's
# fast path).
LIBRARY_SOFTMAX = ("torch.softmax", "torch.log_softmax", "torch._softmax", "torch.Tensor.softmax",
                   "torch.Tensor.log_softmax", "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
                   "torch.nn.functional.softmin", "torch.special.softmax", "torch.special.log_softmax",
                   "aten._softmax", "aten._log_softmax", "aten._safe_softmax", "aten._masked_softmax",
                   "aten._scaled_dot_product_flash_attention_for_cpu", "aten._scaled_dot_product_flash_attention",
                   "aten._scaled_dot_product_efficient_attention", "aten._scaled_dot_product_cudnn_attention",
                   "aten._scaled_dot_product_fused_attention_overrideable", "aten._native_multi_head_attention",
                   "aten._transformer_encoder_layer_fwd")
MULTIPLY = ("torch.Tensor.__mul__", "torch.Tensor.__rmul__", "torch.mul")


@pytest.fixture(autouse=True)
def no_library_softmax(student):
    with student.forbidding(*LIBRARY_SOFTMAX):
        yield


def test_query_weights_match_document(student):
    """Document 000, In [3] (document 003 prints it again): the softmax of query x(2)'s scores, over dim 0."""
    weights = student.softmax.softmax(QUERY2_EXACT_SCORES, dim=0)
    expect_document(weights, QUERY2_WEIGHTS, "softmax(inputs @ inputs[1], dim=0)")


def test_naive_weights_match_document(student):
    """Document 003, "A simple example (single query vector)": the same scores divided by their sum."""
    weights = student.softmax.normalize_sum(QUERY2_EXACT_SCORES, dim=0)
    expect_document(weights, QUERY2_NAIVE_WEIGHTS, "normalize_sum(inputs @ inputs[1], dim=0)")


def test_query_context_matches_document(student):
    """Document 000, In [4] (document 003 prints it again): context vector z(2), from the judge's torch.softmax weights."""
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
    """Document 000, In [5] (document 003 "Normalized attention scores"): row-wise softmax of the 6x6 score matrix."""
    weights = student.softmax.softmax(ALL_EXACT_SCORES, dim=-1)
    expect_document(weights, ALL_WEIGHTS, "softmax(inputs @ inputs.T, dim=-1)")


def test_all_contexts_match_document(student):
    """Document 000, In [6] (document 003 "Context vectors"): all context vectors as weights @ inputs."""
    weights = torch.softmax(ALL_EXACT_SCORES, dim=-1)
    expect_document(student.softmax.context_vectors(INPUTS, weights), ALL_CONTEXTS,
                    "context_vectors(inputs, softmax(inputs @ inputs.T))")


def test_shiny_context_matches_document(student):
    """Document 004, "Step 3: Compute the Context Vector": the context vector of "shiny" in "Hello shiny sun!"."""
    # The page summed weighted embeddings it had rounded to 4 decimals by hand, so its result
    # differs from the exact [0.3990, 0.3854, 0.8610]; the catalog's atol of 5e-4 accepts both.
    tokens = torch.tensor(HELLO_SHINY_SUN)
    weights = torch.softmax(tokens @ tokens[1], dim=0)
    expect_document(student.softmax.context_vector(tokens, weights), SHINY_CONTEXT,
                    "context_vector(hello_shiny_sun, softmax of the scores of \"shiny\")")


def test_minus_1e10_masked_weights(student):
    """Document 001, In [230]-[232]: softmax(M / sqrt(32), dim=1) of the 7x7 scores masked with -1e10 (rows sum to 1)."""
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
    """Document 002, In [20]: softmax of zeros with -inf above the diagonal, dim=-1: uniform causal weights, exact zeros."""
    future = torch.ones(8, 8).tril() == 0
    scores = torch.zeros(8, 8).masked_fill(future, float("-inf"))
    what = "softmax(zeros masked with -inf above the diagonal, dim=-1)"
    weights = student.softmax.softmax(scores, dim=-1)
    expect_document(weights, UNIFORM_CAUSAL_WEIGHTS8, what)
    expect_zero_at(weights, future, f"-inf entries of {what}")


def test_softmax_and_normalize_sum_honour_dim(student):
    """Both normalisations work along the requested dim: dim=0 (columns) of a 4x6 matrix, dim=1 of
    (5, 3, 4) and (2, 3, 4) tensors."""
    scores = random_tensor(11, 4, 6)
    expect_close(student.softmax.softmax(scores, dim=0), torch.softmax(scores, dim=0),
                 "softmax(scores, dim=0) on a (4, 6) tensor", atol=1e-6, source="torch.softmax(scores, dim=0)")
    positive = scores.abs() + 0.5
    expect_close(student.softmax.normalize_sum(positive, dim=0), positive / positive.sum(dim=0, keepdim=True),
                 "normalize_sum(scores, dim=0) on a (4, 6) tensor", atol=1e-6,
                 source="scores / scores.sum(dim=0, keepdim=True)")
    for seed, shape in ((12, (5, 3, 4)), (13, (2, 3, 4))):
        scores = random_tensor(seed, *shape)
        expect_close(student.softmax.softmax(scores, dim=1), torch.softmax(scores, dim=1),
                     f"softmax(scores, dim=1) on a {shape} tensor", atol=1e-6, source="torch.softmax(scores, dim=1)")
        positive = scores.abs() + 0.5
        expect_close(student.softmax.normalize_sum(positive, dim=1), positive / positive.sum(dim=1, keepdim=True),
                     f"normalize_sum(scores, dim=1) on a {shape} tensor", atol=1e-6,
                     source="scores / scores.sum(dim=1, keepdim=True)")


def test_softmax_uses_no_library_softmax(student):
    """Contract: softmax is built from exp and sum; PyTorch's softmaxes raise while this part runs."""
    expect_close(student.softmax.softmax(ALL_EXACT_SCORES, dim=-1), torch.softmax(ALL_EXACT_SCORES, dim=-1),
                 "softmax(inputs @ inputs.T, dim=-1) with PyTorch's softmax unavailable")


def test_softmax_keeps_float64(student):
    """Contract: softmax keeps the input's dtype (float64 in, float64 out)."""
    scores = random_tensor(21, 3, 5, dtype=torch.float64, scale=4.0)
    for name in ("softmax", "normalize_sum"):
        result = getattr(student.softmax, name)(scores.abs() + 0.5, dim=-1)
        expect_tensor(result, f"{name} on float64 input", dtype=torch.float64)
    expect_close(student.softmax.softmax(scores, dim=0), torch.softmax(scores, dim=0),
                 "softmax(float64 scores, dim=0)", atol=1e-12, source="torch.softmax in float64")
    inputs = random_tensor(22, 5, 3, dtype=torch.float64)
    weights = torch.softmax(scores, dim=-1)
    context = expect_tensor(student.softmax.context_vector(inputs, weights[0]), "context_vector on float64 input",
                            dtype=torch.float64)
    expect_close(context, weights[0] @ inputs, "context_vector on float64 input", atol=1e-12)
    contexts = expect_tensor(student.softmax.context_vectors(inputs[:3], weights[:, :3]),
                             "context_vectors on float64 input", dtype=torch.float64)
    expect_close(contexts, weights[:, :3] @ inputs[:3], "context_vectors on float64 input", atol=1e-12)


def test_softmax_gradients_match_torch(student):
    """Contract: gradients through softmax equal those through PyTorch's softmax."""
    scores = random_tensor(31, 4, 5, dtype=torch.float64, scale=2.0)
    upstream = random_tensor(32, 4, 5, dtype=torch.float64)
    for dim in (0, -1):
        leaf = scores.clone().requires_grad_(True)
        backpropagate(torch.softmax(leaf, dim=dim), upstream)
        grad = student.softmax.softmax.grad(scores, upstream=upstream, dim=dim)["inputs"][0]
        if grad is None:
            fail(f"gradient of softmax(scores, dim={dim}): expected a tensor, got None (is the graph cut?)")
        expect_close(grad, leaf.grad, f"gradient of softmax(scores, dim={dim}) with respect to scores",
                     atol=1e-10, rtol=1e-8, source="autograd of torch.softmax")


def test_context_gradients_flow(student):
    """Contract: gradients flow back to both inputs and weights of the context functions."""
    inputs = random_tensor(41, 5, 3, dtype=torch.float64)
    weights = torch.softmax(random_tensor(42, 5, dtype=torch.float64), dim=0)
    upstream = random_tensor(43, 3, dtype=torch.float64)
    grads = student.softmax.context_vector.grad(inputs, weights, upstream=upstream)["inputs"]
    expected = (torch.outer(weights, upstream), inputs @ upstream)  # d/d inputs, d/d weights of sum(u * w @ x)
    for name, grad, want in zip(("inputs", "weights"), grads, expected):
        if grad is None:
            fail(f"gradient of context_vector with respect to {name}: expected a tensor, got None "
                 "(accumulate out of place: acc = acc + ...)")
        expect_close(grad, want, f"gradient of context_vector with respect to {name}", atol=1e-10, rtol=1e-8)
    all_weights = torch.softmax(random_tensor(44, 5, 5, dtype=torch.float64), dim=-1)
    all_upstream = random_tensor(45, 5, 3, dtype=torch.float64)
    grads = student.softmax.context_vectors.grad(inputs, all_weights, upstream=all_upstream)["inputs"]
    expected = (all_weights.T @ all_upstream, all_upstream @ inputs.T)
    for name, grad, want in zip(("inputs", "weights"), grads, expected):
        if grad is None:
            fail(f"gradient of context_vectors with respect to {name}: expected a tensor, got None")
        expect_close(grad, want, f"gradient of context_vectors with respect to {name}", atol=1e-10, rtol=1e-8)


def test_softmax_leaves_inputs_untouched(student):
    """Contract: no input tensor is modified in place."""
    scores = random_tensor(51, 4, 6)
    for name in ("softmax", "normalize_sum"):
        _, (after,) = getattr(student.softmax, name).with_args(scores.clone())
        expect_unmodified(scores, after, name)
    inputs = random_tensor(52, 6, 3)
    weights = torch.softmax(scores, dim=-1)
    _, (after_x, after_w) = student.softmax.context_vector.with_args(inputs.clone(), weights[0].clone())
    expect_unmodified(inputs, after_x, "context_vector")
    expect_unmodified(weights[0], after_w, "context_vector")
    square = torch.softmax(random_tensor(53, 6, 6), dim=-1)
    _, (after_x, after_w) = student.softmax.context_vectors.with_args(inputs.clone(), square.clone())
    expect_unmodified(inputs, after_x, "context_vectors")
    expect_unmodified(square, after_w, "context_vectors")


@given(seed=st.integers(0, 2**20), tokens=st.integers(1, 7), dim=st.integers(1, 5),
       batch=st.lists(st.integers(1, 3), max_size=2))
def test_context_vectors_batched(student, seed, tokens, dim, batch):
    """Contract: context_vectors works on batched weights and inputs."""
    inputs = random_tensor(seed, *batch, tokens, dim)
    weights = torch.softmax(random_tensor(seed + 1, *batch, tokens, tokens, scale=2.0), dim=-1)
    expect_close(student.softmax.context_vectors(inputs, weights), weights @ inputs,
                 f"context_vectors on inputs {tuple(inputs.shape)} and weights {tuple(weights.shape)}",
                 atol=1e-5, rtol=1e-5, source="weights @ inputs")
    single_x, single_w = inputs.reshape(-1, tokens, dim)[0], weights.reshape(-1, tokens, tokens)[0, 0]
    expect_close(student.softmax.context_vector(single_x, single_w), single_w @ single_x,
                 f"context_vector on inputs {tuple(single_x.shape)}", atol=1e-5, rtol=1e-5,
                 source="weights @ inputs")


### BEGIN HIDDEN TESTS


def _pick_dim(ndim, choice, negative):
    return choice % ndim - (ndim if negative else 0)


@given(seed=st.integers(0, 2**20), shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
       choice=st.integers(0, 2), negative=st.booleans())
def test_softmax_random_shapes_any_dim(student, reference, seed, shape, choice, negative):
    """Contract: softmax is right for other shapes, along any dim (negative ones too)."""
    dim = _pick_dim(len(shape), choice, negative)
    scores = random_tensor(seed, *shape, scale=3.0)
    what = f"softmax on shape {tuple(shape)} with dim={dim}"
    expect_close(student.softmax.softmax(scores, dim=dim), reference.softmax.softmax(scores, dim=dim), what,
                 atol=1e-6, rtol=1e-5)


@given(seed=st.integers(0, 2**20), shape=st.lists(st.integers(2, 6), min_size=1, max_size=3),
       choice=st.integers(0, 2), negative=st.booleans())
def test_softmax_large_scores(student, reference, seed, shape, choice, negative):
    """Contract: softmax stays finite and right for large scores."""
    dim = _pick_dim(len(shape), choice, negative)
    scores = random_tensor(seed, *shape, scale=50.0)
    what = f"softmax of large scores (std 50) on shape {tuple(shape)} with dim={dim}"
    weights = expect_tensor(student.softmax.softmax(scores, dim=dim), what, shape=tuple(shape))
    if not bool(torch.isfinite(weights).all()):
        fail(f"{what}: expected finite weights, got NaN or inf (subtract the maximum along dim before exp)")
    expect_close(weights, reference.softmax.softmax(scores, dim=dim), what, atol=1e-5, rtol=1e-4)


@given(seed=st.integers(0, 2**20), shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
       choice=st.integers(0, 2), negative=st.booleans())
def test_normalize_sum_random_shapes(student, reference, seed, shape, choice, negative):
    """Contract: normalize_sum is right for other shapes and dims."""
    dim = _pick_dim(len(shape), choice, negative)
    scores = random_tensor(seed, *shape).abs() + 0.5  # sums far from 0
    expect_close(student.softmax.normalize_sum(scores, dim=dim), reference.softmax.normalize_sum(scores, dim=dim),
                 f"normalize_sum on shape {tuple(shape)} with dim={dim}", atol=1e-6, rtol=1e-5)


### END HIDDEN TESTS
