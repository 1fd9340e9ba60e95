"""What the judge (:mod:`autograder.harness.remote`) and a worker (:mod:`autograder.harness.worker`) say to
each other, declared once: a dataclass per request and per answer, each with one wire form (a dict, which
:mod:`autograder.harness.codec` frames). Torch-free and importing nothing of the judge: the worker, which
runs student code, imports it; the values inside (arguments, tensors, handles) are the codec's. The judge's
requests to its zygote and the zygote's answers are declared here too (the last section).

Every request may carry ``seed`` (None: the worker's default; :data:`CONTINUE_STREAM`: where the previous
request left the RNG, so several calls draw on one stream as the calls inside one forward pass do),
``forbid`` (library functions such as ``"torch.sort"``, or operators such as ``"aten._softmax"`` whatever
Python name reaches them, that raise instead of running while it is served), ``count`` (library functions
whose calls are counted: the answer carries ``counts``), ``fresh`` (the first request of each check: the
worker first forgets the modules it built, so handle ids do not depend on earlier checks) and
``sublayer_calls`` (the answer carries every call, in order, of the submodules a stand-in watches).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import ClassVar

from autograder.kinds import FailureKind
from autograder.text import printable

# A request's "seed" that leaves the worker's RNG where the previous request left it.
CONTINUE_STREAM = "continue"


class MessageError(ValueError):
    """A message that is none of the declared ones, or not in its declared form."""


@dataclass(kw_only=True)
class Request:
    OP: ClassVar[str]
    seed: int | str | None = None
    forbid: list[str] = field(default_factory=list)
    count: list[str] = field(default_factory=list)
    fresh: bool = False
    sublayer_calls: bool = False

    @property
    def targets(self) -> list[str]:
        """What the request calls (``"module.name"``): the modules it may import are theirs."""
        target = getattr(self, "target", "")
        return [target] if target else []

    @property
    def where(self) -> str:
        """What the judge names it by (and charges it to): its first target, else its operation."""
        return str((self.targets or [self.OP])[0])

    def to_wire(self) -> dict:
        """The request as sent: its operation and the fields that differ from their defaults."""
        wire = {"op": self.OP}
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            default = spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default
            required = spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
            if required or (value is not None if default is None else value != default):  # a tensor is never a default
                wire[spec.name] = value
        return wire

    @staticmethod
    def from_wire(wire) -> Request:
        """The request a wire dict is, by its ``op`` (:data:`REQUESTS`); MessageError for any other."""
        kind = REQUESTS.get(wire.get("op")) if isinstance(wire, dict) else None
        if kind is None:
            raise MessageError(f"unknown operation {wire.get('op') if isinstance(wire, dict) else wire!r}")
        try:
            return kind(**{key: value for key, value in wire.items() if key != "op"})
        except TypeError as exc:
            raise MessageError(f"a malformed {kind.OP} request: {exc}") from None


@dataclass(kw_only=True)
class Configure(Request):
    """From now on a call that runs longer than ``timeout`` is interrupted where it is, and answered as a
    time-out naming the student's file and line; with ``imports`` (the submission's modules each module's
    source imports, itself included, as the judge read them) a request imports only those of the modules
    it names."""

    OP = "limits"
    timeout: float = 0.0
    imports: dict[str, list[str]] | None = None
    frame_bytes: int = 0  # the judge's limits on what it reads (Limits.frame_bytes, header_bytes); 0: unchanged
    header_bytes: int = 0


@dataclass(kw_only=True)
class Call(Request):
    """Call a function, or construct a class (answered by a handle to the new module); with ``echo_args``
    answered ``{"result", "args"}``: the tensor arguments as the call left them."""

    OP = "call"
    target: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    echo_args: bool = False


@dataclass(kw_only=True)
class Build(Request):
    """Construct several objects one after the other from one seed: ``specs`` are ``[target, args, kwargs]``."""

    OP = "build"
    specs: list

    @property
    def targets(self) -> list[str]:
        return [spec[0] for spec in self.specs]


@dataclass(kw_only=True)
class Method(Request):
    """A method of a handle: ``forward``, ``train``, ``state_dict``, ``load_state_dict``, ``structure``,
    ``submodule`` (args: [dotted name]; answered by a handle) or ``stand_in`` (args: [{submodule: [part,
    function]}, source, {argument: value}]: from then on, a call of such a submodule that raises or
    answers with the wrong shape or dtype is answered by ``function`` of ``source``). ``target`` is what
    the judge names it by."""

    OP = "method"
    handle: int
    name: str
    target: str = ""
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)


@dataclass(kw_only=True)
class Grad(Request):
    """Run the call (of ``target``, or the forward of ``handle``), backpropagate ``upstream`` (default:
    ones) and answer the gradients of the tensor arguments and of the module's parameters; the arguments
    ``computed`` reach the call as a layer passes a value it computed (a non-leaf tensor)."""

    OP = "grad"
    target: str = ""
    handle: int | None = None
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    upstream: object = None
    computed: list[int] = field(default_factory=list)


REQUESTS: dict[str, type[Request]] = {kind.OP: kind for kind in (Configure, Call, Build, Method, Grad)}


def _number(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass
class Answered:
    """A request served: its value; the library calls it made (when it counted some), the watched
    submodules' calls (when it asked for them) and where a stand-in answered for a sub-part (``stood_in``:
    ``[{"submodule", "part", "why", "file", "line"}]``)."""

    ok: object
    counts: dict | None = None
    sublayer_calls: list | None = None
    stood_in: list[dict] = field(default_factory=list)

    @property
    def value(self):
        """What the judge's caller gets: the value, with the counts or the sub-layer calls beside it."""
        if self.counts is not None:
            return {"result": self.ok, "counts": self.counts}
        if self.sublayer_calls is not None:
            return {"result": self.ok, "sublayer_calls": self.sublayer_calls}
        return self.ok

    def to_wire(self) -> dict:
        return {"ok": self.ok, **({"counts": self.counts} if self.counts is not None else {}),
                **({"sublayer_calls": self.sublayer_calls} if self.sublayer_calls is not None else {}),
                **({"stood_in": self.stood_in} if self.stood_in else {})}


@dataclass
class WorkerError:
    """A request that failed: what went wrong in ``kind``, where in ``file`` and ``line`` (the submission's
    innermost frame; ``called_from``: its outermost, when in another file); ``phase`` is ``import`` when it
    happened while a module was loading (a time-out then lists in ``loading`` the files that never
    finished)."""

    kind: object = FailureKind.EXCEPTION
    type: str = ""
    message: str = "failed"
    where: str = ""
    trace: str = ""
    file: str = ""
    line: int = 0
    phase: str = ""
    called_from: str = ""
    loading: tuple[str, ...] = ()

    def to_wire(self) -> dict:
        return {"error": {**dataclasses.asdict(self), "loading": list(self.loading)}}

    @classmethod
    def from_wire(cls, said, where: str) -> WorkerError:
        """What the judge keeps of a worker's error: its text is the student's, escaped and cut as such;
        the kind as said (the judge decides which it believes: FailureKind.reported_by_worker)."""
        said = said if isinstance(said, dict) else {}
        text = {key: printable(str(said.get(key, default)))[:4000] for key, default in
                (("message", "failed"), ("type", ""), ("where", where), ("trace", ""), ("file", ""), ("phase", ""),
                 ("called_from", ""))}
        loading = said.get("loading")
        return cls(said.get("kind", FailureKind.EXCEPTION), **{**text, "called_from": text["called_from"][:200]},
                   line=_number(said.get("line")),
                   loading=tuple(printable(str(f))[:200] for f in loading[:10]) if isinstance(loading, list) else ())


def answer_from_wire(wire, where: str) -> Answered | WorkerError:
    """A worker's answer as the judge reads it (the worker runs student code: anything not in a declared
    form is a MessageError; stand-in events are cut and escaped, anything else in them dropped)."""
    if not isinstance(wire, dict) or ("ok" not in wire and "error" not in wire):
        raise MessageError("not an answer")
    if "error" in wire:
        return WorkerError.from_wire(wire["error"], where)
    counts, calls = wire.get("counts"), wire.get("sublayer_calls")
    if not (counts is None or isinstance(counts, dict)) or not (calls is None or isinstance(calls, list)):
        raise MessageError("a malformed answer")
    return Answered(wire["ok"], counts, calls, stand_in_events(wire.get("stood_in")))


def stand_in_events(said) -> list[dict]:
    if not isinstance(said, list):
        return []
    return [{"submodule": printable(str(e.get("submodule", "")))[:100], "part": printable(str(e.get("part", "")))[:100],
             "why": printable(str(e.get("why", "")))[:400], "file": printable(str(e.get("file", "")))[:100],
             "line": _number(e.get("line"))}
            for e in said[:20] if isinstance(e, dict)]


@dataclass
class Hello:
    """A worker's first words: what its sandbox enforced, could not and refused (None: unconfined)."""

    report: object = None

    def to_wire(self) -> dict:
        return {"hello": self.report}

    @classmethod
    def from_wire(cls, wire) -> Hello:
        return cls(wire.get("hello") if isinstance(wire, dict) else None)


# -- the judge and its zygote (autograder.harness.zygote): one JSON line each way ------------------------------
# The zygote runs no student code; the judge still checks what it answers (autograder.harness.zygote_client).

@dataclass(kw_only=True)
class ZygoteMessage:
    OP: ClassVar[str]
    id: int = 0  # the request's, echoed by its answer

    def to_line(self) -> bytes:
        return json.dumps({"op": self.OP, **dataclasses.asdict(self)}).encode() + b"\n"

    @staticmethod
    def from_line(line: bytes) -> ZygoteMessage:
        """The message a line is, by its ``op`` (:data:`ZYGOTE_MESSAGES`); MessageError for any other."""
        try:
            wire = json.loads(line)
            return ZYGOTE_MESSAGES[wire.pop("op")](**wire)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MessageError(f"not a zygote message: {exc}") from None


@dataclass(kw_only=True)
class ForkConfined(ZygoteMessage):
    """Fork a worker into a sandbox (:class:`autograder.harness.sandbox.Confinement`'s fields; ``limits`` as
    :class:`autograder.limits.Limits`' fields). Answered by :class:`Forked` with the judge's end of the
    worker's socket and the read end of the pipe it prints into (``SCM_RIGHTS``), or :class:`NotForked`."""

    OP = "fork_confined"
    root: str
    scratch: str
    view: str
    uid: int | None
    cgroup: str | None
    files_required: bool = True
    limits: dict = field(default_factory=dict)
    lab_allows: list[str] = field(default_factory=list)  # lab_imports.LAB_MAY_ALLOW names: paid before the fork
    temporary: str  # the judge's temporary folder (a lane's: its run's, removed after a kill): for the payment's files


@dataclass(kw_only=True)
class ForkTrusted(ZygoteMessage):
    """Fork an unconfined worker for trusted code (the reference solution) in ``root``; answered as
    :class:`ForkConfined` is."""

    OP = "fork_trusted"
    root: str
    lab_allows: list[str] = field(default_factory=list)
    temporary: str


@dataclass(kw_only=True)
class StatusOf(ZygoteMessage):
    """How the zygote's child ``pid`` (a worker) ended: answered by :class:`Status`. ``pid`` 0 asks nothing:
    its answer says the zygote serves (it answers nothing before torch is imported and warmed up)."""

    OP = "status_of"
    pid: int


@dataclass(kw_only=True)
class Forked(ZygoteMessage):
    OP = "forked"
    pid: int


@dataclass(kw_only=True)
class NotForked(ZygoteMessage):
    OP = "not_forked"
    error: str


@dataclass(kw_only=True)
class Status(ZygoteMessage):
    """``status``: the wait status of a worker that has ended; None if unknown or still running."""

    OP = "status"
    status: int | None


@dataclass(kw_only=True)
class ForkJudge(ZygoteMessage):
    """To a batch's judge server (:mod:`autograder.harness.clean_start`): fork a judge with an address space of
    at most ``memory_bytes``, given the memory file of what it had and its three standard streams
    (``SCM_RIGHTS``). Answered by :class:`Forked` with a pidfd of the judge, or :class:`NotForked`; how it
    ended, by :class:`StatusOf` as the zygote answers it."""

    OP = "fork_judge"
    memory_bytes: int


ZYGOTE_MESSAGES: dict[str, type[ZygoteMessage]] = {
    kind.OP: kind for kind in (ForkConfined, ForkTrusted, StatusOf, Forked, NotForked, Status, ForkJudge)}
