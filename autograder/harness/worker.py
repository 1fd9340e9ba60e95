"""The worker: the only process that imports and runs a submission's modules.

Forked by :mod:`autograder.harness.zygote` (with torch already imported) for
:class:`autograder.harness.remote.RemoteCode`: confined in a sandbox for student code, unconfined for
the trusted reference solution. It reads requests and
writes answers on one socket in the format of :mod:`autograder.harness.codec`; a student's ``print``
goes to a log, never into the answer channel. Every request starts from the same RNG state, so a result does
not depend on which calls came before it.

Requests (all optional fields may be omitted):
  {"op": "call", "target": "module.name", "args": [...], "kwargs": {...}, "seed": int|None,
   "echo_args": bool}
      call a function, or construct a class (the result is a handle to the new module);
      with echo_args, answer {"result", "args"}: the tensor arguments as the call left them;
  {"op": "build", "specs": [[target, args, kwargs], ...], "seed": int}
      construct several objects one after the other from one seed (the documents do this);
  {"op": "method", "handle": id, "name": str, "args": [...], "kwargs": {...}, "seed": ...}
      ``forward``, ``train``, ``state_dict``, ``load_state_dict`` or ``structure`` of a handle,
      ``submodule`` (args: [dotted name]): that submodule, as a handle, or ``stand_in`` (args:
      [{submodule: [part, function]}, source, {argument: value}]): from now on, a call of such a
      submodule that raises or answers with the wrong shape or dtype is answered by ``function``
      of ``source`` (public code: :class:`StandIns`);
  {"op": "grad", "target" | "handle": ..., "args": [...], "kwargs": {...}, "upstream": tensor,
   "computed": [argument index]}
      run the call, backpropagate ``upstream`` and return the gradients of the tensor
      arguments (and of the module's parameters); the arguments ``computed`` reach the call as a
      layer passes a value it computed (a non-leaf tensor, which code may change in place).
  {"op": "limits", "timeout": seconds, "imports": {module: [modules]} | None}
      from now on, a call that runs longer is interrupted where it is (``SIGALRM``) and answered
      as a time-out that names the student's file and line (the judge kills a worker that does
      not stop when asked); with ``imports`` (the submission's modules each module's source
      imports, itself included, as the judge read them), a request imports only those of the
      modules it names (:class:`SubmissionImports`).
Any request may carry ``"forbid": [names]`` (library functions such as ``"torch.sort"``, or
PyTorch operators such as ``"aten._softmax"`` whatever Python name reaches them, that raise
instead of running while it is served: a part that asks students to write one themselves)
and ``"count": [names]`` (library functions whose calls are counted: the answer is then
``{"ok": value, "counts": {name: calls}}``), so a check judges the form of code by running it.
An answer to a request during which a stand-in answered for a submodule carries ``"stood_in":
[{"submodule", "part", "why", "file", "line"}]``. A request with ``"sublayer_calls": true`` is answered
``{"ok": value, "sublayer_calls": [{"submodule", "args", "kwargs", "output"}]}``: every call, in order, of
the submodules a stand-in watches (their tensors as the call got and gave them), so a check can judge
each wire of a layer on its own.
A request's ``"seed"`` may be ``"continue"``: the RNG is left where the previous request left it, so
several calls draw on one random stream in order, as the calls inside one forward pass do.
Any request may carry ``"fresh": true`` (the first request of each check does): the worker
first forgets the modules it built, so handle ids start again at 1 and do not depend on what
earlier checks did.
Answers: {"ok": value} or {"error": {"kind", "type", "message", "where", "trace", "file", "line",
"phase"}}: what went wrong is in ``kind`` (one a worker may name, :data:`autograder.kinds.KINDS`), where
it happened in ``file`` and ``line`` (the submission's innermost frame; ``called_from``: its outermost,
when in another file) and ``phase`` is ``import`` when it happened while a module was loading (a
time-out then lists the files that never finished loading in ``loading``).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.abc
import importlib.util
import os
import signal
import socket
import sys
import traceback

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.harness.codec import CONTINUE_STREAM, CodecError, GeneratorSpec, HandleRef, encode, read_frame, recv_exact
from autograder.kinds import FailureKind
from autograder.limits import DEFAULTS

DEFAULT_SEED = 0
METHODS = ("forward", "train", "state_dict", "load_state_dict", "structure", "submodule", "stand_in")


class RequestError(Exception):
    """A request the worker cannot serve (missing module or name, a module that does not import,
    bad handle, bad value); ``fields`` go into the error answer as they are."""

    def __init__(self, kind: FailureKind, message: str, where: str = "", **fields):
        super().__init__(message)
        self.kind, self.where, self.fields = kind, where, fields


class Forbidden(Exception):
    """A library function the request forbids was called."""


class ImportRefused(Forbidden):
    """A module of the submission was imported outside the request's reach (:class:`SubmissionImports`)."""


OPERATOR = "aten."  # a forbidden name of this form is a PyTorch operator, not a Python function


# Torch hands a call to an argument's own handler instead of running it: a tensor subclass's or any
# object's __torch_function__ or __torch_dispatch__, on its class or on itself. The function mode and
# the dispatch mode run each call with themselves off the stack, so such a handler would run under no
# ban at all: while a ban or a call count is in force, a call given one is refused before anything runs.
HANDLERS = ("__torch_dispatch__", "__torch_function__")
# ... and what could answer a lookup of one with anything: a class's own attribute lookup.
HANDLER_LOOKUPS = (*HANDLERS, "__getattr__", "__getattribute__")
# Classes whose handlers are torch's own; the other classes written in Python are read (one written in
# C, as the built-in types and torch._C's are, is no student's).
LIBRARY_CLASSES = frozenset({torch.Tensor, torch.nn.Parameter})
PLAIN_TYPES = frozenset({torch.Tensor, torch.nn.Parameter, int, float, bool, complex, str, bytes, type(None),
                         slice, type(Ellipsis), torch.Size, torch.dtype, torch.device, torch.layout,
                         torch.memory_format, torch.Generator})  # values that carry no handler: checked at once
TENSOR_METACLASSES = frozenset({type(torch.Tensor), type(torch.nn.Parameter)})
# A class's real method resolution order, its own namespace and its name, and the descriptor of an
# object's own dict, read below anything a class or metaclass could put in their place: the check
# runs while the modes are off the stack, so it must run none of the student's code.
_mro = type.__dict__["__mro__"].__get__
_namespace = type.__dict__["__dict__"].__get__
_name = type.__dict__["__name__"].__get__
_flags = type.__dict__["__flags__"].__get__
_OWN_DICT = type(type.__dict__["__dict__"])
_WRITTEN_IN_PYTHON = 1 << 9  # Py_TPFLAGS_HEAPTYPE


LIBRARY_TENSOR_TYPES = frozenset({torch.Tensor, torch.nn.Parameter})


def refuse_own_handlers(types, args, kwargs) -> None:
    """Raise :class:`Forbidden` if a call's arguments carry a handler of their own (see :data:`HANDLERS`):
    among the types torch itself found with one (``types``: it looks inside list subclasses too, which the
    walk below does not), or inside lists, tuples and dicts."""
    stranger = next((kind for kind in types if kind not in LIBRARY_TENSOR_TYPES), None)
    if stranger is not None:
        raise Forbidden(f"a {_name(stranger)} was given to PyTorch, and its handler could take the call over from "
                        "the library, out of this exercise's rules: give it plain tensors")
    pending = [args, kwargs]
    while pending:
        value = pending.pop()
        kind = type(value)
        if kind in PLAIN_TYPES:
            continue
        if kind is list or kind is tuple:
            pending.extend(value)
        elif kind is dict:
            pending.extend(value.values())
        elif handler := own_handler(value, kind):
            raise Forbidden(f"a {_name(kind)} was given to PyTorch, and its {handler} could take the call over from "
                            "the library, out of this exercise's rules: give it plain tensors")


def own_handler(value, kind: type) -> str | None:
    """The handler (or handler lookup) ``value`` has that is not the library's, or None."""
    classes = _mro(kind)
    if torch._C.TensorBase in classes and type(kind) not in TENSOR_METACLASSES:
        return "a metaclass of its own"
    own_dict = None
    for cls in classes:
        namespace = _namespace(cls)
        if own_dict is None and "__dict__" in namespace:
            own_dict = namespace["__dict__"]
        if _flags(cls) & _WRITTEN_IN_PYTHON and cls not in LIBRARY_CLASSES:
            for name in HANDLER_LOOKUPS:
                if name in namespace:
                    return name
    if own_dict is None:
        return None
    if type(own_dict) is not _OWN_DICT:
        return "__dict__"
    attributes = own_dict.__get__(value)
    return next((name for name in HANDLERS if name in attributes), None)


class ForbiddenOperators(TorchDispatchMode):
    """Below every Python name: a forbidden operator raises however student code reached it, through
    ``torch.ops.aten.<name>``, a wrapper's ``__wrapped__`` or a module class alike."""

    def __init__(self, names: frozenset[str]):
        super().__init__()
        self.names = names

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # PyTorch wraps a mode's __torch_dispatch__ to keep torch.compile out of it, and that wrapper
        # imports torch._dynamo (about 800 modules, 1 s) on its first call. Nothing is compiled here.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        refuse_own_handlers(types, args, kwargs)
        name = str(func.overloadpacket)
        if name in self.names:
            raise Forbidden(f"PyTorch's operator {name} is not available in this exercise, by any name: "
                            "write it yourself")
        return func(*args, **(kwargs or {}))


class ForbiddenFunctions(TorchFunctionMode):
    """A forbidden library function raises also through an alias the student's module bound
    before the first request that forbade it (``from torch import <function>`` at
    import time): the wrapper :meth:`Guards.install` puts in place replaces the library's
    attribute, not the alias, while every torch function passes through this mode."""

    def __init__(self, functions: dict):
        super().__init__()
        self.functions = functions  # the library's original function -> its forbidden name

    def __torch_function__(self, func, types, args=(), kwargs=None):
        refuse_own_handlers(types, args, kwargs)
        name = self.functions.get(func)
        if name is not None:
            raise Forbidden(f"{name} is not available in this exercise: write it yourself")
        return func(*args, **(kwargs or {}))


class Guards:
    """Library functions wrapped once, in place, so that whatever name student code reaches them
    by (``torch.sort``, ``getattr(torch, "so" + "rt")``, an alias imported earlier), a
    request can forbid them or count their calls while it is served; forbidden operators
    (``aten.*``) are caught by :class:`ForbiddenOperators` instead."""

    def __init__(self):
        self.forbidden: frozenset[str] = frozenset()
        self.counted: dict[str, int] = {}
        self.originals: dict[str, object] = {}  # name -> the library's function, before its wrapper

    def serving(self, request: dict) -> None:
        names = [str(n) for n in (*(request.get("forbid") or ()), *(request.get("count") or ()))]
        for name in names:
            if not name.startswith(OPERATOR):
                self.install(name)
        self.forbidden = frozenset(str(n) for n in request.get("forbid") or ())
        self.counted = {str(name): 0 for name in request.get("count") or ()}

    def enforcing(self) -> contextlib.ExitStack:
        """While a request is served: its forbidden operators and functions raise, by any name, and
        arguments with handlers of their own are refused (nothing to do when it forbids and counts none).
        The cyclic garbage collector waits: a finaliser it ran while a mode is off the stack (a
        generator's ``finally``) would run under no ban."""
        stack = contextlib.ExitStack()
        if not (self.forbidden or self.counted):
            return stack
        stack.enter_context(ForbiddenOperators(frozenset(n for n in self.forbidden if n.startswith(OPERATOR))))
        stack.enter_context(ForbiddenFunctions({self.originals[n]: n for n in self.forbidden if n in self.originals}))
        if gc.isenabled():
            gc.disable()
            stack.callback(gc.enable)
        return stack

    @functools.cache  # noqa: B019 - one wrapper per name for the worker's life
    def install(self, name: str) -> None:
        path, _, attr = name.rpartition(".")
        owner = functools.reduce(getattr, path.split(".")[1:], importlib.import_module(path.split(".")[0]))
        original = getattr(owner, attr)
        self.originals[name] = original
        guards = self

        @functools.wraps(original)
        def guarded(*args, **kwargs):
            if name in guards.forbidden:
                raise Forbidden(f"{name} is not available in this exercise: write it yourself")
            if name in guards.counted:
                guards.counted[name] += 1
            return original(*args, **kwargs)

        setattr(owner, attr, guarded)


class SubmissionImports(importlib.abc.MetaPathFinder):
    """The one way a submission's modules are imported: its folder is not on ``sys.path``, and this
    finder comes after every other (a submission cannot shadow torch or the standard library). Once
    the judge has said which of the submission's modules each module's source imports (``imports``),
    a request imports only those of the modules it names: code the judge's scan did not read into a
    call's reach never runs in it, whatever way to import the scan missed."""

    def __init__(self, root: str):
        self.root = root
        self.imports: dict[str, list[str]] | None = None
        self.allowed: frozenset[str] | None = None  # the modules the current request may import; None: any

    def serving(self, request: dict) -> None:
        if self.imports is None:
            return
        targets = [request["target"]] if request.get("target") else [spec[0] for spec in request.get("specs") or ()]
        modules = {str(target).partition(".")[0] for target in targets}
        self.allowed = frozenset().union(*(self.imports.get(module, (module,)) for module in modules))

    def find_spec(self, fullname, path=None, target=None):
        origin = os.path.join(self.root, f"{fullname}.py")
        if path is not None or not fullname.isidentifier() or not os.path.isfile(origin):
            return None
        if self.allowed is not None and fullname not in self.allowed:
            if fullname not in self.imports:
                raise ImportRefused(f"{fullname}.py is not one of the lab's modules, which alone are graded")
            raise ImportRefused(f"{fullname}.py was imported where no import statement of the code called leads to "
                                f"it ({', '.join(sorted(self.allowed))}): import the lab's modules with import statements")
        return importlib.util.spec_from_file_location(fullname, origin)


class CallTimeout(BaseException):
    """Raised in student code when its call runs out of time. A BaseException, so that the
    student's ``except Exception`` lets it through."""


def time_is_up(signum, frame):
    raise CallTimeout


class Worker:
    def __init__(self, root: str, imports: SubmissionImports):
        self.root = os.path.realpath(root)
        self.imports = imports
        self.handles: dict[int, torch.nn.Module] = {}
        self.broken_imports: dict[str, RequestError] = {}
        self.timeout = 0.0  # seconds a call may run before it is interrupted; 0: never
        self.guards = Guards()
        self.stand_ins = StandIns(self.root)

    # -- resolving student names -------------------------------------------------------
    def module(self, name: str):
        if name in self.broken_imports:
            raise self.broken_imports[name]
        if not os.path.isfile(os.path.join(self.root, name + ".py")):
            raise RequestError(FailureKind.MISSING, f"{name}.py is missing from the submission", name, file=f"{name}.py")
        try:
            return importlib.import_module(name)
        except (CallTimeout, ImportRefused):
            raise  # a loop at import is answered as a time-out (never asked again), a refused import as such
        except BaseException as exc:  # noqa: BLE001 - any failure at import is the student's
            file, line = failing_line(exc, self.root)
            place = f" (at {file} line {line})" if line else ""
            self.broken_imports[name] = RequestError(
                FailureKind.IMPORT, f"{name}.py could not be imported: {describe_exception(exc, bool(line))}{place}", name,
                file=file or f"{name}.py", line=line, type=type(exc).__name__, phase="import")
            raise self.broken_imports[name] from None

    def resolve(self, target: str):
        module_name, _, attr = str(target).partition(".")
        module = self.module(module_name)
        if not attr or not hasattr(module, attr):
            raise RequestError(FailureKind.MISSING, f"{module_name}.py defines no `{attr}`", target)
        return getattr(module, attr)

    def handle(self, handle_id) -> torch.nn.Module:
        try:
            return self.handles[int(handle_id)]
        except (KeyError, TypeError, ValueError):
            raise RequestError(FailureKind.BAD_REQUEST, f"no object with handle {handle_id!r} (was the worker restarted?)") from None

    # -- values ---------------------------------------------------------------------------
    def materialise(self, value):
        """Turn wire placeholders into live objects for the student's code."""
        if isinstance(value, GeneratorSpec):
            return torch.Generator().manual_seed(value.seed)
        if isinstance(value, HandleRef):
            return self.handle(value.id)
        if isinstance(value, list):
            return [self.materialise(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.materialise(v) for v in value)
        if isinstance(value, dict):
            return {k: self.materialise(v) for k, v in value.items()}
        return value

    def publish(self, value):
        """Turn a student's return value into something the codec may send."""
        if isinstance(value, torch.nn.Module):
            handle_id = len(self.handles) + 1
            self.handles[handle_id] = value
            return HandleRef(handle_id, qualified_name(type(value)))
        if isinstance(value, (list, tuple)):
            items = [self.publish(v) for v in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict):
            return {self.publish(k): self.publish(v) for k, v in value.items()}
        return value

    # -- operations ---------------------------------------------------------------------------
    def serve(self, request: dict):
        seed = request.get("seed")
        if request.get("fresh"):
            self.handles.clear()
        if seed != CONTINUE_STREAM:
            # The CPU generator is the one torch.manual_seed reseeds here (no accelerator), at 1% of the cost.
            torch.default_generator.manual_seed(DEFAULT_SEED if seed is None else int(seed))
        self.guards.serving(request)
        self.imports.serving(request)
        self.stand_ins.calls = [] if request.get("sublayer_calls") else None
        with self.guards.enforcing():
            return self.run(request)

    def run(self, request: dict):
        op = request.get("op")
        args = self.materialise(list(request.get("args") or []))
        kwargs = self.materialise(dict(request.get("kwargs") or {}))
        if op == "limits":
            self.timeout = float(request.get("timeout") or 0)
            self.imports.imports = request.get("imports")
            return None
        if op == "call":
            result = self.publish(self.resolve(request["target"])(*args, **kwargs))
            # The arguments as the call left them: checks that inputs were not modified in place.
            if not request.get("echo_args"):
                return result
            return {"result": result, "args": [a if isinstance(a, torch.Tensor) else None for a in args]}
        if op == "build":
            built = []
            for target, spec_args, spec_kwargs in request["specs"]:
                built.append(self.resolve(target)(*self.materialise(spec_args), **self.materialise(spec_kwargs)))
            return self.publish(built)
        if op == "method":
            return self.publish(self.method(self.handle(request["handle"]), request.get("name"), args, kwargs))
        if op == "grad":
            return self.grad(request, args, kwargs)
        raise RequestError(FailureKind.BAD_REQUEST, f"unknown operation {op!r}")

    def method(self, module: torch.nn.Module, name, args, kwargs):
        if name not in METHODS:
            raise RequestError(FailureKind.BAD_REQUEST, f"method {name!r} is not available")
        if name == "forward":
            return module(*args, **kwargs)
        if name == "train":
            module.train(*args, **kwargs)
            return None
        if name == "state_dict":
            return dict(module.state_dict())
        if name == "load_state_dict":
            module.load_state_dict(*args, **kwargs)
            return None
        if name == "submodule":
            return submodule(module, str(args[0]) if args else "")
        if name == "stand_in":
            self.stand_ins.install(module, *args)
            return None
        return structure(module)

    def grad(self, request, args, kwargs):
        inputs = [a.detach().clone().requires_grad_(True) if floating(a) else a for a in args]
        computed = set(request.get("computed") or ())
        passed = [a.clone() if i in computed and floating(a) else a for i, a in enumerate(inputs)]
        if "handle" in request:
            module = self.handle(request["handle"])
            module.zero_grad(set_to_none=True)
            out = module(*passed, **kwargs)
            params = dict(module.named_parameters())
        else:
            out = self.resolve(request["target"])(*passed, **kwargs)
            params = {}
        if not isinstance(out, torch.Tensor):
            raise RequestError(FailureKind.EXCEPTION, f"expected a tensor to backpropagate through, got {type(out).__name__}")
        upstream = request.get("upstream")
        if not out.requires_grad:
            return {"output": out, "inputs": [None] * len(inputs), "parameters": {k: None for k in params}}
        backpropagate(out, upstream if upstream is not None else torch.ones_like(out))
        return {
            "output": out,
            "inputs": [a.grad if isinstance(a, torch.Tensor) else None for a in inputs],
            "parameters": {k: p.grad for k, p in params.items()},
        }


def submodule(module: torch.nn.Module, name: str) -> torch.nn.Module:
    try:
        return module.get_submodule(name)
    except AttributeError as exc:
        raise RequestError(FailureKind.MISSING, f"no submodule {name!r}: {exc}") from None


class StandIns:
    """Inside a layer built on others, public code answers for a submodule the student wrote
    whenever its call raises or answers with another shape or dtype than that code would: the
    layer is judged on its own wiring, never on a sub-part that fails (its own checks judge that).
    The stand-ins are functions ``f(module, *args, **arguments, **kwargs)`` of a lab's public
    ``tests/stand_ins.py`` (PyTorch's layers, the document's formulas), sent by the judge; each
    time one answers is recorded for the request's answer (``events``)."""

    def __init__(self, root: str):
        self.root = root
        self.events: list[dict] = []
        self.namespaces: dict[str, dict] = {}  # by source
        self.calls: list[dict] | None = None  # the watched submodules' calls, when the request asks for them

    def install(self, layer: torch.nn.Module, parts: dict, source: str, arguments: dict) -> None:
        if source not in self.namespaces:
            self.namespaces[source] = {}
            exec(compile(source, "stand_ins.py", "exec"), self.namespaces[source])  # noqa: S102 - the judge's public code
        for name, (part, function) in parts.items():
            sub = submodule(layer, name)
            own = sub.__dict__.get("forward")
            own = own._own if isinstance(own, StoodIn) else sub.forward
            stand_in = functools.partial(self.namespaces[source][function], sub, **arguments)
            sub.forward = StoodIn(self, name, part, own, stand_in)


class StoodIn:
    """A submodule's forward, answered by its stand-in when the student's raises or answers with
    another shape or dtype (the stand-in's answer, drawn without moving the random stream, says
    which)."""

    def __init__(self, stand_ins: StandIns, name: str, part: str, own, stand_in):
        # Private names: student code that reads them (the recorded calls above all) is named by the internals
        # scan; and a wire's recorded answer is checked against the sub-layer's own (checks.expect_wires).
        self._stand_ins, self._name, self._part, self._own, self._stand_in = stand_ins, name, part, own, stand_in

    def __call__(self, *args, **kwargs):
        calls = self._stand_ins.calls
        if calls is None or len(calls) >= MAX_SUBLAYER_CALLS:
            return self.answer(*args, **kwargs)
        call = {"submodule": self._name, "args": [kept(a) for a in args],  # as given: the call may change them
                "kwargs": {str(k): kept(v) for k, v in kwargs.items()}}
        answer = self.answer(*args, **kwargs)
        calls.append({**call, "output": kept(answer)})
        return answer

    def answer(self, *args, **kwargs):
        try:
            answer = self._own(*args, **kwargs)
        except (Forbidden, MemoryError):
            raise
        except Exception as exc:  # noqa: BLE001 - the student's sub-part failed: its own checks say how
            file, line = failing_line(exc, self._stand_ins.root)
            return self.answered(f"raised {describe_exception(exc)[:300]}", file, line, args, kwargs, exc)
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                expected = self._stand_in(*args, **kwargs)
        except Exception:  # noqa: BLE001 - arguments the stand-in cannot take: the student's answer stands
            return answer
        if not isinstance(answer, torch.Tensor):
            return self.answered(f"answered {type(answer).__name__}, not a tensor", "", 0, args, kwargs)
        for what, got, wanted in (("shape", tuple(answer.shape), tuple(expected.shape)),
                                  ("dtype", answer.dtype, expected.dtype)):
            if got != wanted:
                return self.answered(f"answered {what} {got} where {wanted} was expected", "", 0, args, kwargs)
        return answer

    def answered(self, why: str, file: str, line: int, args, kwargs, error: Exception | None = None):
        try:
            answer = self._stand_in(*args, **kwargs)
        except Exception:  # noqa: BLE001 - nothing can answer for it: the student's failure stands
            if error is not None:
                raise error from None
            raise
        event = {"submodule": self._name, "part": self._part, "why": why, "file": file, "line": line}
        if event not in self._stand_ins.events:
            self._stand_ins.events.append(event)
        return answer


MAX_SUBLAYER_CALLS = 64  # a layer calls each sub-layer once or twice; a loop's calls are not all kept


def kept(value):
    """A watched call's argument or answer as the judge gets it: a tensor's values at that moment, a
    plain scalar as it is, anything else as None."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return value if value is None or isinstance(value, (bool, int, float)) else None


def backpropagate(out: torch.Tensor, upstream: torch.Tensor) -> None:
    """``out.backward(upstream)``: the same gradients, to the bit (the sum's gradient with respect to
    ``out`` is ``upstream`` exactly), with torch's error for an ``upstream`` of another shape. Not
    torch's own call: its shape check for a given ``upstream`` imports sympy, 0.4 s in every process
    that grades (zygote, judge, reference), where nothing else needs it. In a worker it runs inside the
    request's bans, as the student's backward does: a lab that banned ``mul`` or ``sum`` would have its
    gradient requests refused."""
    if upstream.shape != out.shape:
        raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {upstream.shape} and output[0] has "
                           f"a shape of {out.shape}.")
    (out * upstream).sum().backward()


def floating(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def structure(module: torch.nn.Module) -> dict:
    """What a module is made of, in creation order: the structural checks judge this."""
    return {
        "type": qualified_name(type(module)),
        "children": [[name, qualified_name(type(child))] for name, child in module.named_children()],
        "submodules": [[name, qualified_name(type(sub))] for name, sub in module.named_modules() if name],
        "parameters": [[name, list(p.shape), qualified_name(type(p))] for name, p in module.named_parameters(recurse=False)],
        "all_parameters": [[name, list(p.shape)] for name, p in module.named_parameters()],
        "buffers": [[name, str(b.dtype).removeprefix("torch."), list(b.shape)] for name, b in module.named_buffers(recurse=False)],
        "training": bool(module.training),
    }


def describe_exception(exc: BaseException, placed: bool = False) -> str:
    """``Type: message``; with ``placed`` (the caller says the file and line), a syntax error's text
    without the "(file, line N)" its str() appends."""
    if placed and isinstance(exc, SyntaxError) and exc.msg:
        return f"{type(exc).__name__}: {exc.msg}"[:2000]
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:2000]


def student_frames(exc: BaseException, root: str) -> list[traceback.FrameSummary]:
    """The traceback's frames in the submission's files, named relative to it ("module.py")."""
    frames = []
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.realpath(frame.filename)
        if path.startswith(root + os.sep):
            frame.filename = os.path.relpath(path, root)
            frames.append(frame)
    return frames


def innermost_student_code(exc: BaseException, root: str):
    tb, code = exc.__traceback__, None
    while tb is not None:
        if os.path.realpath(tb.tb_frame.f_code.co_filename).startswith(root + os.sep):
            code = tb.tb_frame.f_code
        tb = tb.tb_next
    return code


def failing_line(exc: BaseException, root: str) -> tuple[str, int]:
    """The submission's file and line where ``exc`` happened (a syntax error names its own)."""
    if isinstance(exc, SyntaxError) and exc.filename and \
            os.path.realpath(exc.filename).startswith(root + os.sep):
        return os.path.relpath(os.path.realpath(exc.filename), root), exc.lineno or 0
    frames = student_frames(exc, root)
    return (frames[-1].filename, frames[-1].lineno or 0) if frames else ("", 0)


def error_answer(exc: BaseException, request: dict, root: str, timeout: float) -> dict:
    where = str(request.get("target") or request.get("name") or "")
    answer = {"kind": FailureKind.EXCEPTION, "type": type(exc).__name__, "message": describe_exception(exc), "where": where,
              "trace": "", "file": "", "line": 0, "phase": ""}
    if isinstance(exc, RequestError):
        return {**answer, "type": "", "kind": exc.kind, "message": str(exc), "where": exc.where or where, **exc.fields}
    frames = student_frames(exc, root)
    if frames:  # a call that began at a module's top level happened while it was imported
        answer.update(file=frames[-1].filename, line=frames[-1].lineno or 0,
                      phase="import" if frames[0].name == "<module>" else "")
        if frames[0].filename != frames[-1].filename:  # the submission's own line that led into another file
            answer["called_from"] = f"{frames[0].filename} line {frames[0].lineno or 0}"
    if isinstance(exc, CallTimeout):
        if answer["phase"] == "import":
            loading = list(dict.fromkeys(f.filename for f in frames if f.name == "<module>"))
            message = (f"a loop at import time in {answer['file']} (line {answer['line']}): "
                       f"{' and '.join(loading)} never finished loading in {timeout:g} s")
            return {**answer, "kind": FailureKind.TIMEOUT, "type": "", "message": message, "loading": loading}
        running = f": it was still running {answer['file']} line {answer['line']}" if frames else ""
        return {**answer, "kind": FailureKind.TIMEOUT, "type": "", "message": f"{where} did not finish in {timeout:g} s{running}"}
    if isinstance(exc, Forbidden):
        return {**answer, "kind": FailureKind.FORBIDDEN, "type": "", "message": str(exc)}
    if isinstance(exc, NotImplementedError) and frames:
        # Name the stub that raised ("module.Layer"), not the call that led there.
        code = innermost_student_code(exc, root)
        stub = f"{os.path.splitext(os.path.basename(code.co_filename))[0]}.{code.co_qualname.removesuffix('.__init__')}"
        return {**answer, "kind": FailureKind.NOT_IMPLEMENTED, "message": f"not implemented yet: {stub}", "where": stub}
    answer["trace"] = "".join(traceback.format_list(frames[-5:]))[-3000:]
    return {**answer, "kind": FailureKind.MEMORY} if isinstance(exc, MemoryError) else answer


def run(root: str, sock: socket.socket, report=None) -> None:
    """Serve requests for the submission in ``root`` until the judge hangs up.

    ``report`` (a :class:`autograder.harness.sandbox.Report`) says how this process was confined (it was
    forked into a sandbox by the zygote); its first message to the judge repeats it, and where it says
    the sandbox refused (:attr:`Report.refused`) the worker ends there. Without one, the worker runs
    unconfined (the reference solution) and prints to stderr.
    """
    torch.set_num_threads(1)  # tiny tensors: a thread pool costs more than it saves, and lanes fill the cores
    if report is None:
        os.dup2(2, 1)  # a student's print goes to stderr, never into the answer channel
    sock.sendall(encode({"hello": None if report is None else {"enforced": report.enforced, "missing": report.missing,
                                                               "refused": report.refused}}))
    if report is not None and report.refused:  # its files are not confined: no student code runs here
        return
    imports = SubmissionImports(os.path.realpath(root))
    sys.meta_path.append(imports)
    worker = Worker(root, imports)
    signal.signal(signal.SIGALRM, time_is_up)
    while True:
        try:
            request = read_frame(lambda n: recv_exact(sock, n))
        except (EOFError, OSError):
            return
        try:
            signal.setitimer(signal.ITIMER_REAL, worker.timeout)
            try:
                answer = {"ok": worker.serve(request)}
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                counts, worker.guards.counted, worker.guards.forbidden = worker.guards.counted, {}, frozenset()
                stood_in, worker.stand_ins.events = worker.stand_ins.events, []
                calls, worker.stand_ins.calls = worker.stand_ins.calls, None
            if request.get("count"):
                answer["counts"] = counts
            if calls is not None:
                answer["sublayer_calls"] = calls
            if stood_in:
                answer["stood_in"] = stood_in
            frame = encode(answer)
        except CodecError as exc:
            frame = bad_value(request, f"returned a value the grader cannot read: {exc}")
        except BaseException as exc:  # noqa: BLE001 - report everything the student's code raises
            frame = encode({"error": error_answer(exc, request, worker.root, worker.timeout)})
        if len(frame) > DEFAULTS.frame_bytes:  # the judge would refuse it: say why, in the student's terms
            frame = bad_value(request, f"returned {len(frame) / 2**20:.0f} MiB, more than the "
                                       f"{DEFAULTS.frame_bytes // 2**20} MiB one call may return")
        sock.sendall(frame)


def bad_value(request: dict, message: str) -> bytes:
    """The error answer for a result that cannot go back to the judge."""
    return encode({"error": {"kind": FailureKind.BAD_VALUE, "type": "", "message": message,
                             "where": str(request.get("target", "")), "trace": "", "file": "", "line": 0, "phase": ""}})

