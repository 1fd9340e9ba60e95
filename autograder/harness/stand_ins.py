"""Stand-ins inside a worker (:mod:`autograder.harness.worker`): the lab's public code answering for a
sub-part the student wrote that fails inside a layer built on it, and the watched sub-layers' calls."""

from __future__ import annotations

import functools

import torch

from autograder.harness.guards import Forbidden
from autograder.harness.tracebacks import describe_exception, failing_line


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

    def install(self, parts: dict, source: str, arguments: dict) -> None:
        """``parts``: ``{name: (submodule, part, function)}``."""
        if source not in self.namespaces:
            self.namespaces[source] = {}
            exec(compile(source, "stand_ins.py", "exec"), self.namespaces[source])  # noqa: S102 - the judge's public code
        for name, (sub, part, function) in parts.items():
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

