"""The judge's helpers say what was expected and what came back, and judge form fairly."""

import pytest
import torch

from autograder.checks import CheckFailure, expect_close, expect_loops, expect_no_library_softmax, softmax_calls


def message(call) -> str:
    with pytest.raises(CheckFailure) as caught:
        call()
    return str(caught.value)


def test_expect_close_names_shape_and_first_differing_entry():
    assert message(lambda: expect_close(torch.zeros(2, 3), torch.zeros(3, 2), "out")) == \
        "out: expected shape (3, 2), got (2, 3)"
    got = torch.tensor([[0.1, 0.2], [0.3, 0.9]])
    text = message(lambda: expect_close(got, torch.tensor([[0.1, 0.2], [0.3, 0.4]]), "w", source="000 In [5]"))
    assert "1 of 4 entries differ; first at [1, 1]: expected 0.4000, got 0.9000" in text and "000 In [5]" in text
    assert "expected a tensor, got NoneType" in message(lambda: expect_close(None, torch.zeros(1), "grad"))
    expect_close(torch.tensor([float("-inf"), 1.0]), torch.tensor([float("-inf"), 1.0]), "masked")
    assert "got nan" in message(lambda: expect_close(torch.tensor([float("nan")]), torch.tensor([0.0]), "w"))


def test_the_no_softmax_rule_allows_the_students_own_helpers_only():
    own = "def _softmax(x):\n    return x.exp() / x.exp().sum()\ndef softmax(x, dim=-1):\n    return _softmax(x)\n"
    assert softmax_calls(own) == []
    expect_no_library_softmax(own, "softmax", "softmax")
    for cheat in ("torch.softmax(x, 0)", "x.softmax(0)", "F.softmax(x, 0)", "nn.Softmax(0)(x)", "torch.log_softmax(x, 0)"):
        assert softmax_calls(f"def softmax(x, dim=-1):\n    return {cheat}\n"), cheat
    assert softmax_calls("from torch.nn.functional import softmax as sm\n")


def test_loop_checks_see_comprehensions_and_reject_stubs():
    expect_loops("def f(xs):\n    return [[a * b for b in xs] for a in xs]\n", "scores", "f", depth=2)
    assert "found loops nested 1 deep" in message(
        lambda: expect_loops("def f(xs):\n    return [g(a) for a in xs]\n", "scores", "f", depth=2))
    assert message(lambda: expect_loops("def f(xs):\n    raise NotImplementedError()\n", "scores", "f", 1)) == \
        "not implemented yet: scores.f"
