"""The judge's scan for code that reaches into interpreter, PyTorch or grader internals
(autograder.judge.internals): every known way to lift a part's ban from inside the worker is
found, on its line, and no honest code in the kit is.

An attack is a small hostile module; each line the scan must flag ends in ``# REACH`` (optionally
``# REACH: <words the finding must contain>``), and no other line may be flagged.
"""

import importlib
import json
import os
import shutil
import signal
import subprocess
import textwrap
import time
import types
from pathlib import Path

import pytest
import torch

from autograder.harness.zygote_client import ForkedChild
from autograder.judge import reach_rules
from autograder.judge.internals import Reach, scan, scan_submission
from autograder.judge.reach_rules import LIBRARIES, TORCH_INTERNALS
from autograder.judge.misconceptions import load_catalogue
from autograder.lab import all_labs
import library_tables
from conftest import KIT, WRONG_MODULES

LABS = all_labs()
OWN = {lab.name: frozenset(lab.part_ids) for lab in LABS}
ATTENTION = OWN["attention"]


def marks(source: str) -> dict[int, str]:
    """``{line: words}`` for the lines of ``source`` marked ``# REACH``."""
    return {number: line.split("# REACH", 1)[1].lstrip(":").strip()
            for number, line in enumerate(source.splitlines(), start=1) if "# REACH" in line}


def expect_marked(found: list[Reach], source: str) -> None:
    expected = marks(source)
    assert {r.line for r in found} == set(expected), found
    for line, words in expected.items():
        assert any(words in r.what for r in found if r.line == line), (line, words, found)


def module(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# -- attacks: each lifts a ban, or is a step towards it -----------------------------------------------
ATTACKS = {
    # A self-test block is skipped, not its else: that runs on import.
    "else_of_a_self_test": """
        if __name__ == "__main__":
            pass
        else:
            import gc  # REACH: imports gc
        """,
    # The second red team: a storage's .type(name) imports any dotted name, here the flagged module
    # that lifts the ban, out of the judge's sight (softmax 15/15 before the scan flagged storages).
    "storage_type_with_a_name_in_a_variable": """
        def softmax(x, dim=-1):
            name = "heads.split_heads"
            x.untyped_storage().type(name)  # REACH: a tensor's raw storage
            return x
        """,
    # issue 21: leave the dispatch mode, call the C function behind every Python name
    "dispatch_mode_left": """
        import torch
        from torch.utils._python_dispatch import _disable_current_modes  # REACH: imports torch.utils._python_dispatch


        def softmax(x, dim=-1):
            with _disable_current_modes():
                return torch._C._VariableFunctions.softmax(x, dim)  # REACH: private attribute `_C`
        """,
    # the same with public names only: torch re-exports torch._C's dispatcher classes
    "dispatch_key_excluded": """
        import torch


        def softmax(x, dim=-1):
            python = torch.DispatchKeySet(torch.DispatchKey.Python)  # REACH: uses torch.DispatchKeySet
            with torch.ExcludeDispatchKeyGuard(python):  # REACH: uses torch.ExcludeDispatchKeyGuard
                return torch.special.softmax(x, dim)
        """,
    "guards_emptied_through_gc": """
        import gc  # REACH: imports gc

        import torch


        def softmax(x, dim=-1):
            for thing in gc.get_objects():
                if type(thing).__name__ == "Guards":
                    thing.forbidden = frozenset()
            return torch.softmax(x, dim)
        """,
    "gc_by_dunder_import": """
        def softmax(x, dim=-1):
            gc = __import__("g" + "c")  # REACH: uses `__import__`
            return x
        """,
    "gc_by_importlib": """
        import importlib  # REACH: imports importlib

        gc = importlib.import_module("gc")
        """,
    "gc_through_torch": """
        import torch

        gc = torch.importlib.import_module("gc")  # REACH: uses torch.importlib
        """,
    "wrapped_original": """
        import torch


        def softmax(x, dim=-1):
            return torch.softmax.__wrapped__(x, dim)  # REACH: reads `__wrapped__`
        """,
    "wrapped_by_getattr": """
        import torch


        def softmax(x, dim=-1):
            return getattr(torch.softmax, "__wrapped__", torch.softmax)(x, dim)  # REACH: reads `__wrapped__`
        """,
    "operator_by_ops": """
        import torch


        def softmax(x, dim=-1):
            return torch.ops.aten._softmax(x, dim, False)  # REACH: uses torch.ops
        """,
    "name_built_at_run_time": """
        import torch


        def softmax(x, dim=-1):
            return getattr(torch, "soft" + "max")(x, dim)  # REACH: getattr with a computed name
        """,
    "name_from_a_parameter": """
        import torch


        def lookup(name):
            return getattr(torch, name)  # REACH: getattr with a computed name
        """,
    "name_decoded_from_hex": """
        import torch

        ops = getattr(torch, bytes.fromhex("6f7073").decode())  # REACH: computed name
        """,
    "name_reversed": """
        import torch

        ops = getattr(torch, "".join(reversed("spo")))  # REACH: computed name
        """,
    "name_rebound_inside_the_loop": """
        import torch


        class Heads(torch.nn.Module):
            def forward(self, x):
                for name in ("W_query",):
                    name = "o" + "ps"
                    getattr(self, name)  # REACH: computed name
        """,
    "literal_loop_reaching_a_dunder": """
        class Heads:
            def forward(self, x):
                for name in ("W_query", "__dict__"):  # REACH: a dunder name in a string
                    getattr(self, name)  # REACH: reads `__dict__`
        """,
    "private_name_by_prefix": """
        class Heads:
            def grab(self, what):
                return getattr(self, f"_{what}")  # REACH: computed name
        """,
    "literal_getattr_on_torch": """
        import torch

        ops = getattr(torch, "ops")  # REACH: uses torch.ops
        """,
    "setattr_on_torch": """
        import torch


        def mine(x, dim=-1):
            return x


        setattr(torch, "softmax", mine)  # REACH: changes torch.softmax
        """,
    "library_patched": """
        import torch
        import torch.nn.functional as F

        F.softmax = lambda x, dim=-1: x  # REACH: changes torch.nn.functional.softmax
        torch.Tensor.softmax = lambda x, dim=-1: x  # REACH: changes torch.Tensor.softmax
        del torch.layer_norm  # REACH: changes torch.layer_norm
        """,
    "sys_modules_written": """
        import sys

        sys.modules["torch"].softmax = None  # REACH: uses sys.modules
        """,
    "frame_walking_sys": """
        import sys


        def softmax(x, dim=-1):
            worker = sys._getframe(2).f_globals  # REACH: private attribute `_getframe`
            return x
        """,
    "frame_walking_inspect": """
        import inspect  # REACH: imports inspect


        def softmax(x, dim=-1):
            caller = inspect.currentframe().f_back.f_globals  # REACH: the interpreter's frames
            return x
        """,
    "frame_through_a_generator": """
        def softmax(x, dim=-1):
            def probe():
                yield running.gi_frame.f_back.f_back.f_globals  # REACH: frames
            running = probe()
            guards = next(running)["worker"].guards
            return x
        """,
    "frame_through_a_traceback": """
        def softmax(x, dim=-1):
            try:
                raise RuntimeError
            except RuntimeError as error:
                frame = error.__traceback__.tb_frame.f_back  # REACH: reads `__traceback__`
            return x
        """,
    "ctypes_imported": """
        import ctypes  # REACH: imports ctypes

        ctypes.pythonapi.PyGILState_Ensure()
        """,
    "ctypes_through_torch": """
        import torch

        api = torch.ctypes.pythonapi  # REACH: uses torch.ctypes
        """,
    "ctypes_through_numpy": """
        import torch


        def softmax(x, dim=-1):
            address = x.numpy().ctypes.data  # REACH: raw memory
            return x
        """,
    "exec_eval_compile": """
        exec("import gc")  # REACH: calls exec
        value = eval("1 + 1")  # REACH: calls eval
        code = compile("x = 1", "<x>", "exec")  # REACH: calls compile
        """,
    "builtins_dict": """
        gc = __builtins__["__import__"]("gc")  # REACH: uses `__builtins__`
        """,
    "subclasses_walk": """
        everything = ().__class__.__base__.__subclasses__()  # REACH: reads `__subclasses__`
        """,
    "function_internals": """
        import torch


        def softmax(x, dim=-1):
            return x


        worker_globals = softmax.__globals__  # REACH: reads `__globals__`
        cell = softmax.__closure__  # REACH: reads `__closure__`
        code = softmax.__code__  # REACH: reads `__code__`
        """,
    "object_getattribute": """
        import torch

        C = object.__getattribute__(torch, "_C")  # REACH: reads `__getattribute__`
        """,
    "vars_globals_locals": """
        import torch

        C = vars(torch)["_C"]  # REACH: calls vars
        mine = globals()  # REACH: calls globals
        here = locals()  # REACH: calls locals
        """,
    "proc_self_mem": """
        memory = open("/proc/self/mem", "rb")  # REACH: calls open
        """,
    "storage_from_file": """
        import torch

        memory = torch.UntypedStorage.from_file("/proc/self/mem", False, 4096)  # REACH: uses torch.UntypedStorage
        """,
    "kernel_registered": """
        import torch

        lib = torch.library.Library("aten", "IMPL")  # REACH: uses torch.library
        lib.impl("_softmax", lambda x, dim, half: x, "CPU")
        """,
    "kernel_registered_by_import": """
        from torch.library import Library  # REACH: imports torch.library
        """,
    "torch_function_mode": """
        import torch


        class Lift(torch.overrides.TorchFunctionMode):  # REACH: uses torch.overrides
            pass
        """,
    "cpp_extension": """
        from torch.utils.cpp_extension import load_inline  # REACH: imports torch.utils.cpp_extension
        """,
    "alias_of_torch": """
        import torch as t

        C = t._C  # REACH: private attribute `_C`
        """,
    "private_name_imported": """
        from torch import _C  # REACH: imports a private name `_C` from torch
        """,
    "module_assigned_to_a_name": """
        import torch

        x = torch
        softmax_op = x.ops.aten._softmax  # REACH: uses torch.ops
        """,
    "module_handed_to_a_function": """
        import torch


        def reach(library):
            return library.ops.aten.native_layer_norm


        layer_norm = reach(torch)  # REACH: uses the module torch as a value
        """,
    "module_in_a_walrus": """
        import torch

        layer_norm = (t := torch).ops.aten.native_layer_norm  # REACH: uses the module torch as a value
        """,
    "module_called_as_self": """
        import torch


        class Probe:
            def __init__(self):
                self._C = None

            def peek(self):
                return self._C


        C = Probe.peek(torch)  # REACH: uses the module torch as a value
        """,
    "module_kept_in_a_class": """
        import torch


        class Box:
            lib = torch  # REACH: uses the module torch as a value


        layer_norm = Box.lib.ops.aten.native_layer_norm
        """,
    "module_imported_in_a_class": """
        class Box:
            import torch as lib  # REACH: imports inside a class body
        """,
    "module_machinery": """
        import torch.nn.functional as F

        F.__init__("torch.nn.functional")  # REACH: reads `__init__`
        table = F.__dict__  # REACH: reads `__dict__`
        """,
    "torch_inside_functional": """
        import torch.nn.functional as F

        ops = F.torch.ops  # REACH: uses torch.nn.functional.torch
        """,
    "stdlib_inside_allowed_modules": """
        import dataclasses
        import torch
        import typing
        import warnings

        modules = torch.sys.modules  # REACH: uses torch.sys
        loaded = dataclasses.sys.modules  # REACH: uses dataclasses.sys
        attrgetter = typing.operator.attrgetter  # REACH: uses typing.operator
        frames = warnings.sys.settrace  # REACH: uses warnings.sys
        """,
    "global_hooks": """
        import torch.nn as nn

        hooks = nn.modules.module.register_module_forward_hook  # REACH: uses torch.nn.modules
        """,
    "getattr_passed_around": """
        import functools
        import torch

        ops = functools.reduce(getattr, ["ops", "aten"], torch)  # REACH: passes getattr around
        """,
    "operator_attrgetter": """
        import operator  # REACH: imports operator
        """,
    "annotations_evaluated": """
        from typing import get_type_hints  # REACH: imports get_type_hints from typing


        def f(x: "__import__('gc')"):
            pass


        get_type_hints(f)
        """,
    "singledispatch_evaluates_annotations": """
        import functools


        @functools.singledispatch  # REACH: uses functools.singledispatch
        def f(x):
            pass
        """,
    "pattern_matching_on_a_module": """
        import torch

        match torch:  # REACH: uses the module torch as a value
            case object(_C=C):  # REACH: private attribute `_C`
                pass
        """,
    # ordinary API, and yet: the dispatch mode that refuses forbidden operators sees none under it
    "inference_mode_skips_the_dispatch_mode": """
        import torch
        import torch.nn.functional as F


        def softmax(x, dim=-1):
            n = x.shape[-1]
            rows = x.reshape(-1, n).repeat_interleave(n, dim=0)
            targets = torch.arange(n).repeat(rows.shape[0] // n)
            with torch.inference_mode():  # REACH: uses torch.inference_mode
                return torch.exp(-F.cross_entropy(rows, targets, reduction="none")).reshape(x.shape)
        """,
    "torch_load_pickle": """
        import torch

        state = torch.load("/tmp/x.pt", weights_only=False)  # REACH: uses torch.load
        """,
    "compiled": """
        import torch

        fast = torch.compile(lambda x: x)  # REACH: uses torch.compile
        script = torch.jit.script  # REACH: uses torch.jit


        class Fast(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.compile()  # REACH: compiles code
        """,
    "device_module_returned": """
        import torch

        cpu = torch.get_device_module("cpu")  # REACH: uses torch.get_device_module
        """,
    "dotted_name_imported_by_type": """
        import torch


        def softmax(x, dim=-1):
            x.untyped_storage().type("gc.collect")  # REACH: .type() with a name in a string
            return x
        """,
    "breakpoint_and_input": """
        breakpoint()  # REACH: calls breakpoint
        answer = input()  # REACH: calls input
        """,
    "builtin_shadowed_only_in_dead_code": """
        if False:
            eval = None
        eval("1")  # REACH: calls eval
        """,
    "builtin_declared_global": """
        def run(text):
            global exec
            exec(text)  # REACH: calls exec
        """,
    "builtin_in_a_default": """
        def run(text, run=exec):  # REACH: uses the built-in `exec`
            run(text)
        """,
    "fullwidth_identifier": """
        ｅｖａｌ("1")  # REACH: calls eval
        """,
    "dunder_hooks_defined": """
        import torch


        class Sneaky(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):  # REACH: defines `__torch_function__`
                return func(*args, **(kwargs or {}))

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # REACH: defines `__torch_dispatch__`
                return func(*args)
        """,
    "class_made_by_type": """
        def hook(*args):
            return None


        Sneaky = type("Sneaky", (), {"__torch_function__": hook})  # REACH: creates a class with type
        """,
    # issue 38: a tensor subclass made by type under another name, its handler a dictionary key; the
    # judge's modes ran the handler under no ban (softmax 14.5/15, layer norm 15/15 before)
    "subclass_made_by_type_under_another_name": """
        import torch

        make = type  # REACH: uses the built-in `type` as a value


        def handler(cls, func, types, args=(), kwargs=None):
            return torch.zeros(())


        S = make("S", (torch.Tensor,), {"__torch_dispatch__": classmethod(handler)})  # REACH: dunder name in a string


        def softmax(x, dim=-1):
            return torch.neg(x.as_subclass(S))  # REACH: makes a tensor of another class
        """,
    "classes_made_through_a_class": """
        import torch


        def softmax(x, dim=-1):
            maker = type(type(x))  # REACH: an object's class beyond its name
            again = type(x).mro()[0]  # REACH: an object's class beyond its name
            other = x.__class__.__class__  # REACH: an object's class beyond its name
            made = type(*("S", (), {}))  # REACH: creates a class with type
            sub = getattr(x, "as_subclass")(torch.Tensor)  # REACH: another class
            type(x).softmax = lambda self, dim=-1: self  # REACH: an object's class beyond its name
            return x
        """,
    "dunders_by_keyword_and_key": """
        def finalise(self):
            pass


        namespace = dict(__del__=finalise)  # REACH: passes `__del__` as a keyword
        namespace["__getattribute__"] = finalise  # REACH: dunder name in a string
        hooks = {"__init_subclass__": finalise}  # REACH: dunder name in a string


        class Meta(type):  # REACH: uses the built-in `type` as a value
            pass
        """,
    "metaclasses_and_class_factories": """
        import abc
        import dataclasses
        import enum

        Made = abc.ABCMeta("Made", (), {})  # REACH: uses abc.ABCMeta
        Data = dataclasses.make_dataclass("Data", [])  # REACH: uses dataclasses.make_dataclass
        Meta = enum.EnumType  # REACH: uses enum.EnumType
        """,
    "raw_file_below_a_standard_stream": """
        import sys


        def softmax(x, dim=-1):
            opener = type(sys.stdout.buffer.raw)  # REACH: uses sys.stdout other than to write to it
            raw = sys.stderr.detach()  # REACH: uses sys.stderr other than to write to it
            out = sys.stdout  # REACH: uses sys.stdout other than to write to it
            text = out.buffer.raw.readall()  # REACH: a raw file
            return x
        """,
    "warning_records": """
        import warnings
        from warnings import catch_warnings  # REACH: imports catch_warnings from warnings


        def softmax(x, dim=-1):
            with warnings.catch_warnings(record=True) as seen:  # REACH: uses warnings.catch_warnings
                warnings.warn("where am I")
            show = warnings.showwarning  # REACH: uses warnings.showwarning
            return x
        """,
    "module_name_claimed": """
        import torch.nn as nn


        class LayerNorm(nn.Module):
            __module__ = "layernorm"  # REACH: sets `__module__`


        LayerNorm.__qualname__ = "LayerNorm"  # REACH: changes `__qualname__`
        """,
    "module_getattr": """
        def __getattr__(name):  # REACH: defines `__getattr__`
            return None
        """,
    "star_import": """
        from torch import *  # REACH: imports * from torch
        """,
    "relative_import": """
        from . import masking  # REACH: a relative import
        """,
    "os_and_friends": """
        import os  # REACH: imports os
        import os.path  # REACH: imports os.path
        import numpy as np  # REACH: imports numpy
        import torch.utils.checkpoint  # REACH: imports torch.utils.checkpoint
        """,
    "sys_beyond_printing": """
        import sys

        sys.stdout.write("fine")
        sys.settrace(lambda *a: None)  # REACH: uses sys.settrace
        hook = sys.exc_info  # REACH: uses sys.exc_info
        """,
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attack_is_found_on_its_line(name):
    source = module(ATTACKS[name])
    found = scan(source, "softmax.py", ATTENTION)
    expect_marked(found, source)
    assert all(r.file == "softmax.py" for r in found)


def test_a_utf7_source_is_read_as_python_reads_it():
    """Read as UTF-8, the second line is a comment; Python reads ``import gc`` on line 3."""
    data = b"# coding: utf-7\nx = 1 +AAo-import gc\n"
    assert scan(data, "softmax.py", ATTENTION) == [Reach("softmax.py", 3, "imports gc")]


def test_a_module_handed_over_by_a_sibling_is_resolved(tmp_path):
    """``masking.py`` imports torch as ``helper``; ``softmax.py`` imports ``helper`` from it. Scanned
    alone, softmax.py's ``helper`` may be anything; scanned with its siblings, it is torch."""
    (tmp_path / "masking.py").write_text("import torch as helper\nfrom heads import layer as again\n")
    (tmp_path / "heads.py").write_text("import torch.nn as layer\n")
    softmax = module("""
        from masking import helper, again


        class Probe:
            def __init__(self):
                self._C = None

            def peek(self):
                return self._C


        op = helper.ops.aten.native_layer_norm  # REACH: uses torch.ops
        C = Probe.peek(helper)  # REACH: uses the module torch as a value
        hooks = again.modules  # REACH: uses torch.nn.modules
        """)
    (tmp_path / "softmax.py").write_text(softmax)
    found = scan_submission(tmp_path, ["softmax.py", "masking.py", "heads.py", "dropout.py"])
    expect_marked([r for r in found if r.file == "softmax.py"], softmax)
    assert [r for r in found if r.file != "softmax.py"] == []
    # Alone, the names that are library internals on any module are still found; the hand-over is not.
    alone = scan(softmax, "softmax.py", ATTENTION)
    handed_over = next(n for n, line in enumerate(softmax.splitlines(), 1) if "Probe.peek(helper)" in line)
    assert {r.line for r in alone} == set(marks(softmax)) - {handed_over}, alone


# -- what the scan does not see (each a strict xfail: when the scan learns it, move it up) ----------------
NOT_CAUGHT = {
    "format_string_traversal": (
        "a format field walks attributes: only text comes out, nothing to call",
        """
        def softmax(x, dim=-1):
            text = "{0.__globals__}".format(softmax)
            return x
        """),
    "class_made_by_enums_functional_api": (
        "enum's functional API makes a class whose names may be dunders computed at run time: the worker "
        "refuses its objects as a call's arguments while a ban holds (a handler of their own), and the "
        "collector waits meanwhile (a finaliser cannot run when a mode is off the stack)",
        """
        import enum


        def _hook(*args, **kwargs):
            return None


        Sneaky = enum.Enum("Sneaky", [("_".join(["", "", "del", "", ""]), _hook), ("ONE", 1)])
        """),
    "softmax_by_attention": (
        "public API that computes the forbidden function by another operator: the ban's list decides, "
        "not this scan (scaled_dot_product_attention with identity keys and values is a softmax)",
        """
        import math
        import torch
        import torch.nn.functional as F


        def softmax(x, dim=-1):
            n = x.shape[-1]
            eye = torch.eye(n).expand(*x.shape[:-1], n, n)
            return F.scaled_dot_product_attention(x.unsqueeze(-2) * math.sqrt(n), eye, eye).squeeze(-2)
        """),
}


@pytest.mark.parametrize("name", sorted(NOT_CAUGHT))
def test_what_the_scan_does_not_see(name):
    why, source = NOT_CAUGHT[name]
    found = scan(module(source), "softmax.py", ATTENTION)
    if not found:
        pytest.xfail(why)
    pytest.fail(f"the scan now sees {name}: move it to ATTACKS ({found})")


# -- honest code is never flagged ---------------------------------------------------------------------
# The wrong-module corpus' deliberate evasions: they reach an operator below its Python names.
EVASIONS = {
    "attention/softmax/operator_softmax.py": "torch.ops.aten._softmax: the softmax operator below its Python names",
    "transformer/layernorm/operator_layer_norm.py": "torch.ops.aten.native_layer_norm: the layer norm operator",
}


def lab_of(path: Path) -> str:
    return next(lab for lab in OWN if lab in path.relative_to(KIT).parts)


def honest_files() -> list[Path]:
    files = [*KIT.glob("solutions/*/*.py"), *KIT.glob("assignments/*/*.py"), *KIT.glob("source/*/*.py"),
             *(p for p in WRONG_MODULES.glob("**/*.py") if str(p.relative_to(WRONG_MODULES)) not in EVASIONS)]
    return sorted(files)


@pytest.mark.parametrize("path", honest_files(), ids=lambda p: str(p.relative_to(KIT)))
def test_the_kits_modules_are_never_flagged(path):
    assert scan(path.read_bytes(), path.name, OWN[lab_of(path)]) == []


@pytest.mark.parametrize("evasion", sorted(EVASIONS))
def test_the_wrong_module_corpus_evasions_are_flagged(evasion):
    path = WRONG_MODULES / evasion
    found = scan(path.read_bytes(), path.name, OWN[lab_of(path)])
    assert any("torch.ops" in r.what for r in found), (EVASIONS[evasion], found)


@pytest.mark.parametrize("folder", sorted(KIT.glob("examples/submitted/*/*")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_demo_cohort_is_never_flagged(folder):
    lab = next(lab for lab in LABS if lab.name == folder.name)
    assert scan_submission(folder, list(lab.modules)) == []


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.name)
def test_known_mistakes_are_never_flagged(lab):
    for part, mistakes in load_catalogue(lab.checks).items():
        reference = (lab.reference / f"{part}.py").read_text()
        for mistake in mistakes:
            assert scan(mistake.apply(reference), f"{part}.py", OWN[lab.name]) == [], mistake.id


def test_the_kits_test_submissions_are_flagged_only_where_hostile():
    import test_checks
    import test_fairness
    import test_grade
    reference = {part: (KIT / "solutions" / "attention" / f"{part}.py").read_text() for part in ATTENTION}
    hostile = {"exit_at_import", "segfault", "scribbler"}  # os._exit, ctypes, os.write on sockets
    for student, (part, appended, *_) in {**test_fairness.MISTAKES, **test_fairness.MASKING_MISTAKES}.items():
        found = scan(reference[part] + appended, f"{part}.py", ATTENTION)
        assert bool(found) == (student in hostile), (student, found)
    assert scan(reference["softmax"] + test_grade.COUNTING_SOFTMAX, "softmax.py", ATTENTION) == []
    forms = test_checks.SOFTMAXES
    flagged = {r.line for r in scan(forms, "forms.py", frozenset())}
    lines = forms.splitlines()
    assert {lines[n - 1].strip() for n in flagged} == {
        'return getattr(torch, "soft" + "max")(x, dim=-1)', "return torch.ops.aten._softmax(x, -1, False)",
        'return getattr(torch.softmax, "__wrapped__", torch.softmax)(x, dim=-1)'}


HONEST = {
    # The second red team's false positives: a self-test that never runs on import, device boilerplate.
    "self_test_and_device_boilerplate": """
        import torch

        DEVICE = "mps" if torch.backends.mps.is_available() else "cpu"


        def softmax(x, dim=-1):
            e = (x - x.max(dim=dim, keepdim=True).values).exp()
            return e / e.sum(dim=dim, keepdim=True)


        if __name__ == "__main__":
            import numpy as np
            torch.testing.assert_close(softmax(torch.ones(3)), torch.full((3,), 1 / 3))
            print(np.arange(3))
        """,
    "einsum_attention": """
        import math

        import torch


        def attention(q, k, v, mask=None):
            scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
            weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)
            return torch.einsum("bhqk,bhkd->bhqd", weights, v)
        """,
    "private_helpers_and_constants": """
        from __future__ import annotations

        import torch

        _EPS = 1e-5
        __all__ = ["layer_norm"]


        def _split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x.mean(dim=-1, keepdim=True), x.var(dim=-1, keepdim=True, unbiased=False)


        def layer_norm(x, weight, bias, eps=_EPS):
            mean, var = _split(x)
            return (x - mean) * torch.rsqrt(var + eps) * weight + bias
        """,
    "module_with_its_own_private_state": """
        import math
        from typing import Optional

        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class MultiHeadAttention(nn.Module):
            _registry = []

            def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
                super(MultiHeadAttention, self).__init__()
                self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # packed in-projection
                self.out_proj = nn.Linear(d_model, d_model, bias=bias)
                self.heads = nn.ModuleList([nn.Identity() for _ in range(num_heads)])
                self.relu = nn.ReLU()
                self.num_heads, self.head_dim = num_heads, d_model // num_heads
                self._cache: Optional[torch.Tensor] = None
                self.__seen = 0
                self.register_buffer("_scale", torch.tensor(1 / math.sqrt(self.head_dim)))
                MultiHeadAttention._registry.append(self)

            def forward(self, query, key, value, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
                q, k, v = self.in_proj(query).chunk(3, dim=-1)
                B, T, _ = q.shape
                outs = []
                for h in range(self.num_heads):  # per-head slices
                    cut = slice(h * self.head_dim, (h + 1) * self.head_dim)
                    keep = None if mask is None else ~mask
                    outs.append(F.scaled_dot_product_attention(q[..., cut], k[..., cut], v[..., cut], attn_mask=keep))
                self._cache = outs[0].detach()
                self.__seen += 1
                return self.out_proj(torch.cat(outs, dim=-1)) * self._scale / self._scale

            def __repr__(self):
                return f"{type(self).__name__}(heads={self.num_heads})"
        """,
    "names_spelled_out": """
        import torch.nn as nn

        _NAMES = ("W_query", "W_key", "W_value")


        class Projections(nn.Module):
            def __init__(self, d_in, d_out):
                nn.Module.__init__(self)
                for name in _NAMES:
                    setattr(self, name, nn.Linear(d_in, d_out))
                for kind in ("query", "key"):
                    getattr(self, f"W_{kind}").weight.data.mul_(1.0)
                if hasattr(self, "W_value") and hasattr(self, "W_" + "key"):
                    pass

            def forward(self, x):
                return [getattr(self, name)(x) for name in _NAMES]
        """,
    "grad_modes_and_tensor_helpers": """
        import dataclasses
        import sys
        import warnings

        import torch


        @dataclasses.dataclass(frozen=True)
        class Config:
            p: float = 0.1


        @torch.no_grad()
        def dropout(x, p, keep_mask=None, generator=None, training=True):
            if not 0 <= p <= 1:
                raise ValueError(f"p must be in [0, 1], got {p}")
            if p > 0.9:
                warnings.warn("most values are dropped")
            if keep_mask is None:
                keep_mask = torch.rand(x.shape, generator=generator) >= p
            out = x.new_zeros(x.shape)
            out = torch.where(keep_mask, x / (1 - p), out)
            with torch.enable_grad():
                return out if training else x


        def debug(*args):
            print(*args, file=sys.stderr)
            device = "cuda" if torch.cuda.is_available() else "cpu"
            return device


        if __name__ == "__main__":
            debug(dropout(torch.ones(3), 0.5, generator=torch.Generator().manual_seed(0)))
        """,
    "initialisers_and_plain_namespaces": """
        import collections
        import copy
        import itertools

        import torch
        import torch.nn as nn
        from torch import Tensor


        def init_(layer: nn.Linear) -> nn.Linear:
            nn.init.xavier_uniform_(layer.weight)
            torch.nn.init.zeros_(layer.bias)
            return layer


        def stack(layer: nn.Module, n: int) -> nn.Sequential:
            named = collections.OrderedDict((f"layer{i}", copy.deepcopy(layer)) for i in range(n))
            return nn.Sequential(named)


        def norms(x: Tensor) -> Tensor:
            pairs = list(itertools.product(range(2), repeat=2))
            return torch.linalg.vector_norm(x, dim=-1) + torch.special.expit(x).sum() + len(pairs)
        """,
    "parameters_named_like_builtins": """
        import torch


        def softmax(input, dim=-1, type=None, open=None):
            shifted = input - input.amax(dim=dim, keepdim=True)
            return shifted.exp() / shifted.exp().sum(dim=dim, keepdim=True)


        def use(vars):
            return [input for input in vars]
        """,
    "class_replaces_its_own_method": """
        import torch.nn as nn


        class CausalAttention(nn.Module):
            def forward(self, x):
                return x


        _forward = CausalAttention.forward
        CausalAttention.forward = lambda self, x: 2 * _forward(self, x)
        """,
    # A class by its name, compared or tested; the standard streams written to; a self-test that compares
    # __name__ the other way round.
    "classes_named_and_streams_written": """
        import sys

        import torch


        def describe(x, y):
            '''__init__'''
            if type(x) is torch.Tensor and isinstance(y, type(x)) and type(y) == type(x):
                print(f"a {type(x).__name__} like {type(y)}", file=sys.stderr)
            sys.stdout.write(repr(x.__class__.__qualname__))
            sys.stdout.flush()
            return str(type(x))


        if "__main__" == __name__:
            describe(torch.ones(1), torch.ones(1))
        """,
    # The red team's honest idioms that an earlier scan flagged.
    "class_name_in_a_message_parameter_import_and_a_custom_function": """
        import torch
        from torch import nn
        from torch.nn.parameter import Parameter


        class Scale(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, factor):
                ctx.factor = factor
                return x * factor

            @staticmethod
            def backward(ctx, grad):
                return grad * ctx.factor, None


        class Heads(nn.Module):
            def __init__(self, d_out, num_heads):
                super().__init__()
                if d_out % num_heads:
                    raise ValueError(f"{self.__class__.__name__}: d_out must be divisible by num_heads")
                self.gain = Parameter(torch.ones(d_out))

            def forward(self, x):
                return Scale.apply(x, 2.0) * self.gain
        """,
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_styles_are_never_flagged(name):
    assert scan(module(HONEST[name]), "heads.py", ATTENTION) == []


def test_a_module_that_does_not_parse_gives_no_findings():
    assert scan("def softmax(x:\n    import gc\n", "softmax.py", ATTENTION) == []
    assert scan(b"import gc\n\xe9\n", "softmax.py", ATTENTION) == []  # not UTF-8: its import fails too
    assert scan("(" * 1000 + ")" * 1000, "softmax.py", ATTENTION) == []  # too nested for Python itself


def test_a_deep_expression_is_scanned_not_crashed_on():
    """As deep as Python compiles, the scan reads it; deeper, Python does not compile it either, and
    the scan says so rather than passing it unread (another interpreter's limit may differ)."""
    deep = "import torch\nx = " + "-" * 900 + "torch.ops\n"
    assert [r.what for r in scan(deep, "softmax.py", ATTENTION)] == ["uses torch.ops"]
    deeper = "import torch\nx = " + "-" * 20000 + "torch.ops\n"
    assert scan(deeper, "softmax.py", ATTENTION) == [Reach("softmax.py", 1, "is nested too deeply to be checked")]


def test_a_scan_takes_milliseconds():
    sources = [(path.read_bytes(), OWN[lab_of(path)]) for path in KIT.glob("solutions/*/*.py")]
    start = time.perf_counter()
    for data, own in sources:
        scan(data, "x.py", own)
    assert (time.perf_counter() - start) / len(sources) < 0.02


# -- the tables hold for the installed libraries --------------------------------------------------------
def public(module_name: str) -> dict[str, object]:
    imported = importlib.import_module(module_name)
    return {name: getattr(imported, name) for name in dir(imported) if not name.startswith("_")}


@pytest.mark.parametrize("name", sorted(LIBRARIES))
def test_the_tables_hold_for_the_installed_libraries(name):
    assert library_tables.gaps(name) == []


def interpreter(version: str) -> str | None:
    """A Python ``version`` ("3.12") on this machine: on the path, or one of pyenv's."""
    candidates = [shutil.which(f"python{version}"), *map(str, sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python")))]
    for candidate in filter(None, candidates):
        run = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True)
        if run.returncode == 0 and run.stdout.strip() == version:
            return candidate
    return None


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13"])
def test_the_standard_librarys_tables_hold_on_every_python_the_readme_names(version, tmp_path):
    """Which modules the standard library's modules hold differs by version (typing holds copyreg from
    3.12, collections.abc sys from 3.13): the tables are read from the running Python, and checked here
    under each, with empty modules standing in for torch (its wheel is built for one Python)."""
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    for name in filter(lambda name: name.partition(".")[0] == "torch", LIBRARIES):
        folder = tmp_path.joinpath(*name.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").touch()
    run = subprocess.run([python, str(KIT / "tests" / "library_tables.py")], capture_output=True, text=True,
                         env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{KIT}", "PATH": os.environ["PATH"]})
    assert run.returncode == 0, run.stderr[-3000:]
    assert {name: found for name, found in json.loads(run.stdout).items() if found} == {}


def test_torchs_machinery_under_public_names_is_denied():
    """torch re-exports torch._C's dispatcher and JIT classes, storages and operator packets, and
    functions that compile, unpickle or import: each is in TORCH_INTERNALS (torch.Generator, the
    random-number generator a dropout is handed, is the one torch._C class a lab needs)."""
    machinery = {"torch.serialization", "torch._utils_internal", "torch.func", "torch.utils.dlpack", "torch._utils",
                 "torch.jit", "torch._C"}
    undenied = []
    for name, value in public("torch").items():
        origin = str(getattr(value, "__module__", ""))
        if (type(value).__name__ in ("pybind11_type", "_LegacyStorageMeta", "OpOverloadPacket")
                or (isinstance(value, type) and origin in machinery)
                or (callable(value) and (origin in machinery or origin.startswith("torch._higher_order_ops"))
                    and not hasattr(torch._C._VariableFunctions, name))
                or isinstance(value, types.ModuleType)):
            if name not in TORCH_INTERNALS and name not in LIBRARIES["torch"].submodules and name != "Generator":
                undenied.append(name)
    assert undenied == []


def test_no_module_torch_loads_on_first_use_is_allowed():
    """Missing from dir(torch) until then (the private ones are refused as private)."""
    assert [name for name in torch._lazy_modules if name[0] != "_" and LIBRARIES["torch"].allows(name)] == []


def test_a_lab_that_allows_the_optimisers_gives_only_what_torch_defines_there():
    """An allowed module is an allowlist of the names it defines itself: the optimisers and schedulers, not
    weakref's ``ref`` that torch.optim.lr_scheduler imports (a finaliser, as ``__del__`` is), nor a submodule
    torch deletes from torch.optim (were a later torch to keep ``torch.optim.optimizer``, its ``sys``)."""
    allowed = frozenset({"torch.optim", "torch.optim.lr_scheduler"})
    trains = textwrap.dedent("""
        import torch
        from torch.optim.lr_scheduler import StepLR
        weight = torch.zeros(2, requires_grad=True)
        optimiser = torch.optim.Adam([weight], lr=0.1)
        schedule = StepLR(optimiser, step_size=1)
        optimiser.zero_grad()
        optimiser.step()
        schedule.step()
    """)
    assert scan(trains, "train.py", frozenset({"train"}), allowed) == []
    for reach in ("from torch.optim.lr_scheduler import ref", "import torch.optim.lr_scheduler as s; s.ref(print)",
                  "import torch; s = torch.optim.lr_scheduler; f = s.ref", "import torch; m = torch.optim.optimizer.sys",
                  "from torch.optim import swa_utils"):
        assert scan(reach, "train.py", frozenset({"train"}), allowed), reach


def test_the_allowed_builtins_reach_nothing():
    assert not reach_rules.ALLOWED_BUILTINS & {"exec", "eval", "compile", "open", "vars", "globals", "locals",
                                              "getattr", "setattr", "delattr", "hasattr", "breakpoint", "input",
                                              "memoryview", "help", "id", "dir", "__import__"}


def test_the_operator_ban_keeps_no_compiler_wrapper_because_the_scan_refuses_the_compiler():
    """PyTorch wraps a dispatch mode's ``__torch_dispatch__`` to keep torch.compile out of it, and the
    wrapper imports torch._dynamo (a second, in every zygote) on its first use. The worker's operator ban
    opts out (``_should_skip_dynamo``): safe because no submission may reach the compiler at all."""
    from autograder.harness.guards import ForbiddenOperators

    dispatch = ForbiddenOperators.__dict__["__torch_dispatch__"]
    assert not hasattr(dispatch, "__wrapped__"), "PyTorch's dynamo wrapper is back: see _should_skip_dynamo"
    for reach in ("torch.compile(f)", "torch._dynamo.optimize()(f)", "model.compile()"):
        found = scan(textwrap.dedent(f"""
            import torch
            def f(x):
                return x
            model = torch.nn.Linear(2, 2)
            g = {reach}
        """), "softmax.py", ATTENTION)
        assert found, reach


def test_a_forked_zygotes_handle_says_ended_and_signals_nobody_once_it_is_collected():
    """A judge that started clean holds its zygote by pid (harness.clean_start). Collected by someone
    else (the kernel, where child exits are ignored), it has ended: the handle must say so, so that a
    new zygote is started, and must never signal the pid, which another process may have by now."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # collected, not by the handle
    handle = ForkedChild(pid)
    assert handle.poll() is not None and handle.wait() == -signal.SIGKILL
    handle.kill()  # nothing to signal: no error, no signal
    child = ForkedChild(os.fork() or 0)
    if child.pid == 0:
        os._exit(3)
    assert child.wait() == 3 and child.poll() == 3


def test_preparing_a_zygote_leaves_the_judges_random_state_and_freezes_what_is_loaded():
    """A judge that started clean prepares before it forks its zygote (harness.clean_start): its own
    random state must come out as it went in, and what was loaded must be out of the collector's way
    (workers then share those pages, and hypothesis's collection in the judge skips them)."""
    import gc

    from autograder.harness import zygote

    torch.manual_seed(7)
    before = torch.get_rng_state()
    try:
        zygote.prepare()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert torch.equal(torch.get_rng_state(), before)
