"""The rules a worker keeps while it serves a request (:mod:`autograder.harness.worker`): library functions
and operators a request forbids or counts, whatever name student code reaches them by (:class:`Guards`), and
the submission's modules a request may import (:class:`SubmissionImports`).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.abc
import importlib.util
import os

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from autograder import shortcuts
from autograder.harness.messages import Request


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
# Values that carry no handler, by their very type: checked at once. torch.ScriptObject is C++ made a heap type by
# pybind11, its __getattr__ TorchScript's: an optimiser's step gives the profiler's one to an operator
# (record_function), which failed under any ban. Its subclass ScriptModule, whose TorchScript methods could be
# named as handlers, is still read.
PLAIN_TYPES = frozenset({torch.Tensor, torch.nn.Parameter, int, float, bool, complex, str, bytes, type(None),
                         slice, type(Ellipsis), torch.Size, torch.dtype, torch.device, torch.layout,
                         torch.memory_format, torch.Generator, torch.ScriptObject})
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

    if shortcuts.on("no_dynamo"):
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

    def serving(self, request: Request) -> None:
        names = [str(n) for n in (*request.forbid, *request.count)]
        for name in names:
            if not name.startswith(OPERATOR):
                self.install(name)
        self.forbidden = frozenset(str(n) for n in request.forbid)
        self.counted = {str(name): 0 for name in request.count}

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

    def serving(self, request: Request) -> None:
        if self.imports is None:
            return
        modules = {str(target).partition(".")[0] for target in request.targets}
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

