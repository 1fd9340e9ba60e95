"""The rules of the internals scan (:mod:`autograder.judge.internals`), as data: the modules a submission may
import and what it may use of each (:data:`LIBRARIES`, and what a lab that declares more may allow:
:data:`autograder.harness.lab_imports.LAB_MAY_ALLOW`), the attributes no object may be asked for
(:data:`INTERPRETER_ATTRIBUTES`), the built-ins and dunder names allowed. The walker applies them; a change
of what is allowed is a change here.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from autograder.harness.lab_imports import LAB_MAY_ALLOW


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

# What a lab may allow beyond LIBRARIES is declared with each one's first use, which the zygote pays
# (autograder.harness.lab_imports.LAB_MAY_ALLOW). Allowing one makes it an attribute its parent module may lead
# to. Each is read from the running torch only when a lab allows it (as _library reads every module).


def _own_names(name: str) -> frozenset[str]:
    """The public names module ``name`` defines itself (torch's classes and functions): all a lab that allows it
    may use of it. Not what it imports from elsewhere (torch.optim.lr_scheduler holds weakref's ``ref``, a
    finaliser), nor a submodule that torch deletes from it (``torch.optim.optimizer``, whose ``sys`` a later
    torch that kept the name would hand out)."""
    return frozenset(attribute for attribute, value in vars(importlib.import_module(name)).items()
                     if attribute[:1] != "_" and not isinstance(value, types.ModuleType)
                     and (getattr(value, "__module__", None) or "").startswith("torch"))


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
    if allowed - LAB_MAY_ALLOW.keys():
        raise ValueError(f"allowed_imports: {', '.join(sorted(allowed - LAB_MAY_ALLOW.keys()))} cannot be allowed; a "
                         f"lab may allow {', '.join(sorted(LAB_MAY_ALLOW))} (autograder/harness/lab_imports.py: LAB_MAY_ALLOW)")
    libraries = dict(LIBRARIES)
    for name in sorted(allowed):  # a parent before its children: each child becomes its parent's submodule
        libraries[name] = _library(name, only=_own_names(name))
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
OPERATORS = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
              "lshift", "rshift")
CLASS_DUNDERS = frozenset({
    "__init__", "__post_init__", "__repr__", "__str__", "__format__", "__call__", "__len__", "__iter__",
    "__next__", "__reversed__", "__contains__", "__getitem__", "__setitem__", "__delitem__", "__eq__",
    "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__bool__", "__enter__", "__exit__",
    "__neg__", "__pos__", "__abs__", "__invert__", "__slots__", "__doc__",
    *(f"__{prefix}{op}__" for op in OPERATORS for prefix in ("", "r", "i")),
})
MODULE_DUNDERS = frozenset({"__all__", "__author__", "__version__", "__license__", "__copyright__",
                            "__email__", "__status__", "__credits__", "__maintainer__", "__date__", "__doc__"})
READABLE_DUNDER_NAMES = frozenset({"__name__", "__doc__"}) | MODULE_DUNDERS
# __class__ is type(x), which any code may call; what leads on from a class (__mro__, __subclasses__,
# __dict__) is not read.
READABLE_DUNDER_ATTRIBUTES = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__class__"})

# Calls that give an nn.Module an attribute named by a string: they make a private name the
# student's own as ``self._name = ...`` does.
REGISTERS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module"})
# Built-ins that read an object's class without leading anywhere from it.
CLASS_READERS = frozenset({"isinstance", "issubclass", "print", "str", "repr"})
RECEIVERS = frozenset({"self", "cls"})
