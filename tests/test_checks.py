"""The judge's helpers say what was expected and what came back, and judge form fairly."""

import pytest
import torch

from types import SimpleNamespace

from autograder.harness.codec import HandleRef
from autograder.harness.handles import Handle, RemoteFunction, SublayerCall
from autograder.harness.remote import RemoteCode, StudentError
from autograder.judge.checks import (CheckFailure, expect_calls, expect_close, expect_gradients_reach,
                                     expect_random_only_in_training, expect_wires)
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


@pytest.mark.parametrize("answer", [torch.zeros(1), {"result": 1}, {"result": 1, "sublayer_calls": "x"},
                                    {"result": 1, "sublayer_calls": [{"submodule": "ff", "args": [], "kwargs": {}}]},
                                    {"result": 1, "sublayer_calls": [{"submodule": 3, "args": [], "kwargs": {},
                                                                      "output": 1}]},
                                    # 0 bytes that claim 30 million queries; a value the worker never records
                                    {"result": 1, "sublayer_calls": [{"submodule": "ff", "kwargs": {}, "output": None,
                                                                      "args": [torch.zeros(1, 30_000_000, 0)]}]},
                                    {"result": 1, "sublayer_calls": [{"submodule": "ff", "args": ["x"], "kwargs": {},
                                                                      "output": None}]}])
def test_a_malformed_account_of_sublayer_calls_is_the_submissions_failure(answer):
    forged = Forged(answer)
    forged._shared = SimpleNamespace(stand_ins=object())  # the lab declares stand-ins: its sub-layers are watched
    with pytest.raises(StudentError) as caught:
        Handle(forged, HandleRef(1, "encoder.EncoderLayer"), "encoder.EncoderLayer").with_sublayer_calls(torch.zeros(1))
    assert caught.value.kind == FailureKind.BAD_VALUE and caught.value.where == "encoder.EncoderLayer.forward"


class Traced:
    """A layer whose forward answered ``output`` after calling its sub-layers as ``calls`` say; asked again,
    each sub-layer answers ``again`` (default: as recorded)."""

    def __init__(self, output, *calls, again=None):
        self.answer = output, [SublayerCall(name, args, {}, out) for name, args, out in calls]
        self.again = again or {name: out for name, _, out in calls}

    def with_sublayer_calls(self, *inputs):
        return self.answer

    def submodule(self, name):
        return lambda *args: self.again[name]


def test_a_layer_is_judged_one_wire_at_a_time_on_its_own_sublayers():
    x, a, nowhere = torch.ones(2), torch.full((2,), 2.0), torch.full((2,), 9.0)
    wires = (("f must get x", lambda calls, inputs, output: (calls["f"].argument(0, "x"), inputs[0])),
             ("the layer must answer g(x + f(x))", lambda calls, inputs, output: (output, calls["g"].output)))

    def judged(layer, wires=wires, composed=nowhere):
        expect_wires(layer, (x,), wires, "layer(x)", reference=torch.ones(2), composed=lambda: composed, atol=1e-6)

    judged(Traced(torch.zeros(2), ("f", (x,), a), ("g", (x + a,), torch.zeros(2))))  # its own sub-layers, wired right
    wrong_input = Traced(torch.zeros(2), ("f", (a,), a), ("g", (x + a,), torch.zeros(2)))
    judged(wrong_input, wires[1:])  # its other wire holds
    assert "layer(x): f must get x" in message(lambda: judged(wrong_input))
    assert message(lambda: judged(Traced(torch.zeros(2), ("f", (x,), a)))) == \
        "layer(x): the layer must answer g(x + f(x)), but the layer never called its g"
    judged(Traced(torch.ones(2)))  # the trusted answer
    judged(Traced(torch.zeros(2)), composed=torch.zeros(2))  # its own sub-layers composed as documented, however called
    # A record the sub-layer does not answer alike is a forgery (student code shares the worker's process).
    forged = Traced(torch.zeros(2), ("f", (x,), a), ("g", (x + a,), torch.zeros(2)), again={"f": a, "g": torch.ones(2)})
    assert "what the layer's forward gave as its g's answer is not what its g answers" in message(lambda: judged(forged))


def test_what_holds_of_gradients_and_random_zeroing_whatever_the_wiring():
    answer = {"inputs": [torch.ones(1), None], "parameters": {"w": torch.ones(1), "b": None, "zero": torch.zeros(1)}}
    assert "with respect to memory: missing" in message(lambda: expect_gradients_reach(answer, ("x", "memory"), ["w"], "L"))
    assert "with respect to b: missing" in message(lambda: expect_gradients_reach(answer, ("x",), ["w", "b"], "L"))
    assert "with respect to zero: all zero" in message(lambda: expect_gradients_reach(answer, (), ["zero"], "L"))
    expect_gradients_reach(answer, ("x",), ["w"], "L")
    plain, zeroed = torch.ones(4), torch.tensor([0.0, 2.0, 2.0, 0.0])
    expect_random_only_in_training(plain, plain, zeroed, "L(x) in eval mode", "L with p=0", "L(x)")
    assert "L(x) in eval mode, against L with p=0" in message(
        lambda: expect_random_only_in_training(zeroed, plain, zeroed, "L(x) in eval mode", "L with p=0", "L(x)"))
    assert "answered exactly as L with p=0" in message(
        lambda: expect_random_only_in_training(plain, plain, plain, "L(x) in eval mode", "L with p=0", "L(x)"))
