"""What the checks of a lab ask the student's code: the sizes in every request, public and hidden apart.

Run as ``python tests/request_sizes.py <lab folder> <out.json>``: runs the lab's checks on its
reference solution (unconfined, no replay) and writes ``{"public": {...}, "hidden": {...}}``, each
mapping a size's name to the values the requests used. A size is named by what the request
calls and the parameter of the reference's signature it fills (positional or keyword alike):
``encoder.EncoderLayer d_ff`` (a number or a bool), ``encoder.EncoderLayer.forward x dim -2`` (a
tensor's dimension, from the last), ``... x ndim``, ``... x dtype``, and ``... d_ff / d_model`` (the
ratio of two integer arguments: d_ff = 2 * d_model is one value). Calls the signature cannot name
(a submodule's) keep their positions: ``arg 0``.
"""

from __future__ import annotations

import collections
import functools
import importlib
import inspect
import itertools
import json
import re
import sys
from pathlib import Path

import pytest
import torch

from autograder.harness.messages import Request
from autograder.harness.remote import RemoteCode
from autograder.judge.plugin import checks_command_line


@functools.cache
def signature(target: str) -> inspect.Signature | None:
    """The reference's signature of ``part.name[.method]``, without ``self``; None for a submodule's call.
    The lab's folder is on sys.path (its modules import each other)."""
    part, *names = target.split(".")
    called = importlib.import_module(part)
    for name in names:
        called = getattr(called, name, None)
    if called is None:
        return None
    found = inspect.signature(called)
    if len(names) == 2:  # a method: drop self
        found = found.replace(parameters=list(found.parameters.values())[1:])
    return found


def named_arguments(target: str, args: list, kwargs: dict) -> dict[str, object]:
    found = signature(target)
    if found is not None:
        try:
            bound = found.bind(*args, **kwargs)
            bound.apply_defaults()  # an argument left out is its default: qkv_bias=False
            return dict(bound.arguments)
        except TypeError:
            pass
    return {**{f"arg {i}": a for i, a in enumerate(args)}, **kwargs}


def sizes(named: dict[str, object], target: str) -> dict[str, object]:
    found: dict[str, object] = {}
    for name, value in named.items():
        if isinstance(value, torch.Tensor):
            found[f"{target} {name} dtype"] = str(value.dtype)
            found[f"{target} {name} ndim"] = value.dim()
            found.update({f"{target} {name} dim {d - value.dim()}": size for d, size in enumerate(value.shape)})
        elif isinstance(value, (bool, int, float)):  # None is no size: the same as leaving an argument out
            found[f"{target} {name}"] = value
    numbers = [(n, v) for n, v in named.items() if isinstance(v, int) and not isinstance(v, bool) and v]
    for (n1, v1), (n2, v2) in itertools.combinations(numbers, 2):
        found[f"{target} {n2} / {n1}"] = round(v2 / v1, 6)
    return found


def shape_only(value):
    """A tensor as a meta tensor (its shape and dtype, no data): the calls are named after the run."""
    return torch.empty(value.shape, dtype=value.dtype, device="meta") if isinstance(value, torch.Tensor) else value


class Recorder:
    """Pytest plugin: notes which check (public or hidden) is running, fixtures included; the patched
    request reads it."""

    def __init__(self):
        self.hidden = False
        self.calls: list[tuple[str, str, list, dict]] = []  # (public or hidden, target, args, kwargs)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.hidden = item.get_closest_marker("hidden") is not None
        return (yield)

    def note(self, request: Request) -> None:
        specs = getattr(request, "specs", None) or [[getattr(request, "target", ""), getattr(request, "args", []),
                                                     getattr(request, "kwargs", {})]]
        for target, args, kwargs in specs:
            if target:
                self.calls.append(("hidden" if self.hidden else "public", str(target),
                                   [shape_only(a) for a in args], {k: shape_only(v) for k, v in kwargs.items()}))

    def table(self) -> dict[str, dict[str, list[str]]]:
        seen = {"public": collections.defaultdict(set), "hidden": collections.defaultdict(set)}
        for kind, target, args, kwargs in self.calls:
            kind_of_call = re.sub(r"\.\d+\.", ".*.", target)  # heads.0.forward and heads.2.forward alike
            for name, value in sizes(named_arguments(target, args, kwargs), kind_of_call).items():
                seen[kind][name].add(value)
        return {kind: {name: sorted(map(repr, values)) for name, values in found.items()} for kind, found in seen.items()}


def main(lab: Path, out: Path) -> None:
    recorder = Recorder()
    request = RemoteCode.request

    def noted(self, message, wrap=True):
        if self._shared.memo is None:  # the student's side, not the reference's
            recorder.note(message)
        return request(self, message, wrap)

    RemoteCode.request = noted
    args = checks_command_line(lab / "tests", lab, None, None, str(lab)) + ["--no-sandbox", "--no-replay"]
    if pytest.main(args, plugins=[recorder]) != 0:
        sys.exit("the reference solution failed a check: the sizes recorded would be incomplete")
    sys.path.insert(0, str(lab))
    out.write_text(json.dumps(recorder.table(), indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]))
