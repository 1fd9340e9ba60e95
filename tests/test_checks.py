"""The judge's helpers say what was expected and what came back, and judge form fairly."""

import pytest
import torch

from autograder.harness.remote import RemoteCode, RemoteFunction, StudentError
from autograder.judge.checks import CheckFailure, expect_calls, expect_close
from autograder.results import FailureKind


def message(call) -> str:
    with pytest.raises(CheckFailure) as caught:
        call()
    return str(caught.value)


def test_expect_close_names_shape_and_first_differing_entry():
    assert message(lambda: expect_close(torch.zeros(2, 3), torch.zeros(3, 2), "out")) == \
        "out: expected shape (3, 2), got (2, 3)"
    got = torch.tensor([[0.1, 0.2], [0.3, 0.9]])
    text = message(lambda: expect_close(got, torch.tensor([[0.1, 0.2], [0.3, 0.4]]), "w", source="000 In [5]"))
    assert "1 of 4 entries differ; first at [1, 1]: expected 0.4, got 0.9 (off by 0.5); allowed: atol 0.0001" in text
    assert "000 In [5]" in text
    # As many digits as it takes to see the difference (4 digits showed "expected 0.0435, got 0.0435").
    close = message(lambda: expect_close(torch.tensor([0.0435118], dtype=torch.float64),
                                         torch.tensor([0.0435112], dtype=torch.float64), "w", atol=1e-7))
    assert "expected 0.043511, got 0.043512 (off by 6e-07); allowed: atol 1e-07" in close, close
    assert "expected a tensor, got NoneType" in message(lambda: expect_close(None, torch.zeros(1), "grad"))
    expect_close(torch.tensor([float("-inf"), 1.0]), torch.tensor([float("-inf"), 1.0]), "masked")
    assert "expected 0, got NaN (not a number)" in message(lambda: expect_close(torch.tensor([float("nan")]),
                                                                                 torch.tensor([0.0]), "w"))


LIBRARY_SOFTMAX = ("torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax")
SOFTMAXES = """
import torch
import torch.nn.functional as F
from torch import softmax as imported_early

def own(x):
    return x.exp() / x.exp().sum(dim=-1, keepdim=True)

def by_name(x):
    return getattr(torch, "soft" + "max")(x, dim=-1)

def by_method(x):
    return x.softmax(-1)

def by_module(x):
    return torch.nn.Softmax(dim=-1)(x)

def by_alias(x):
    return imported_early(x, dim=-1)

def by_operator(x):
    return torch.ops.aten._softmax(x, -1, False)

def by_unwrapping(x):
    return getattr(torch.softmax, "__wrapped__", torch.softmax)(x, dim=-1)

def dummy_loops(xs):
    for _ in xs:
        pass
    return xs @ xs.T

def nested_loops(xs):
    return torch.stack([torch.stack([torch.dot(a, b) for b in xs]) for a in xs])
"""


@pytest.fixture(scope="module")
def forms(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forms")
    (folder / "forms.py").write_text(SOFTMAXES)
    student = RemoteCode(folder)
    yield student.forms
    student.close()


def test_a_forbidden_library_function_raises_by_whatever_name_it_is_reached(forms):
    student = forms._student
    x = torch.randn(2, 3)
    with student.forbidding(*LIBRARY_SOFTMAX):
        expect_close(forms.own(x), torch.softmax(x, dim=-1), "own")
        for cheat in ("by_name", "by_method", "by_module", "by_alias"):
            with pytest.raises(StudentError) as caught:
                getattr(forms, cheat)(x)
            assert caught.value.kind == "forbidden" and "write it yourself" in str(caught.value), cheat
    expect_close(forms.by_alias(x), torch.softmax(x, dim=-1), "allowed again outside")


def test_a_forbidden_function_raises_through_an_alias_bound_before_the_ban(tmp_path):
    """The module is imported, binding its alias, by a request that forbids nothing (lab 1's heads
    checks imported masking.py before a ban there would apply): the ban reaches the alias."""
    (tmp_path / "forms.py").write_text(SOFTMAXES)
    student = RemoteCode(tmp_path)
    try:
        x = torch.randn(2, 3)
        expect_close(student.forms.by_alias(x), torch.softmax(x, dim=-1), "before any ban")
        with student.forbidding(*LIBRARY_SOFTMAX), pytest.raises(StudentError) as caught:
            student.forms.by_alias(x)
        assert caught.value.kind == "forbidden" and "torch.softmax is not available" in str(caught.value)
    finally:
        student.close()


def test_a_forbidden_operator_raises_below_every_python_name(forms):
    """Names alone miss torch.ops.aten and the original a name guard wraps: the operator does not."""
    student = forms._student
    x = torch.randn(2, 3)
    with student.forbidding(*LIBRARY_SOFTMAX, "aten._softmax"):
        expect_close(forms.own(x), torch.softmax(x, dim=-1), "own")
        for cheat in ("by_operator", "by_unwrapping", "by_module"):
            with pytest.raises(StudentError) as caught:
                getattr(forms, cheat)(x)
            assert caught.value.kind == "forbidden" and "write it yourself" in str(caught.value), cheat
    expect_close(forms.by_operator(x), torch.softmax(x, dim=-1), "allowed again outside")


def test_the_form_of_code_is_judged_by_running_it(forms):
    xs = torch.randn(4, 3)
    dot = ("torch.dot", "torch.Tensor.dot")
    assert forms.nested_loops.counting(dot, xs)[1] == {"torch.dot": 16, "torch.Tensor.dot": 0}
    expect_calls(forms.nested_loops.counting(dot, xs)[1], 16, "nested_loops(xs)", "use torch.dot per pair")
    said = message(lambda: expect_calls(forms.dummy_loops.counting(dot, xs)[1], 16, "dummy_loops(xs)",
                                        "use torch.dot per pair"))
    assert said == ("dummy_loops(xs) must use torch.dot per pair (this exercise is about that form): "
                    "it made 0 such calls, at least 16 expected")


class Forged:
    """A worker whose answer is whatever student code wrote on its channel (it shares the process)."""

    def __init__(self, answer):
        self.answer = answer

    def request(self, _request):
        return self.answer


@pytest.mark.parametrize("call, answer", [
    ("with_args", 1), ("with_args", {"result": 1}), ("with_args", {"result": 1, "args": "x"}),
    ("counting", {"result": 1, "counts": 7}), ("counting", {"result": 1, "counts": {"torch.dot": "many"}}),
    ("counting", {"result": 1, "counts": {}}), ("grad", [1]), ("grad", {"output": 1}),
])
def test_a_malformed_answer_is_the_submissions_failure_never_a_broken_check(call, answer):
    function = RemoteFunction(Forged(answer), "scores.attention_scores")
    calls = {"with_args": lambda: function.with_args(1), "counting": lambda: function.counting(("torch.dot",), 1),
             "grad": lambda: function.grad(1)}
    with pytest.raises(StudentError) as caught:
        calls[call]()
    assert caught.value.kind == FailureKind.BAD_VALUE and caught.value.where == "scores.attention_scores"


def test_a_well_formed_answer_passes_through():
    assert RemoteFunction(Forged({"result": 1, "counts": {"torch.dot": 2}}), "m.f").counting(("torch.dot",)) == \
        (1, {"torch.dot": 2})
