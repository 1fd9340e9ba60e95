"""Checks for part ``scores``: attention scores as dot products, by loops and as a matrix product."""

import torch

from autograder.judge.checks import (expect_calls, expect_close, expect_document, expect_gradient, expect_tensor,
                               expect_unmodified, random_tensor)
from document_tensors import ALL_SCORES, BATCHED_A, BATCHED_AAT, QUERY2_SCORES, YOUR_JOURNEY

INPUTS = torch.tensor(YOUR_JOURNEY)
DOT = ("torch.dot", "torch.Tensor.dot")  # x.dot(y) is torch.dot too


def test_query_scores_match_document(student):
    """Document 000, In [2]: the scores of query x(2) against every token."""
    scores = student.scores.attention_scores_for_query(INPUTS, INPUTS[1])
    expect_document(scores, QUERY2_SCORES, "attention_scores_for_query(inputs, inputs[1])")


def test_query_scores_use_a_loop(student):
    """Form: one torch.dot per token, in a Python loop (run on the 6 tokens of 003)."""
    _, counts = student.scores.attention_scores_for_query.counting(DOT, INPUTS, INPUTS[1])
    expect_calls(counts, 6, "attention_scores_for_query(inputs, inputs[1])", "compute each score with torch.dot "
                 "in a Python loop over the tokens")


def test_loop_scores_match_document(student):
    """Document 003, "A simple example (batch query)": the 6x6 score matrix, computed with nested loops."""
    expect_document(student.scores.attention_scores_loop(INPUTS), ALL_SCORES, "attention_scores_loop(inputs)")


def test_loop_scores_use_nested_loops(student):
    """Form: one torch.dot per (query, key) pair, in two nested Python loops."""
    _, counts = student.scores.attention_scores_loop.counting(DOT, INPUTS)
    expect_calls(counts, 36, "attention_scores_loop(inputs)", "compute each of the 6 x 6 entries with torch.dot "
                 "in two nested Python loops")


def test_matrix_scores_match_document(student):
    """Document 003, "A simple example (batch query)": the same 6x6 matrix as one matrix product."""
    expect_document(student.scores.attention_scores(INPUTS), ALL_SCORES, "attention_scores(inputs)")


def test_matrix_scores_batched_match_document(student):
    """Document 003, "A note on batched matrix multiplications": a @ a.transpose(2, 3) for a of shape (1, 2, 3, 4); then
    shapes (3, 3, 4) and (2, 1, 3, 4)."""
    expect_document(student.scores.attention_scores(torch.tensor(BATCHED_A)), BATCHED_AAT,
                    "attention_scores(a) with a of shape (1, 2, 3, 4)")
    for shape in ((3, 3, 4), (2, 1, 3, 4)):
        a = random_tensor(8, *shape)
        expect_close(student.scores.attention_scores(a), a @ a.transpose(-2, -1),
                     f"attention_scores(a) with a of shape {shape}", atol=1e-5, rtol=1e-5)


def test_loop_and_matrix_scores_agree(student):
    """Document 001, In [39]/[40]/[43]: loop scores equal matrix scores (7 tokens, 32-dim embeddings)."""
    embedded = random_tensor(7, 7, 32)
    # Each against the true scores: a wrong one is named, never the other one compared with it.
    for name in ("attention_scores_loop", "attention_scores"):
        expect_close(getattr(student.scores, name)(embedded), embedded @ embedded.T,
                     f"{name}(x) for x of shape (7, 32), whose scores the two functions must agree on",
                     atol=1e-4, rtol=1e-5)


def test_scores_keep_float64(student):
    """Contract: the score functions keep the input's dtype (float64 in, float64 out)."""
    x = random_tensor(1, 5, 4, dtype=torch.float64)
    for name in ("attention_scores_loop", "attention_scores"):
        expect_tensor(getattr(student.scores, name)(x), f"{name} on float64 input", dtype=torch.float64)
    expect_tensor(student.scores.attention_scores_for_query(x, x[0]), "attention_scores_for_query on float64 input",
                  dtype=torch.float64)


def test_scores_gradients_flow(student):
    """Contract: gradients flow back to the inputs through the score functions."""
    x = random_tensor(2, 4, 3, dtype=torch.float64)
    upstream = random_tensor(3, 4, 4, dtype=torch.float64)
    expected = (upstream + upstream.T) @ x  # d/dx of sum(upstream * x x^T)
    for name in ("attention_scores_loop", "attention_scores"):
        grad = getattr(student.scores, name).grad(x, upstream=upstream)["inputs"][0]
        expect_gradient(grad, expected, f"gradient of {name} with respect to its input", atol=1e-9, rtol=1e-9)


def test_scores_leave_inputs_untouched(student):
    """Contract: no input tensor is modified in place."""
    x = random_tensor(4, 5, 3)
    for name in ("attention_scores_loop", "attention_scores"):
        _, (after,) = getattr(student.scores, name).with_args(x.clone())
        expect_unmodified(x, after, name)
    _, (after_x, after_q) = student.scores.attention_scores_for_query.with_args(x.clone(), x[2].clone())
    expect_unmodified(x, after_x, "attention_scores_for_query")
    expect_unmodified(x[2], after_q, "attention_scores_for_query")


### BEGIN HIDDEN TESTS
from hypothesis import given, strategies as st


@given(seed=st.integers(0, 2**20), tokens=st.integers(1, 9), dim=st.integers(1, 12),
       batch=st.lists(st.integers(1, 3), max_size=2))
def test_matrix_scores_random_shapes(student, reference, seed, tokens, dim, batch):
    """Contract: attention_scores is right for other shapes, batched ones included."""
    x = random_tensor(seed, *batch, tokens, dim)
    expect_close(student.scores.attention_scores(x), reference.scores.attention_scores(x),
                 f"attention_scores on shape {tuple(x.shape)}", atol=1e-5, rtol=1e-5)


@given(seed=st.integers(0, 2**20), tokens=st.integers(1, 9), dim=st.integers(1, 12), row=st.integers(0, 8))
def test_loop_scores_random_inputs(student, reference, seed, tokens, dim, row):
    """Contract: attention_scores_loop is right for other inputs."""
    x = random_tensor(seed, tokens, dim, scale=3.0)
    query = x[row % tokens]
    expect_close(student.scores.attention_scores_for_query(x, query), reference.scores.attention_scores_for_query(x, query),
                 f"attention_scores_for_query on shape {tuple(x.shape)}", atol=1e-5, rtol=1e-5)
    expect_close(student.scores.attention_scores_loop(x), reference.scores.attention_scores_loop(x),
                 f"attention_scores_loop on shape {tuple(x.shape)}", atol=1e-5, rtol=1e-5)


### END HIDDEN TESTS
