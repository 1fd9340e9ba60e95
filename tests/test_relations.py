"""Diagnoses beyond the catalogue: a wrong answer that is the expected one under a simple relation."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from autograder.judge.checks import CheckFailure, expect_close, expect_mask
from autograder.judge.relations import relation
from conftest import grade, submission_with

X = torch.randn(4, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
CAUSAL = torch.ones(6, 6, dtype=torch.bool).triu(1)


@pytest.mark.parametrize("actual, expected, said", [
    (X.T, X, "transposed"),
    (X * 2 ** 0.5, X, "multiplied by 1.414 = sqrt(2)"),
    (X / 8 ** 0.5, X, "multiplied by 0.3536 = 1/sqrt(8)"),
    (X * 2, X, "multiplied by 2"),
    (X.softmax(0), X.softmax(1), "sum to 1 along dim 0 (= -2); the expected ones along dim 1 (= -1)"),
    (~CAUSAL, CAUSAL, "complement"),
    (torch.ones(6, 6, dtype=torch.bool).triu(0), CAUSAL, "triu(..., diagonal=0) where triu(..., diagonal=1)"),
    (X.view(2, 2, 5).permute(1, 2, 0), X.view(2, 2, 5), "expected.permute(1, 2, 0)"),
    (X.float(), X, "dtype is torch.float32, not torch.float64"),
    (X.reshape(5, 4), X, "in their order but in shape (5, 4): reshaped (or viewed), not transposed"),
])
def test_a_simple_relation_is_named(actual, expected, said):
    assert said in relation(actual, expected)


def test_no_relation_is_claimed_that_the_expected_answer_has_itself():
    symmetric = X @ X.T
    assert relation(symmetric.T, symmetric) is None  # a symmetric matrix is its own transpose
    assert relation(X + 1, X) is None and relation(torch.zeros(4, 5), X) is None
    assert relation(torch.zeros(5, 4), torch.zeros(4, 5)) is None  # a constant tensor, rearranged, tells nothing


def test_a_factor_the_check_names_is_said_by_its_name():
    assert "multiplied by 2 = sqrt(d_k)" in relation(X * 2, X, {"sqrt(d_k)": 2.0})
    assert "multiplied by 0.5 = 1/sqrt(d_k)" in relation(X / 2, X, {"sqrt(d_k)": 2.0})
    assert "= 1/(1 - p)" in relation(X * 1.25, X, {"1/(1 - p)": 1.25})


def test_a_failed_comparison_carries_its_relation_and_the_differing_matrix():
    expected = torch.arange(12.0).reshape(1, 3, 4)
    with pytest.raises(CheckFailure) as caught:
        expect_close(expected * 2, expected, "out", constants={"the number of heads": 2})
    failure = caught.value
    assert str(failure).endswith("Seen from the values: your answer is the expected one multiplied by 2 = "
                                 "the number of heads.")
    assert failure.relation.startswith("your answer is") and failure.picture["slice"] == [0]
    assert failure.picture["expected"][2] == [8.0, 9.0, 10.0, 11.0] and failure.picture["actual"][2][0] == 16.0
    assert failure.picture["differ"][0] == [0, 1, 1, 1]  # 0 * 2 == 0: the one entry that agrees
    with pytest.raises(CheckFailure) as caught:
        expect_mask(torch.ones(3, 3, dtype=torch.bool).tril(), CAUSAL[:3, :3], "mask")
    assert caught.value.picture["mask"] and caught.value.picture["actual"][0] == [1, 0, 0]


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2 ** 16), st.floats(-3, 3).filter(lambda f: abs(f - 1) > 0.01 and abs(f) > 0.01))
def test_any_scaling_is_found_and_named_by_its_value(seed, factor):
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    said = relation(x * factor, x)
    assert said and "multiplied by" in said


@pytest.mark.slow
def test_a_softmax_over_dim_0_is_diagnosed_in_the_feedback(tmp_path):
    """The issue's case: its only message was "expected 0.0900, got 1.0000" in the stability check."""
    reference = (submission_with(tmp_path / "ref", {}) / "softmax.py").read_text()
    wrong = reference.replace("def softmax(scores, dim=-1):", "def softmax(scores, dim=-1):\n    dim = 0", 1)
    assert wrong != reference
    results = grade(submission_with(tmp_path, {"softmax": wrong}), tmp_path / "results.json", part="softmax")
    stability = next(c for c in results["checks"] if c["name"] == "test_softmax_is_numerically_stable")
    assert not stability["passed"] and "normalised along another dim" in stability["message"]
    assert "normalised along another dim" in stability["failure"]["relation"]
    pictured = [c for c in results["checks"] if (c.get("failure") or {}).get("picture")]
    assert pictured and not any(c["hidden"] for c in pictured)  # a hidden check's values stay in the judge
    assert any(c["hidden"] and c["failure"].get("relation") for c in results["checks"] if not c["passed"])
