"""Trusted helpers the graded checks judge with. None of them runs student code in the judge's
process: where a helper uses the student's modules (handles), its calls go to the worker.

Every failure raises :class:`CheckFailure` whose message says what was expected and what
came back (shape, dtype, first differing entry); the pytest plugin prints that message
alone instead of a traceback. A failed comparison also says how the answer relates to the
expected one when a simple relation holds (:mod:`autograder.judge.relations`) and keeps the
differing matrix for a picture (:mod:`autograder.judge.pictures`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from autograder.harness.remote import StudentError
from autograder.harness.worker import backpropagate  # noqa: F401 - the checks' expected gradients, as workers compute theirs
from autograder.judge.pictures import matrix_picture
from autograder.judge.relations import relation
from autograder.results import FailureKind
from autograder.text import relation_sentence


class CheckFailure(AssertionError):
    """A check's verdict, worded for the student, with what trusted code saw in the values as
    fields: ``relation`` (one sentence, or None) and ``picture`` (a dict, or None)."""

    def __init__(self, message: str, relation: str | None = None, picture: dict | None = None):
        super().__init__(message)
        self.relation, self.picture = relation, picture


def random_tensor(seed: int, *shape: int, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    """Standard-normal values from a private generator: the judge's RNG never depends on order."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype) * scale


def fail(message: str, *, actual=None, expected=None, differ=None, constants: dict[str, float] | None = None):
    """Fail the check with ``message``. Given the tensors compared, the message also names a
    simple relation between them (``constants``: names for scale factors, such as
    ``{"sqrt(d_k)": 2.0}``), and ``differ`` (the failing entries) makes a picture."""
    said = relation(actual, expected, constants) if expected is not None else None
    picture = matrix_picture(actual, expected, differ) if differ is not None else None
    raise CheckFailure(message + (relation_sentence(said) if said else ""), said, picture)


def _index(flat: int, shape) -> list[int]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return index[::-1]


def _differing(want: float, got: float) -> str:
    """"expected W, got G" with as many digits as it takes to see them differ, the difference, and
    NaN and infinities named as such."""
    def said(value: float, digits: int) -> str:
        if math.isnan(value):
            return "NaN (not a number)"
        return f"{value:.{digits}g}" if math.isfinite(value) else ("+inf" if value > 0 else "-inf")
    digits = next((d for d in range(4, 18) if said(want, d) != said(got, d)), 17)
    text = f"expected {said(want, digits)}, got {said(got, digits)}"
    if math.isfinite(want) and math.isfinite(got):
        text += f" (off by {abs(got - want):.3g})"
    elif math.isnan(want) and math.isnan(got):
        text += " (NaN never equals NaN: the expected value is undefined here)"
    return text


def expect_tensor(actual, what: str, *, shape=None, dtype=None, expected=None) -> torch.Tensor:
    """``actual`` must be a tensor (of ``shape`` and ``dtype`` when given; ``expected``, the
    tensor it will be compared with, lets a failure name how the two relate)."""
    if not isinstance(actual, torch.Tensor):
        fail(f"{what}: expected a tensor, got {type(actual).__name__}: {str(actual)[:200]}")
    if shape is not None and tuple(actual.shape) != tuple(shape):
        fail(f"{what}: expected shape {tuple(shape)}, got {tuple(actual.shape)}", actual=actual, expected=expected)
    if dtype is not None and actual.dtype != dtype:
        fail(f"{what}: expected dtype {dtype}, got {actual.dtype}", actual=actual, expected=expected)
    return actual


def _close_entries(a: torch.Tensor, e: torch.Tensor, atol: float, rtol: float, equal_nan: bool = False) -> torch.Tensor:
    same_inf = torch.isinf(a) & torch.isinf(e) & (torch.sign(a) == torch.sign(e))
    finite = torch.isfinite(a) & torch.isfinite(e)
    close = same_inf | (finite & ((a - e).abs() <= atol + rtol * e.abs()))
    return close | (torch.isnan(a) & torch.isnan(e)) if equal_nan else close


def is_close(actual, expected, *, atol: float, rtol: float = 0.0, equal_nan: bool = False) -> bool:
    """Whether :func:`expect_close` would accept ``actual`` (no message, no failure)."""
    if not isinstance(actual, torch.Tensor) or actual.shape != torch.as_tensor(expected).shape:
        return False
    expected = torch.as_tensor(expected).detach().to(torch.float64)
    return bool(_close_entries(actual.detach().to(torch.float64), expected, atol, rtol, equal_nan).all())


def expect_close(actual, expected, what: str, *, atol: float = 1e-4, rtol: float = 0.0, source: str = "",
                 check_dtype: bool = False, constants: dict[str, float] | None = None, equal_nan: bool = False) -> None:
    """``actual`` equals ``expected`` entry by entry within ``atol + rtol * |expected|``.

    -inf/inf must match exactly; NaN never matches, unless ``equal_nan`` (NaN where ``expected``
    is NaN: a composition that reproduces the student's own NaN). ``source`` names where the expected
    tensor comes from (a document cell) and is appended to the message; ``constants`` names
    the scale factors a wrong answer may be off by (see :func:`fail`).
    """
    expected = torch.as_tensor(expected)
    where = f" (expected values: {source})" if source else ""
    actual = expect_tensor(actual, what, shape=expected.shape, dtype=expected.dtype if check_dtype else None,
                           expected=expected)
    if not actual.is_floating_point() and expected.is_floating_point():
        actual = actual.to(expected.dtype)
    a = actual.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    close = _close_entries(a, e, atol, rtol, equal_nan)
    if bool(close.all()):
        return
    bad = (~close).reshape(-1)
    first = int(bad.nonzero()[0])
    index = _index(first, a.shape)
    got, want = a.reshape(-1)[first].item(), e.reshape(-1)[first].item()
    tolerance = f"atol {atol:g}" + (f", rtol {rtol:g}" if rtol else "")
    fail(f"{what}: {int(bad.sum())} of {bad.numel()} entries differ; first at {index}: "
         f"{_differing(want, got)}; allowed: {tolerance}{where}",
         actual=actual, expected=expected, differ=~close, constants=constants)


def expect_document(actual, printed, what: str, constants: dict[str, float] | None = None) -> None:
    """``actual`` reproduces a tensor printed in a document (a ``Printed`` of the checks' catalog)."""
    expect_close(actual, printed.tensor, what, atol=printed.atol, source=printed.provenance, constants=constants)


def expect_equal(actual, expected, what: str) -> None:
    """Exact equality, for masks and other discrete tensors (dtype included)."""
    expected = torch.as_tensor(expected)
    actual = expect_tensor(actual, what, shape=expected.shape, dtype=expected.dtype, expected=expected)
    differ = (actual != expected).reshape(-1)
    if bool(differ.any()):
        first = int(differ.nonzero()[0])
        fail(f"{what}: {int(differ.sum())} of {differ.numel()} entries differ; first at {_index(first, actual.shape)}: "
             f"expected {expected.reshape(-1)[first].item()}, got {actual.reshape(-1)[first].item()}",
             actual=actual, expected=expected, differ=differ)


def expect_unmodified(original: torch.Tensor, after, what: str) -> None:
    """An argument must come back from the call exactly as it went in."""
    if not isinstance(after, torch.Tensor) or after.shape != original.shape or not torch.equal(after, original):
        fail(f"{what} modified its input in place; compute a new tensor instead (x += ..., x[...] = ... and a "
             "method ending in _, such as add_ or masked_fill_, write into x)")


GRAPH_CUT = ("missing, got None (the computation graph was cut: no .detach(), torch.no_grad(), .data or new tensors "
             "built from .tolist()/.item() on the way)")


def expect_gradients_reach(answer: dict, inputs: tuple[str, ...], parameters, what: str) -> None:
    """Every input named in ``inputs`` and every parameter in ``parameters`` got a gradient that is not all
    zero (``answer``: :meth:`~autograder.harness.remote.Handle.grad`'s): what holds of a layer's gradients
    however it is wired (``0 * weight`` reaches a weight in name only)."""
    got = [*zip(inputs, answer["inputs"]), *((name, answer["parameters"].get(name)) for name in parameters)]
    for name, gradient in got:
        if gradient is None:
            fail(f"gradient of {what}'s output with respect to {name}: {GRAPH_CUT}")
        if not bool(expect_tensor(gradient, f"gradient with respect to {name}").ne(0).any()):
            fail(f"gradient of {what}'s output with respect to {name}: all zero (its value does not reach the output)")


def expect_random_only_in_training(evaluated, plain, trained, evaluated_what: str, plain_what: str, what: str) -> None:
    """What holds of a layer that zeroes at random however it is wired: in eval mode (``evaluated``) it
    answers as the same layer with a zeroing probability of 0 (``plain``, named ``plain_what``), in
    training mode (``trained``) otherwise. ``evaluated_what`` names the eval mode call (:func:`in_eval_mode`)."""
    expect_close(evaluated, plain, f"{evaluated_what}, against {plain_what}", atol=1e-6, equal_nan=True)
    if is_close(trained, plain, atol=0.0):
        fail(f"{what} in training mode: answered exactly as {plain_what} (in training mode activations are zeroed "
             "at random)")


def expect_gradient(got, expected, what: str, atol: float = 1e-5, rtol: float = 1e-4,
                    constants: dict[str, float] | None = None, wired: bool = False) -> None:
    """A gradient that exists (the graph reaches it) and equals trusted autograd's; the message
    says which of the two failed. ``wired``: ``expected`` comes through the student's own submodules
    (:func:`differentiable`), so where they give no gradient (None) or NaN, so may the layer."""
    if wired and expected is None and got is None:
        return
    if got is None:
        fail(f"{what}: {GRAPH_CUT}")
    if wired and expected is None:
        fail(f"{what}: expected none, as your own submodules give none, got a gradient")
    expect_close(got, expected, f"{what}: wrong", atol=atol, rtol=rtol, constants=constants, equal_nan=wired)


def expect_finite(actual, what: str) -> torch.Tensor:
    """``actual`` holds no NaN or infinity (a property check is meaningless on NaN)."""
    bad = ~torch.isfinite(expect_tensor(actual, what))
    if bool(bad.any()):
        first = int(bad.reshape(-1).nonzero()[0])
        fail(f"{what}: expected finite values, got {actual.reshape(-1)[first].item()} at {_index(first, actual.shape)} "
             f"({int(bad.sum())} of {bad.numel()} entries are NaN or infinite)")
    return actual


def expect_zero_at(actual, positions: torch.Tensor, what: str, *, below: float = 0.0) -> None:
    """Where ``positions`` is True, ``actual`` must be exactly 0 (or, with ``below``, in [0, below))."""
    actual = expect_tensor(actual, what, shape=positions.shape)
    values = actual.detach().to(torch.float64)
    ok = (values == 0) | ((values >= 0) & (values < below))
    bad = positions & ~ok
    if bool(bad.any()):
        index = [int(i) for i in bad.nonzero()[0]]
        wanted = "exactly 0" if below == 0 else f"0 (or in [0, {below:g}))"
        fail(f"{what}: {int(bad.sum())} masked entries are not {wanted}; first at {index}: "
             f"expected 0, got {values[tuple(index)].item():.6g}")


def expect_mask(actual, expected: torch.Tensor, what: str, source: str = "") -> None:
    """``actual`` holds the True/False pattern of the bool tensor ``expected`` (any dtype with 0/1 values)."""
    actual = expect_tensor(actual, what, shape=expected.shape, expected=expected)
    wrong = (actual != expected.to(actual.dtype)).reshape(-1)
    if bool(wrong.any()):
        first = int(wrong.nonzero()[0])
        where = f" (expected values: {source})" if source else ""
        fail(f"{what}: {int(wrong.sum())} of {wrong.numel()} entries differ; first at {_index(first, expected.shape)}: "
             f"expected {expected.reshape(-1)[first].item()}, got {actual.reshape(-1)[first].item()}{where}",
             actual=actual, expected=expected, differ=wrong)


def load_weights(handle, state: dict, what: str) -> None:
    """Copy ``state`` into a student's module, after checking it has exactly these entries."""
    have = sorted(handle.state_dict())
    if have != sorted(state):
        fail(f"{what}: expected the state_dict keys {sorted(state)}, got {have}")
    handle.load_state_dict(state)


def in_eval_mode(what: str, first, again) -> str:
    """The label of a check on ``first``, a module's answer in eval mode, given ``again``, its answer to the
    same call made after another random seed (a worker seeds every call: the same seed draws the same zeros):
    random zeroing is named as the cause only when the two differ; a module that answers alike whatever the
    seed is wrong, if it is, for another reason."""
    random = isinstance(first, torch.Tensor) and isinstance(again, torch.Tensor) and not (
        first.shape == again.shape and bool(torch.allclose(first, again, rtol=0.0, atol=0.0, equal_nan=True)))
    return f"{what} in eval mode" + (" (nothing may be zeroed at random in eval mode: called after another random "
                                     "seed, it answered otherwise)" if random else "")


def expect_reused(sub, own, inputs: tuple, what: str) -> None:
    """``sub``, a submodule of the student's layer (:meth:`Handle.submodule`), computes what ``own``
    does: the lab's module it claims to be, built by the judge's own call, given ``sub``'s weights.
    The judge's evidence that the layer reuses that module: a class name is only what the student's
    process says it is. Both run in eval mode (no random zeroing of activations). Where the lab's module
    raises (a mistake its own checks charge), ``sub`` must raise the same."""
    own.load_state_dict(sub.state_dict())
    sub.eval()
    own.eval()
    reused = f"{what}: computes otherwise than the lab's own module with its weights (the layer must reuse that " \
             "module, not a copy of it)"
    try:
        expected = own(*inputs)
    except StudentError as error:
        try:
            sub(*inputs)
        except StudentError as same:
            if (same.kind, same.type_name, str(same)) == (error.kind, error.type_name, str(error)):
                return
        fail(reused)
    expect_close(sub(*inputs), expected, reused, equal_nan=True)


def expect_wired(actual, composed, what: str, *, reference=None, atol: float, rtol: float = 0.0) -> None:
    """A layer built on others is judged on its own wiring: ``actual`` must equal ``composed``, what
    the judge computes from the layer's own submodules' answers wired as the contract says
    (:func:`differentiable`, or the handles themselves; NaN where they give NaN). An ``actual`` equal to ``reference`` (the
    trusted layer) is right whatever its submodules do, so a layer that does not call a broken
    submodule of its own is not blamed for it."""
    if reference is not None and is_close(actual, reference, atol=atol, rtol=rtol):
        return
    expect_close(actual, composed, f"{what}, against your own submodules wired as the docstring says",
                 atol=atol, rtol=rtol, equal_nan=True)


class _FirstCalls(dict):
    """The first call of each watched submodule of ``layer``, each asked again of that submodule when a wire
    first uses it (the record comes from the worker, where student code runs: its answer must be the one the
    submodule gives); a submodule never called fails the wire that needs it."""

    def __init__(self, layer, calls, what: str, atol: float, rtol: float):
        super().__init__()
        self.first: dict = {}
        for call in calls:
            self.first.setdefault(call.submodule, call)
        self.layer, self.what, self.atol, self.rtol, self.says = layer, what, atol, rtol, ""

    def __missing__(self, name: str):
        call = self.first.get(name)
        if call is None:
            fail(f"{self.what}: {self.says}, but the layer never called its {name}")
        again = self.layer.submodule(name)(*call.args, **call.kwargs)
        if not is_close(again, call.output, atol=self.atol, rtol=self.rtol, equal_nan=True):
            fail(f"{self.what}: {self.says}, but what the layer's forward gave as its {name}'s answer is not what "
                 f"its {name} answers to the same arguments")
        self[name] = call
        return call


def expect_wires(layer, inputs: tuple, wires: tuple[tuple[str, Callable], ...], what: str, *, reference, composed,
                 atol: float, rtol: float = 0.0) -> None:
    """A layer built on others judged one wire at a time, so a wrong wire fails only the check of the
    block it is in. An output equal to ``reference`` (the trusted layer) or to ``composed()`` (the judge's
    composition of the layer's own sub-layers wired as the contract says) has every wire right, however the
    layer calls them (once, or once per sequence) or computes one of them inline. Otherwise each wire
    ``(says, judge)`` must hold: what the contract says one sub-layer must get, or what the layer must make
    of their answers, with ``judge(calls, inputs, output) -> (got, expected)`` over the layer's calls of its
    own sub-layers in that forward (``calls[name]``: the first
    :class:`~autograder.harness.remote.SublayerCall` of that submodule, a stand-in's answer included:
    :meth:`~autograder.harness.remote.Handle.with_sublayer_calls`), its inputs and its output."""
    output, calls = layer.with_sublayer_calls(*inputs)
    if is_close(output, reference, atol=atol, rtol=rtol) or is_close(output, composed(), atol=atol, rtol=rtol,
                                                                     equal_nan=True):
        return
    first = _FirstCalls(layer, calls, what, atol, rtol)
    for says, judge in wires:
        first.says = says
        try:
            got, expected = judge(first, inputs, output)
        # A sub-layer gave something the wire's sum cannot take, or the layer passed it something odd.
        except (TypeError, RuntimeError, AttributeError, IndexError, ValueError) as exc:
            fail(f"{what}: {says}, but it could not be checked ({type(exc).__name__}: {str(exc)[:200]})")
        expect_close(got, expected, f"{what}: {says}", atol=atol, rtol=rtol, equal_nan=True)


class _RemoteStep(torch.autograd.Function):
    """One call of a module in the worker as a step of the judge's autograd graph: the forward value
    is the worker's answer; backward asks the worker for the module's vector-Jacobian product
    (:meth:`Handle.grad` with the upstream gradient) and adds its parameters' gradients to
    ``gradients`` under ``prefix``."""

    @staticmethod
    def forward(ctx, handle, gradients: dict, prefix: str, *args):
        # What the layer would pass computed (a sum, not its own input) reaches the module as such:
        # code that changes it in place is allowed there, as in the layer.
        ctx.computed = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.grad_fn is not None)
        args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
        ctx.handle, ctx.gradients, ctx.prefix, ctx.args = handle, gradients, prefix, args
        return expect_tensor(handle(*args), f"{handle.origin}(...)")

    @staticmethod
    def backward(ctx, upstream):
        answer = ctx.handle.grad(*ctx.args, upstream=upstream.contiguous(), computed=ctx.computed)
        if not (isinstance(answer, dict) and isinstance(answer.get("parameters"), dict)
                and isinstance(answer.get("inputs"), list) and len(answer["inputs"]) == len(ctx.args)):
            fail(f"{ctx.handle.origin}: the worker's answer to a gradient request is malformed")
        for name, grad in answer["parameters"].items():
            key, before = ctx.prefix + str(name), ctx.gradients.get(ctx.prefix + str(name))
            ctx.gradients[key] = grad if before is None else before if grad is None else before + grad
        grads = []
        for i, (arg, grad) in enumerate(zip(ctx.args, answer["inputs"])):
            wanted = isinstance(arg, torch.Tensor) and arg.is_floating_point() and grad is not None
            grads.append(expect_tensor(grad, f"{ctx.handle.origin}: the gradient of argument {i}", shape=arg.shape)
                         .to(arg.dtype) if wanted else None)
        return (None, None, None, *grads)


def differentiable(handle, gradients: dict, prefix: str = ""):
    """``handle`` (a module in the worker) as a function the judge's autograd differentiates
    through: a judge composing a layer from its submodules gets the gradient the layer's own
    wiring should give, and each submodule's parameter gradients in ``gradients`` (named
    ``prefix`` + the submodule's own names, as in the layer's ``state_dict``)."""
    return lambda *args: _RemoteStep.apply(handle, gradients, prefix, *args)


def expect_children(info: dict, expected: list[list[str]], what: str, ordered: bool) -> None:
    """A module's children (from ``structure()``) are ``expected`` (``[name, type]`` pairs), in that
    order when ``ordered`` (only where a seeded check needs it: seeded initialisation draws in
    creation order). A child holding no parameter that ``expected`` does not name (an extra
    ``nn.ReLU()``) changes nothing and is accepted. The message names the first entry that differs."""
    holders = {name.split(".")[0] for name, _ in info["all_parameters"]}
    named = {name for name, _ in expected}
    found = [list(child) for child in info["children"] if child[0] in named or child[0] in holders]
    if (found if ordered else sorted(found)) == (expected if ordered else sorted(expected)):
        return
    if not ordered:
        missing = [child for child in expected if child not in found]
        extra = [child for child in found if child not in expected]
        fail(f"{what}: expected the submodules {expected} (in any order); missing {missing}, not expected {extra}")
    first = next(i for i in range(max(len(found), len(expected)))
                 if i >= len(found) or i >= len(expected) or found[i] != expected[i])
    fail(f"{what}: expected the submodules {expected} in this order (seeded initialisation follows it); the first "
         f"that differs is number {first + 1}: expected {expected[first] if first < len(expected) else 'none'}, "
         f"got {found[first] if first < len(found) else 'none'}")


def expect_student_error(call, error_type: str, what: str) -> StudentError:
    """``call()`` must make the student's code raise ``error_type`` (a name such as "ValueError")."""
    try:
        result = call()
    except StudentError as error:
        if error.kind == FailureKind.EXCEPTION and error.type_name == error_type:
            return error
        if error.kind == FailureKind.EXCEPTION:
            fail(f"{what}: expected {error_type}, got {error}")
        raise
    fail(f"{what}: expected {error_type} to be raised, but it returned {type(result).__name__}")


# -- the form of code ---------------------------------------------------------------------------

def expect_calls(counts: dict[str, int], at_least: int, what: str, form: str) -> None:
    """The form of code, judged by running it: ``counts`` (from :meth:`RemoteFunction.counting`) must add
    up to ``at_least`` calls of the library functions that ``form`` names."""
    made = sum(counts.values())
    if made < at_least:
        fail(f"{what} must {form} (this exercise is about that form): it made {made} such call"
             f"{'' if made == 1 else 's'}, at least {at_least} expected")
