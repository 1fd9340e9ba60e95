"""A judge-side scan of a submission's source for code that reaches into the interpreter's,
PyTorch's or the grader's internals.

A part that forbids a library function (``torch.sort``, ``F.group_norm``) or counts calls
(``torch.dot``) is enforced inside the worker that runs the student's code, by wrappers and a
dispatch mode (:mod:`autograder.harness.guards`). Code in that process can reach them: leave the
dispatch mode, empty the guards through ``gc``, call the original behind ``__wrapped__``. Nothing
in the worker can be trusted to notice, so this scan runs in the judge, on the bytes the worker
will import, and never runs them. Each finding is a :class:`Reach`: file, line, and what the code
does in words a student understands.

The rules are allowlists wherever Python allows one:

- imports: the modules of :data:`LIBRARIES` and the lab's own modules, nothing else;
- the attributes of those modules: what each :class:`Library` allows (for torch: its public API
  but for :data:`TORCH_INTERNALS`, and only the submodules listed), whatever name the module
  goes by (``import torch as t``, ``x = torch``, a sibling module's ``helper``), and a module is
  only ever the base of an attribute, never a value passed around;
- names that start with ``_``: the submission's own (``_EPS``, ``_split``, ``self._cache``,
  ``other_module._helper``); of the others only ``__init__``, ``__name__``, ``__qualname__`` and
  ``__doc__`` are read, and a class defines only the dunder methods of :data:`CLASS_DUNDERS`;
- built-ins: :data:`ALLOWED_BUILTINS`; ``getattr`` and its kin only called, with a name the
  source spells out (a string literal, or a loop over a tuple of them), or on ``self`` with a
  name that starts with a public literal (``f"W_{kind}"``); ``type`` only as ``type(x)``, and an
  object's class only named, compared or tested (a class's class makes classes with any dunder);
- no dunder name in a string or as a keyword (a class's namespace, ``dict(__del__=...)``), and
  ``sys.stdout``/``sys.stderr`` only written to.

One rule is a denylist, because any object may carry the attributes: frames, code, raw memory
and files, compilers and tensors of another class (:data:`INTERPRETER_ATTRIBUTES`). The tables are
checked against the installed torch and standard library, and under each Python the README names,
by ``tests/test_internals.py``, which also lists what this scan does not see (``NOT_CAUGHT``):
static analysis of Python is not airtight.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import types
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, order=True)
class Reach:
    """One place where a submission reaches into internals: ``what`` is a short phrase
    ("imports gc", "reads a private attribute `_C`")."""

    file: str
    line: int
    what: str


@dataclass(frozen=True)
class Library:
    """What a submission may use of a module it imports. ``submodules`` are attributes that are
    themselves allowed modules (``torch.nn``); every other attribute is allowed unless ``denied``
    names it or, when ``only`` is given, unless ``only`` leaves it out."""

    submodules: frozenset[str] = frozenset()
    denied: frozenset[str] = frozenset()
    only: frozenset[str] | None = None

    def allows(self, attribute: str) -> bool:
        if attribute in self.submodules:
            return True
        if self.only is not None:
            return attribute in self.only
        return attribute not in self.denied


# torch's public names that are not the tensor library but its machinery. Every module torch
# holds (its internals live in them: torch.utils._python_dispatch, torch.library, torch.ops,
# and torch.sys, torch.ctypes, torch.builtins, torch.importlib are the standard library's), but
# the few of LIBRARIES; named here, as some are loaded only on first use (torch.onnx).
TORCH_SUBMODULES_DENIED = frozenset({
    "accelerator", "amp", "ao", "builtins", "classes", "compiler", "cpp", "cpu",
    "ctypes", "distributed", "distributions", "export", "func", "functional", "functools", "futures", "fx",
    "glob", "hub", "importlib", "inspect", "jit", "library", "masked", "math", "monitor", "mps", "mtia",
    "multiprocessing", "nested", "onnx", "ops", "optim", "os", "overrides", "package", "platform", "profiler",
    "quantization", "quasirandom", "random", "return_types", "serialization", "signal", "sparse", "storage",
    "sys", "testing", "textwrap", "threading", "torch", "torch_version", "types", "utils", "version",
    "warnings", "windows", "xpu",
})
TORCH_INTERNALS = TORCH_SUBMODULES_DENIED | frozenset({
    # torch._C's dispatcher and JIT classes, re-exported under public names:
    # torch.ExcludeDispatchKeyGuard(torch.DispatchKeySet(torch.DispatchKey.Python)) leaves the
    # grader's dispatch mode as surely as torch.utils._python_dispatch._disable_current_modes().
    "AggregationType", "AliasDb", "AnyType", "Argument", "ArgumentSpec", "AwaitType", "BenchmarkConfig",
    "BenchmarkExecutionStats", "Block", "BoolType", "BufferDict", "CallStack", "Capsule", "ClassType", "Code",
    "CompilationUnit", "CompleteArgumentSpec", "ComplexType", "ConcreteModuleType", "ConcreteModuleTypeBuilder",
    "DeepCopyMemoTable", "DeserializationStorageContext", "DeviceObjType", "DictType", "DisableTorchFunction",
    "DisableTorchFunctionSubclass", "DispatchKey", "DispatchKeySet", "EnumType", "ErrorReport",
    "ExcludeDispatchKeyGuard", "ExecutionPlan", "FileCheck", "FloatType", "FunctionSchema", "Future",
    "FutureType", "Gradient", "Graph", "GraphExecutorState", "IODescriptor", "InferredType", "IntType",
    "InterfaceType", "JITException", "ListType", "LiteScriptModule", "LockingLogger", "LoggerBase", "ModuleDict",
    "Node", "NoneType", "NoopLogger", "NumberType", "OperatorInfo", "OptionalType", "ParameterDict",
    "PyObjectType", "PyTorchFileReader", "PyTorchFileWriter", "RRefType", "ScriptClass", "ScriptClassFunction",
    "ScriptDict", "ScriptDictIterator", "ScriptDictKeyIterator", "ScriptFunction", "ScriptList",
    "ScriptListIterator", "ScriptMethod", "ScriptModule", "ScriptModuleSerializer", "ScriptObject",
    "ScriptObjectProperty", "SerializationStorageContext", "StaticModule", "StorageBase", "StreamObjType",
    "StringType", "SymBoolType", "SymIntType", "Tag", "TensorType", "ThroughputBenchmark", "TracingState",
    "TupleType", "Type", "UnionType", "Use", "Value",
    # storages: raw memory and files (UntypedStorage.from_file)
    "BFloat16Storage", "BoolStorage", "ByteStorage", "CharStorage", "ComplexDoubleStorage",
    "ComplexFloatStorage", "DoubleStorage", "FloatStorage", "HalfStorage", "IntStorage", "LongStorage",
    "QInt32Storage", "QInt8Storage", "QUInt2x4Storage", "QUInt4x2Storage", "QUInt8Storage", "ShortStorage",
    "Storage", "TypedStorage", "UntypedStorage",
    # operators reached below their Python names (torch.ops.aten's packets)
    "quantized_gru", "quantized_lstm",
    # Under inference_mode the dispatch mode sees no operator: with it, F.cross_entropy(..., reduction="none")
    # computes a normalised exponential under a ban of the library's own (measured on torch 2.13). Labs never need it.
    "inference_mode",
    # code run through the compiler, the JIT or pickle, files, names imported from strings, modules
    "compile", "cond", "while_loop", "vmap", "load", "save", "from_file", "from_dlpack", "to_dlpack",
    "get_file_path", "prepare_multiprocessing_environment", "profiler_allow_cudagraph_cupti_lazy_reinit_cuda12",
    "set_default_tensor_type", "get_device_module", "classproperty", "fork", "wait", "import_ir_module",
    "import_ir_module_from_buffer", "parse_ir", "parse_schema", "parse_type_comment",
    "merge_type_from_type_comment", "unify_type_list",
})

def _library(name: str, submodules: Iterable[str] = (), denied: Iterable[str] = (),
             only: Iterable[str] | None = None) -> Library:
    """What a submission may use of module ``name``: besides what is ``denied``, every attribute of it
    that is a module (but the ``submodules``) or a metaclass (called with a name, bases and a
    namespace, it makes a class with any dunder method). Read from this Python's module: which
    modules it holds differs by version (``typing.copyreg`` from 3.12, ``collections.abc.sys`` from
    3.13, ``dataclasses.builtins`` before 3.12)."""
    held = vars(importlib.import_module(name))
    derived = {attribute for attribute, value in held.items() if attribute[:1] != "_"
               and (isinstance(value, types.ModuleType) or (isinstance(value, type) and issubclass(value, type)))}
    return Library(submodules=frozenset(submodules), denied=frozenset(denied) | frozenset(derived - set(submodules)),
                   only=None if only is None else frozenset(only))


# The modules a submission may import, and what it may use of each. Anything else a lab needs
# (numpy, os, inspect, importlib, gc, ctypes, operator ...) reaches further than a lab module
# should; a module's attributes that are modules are denied unless they are allowed modules.
LIBRARIES: Mapping[str, Library] = {
    "torch": _library("torch", submodules={"nn", "linalg", "special", "fft", "cuda", "autograd", "backends"},
                      denied=TORCH_INTERNALS),
    # Device boilerplate: whether a backend is there, nothing else of them.
    "torch.backends": _library("torch.backends", submodules={"mps", "cuda"}, only=()),
    "torch.backends.mps": _library("torch.backends.mps", only={"is_available", "is_built"}),
    "torch.backends.cuda": _library("torch.backends.cuda", only={"is_built"}),
    # A custom autograd function is a lesson of its own, not a way in: its class and the gradient calls only.
    "torch.autograd": _library("torch.autograd", only={"Function", "grad", "backward"}),
    "torch.nn": _library("torch.nn", submodules={"functional", "init", "parameter"}),
    "torch.nn.parameter": _library("torch.nn.parameter", only={"Parameter", "Buffer", "UninitializedParameter"}),
    # torch.overrides' entry points into the dispatch of __torch_function__
    "torch.nn.functional": _library("torch.nn.functional", denied={
        "handle_torch_function", "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic"}),
    "torch.nn.init": _library("torch.nn.init"),
    "torch.linalg": _library("torch.linalg"),
    "torch.special": _library("torch.special"),
    "torch.fft": _library("torch.fft"),
    "torch.cuda": _library("torch.cuda", only={
        "is_available", "device_count", "current_device", "get_device_name", "manual_seed", "manual_seed_all",
        "synchronize", "empty_cache", "is_bf16_supported"}),
    "math": _library("math"),
    "__future__": _library("__future__"),
    # get_type_hints and singledispatch's register evaluate annotations written as strings
    "typing": _library("typing", denied={"get_type_hints", "ForwardRef"}),
    # make_dataclass makes a class with any namespace
    "dataclasses": _library("dataclasses", denied={"make_dataclass"}),
    "functools": _library("functools", denied={"singledispatch", "singledispatchmethod"}),
    "itertools": _library("itertools"),
    "collections": _library("collections", submodules={"abc"}),
    "collections.abc": _library("collections.abc"),
    "numbers": _library("numbers"),
    "abc": _library("abc"),
    "enum": _library("enum"),
    # A warning's record and its formatting name the file that warned: the worker's staging path.
    "warnings": _library("warnings", only={"warn", "simplefilter", "filterwarnings", "resetwarnings"}),
    "time": _library("time"),
    "random": _library("random"),
    "copy": _library("copy", only={"copy", "deepcopy"}),
    # the standard streams are only written to (sys.stdout.buffer.raw is a file opened by the grader)
    "sys": _library("sys", only={"stdout", "stderr", "float_info", "maxsize", "version_info", "exit"}),
}

# What a lab may allow beyond LIBRARIES (lab.toml's `allowed_imports`), and nothing else: a lab with a
# training loop needs the optimisers. Allowing one makes it an attribute its parent module may lead to.
# Each is read from the running torch only when a lab allows it (as _library reads every module).
LAB_MAY_ALLOW = frozenset({"torch.optim", "torch.optim.lr_scheduler"})


@dataclass(frozen=True)
class Rules:
    """The modules one lab's submissions may import and use (:data:`LIBRARIES` and what the lab allows),
    with what follows from them for names that may be modules."""

    libraries: Mapping[str, Library]
    perhaps_denied: frozenset[str]  # attribute names denied on some allowed module
    submodule_names: frozenset[str]


@functools.cache
def rules_for(allowed: frozenset[str] = frozenset()) -> Rules:
    """The rules of a lab that allows ``allowed`` (names of :data:`LAB_MAY_ALLOW`) beyond the kit's
    libraries; ``ValueError`` for any other name, in the lab author's words."""
    if allowed - LAB_MAY_ALLOW:
        raise ValueError(f"allowed_imports: {', '.join(sorted(allowed - LAB_MAY_ALLOW))} cannot be allowed; a lab "
                         f"may allow {', '.join(sorted(LAB_MAY_ALLOW))} (autograder/judge/internals.py: LAB_MAY_ALLOW)")
    libraries = dict(LIBRARIES)
    for name in sorted(allowed):  # a parent before its children: each child becomes its parent's submodule
        libraries[name] = _library(name)
        parent, _, child = name.rpartition(".")
        if parent in libraries:
            held = libraries[parent]
            libraries[parent] = Library(held.submodules | {child}, held.denied - {child}, held.only)
    return Rules(libraries,
                 frozenset().union(*(library.denied for library in libraries.values()))
                 | {"modules", "settrace", "setprofile", "exc_info", "meta_path", "path_hooks", "addaudithook"},
                 frozenset().union(*(library.submodules for library in libraries.values())))


# Attributes any object may have that lead to the interpreter's frames and code, to memory and
# files below Python's objects, or to a compiler: no lab needs them, whatever they are read from.
_FRAMES_AND_CODE = frozenset({
    "f_back", "f_builtins", "f_code", "f_globals", "f_locals", "f_lasti", "f_lineno", "f_trace",
    "f_trace_lines", "f_trace_opcodes", "tb_frame", "tb_next", "tb_lasti", "tb_lineno",
    "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended",
    "cr_frame", "cr_code", "cr_await", "cr_origin", "cr_running", "cr_suspended",
    "ag_frame", "ag_code", "ag_await", "ag_running", "cell_contents",
    "co_code", "co_consts", "co_names", "co_varnames", "co_cellvars", "co_freevars", "co_filename", "co_name",
    "co_qualname", "co_firstlineno", "co_lnotab", "co_linetable", "co_exceptiontable", "co_flags",
    "co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_lines",
    "co_positions",
})
INTERPRETER_ATTRIBUTES: Mapping[str, str] = {
    **{name: "the interpreter's frames and code" for name in _FRAMES_AND_CODE},
    **{name: "raw memory" for name in ("ctypes", "from_address", "from_buffer", "from_buffer_copy", "in_dll")},
    # A storage's .type(name) imports any dotted name (torch._utils._type): a module loaded out of
    # the judge's sight. No lab reads storages.
    **{name: "a tensor's raw storage" for name in ("storage", "untyped_storage", "typed_storage")},
    "from_file": "opens a file",
    "raw": "a raw file below Python's text streams",  # type(sys.stdout.buffer.raw) is io.FileIO: open
    "FileIO": "a raw file below Python's text streams",
    "compile": "compiles code out of the grader's sight",  # nn.Module.compile is torch.compile
    # A tensor of another class: its own __torch_dispatch__ would run the library's calls under no ban.
    "as_subclass": "makes a tensor of another class, whose own handlers could run the library under no ban",
}

ALLOWED_BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "classmethod",
    "complex", "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "int",
    "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "oct", "ord",
    "pow", "print", "property", "range", "repr", "reversed", "round", "set", "slice", "sorted",
    "staticmethod", "str", "sum", "super", "tuple", "type", "zip", "NotImplemented", "Ellipsis",
    *(name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)),
})
# Attribute lookups by a name given at run time: allowed only when the source spells the name out.
NAMED_LOOKUPS = frozenset({"getattr", "hasattr", "setattr", "delattr"})

# Dunder names: a class may define the usual protocol methods; a module may set its metadata;
# code may read a name's or a docstring's text and call __init__ (super().__init__()).
_OPERATORS = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
              "lshift", "rshift")
CLASS_DUNDERS = frozenset({
    "__init__", "__post_init__", "__repr__", "__str__", "__format__", "__call__", "__len__", "__iter__",
    "__next__", "__reversed__", "__contains__", "__getitem__", "__setitem__", "__delitem__", "__eq__",
    "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__bool__", "__enter__", "__exit__",
    "__neg__", "__pos__", "__abs__", "__invert__", "__slots__", "__doc__",
    *(f"__{prefix}{op}__" for op in _OPERATORS for prefix in ("", "r", "i")),
})
MODULE_DUNDERS = frozenset({"__all__", "__author__", "__version__", "__license__", "__copyright__",
                            "__email__", "__status__", "__credits__", "__maintainer__", "__date__", "__doc__"})
READABLE_DUNDER_NAMES = frozenset({"__name__", "__doc__"}) | MODULE_DUNDERS
# __class__ is type(x), which any code may call; what leads on from a class (__mro__, __subclasses__,
# __dict__) is not read.
READABLE_DUNDER_ATTRIBUTES = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__class__"})

# Calls that give an nn.Module an attribute named by a string: they make a private name the
# student's own as ``self._name = ...`` does.
_REGISTERS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module"})
# Built-ins that read an object's class without leading anywhere from it.
_CLASS_READERS = frozenset({"isinstance", "issubclass", "print", "str", "repr"})
_RECEIVERS = frozenset({"self", "cls"})


def scan(source: str | bytes, filename: str, own_modules: frozenset[str], allowed: frozenset[str] = frozenset()
         ) -> list[Reach]:
    """Every place where ``source`` (one module of a submission, named ``filename`` in the
    findings) reaches into interpreter, PyTorch or grader internals, by line. ``own_modules``
    are the lab's module names (``"blocks"``): they may be imported, and their private names
    used. Names imported from them are treated as possibly being modules (use
    :func:`scan_submission` to have them resolved). A module that does not parse gives no
    findings: its import fails, and that is reported elsewhere."""
    return _scan(source, filename, frozenset(own_modules), None, rules_for(frozenset(allowed)))


def scan_submission(folder: Path, modules: Iterable[str], allowed: frozenset[str] = frozenset()) -> list[Reach]:
    """:func:`scan` over the lab's module files (``modules``: ``"blocks.py"``, ...) present in
    ``folder``, each read as bytes and decoded as the import system will (a ``# coding:`` line is
    honoured: read as UTF-8, a UTF-7 file would hide what Python runs). A name one module imports
    from another is resolved to what it is there, so a module cannot be handed over under an
    innocent name. Files that cannot be read are skipped."""
    sources = {}
    for name in modules:
        try:
            sources[Path(name).stem] = (name, (Path(folder) / name).read_bytes())
        except OSError:
            continue
    own, rules = frozenset(Path(name).stem for name in modules), rules_for(frozenset(allowed))
    trees = {stem: tree for stem, (_, data) in sources.items() if isinstance(tree := _parse(data), ast.Module)}
    # What each module exports as a module, to a fixpoint (a module may pass on what it imported).
    exports: dict[str, dict[str, frozenset[_Module]]] = {stem: {} for stem in own}
    for _ in range(len(trees) + 1):
        found = {stem: _Facts(tree, own, exports, rules).exported() for stem, tree in trees.items()}
        if all(found[stem] == exports[stem] for stem in trees):
            break
        exports.update(found)
    reaches = []
    for name, data in sources.values():
        reaches += _scan(data, name, own, exports, rules)
    return reaches


def submission_loads(folder: Path, modules: Iterable[str]) -> dict[str, frozenset[str]]:
    """For each of the lab's modules (``"blocks.py"``, ...), the lab's modules that importing it
    loads, itself included (``{"model": {"model", "blocks"}}``): what one of them reaching into
    internals can touch. Static, as the scan allows no other way to import. A module that does not
    parse loads only itself (it fails to import)."""
    own = {Path(name).stem for name in modules}
    direct = {}
    for stem in own:
        try:
            tree = _parse((Path(folder) / f"{stem}.py").read_bytes())
        except OSError:
            tree = None
        names = set()
        for node in ast.walk(tree) if isinstance(tree, ast.Module) else ():
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        direct[stem] = names & own
    loads = {}
    for stem in own:
        seen, todo = {stem}, [stem]
        while todo:
            for imported in direct[todo.pop()] - seen:
                seen.add(imported)
                todo.append(imported)
        loads[stem] = frozenset(seen)
    return loads


@dataclass(frozen=True)
class _Module:
    """What a name may hold: a module, by its import name; ``own`` for the lab's modules."""

    name: str
    own: bool = False


# A name imported from a lab module whose source was not scanned: it may be a module.
_PERHAPS = _Module("?", own=True)

_BUILTIN_NAMES = frozenset(dir(builtins))
_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _parse(data: bytes) -> ast.Module | Reach | None:
    """The module's tree as Python would compile it; None if it does not compile; a Reach if it
    compiles but is too deep for the scan (so it cannot slip through unread)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like are the student's business
            tree = ast.parse(data)
        tree.body = [kept for node in tree.body for kept in _run_on_import(node)]
        return tree
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError):
        return Reach("", 1, "is nested too deeply to be checked")


def _run_on_import(node: ast.stmt) -> list[ast.stmt]:
    """``node``, or of an ``if __name__ == "__main__":`` block only its ``else`` (the block is a
    student's self-test: it never runs when the grader imports the module, and rebinding
    ``__name__`` is flagged)."""
    test = node.test if isinstance(node, ast.If) else None
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and {_name_or_text(test.left), _name_or_text(test.comparators[0])} == {"__name__", "'__main__'"}):
        return node.orelse
    return [node]


def _name_or_text(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    return repr(expr.value) if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else None


def _scan(source: str | bytes, filename: str, own: frozenset[str],
          exports: Mapping[str, Mapping[str, frozenset[_Module]]] | None, rules: Rules) -> list[Reach]:
    tree = _parse(source.encode("utf-8") if isinstance(source, str) else source)
    if tree is None:
        return []
    if isinstance(tree, Reach):
        return [Reach(filename, tree.line, tree.what)]
    return sorted({Reach(filename, line, what) for line, what in _Facts(tree, own, exports, rules).reaches()})


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _walk(tree: ast.Module) -> Iterator[tuple[ast.AST, ast.AST | None, ast.AST]]:
    """Every node with its parent and the scope it runs in (the module, a class body, a function
    or a comprehension): defaults, decorators, annotations and a comprehension's first iterable
    run in the enclosing scope. Iterative: a deep expression cannot exhaust the scan's stack."""
    scope_of: dict[int, ast.AST] = {id(tree): tree}
    stack: list[tuple[ast.AST, ast.AST | None, ast.AST]] = [(tree, None, tree)]
    while stack:
        node, parent, scope = stack.pop()
        scope_of[id(node)] = scope
        yield node, parent, scope
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                     *filter(None, (arguments.vararg, arguments.kwarg))]
            outside = [*getattr(node, "decorator_list", ()), *arguments.defaults, *filter(None, arguments.kw_defaults),
                       *(a.annotation for a in every if a.annotation), *filter(None, [getattr(node, "returns", None)])]
            body = node.body if isinstance(node.body, list) else [node.body]
            children = [(child, scope) for child in outside] + [(child, node) for child in (*every, *body)]
        elif isinstance(node, ast.ClassDef):
            children = [(child, scope) for child in (*node.decorator_list, *node.bases, *node.keywords)]
            children += [(child, node) for child in node.body]
        elif isinstance(node, _COMPREHENSIONS):
            children = [(child, node) for child in ast.iter_child_nodes(node)]
        elif isinstance(node, ast.comprehension):
            first = isinstance(parent, _COMPREHENSIONS) and parent.generators[0] is node
            children = [(node.target, scope), (node.iter, scope_of[id(parent)] if first else scope)]
            children += [(test, scope) for test in node.ifs]
        elif isinstance(node, ast.arg):
            children = []  # its annotation runs in the enclosing scope, visited there
        else:
            children = [(child, scope) for child in ast.iter_child_nodes(node)]
        stack.extend((child, node, child_scope) for child, child_scope in reversed(children))


class _Facts:
    """One module's tree, what its names are bound to, and the rules applied to it."""

    def __init__(self, tree: ast.Module, own: frozenset[str],
                 exports: Mapping[str, Mapping[str, frozenset[_Module]]] | None, rules: Rules):
        self.tree, self.own, self.exports, self.rules = tree, own, exports, rules
        self.nodes = list(_walk(tree))
        self.parent = {id(node): parent for node, parent, _ in self.nodes}
        self.scope_of = {id(node): scope for node, _, scope in self.nodes}
        self.locals: dict[int, set[str]] = defaultdict(set)  # function scope -> names bound in it
        self.sites: dict[str, list[ast.AST]] = defaultdict(list)  # name -> where it is bound, anywhere
        declared: dict[int, set[str]] = defaultdict(set)  # scope -> names declared global or nonlocal
        for node, parent, scope in self.nodes:
            for name in _bound_names(node):
                target_scope = scope
                if isinstance(parent, ast.NamedExpr):  # := in a comprehension binds in the function around it
                    while isinstance(target_scope, _COMPREHENSIONS):
                        target_scope = self.scope_of[id(target_scope)]
                self.locals[id(target_scope)].add(name)
                self.sites[name].append(node)
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                declared[id(scope)].update(node.names)
        for scope_id, names in declared.items():
            self.locals[scope_id] -= names
        self.classes = {name for name, sites in self.sites.items() if all(isinstance(s, ast.ClassDef) for s in sites)}
        self.receivers = {name for name in _RECEIVERS if self.sites[name]
                          and all(isinstance(s, ast.arg) for s in self.sites[name])}
        self.own_private = self._own_private()
        self.resolved: dict[int, frozenset[_Module]] = {}
        self.aliases = self._aliases()
        self.constants = self._constant_tuples()
        self.found: set[tuple[int, str]] = set()

    # -- what names are -------------------------------------------------------------------------
    def _own_private(self) -> set[str]:
        """Private names the submission gives its own objects: ``self._x = ...``, a class body's
        ``_x``, ``self.register_buffer("_x", ...)``."""
        names, owners = set(), self.receivers | self.classes
        for node, _, scope in self.nodes:
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
                    and node.value.id in owners):
                names.add(node.attr)
            elif isinstance(scope, ast.ClassDef):
                names.update(_bound_names(node))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _REGISTERS
                  and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names.add(node.args[0].value)
        return {name for name in names if name.startswith("_") and not _is_dunder(name)}

    def _aliases(self) -> dict[str, frozenset[_Module]]:
        """Names bound to modules: by import, or by assigning a module (``x = torch``). A name
        is a module's wherever it is used (conservative: a parameter of that name too)."""
        aliases: dict[str, frozenset[_Module]] = {}
        binders = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)
        bindings = [node for node, _, _ in self.nodes if isinstance(node, binders)]
        changed = True
        while changed:
            changed = False
            for node in bindings:
                for name, targets in self._binds_modules(node, aliases):
                    if not targets <= aliases.get(name, frozenset()):
                        aliases[name] = aliases.get(name, frozenset()) | targets
                        changed = True
        return aliases

    def _binds_modules(self, node: ast.AST,
                       aliases: Mapping[str, frozenset[_Module]]) -> Iterator[tuple[str, frozenset[_Module]]]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                yield name, frozenset({self._module(alias.name if alias.asname else name)})
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                target = self._step(self._module(node.module), alias.name) if alias.name != "*" else None
                if target:
                    yield alias.asname or alias.name, target
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = self._resolve(node.value, aliases)
            if targets:
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(target, ast.Name):
                        yield target.id, targets

    def _module(self, name: str) -> _Module:
        return _Module(name, own=name in self.own)

    def _step(self, module: _Module, attribute: str) -> frozenset[_Module]:
        """What ``module.attribute`` may be, as far as it is a module."""
        if module is _PERHAPS:
            return frozenset({_PERHAPS}) if attribute in self.rules.submodule_names else frozenset()
        if module.own:
            if self.exports is None or module.name not in self.exports:
                return frozenset({_PERHAPS})
            return frozenset(self.exports[module.name].get(attribute, frozenset()))
        library = self.rules.libraries.get(module.name)
        if library and attribute in library.submodules:
            return frozenset({_Module(f"{module.name}.{attribute}")})
        return frozenset()

    def _resolve(self, expr: ast.AST | None,
                 aliases: Mapping[str, frozenset[_Module]] | None = None) -> frozenset[_Module]:
        """The modules ``expr`` (a name or an attribute chain) may be. Once the aliases are
        known, results are kept per node: every link of a long chain is asked about."""
        memo = self.resolved if aliases is None else {}
        aliases = self.aliases if aliases is None else aliases
        chain = []
        while isinstance(expr, ast.Attribute) and id(expr) not in memo:
            chain.append(expr)
            expr = expr.value
        if id(expr) in memo:
            targets = memo[id(expr)]
        elif isinstance(expr, ast.Name):
            targets = aliases.get(expr.id, frozenset())
        else:
            targets = frozenset()
        for link in reversed(chain):
            targets = frozenset().union(*(self._step(target, link.attr) for target in targets))
            memo[id(link)] = targets
        return targets

    def exported(self) -> dict[str, frozenset[_Module]]:
        """The names of this module that may hold modules, for its siblings to import (every
        alias, not only the module-level ones: a function's ``global`` reaches the module too)."""
        return dict(self.aliases)

    def _constant_tuples(self) -> dict[str, frozenset[str]]:
        """Module-level names bound once, to a tuple of strings: ``_NAMES = ("W_query", ...)``."""
        constants = {}
        for name, sites in self.sites.items():
            if len(sites) != 1 or name in _BUILTIN_NAMES:
                continue
            site, parent = sites[0], self.parent[id(sites[0])]
            if isinstance(parent, ast.Assign):
                single = parent.targets == [site]
            else:
                single = isinstance(parent, ast.AnnAssign) and parent.target is site and parent.value is not None
            values = _strings(parent.value, tuples_only=True) if single else None
            if values is not None and self.parent[id(parent)] is self.tree:
                constants[name] = values
        return constants

    def _spelled_out(self, expr: ast.AST) -> frozenset[str] | None:
        """The strings ``expr`` can be, when the source spells all of them out: a literal, or a
        name bound only to literals or by loops over a literal tuple or a constant one."""
        if isinstance(expr, ast.Constant):
            return frozenset({expr.value}) if isinstance(expr.value, str) else None
        if not isinstance(expr, ast.Name) or expr.id in _BUILTIN_NAMES or not self.sites.get(expr.id):
            return None
        values: set[str] = set()
        for site in self.sites[expr.id]:
            parent = self.parent[id(site)]
            if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)) and parent.target is site:
                iterated = (self.constants.get(parent.iter.id) if isinstance(parent.iter, ast.Name)
                            else _strings(parent.iter, tuples_only=False))
            elif (isinstance(parent, ast.Assign) and parent.targets == [site]
                  and isinstance(parent.value, ast.Constant) and isinstance(parent.value.value, str)):
                iterated = frozenset({parent.value.value})
            else:
                iterated = None
            if iterated is None:
                return None
            values |= iterated
        return frozenset(values)

    def _function_local(self, name: str, scope: ast.AST) -> bool:
        """Whether ``name`` used in ``scope`` is a function's local (or a closure's): then it is
        never the built-in of that name (an unbound local raises, it does not fall back)."""
        while scope is not self.tree:
            if isinstance(scope, _FUNCTION_SCOPES) and name in self.locals.get(id(scope), ()):
                return True
            scope = self.scope_of[id(scope)]
        return False

    # -- the rules --------------------------------------------------------------------------------
    def reaches(self) -> set[tuple[int, str]]:
        for node, parent, scope in self.nodes:
            line = getattr(node, "lineno", None) or getattr(parent, "lineno", 1)
            if isinstance(node, (ast.Import, ast.ImportFrom)) and isinstance(scope, ast.ClassDef):
                self._found(line, "imports inside a class body (a module as the class's attribute)")
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
            elif isinstance(node, ast.Attribute):
                self._attribute(node.value, node.attr, not isinstance(node.ctx, ast.Load), line)
                if isinstance(node.ctx, ast.Load):
                    self._module_as_value(node, parent, scope, line)
                    self._stream(node, parent, line)
                    if node.attr == "__class__":
                        self._class_kept(node, parent, line)
            elif isinstance(node, ast.Name):
                self._name(node, parent, scope, line)
            elif isinstance(node, ast.Call):
                self._call(node, scope, line)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _is_dunder(node.value):
                if node.value != "__main__" and not _is_docstring(parent):
                    self._found(line, f"spells a dunder name in a string ({node.value!r})")
            elif isinstance(node, ast.keyword) and node.arg and _is_dunder(node.arg):
                self._found(line, f"passes `{node.arg}` as a keyword")
            elif isinstance(node, ast.MatchClass):
                for attribute in node.kwd_attrs:  # case C(attr=...) reads attr
                    self._attribute(None, attribute, False, line)
            for name in _bound_names(node):
                if _is_dunder(name) and not self._may_bind_dunder(name, scope):
                    self._found(line, f"defines `{name}`" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                                else f"sets `{name}`")
        return self.found

    def _found(self, line: int, what: str) -> None:
        self.found.add((line, what))

    def _may_bind_dunder(self, name: str, scope: ast.AST) -> bool:
        if isinstance(scope, ast.ClassDef):
            return name in CLASS_DUNDERS
        return scope is self.tree and name in MODULE_DUNDERS

    def _allowed_module(self, name: str) -> bool:
        return name in self.rules.libraries or name in self.own

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not self._allowed_module(alias.name):
                self._found(node.lineno, f"imports {alias.name}")

    def _import_from(self, node: ast.ImportFrom) -> None:
        if node.level:
            self._found(node.lineno, "a relative import (from . import ...)")
            return
        module = node.module or ""
        if not self._allowed_module(module):
            self._found(node.lineno, f"imports {module}")
            return
        for alias in node.names:
            name = alias.name
            if name == "*":
                self._found(node.lineno, f"imports * from {module} (names the check cannot see)")
            elif _is_dunder(name):
                self._found(node.lineno, f"imports `{name}` from {module}")
            elif module in self.rules.libraries and name.startswith("_"):
                self._found(node.lineno, f"imports a private name `{name}` from {module}")
            elif module in self.rules.libraries and not self.rules.libraries[module].allows(name):
                self._found(node.lineno, f"imports {name} from {module}")

    def _attribute(self, value: ast.AST | None, attribute: str, changes: bool, line: int) -> None:
        """The rules for ``value.attribute`` (read, or changed when ``changes``)."""
        targets = self._resolve(value)
        if attribute.startswith("_") and not self._private_allowed(value, attribute, changes, targets):
            if _is_dunder(attribute):
                self._found(line, f"{'changes' if changes else 'reads'} `{attribute}`")
            else:
                self._found(line, f"{'changes' if changes else 'reads'} a private attribute `{attribute}`")
        if attribute in INTERPRETER_ATTRIBUTES:
            self._found(line, f"reads `{attribute}` ({INTERPRETER_ATTRIBUTES[attribute]})")
        for target in targets:
            if target is _PERHAPS:
                if attribute in self.rules.perhaps_denied:
                    self._found(line, f"uses `{attribute}` of a name imported from a lab module (a module's internals)")
                continue
            library = self.rules.libraries.get(target.name)
            if library and not attribute.startswith("_") and not library.allows(attribute):
                self._found(line, f"uses {target.name}.{attribute}")
        if changes and (rooted := self._rooted(value)):
            self._found(line, f"changes {'.'.join((*rooted, attribute))}")

    def _rooted(self, value: ast.AST | None) -> tuple[str, ...]:
        """``value`` as a dotted path from the module it starts at (``torch.Tensor``), or ()
        when it does not start at a module: what changing one of its attributes changes."""
        chain = []
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        modules = [t for t in self._resolve(value) if t is not _PERHAPS] if isinstance(value, ast.Name) else []
        return (modules[0].name, *reversed(chain)) if modules else ()

    def _private_allowed(self, value: ast.AST | None, attribute: str, changes: bool,
                         targets: frozenset[_Module]) -> bool:
        if _is_dunder(attribute):  # a module's dunders are its machinery (__dict__, __spec__, __init__)
            return (not changes and attribute in READABLE_DUNDER_ATTRIBUTES
                    and all(target is _PERHAPS for target in targets))
        if targets and all(t.own and t is not _PERHAPS for t in targets):
            return True  # a private name of one of the lab's modules
        return (isinstance(value, ast.Name) and attribute in self.own_private
                and (value.id in self.receivers or value.id in self.classes))

    def _module_as_value(self, node: ast.AST, parent: ast.AST | None, scope: ast.AST, line: int) -> None:
        """A module is only ever an attribute's base, or bound to a name of a module or a
        function, which then is the module: passed to a function, kept in an object or a class
        (a class's names are its attributes), it could be read where no name shows it is torch."""
        modules = [t for t in self._resolve(node) if t is not _PERHAPS]
        if not modules:
            return
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        bound_to_names = ((isinstance(parent, ast.Assign) and all(isinstance(t, ast.Name) for t in parent.targets))
                          or (isinstance(parent, ast.AnnAssign) and isinstance(parent.target, ast.Name)))
        if bound_to_names and parent.value is node and not isinstance(scope, ast.ClassDef):
            return
        if (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in NAMED_LOOKUPS
                and parent.args and parent.args[0] is node):
            return  # getattr(torch, "name") is judged as torch.name
        self._found(line, f"uses the module {modules[0].name} as a value")

    def _name(self, node: ast.Name, parent: ast.AST | None, scope: ast.AST, line: int) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        name = node.id
        if _is_dunder(name):
            if name not in READABLE_DUNDER_NAMES:
                self._found(line, f"uses `{name}`")
            return
        self._module_as_value(node, parent, scope, line)
        if name not in _BUILTIN_NAMES or name in self.aliases or self._function_local(name, scope):
            return
        if name == "type":
            self._type(node, parent, line)
        if name in ALLOWED_BUILTINS:
            return
        called = isinstance(parent, ast.Call) and parent.func is node
        if name in NAMED_LOOKUPS:
            if not called:
                self._found(line, f"passes {name} around as a value (an attribute looked up by a computed name)")
        else:
            self._found(line, f"calls {name}" if called else f"uses the built-in `{name}`")

    def _call(self, node: ast.Call, scope: ast.AST, line: int) -> None:
        function = node.func
        if isinstance(function, ast.Name) and function.id in NAMED_LOOKUPS and not self._function_local(function.id, scope):
            self._named_lookup(node, function.id, line)
        elif isinstance(function, ast.Attribute) and function.attr == "type" and node.args and _stringy(node.args[0]):
            self._found(line, "calls .type() with a name in a string (that imports the name)")

    def _type(self, node: ast.Name, parent: ast.AST | None, line: int) -> None:
        """The built-in ``type``: only ``type(x)``, whose class is only named or compared. Called with a
        name, bases and a namespace it makes a class with any dunder method (``__torch_dispatch__``,
        ``__del__``), and so does the class of a class (``type(type(x))``, ``type(x).mro()[0]``)."""
        call = isinstance(parent, ast.Call) and parent.func is node
        if not call:
            self._found(line, "uses the built-in `type` as a value (called, it makes classes)")
        elif len(parent.args) != 1 or isinstance(parent.args[0], ast.Starred) or parent.keywords:
            self._found(line, "creates a class with type (called with other than one argument)")
        else:
            self._class_kept(parent, self.parent[id(parent)], line)

    def _class_kept(self, node: ast.AST, parent: ast.AST | None, line: int) -> None:
        """``node`` gives an object's class (``type(x)``, ``x.__class__``): it may be named, compared,
        formatted or tested against, nothing more (called, or through its methods, it leads to
        ``type`` itself, which makes classes)."""
        named = (isinstance(parent, ast.Attribute) and parent.value is node and isinstance(parent.ctx, ast.Load)
                 and parent.attr in ("__name__", "__qualname__"))
        tested = (isinstance(parent, ast.Call) and node in parent.args and isinstance(parent.func, ast.Name)
                  and parent.func.id in _CLASS_READERS)
        if not (named or tested or isinstance(parent, (ast.Compare, ast.FormattedValue))):
            self._found(line, "uses an object's class beyond its name (a class's class makes classes)")

    def _stream(self, node: ast.Attribute, parent: ast.AST | None, line: int) -> None:
        """``sys.stdout`` and ``sys.stderr`` are only written to (``print(..., file=sys.stderr)``,
        ``sys.stdout.write``): below them lie the raw files the grader opened."""
        if node.attr not in ("stdout", "stderr") or not any(t.name == "sys" for t in self._resolve(node.value)):
            return
        printed = isinstance(parent, ast.keyword) and parent.arg == "file"
        written = (isinstance(parent, ast.Attribute) and parent.attr in ("write", "flush")
                   and isinstance(self.parent[id(parent)], ast.Call) and self.parent[id(parent)].func is parent)
        if not (printed or written):
            self._found(line, f"uses sys.{node.attr} other than to write to it (below it lies a raw file)")

    def _named_lookup(self, node: ast.Call, function: str, line: int) -> None:
        """``getattr(obj, name)`` and its kin: judged as ``obj.name`` for every name the source
        spells out; a name computed at run time could be anything."""
        arguments = node.args
        names = None
        if len(arguments) >= 2 and not node.keywords and not any(isinstance(a, ast.Starred) for a in arguments):
            names = self._spelled_out(arguments[1])
        if names is None:
            receiver = len(arguments) >= 2 and isinstance(arguments[0], ast.Name) and arguments[0].id in self.receivers
            if not (receiver and _public_prefix(arguments[1])):  # getattr(self, f"W_{kind}") is the student's own
                self._found(line, f"{function} with a computed name")
            return
        for name in sorted(names):
            self._attribute(arguments[0], name, function in ("setattr", "delattr"), line)


def _is_docstring(parent: ast.AST | None) -> bool:
    """Whether a string constant whose parent is ``parent`` stands alone as a statement: a docstring."""
    return isinstance(parent, ast.Expr)


def _bound_names(node: ast.AST) -> Iterator[str]:
    """The names a node binds in the scope it runs in."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        yield node.id
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.alias) and node.name != "*":
        yield node.asname or node.name.split(".")[0]
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest


def _public_prefix(expr: ast.AST) -> bool:
    """Whether the string ``expr`` builds starts with a literal that is not private (``f"W_{kind}"``,
    ``"W_" + kind``, ``"W_{}".format(kind)``): no dunder or private name can come out of it."""
    while isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        expr = expr.left
    if isinstance(expr, ast.JoinedStr) and expr.values:
        expr = expr.values[0]
    elif (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "format"
          and isinstance(expr.func.value, ast.Constant)):
        expr = ast.Constant(expr.func.value.value.split("{")[0] if isinstance(expr.func.value.value, str) else None)
    return isinstance(expr, ast.Constant) and isinstance(expr.value, str) and expr.value[:1] not in ("", "_")


def _stringy(expr: ast.AST) -> bool:
    """Whether ``expr`` is a string the source writes or builds (a literal, an f-string, a sum)."""
    literal = isinstance(expr, ast.Constant) and isinstance(expr.value, str)
    return literal or isinstance(expr, (ast.JoinedStr, ast.BinOp))


def _strings(expr: ast.AST, tuples_only: bool) -> frozenset[str] | None:
    """The strings of a literal tuple (or list or set, unless ``tuples_only``) of string literals."""
    kinds = (ast.Tuple,) if tuples_only else (ast.Tuple, ast.List, ast.Set)
    if not isinstance(expr, kinds):
        return None
    if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in expr.elts):
        return None
    return frozenset(e.value for e in expr.elts)
