"""The judge's side of the boundary: call a submission's code without importing it.

``RemoteCode(dir)`` is a folder of modules seen through a worker process
(:mod:`autograder.harness.worker`), started on first use: the student's submission, and also the
reference solution and the misconceptions' mutants. Checks read naturally::

    student.module.function(x, dim=0)                      # call a function of module.py
    layer = student.seeded(789).module.Layer(3, 2)         # seeded construction
    layer(inputs); layer.state_dict(); layer.eval()        # use the nn.Module it built
    a, b = student.build_in_order(123, ("module.Layer", 3, 2), ("module.Other", 3, 2))

Anything that goes wrong on the student's side (an exception, a stub, a missing module, a
time-out, a dead worker) arrives as :class:`StudentError`: a one-line message and, as data, a
:class:`Failure`. One mistake costs one mistake: the next call after a crash starts a fresh
worker; a function that timed out fails its later calls at once, with the same message, and
so does a module whose import hung; and each module has a time budget of its own, so a loop in
one part never starves another.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import hashlib
import math
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from autograder.harness.codec import CONTINUE_STREAM, CodecError, HandleRef, decode_frame, encode
from autograder.harness.recording import Call, Outcome, Recording, answer_value
from autograder.harness.processes import WorkerProcess
from autograder.harness.zygote_client import Zygote
from autograder.limits import DEFAULTS
from autograder.results import Failure, FailureKind
from autograder.text import printable, still_running


class StudentError(Exception):
    """The student's code failed: ``message`` in the student's words, ``failure`` the facts."""

    def __init__(self, kind: FailureKind, message: str, type_name: str = "", where: str = "", trace: str = "",
                 **details):
        super().__init__(message)
        self.failure = Failure(FailureKind(kind), where, type_name, **details)
        self.trace = trace

    @property
    def kind(self) -> FailureKind:
        return self.failure.kind

    @property
    def type_name(self) -> str:
        return self.failure.type

    @property
    def where(self) -> str:
        return self.failure.where


@dataclass
class Shared:
    """What a :class:`RemoteCode` and its seeded and streaming views share: one worker, one budget,
    one check at a time."""

    worker: WorkerProcess | None = None
    sandbox: dict | None = None  # what the first worker's sandbox enforced and could not
    spent: collections.Counter = field(default_factory=collections.Counter)  # seconds charged, per module
    memo: dict | None = None  # the answers of function calls, by request (memoize; None: off)
    recording: Recording | None = None  # the current check's calls (begin_check(record=True))
    fresh: bool = False  # the check's first request is still to be sent (it makes the worker forget)
    answered: collections.deque = field(default_factory=collections.deque)  # (frame, answer) a replay asked
    check_bytes: int = 0  # the current check's answers so far
    stopped: dict = field(default_factory=dict)  # a call, or a file whose import hung: the time-out it got
    timed_out: set = field(default_factory=set)  # calls that timed out (asked again within repeat_timeout)
    printed: int = 0  # bytes earlier workers printed
    forbid: tuple = ()  # library functions the calls may not use now (forbidding)
    reaches: tuple = ()  # where the source reaches into internals (judge.internals)
    loads: dict = field(default_factory=dict)  # module: the submission's modules it loads
    loaded: set = field(default_factory=set)  # modules the current worker has loaded
    started: bool = False  # a worker was started (the first start waits for the zygote, uncharged)
    stand_ins: StandInCode | None = None  # the lab's public code that may answer for a failing sub-part
    stood_in: list = field(default_factory=list)  # the current check's: where a stand-in answered, and why
    progress: Callable[[str], None] | None = None  # told, while a call has not answered, that it still runs


@dataclass(frozen=True)
class StandInCode:
    """A lab's stand-ins (``lab.toml``): the source of its public ``tests/stand_ins.py`` and, for each
    part a layer may build on, the function of it that answers for that part's module."""

    source: str
    functions: dict[str, str]


class RemoteCode:
    """A folder of modules (a submission, the reference, a mutant) seen through a worker process.

    ``confined`` runs the submission in workers forked by the zygote into a sandbox each
    (:mod:`autograder.harness.sandbox`); otherwise a plain worker runs it (the reference solution).
    ``timeout`` caps the seconds one call may take, ``budget`` those all calls into one
    module together may take and ``total_budget`` those all calls into the submission may take
    (the judge's clock, charged to the module the judge named: see :class:`Handle`). ``reaches`` are
    the places the judge's scan of the source found reaching into internals (objects with ``file``,
    ``line`` and ``what``), and ``loads`` the submission's modules each module loads (itself
    included): code that reaches into internals could lift the rules the worker enforces (forbidden
    and counted library calls) from inside, so a request carrying one is refused when its module
    loads such code, and otherwise served by a worker in which such code never ran; a worker given
    ``loads`` imports in a request no module of the submission outside them. ``memoize``
    keeps the answers of function calls (never of modules, which have state): for the reference
    solution, whose functions are pure and whose checks repeat the same derandomized calls for
    every submission. ``progress`` gets a line every few seconds while a call has not answered
    (`make check`: a hang is not a silent terminal).
    """

    def __init__(self, root, timeout: float = DEFAULTS.call_timeout, confined: bool = False,
                 budget: float = DEFAULTS.module_budget,
                 memoize: bool = False, seed: int | None = None, total_budget: float = math.inf, reaches: tuple = (),
                 loads: dict[str, frozenset[str]] | None = None, stand_ins: StandInCode | None = None,
                 progress: Callable[[str], None] | None = None, _shared: Shared | None = None):
        self.root = Path(root).resolve()
        self.timeout, self.confined, self.budget, self.total_budget = timeout, confined, budget, total_budget
        self._seed, self._streaming = seed, False
        self._shared = _shared if _shared is not None else Shared(
            memo={} if memoize else None, reaches=tuple(reaches), loads=loads or {}, stand_ins=stand_ins,
            progress=progress)

    # -- the calls checks make ------------------------------------------------------------
    def __getattr__(self, module: str) -> RemoteModule:
        if module.startswith("_"):
            raise AttributeError(module)
        return RemoteModule(self, module)

    @contextlib.contextmanager
    def forbidding(self, *names: str):
        """While inside, calls into the submission cannot use these library functions (for
        example the library's version of a function the part asks students to write): they raise, and
        the call fails with kind ``forbidden``."""
        before, self._shared.forbid = self._shared.forbid, names
        try:
            yield
        finally:
            self._shared.forbid = before

    def seeded(self, seed: int) -> RemoteCode:
        """The same submission, with every call made right after ``torch.manual_seed(seed)``."""
        return RemoteCode(self.root, self.timeout, self.confined, self.budget, seed=seed, total_budget=self.total_budget,
                          _shared=self._shared)

    def stream(self, seed: int) -> RemoteCode:
        """The same submission, its calls drawing on one random stream: the first right after
        ``torch.manual_seed(seed)``, each later one where the previous left the RNG (as the calls
        inside one forward pass draw). A judge composing a layer's forward pass from its
        submodules' calls draws what the layer itself would."""
        view = self.seeded(seed)
        view._streaming = True
        return view

    def build_in_order(self, seed: int, *specs) -> list[Handle]:
        """Construct ``(target, *args)`` specs one after another after a single ``manual_seed``."""
        wire = [[spec[0], list(spec[1:]), {}] for spec in specs]
        built = self.request({"op": "build", "specs": wire, "seed": seed}, wrap=False)
        if not isinstance(built, list) or len(built) != len(specs):
            raise StudentError(FailureKind.BAD_VALUE, f"{specs[0][0]}: built {len(specs)} modules but answered otherwise",
                               where=str(specs[0][0]))
        return [self._wrap(ref, str(spec[0])) for ref, spec in zip(built, specs)]

    def source(self, module: str, record: bool = True) -> str | None:
        """The text of ``<module>.py`` (read here, never run here), or None when missing."""
        path = self.root / f"{module}.py"
        try:
            text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
        except OSError:
            text = None
        recording = self._shared.recording
        if record and recording is not None:
            recording.sources[module] = text
        return text

    @property
    def reaches(self) -> tuple:
        """Where the judge's scan found the submission reaching into internals (see the class)."""
        return self._shared.reaches

    @property
    def stood_in(self) -> list[dict]:
        """Where, in the current check, a stand-in answered for a sub-part of the submission, and why
        (:meth:`Handle.standing_in`): ``[{"submodule", "part", "why", "file", "line"}]``, each once."""
        return list(self._shared.stood_in)

    @property
    def sandbox(self) -> dict | None:
        """What the worker's sandbox enforced ({"enforced", "missing"}), once a worker has started."""
        return self._shared.sandbox

    # -- transport ------------------------------------------------------------------------------
    def _start(self) -> WorkerProcess:
        worker = WorkerProcess(self.root, self.confined)
        self._shared.worker = worker
        loads = self._shared.loads
        worker.greet(self.timeout, {module: sorted(modules) for module, modules in loads.items()} if loads else None)
        self._shared.sandbox = worker.report
        return worker

    def request(self, request: dict, wrap: bool = True):
        """Send one request (see :mod:`autograder.harness.worker`); the answer, with modules as
        :class:`Handle` objects (or, with ``wrap=False``, as the raw :class:`HandleRef`)."""
        request.setdefault("seed", self._seed)
        if self._streaming:
            self._seed = CONTINUE_STREAM
        if self._shared.forbid:
            request.setdefault("forbid", list(self._shared.forbid))
        where = str(request.get("target") or (request.get("specs") or [[request["op"]]])[0][0])
        if self._shared.reaches:
            self._keep_rules(request, module_of(where))
        encoded = encode(request)
        key = hashlib.sha256(encoded).digest()  # the call, whichever check makes it
        memo = self._shared.memo
        if memo is not None and request["op"] == "call" and not request.get("echo_args"):
            if key not in memo:
                answer = self._answer(self.ask(self._frame(request, encoded), where, key), where, key)
                if contains_handle(answer):
                    return self._wrap(answer, where) if wrap else answer
                memo[key] = answer
            return copy.deepcopy(memo[key])
        frame = self._frame(request, encoded)
        recording = self._shared.recording
        answer = b""  # stays empty when no answer came (a time-out, a crash, the budget)
        try:
            answer = self._answered(frame) or self.ask(frame, where, key)
            value = self._answer(answer, where, key)
        except StudentError as error:
            if recording is not None:
                recording.calls.append(Call(frame, where, Outcome(answer, (error.kind, error.type_name))))
            raise
        if recording is not None:
            recording.calls.append(Call(frame, where, Outcome(answer)))
        return self._wrap(value, where) if wrap else value

    def _keep_rules(self, request: dict, module: str) -> None:
        """Before ``request`` into ``module`` is sent: refuse it if it carries a rule (a forbidden or
        counted library function) that code ``module`` loads could lift; start a fresh worker if
        such code was loaded into this one by earlier calls."""
        loads = self._shared.loads.get(module, frozenset({module}))
        if request.get("forbid") or request.get("count"):
            reaches = [r for r in self._shared.reaches if Path(r.file).stem in loads]
            if reaches:
                first, more = reaches[0], len(reaches) - 1
                where = request.get("target", module)
                raise StudentError(FailureKind.FORBIDDEN, f"{where} was not run: your code {first.what} ({first.file} line "
                                                f"{first.line}{f', and {more} more' if more else ''}), reaching into the "
                                                "interpreter's, PyTorch's or the grader's internals. That is not "
                                                "allowed: the checks that forbid a library function or count calls "
                                                "give such code no points", where=where, file=first.file, line=first.line)
            if self._shared.loaded & {Path(r.file).stem for r in self._shared.reaches}:
                self.close()
        self._shared.loaded |= loads

    def _frame(self, request: dict, encoded: bytes) -> bytes:
        """The request as sent: ``encoded``, or, for the first one of a check that reaches the worker,
        encoded again marked fresh (the only request encoded twice)."""
        if not self._shared.fresh:
            return encoded
        request["fresh"] = True
        self._shared.fresh = False
        return encode(request)

    # -- one check at a time --------------------------------------------------------------------
    def begin_check(self, record: bool = True) -> None:
        """A check starts: its first request makes the worker forget earlier checks' modules,
        and (with ``record``) its requests, answers and source reads are kept until :meth:`end_check`."""
        self._shared.fresh = True
        self._shared.answered.clear()
        self._shared.check_bytes = 0
        self._shared.stood_in = []
        self._shared.recording = Recording() if record else None

    def end_check(self) -> Recording:
        """What the check sent and got since :meth:`begin_check` (empty when not recording)."""
        recording, self._shared.recording = self._shared.recording, None
        self._shared.answered.clear()
        return recording or Recording()

    def preanswer(self, frame: bytes, answer: bytes | StudentError) -> None:
        """``frame`` was already asked (by a replay): the check's own identical request gets
        ``answer`` without asking again, so the worker sees each request once."""
        self._shared.answered.append((frame, answer))

    def _answered(self, frame: bytes) -> bytes | None:
        answered = self._shared.answered
        if not answered:
            return None
        asked, answer = answered.popleft()
        if asked != frame:  # the check took another path than the replay: ask for real from here
            answered.clear()
            if self._shared.recording is not None:
                self._shared.recording.diverged = True
            return None
        if isinstance(answer, StudentError):
            raise answer
        return answer

    # -- transport ------------------------------------------------------------------------------
    def ask(self, frame: bytes, where: str, key: bytes | None = None) -> bytes:
        """Send an encoded request; the worker's answer, undecoded. StudentError when there
        is no answer (time-out, crash, budget used up) or when this very call (``key``: what it
        asks; default: its frame), or the import of its module, timed out before: then at once,
        with the same message. A time-out costs only the calls that hang: another call of the
        same function is asked, in a fresh worker, within ``Limits.repeat_timeout``."""
        module = module_of(where)
        key = key or hashlib.sha256(frame).digest()
        stopped = self._shared.stopped
        for stop in (key, f"{module}.py"):
            if stop in stopped:
                raise stopped[stop]
        spent = self._shared.spent
        budgets = ((self.budget - spent[module], f"the calls into {module}.py used up their {self.budget:g} s budget"),
                   (self.total_budget - spent.total(),
                    f"the calls into your submission used up their {self.total_budget:g} s in total"))
        left, used_up = min(budgets)
        if left <= 0:
            raise StudentError(FailureKind.TIMEOUT, f"{where} not run: {used_up}", where=where)
        repeat = where in self._shared.timed_out
        timeout = min(self.timeout, DEFAULTS.repeat_timeout) if repeat else self.timeout
        if not self._shared.started:  # the zygote's own start (torch, the warm-up) is the grader's cost;
            Zygote.shared().wait_ready()  # a later one (code that killed it) is charged like any restart
            self._shared.started = True
        started = time.monotonic()  # a worker's fork and sandbox are charged: restarts after crashes are bounded
        try:
            worker = self._shared.worker or self._start()
            report = self._shared.progress
            # A repeat is not asked to stop at its shorter limit: it is stopped by the worker's end.
            answer = worker.exchange(frame, min(timeout + (0 if repeat else DEFAULTS.stop_grace), left),
                                     report and (lambda waited: report(still_running(module, where, waited, timeout))))
            self._shared.check_bytes += len(answer)
            if self._shared.check_bytes > DEFAULTS.check_bytes:  # what the judge would hold for one check
                raise StudentError(FailureKind.TOO_LARGE, f"{where}: the answers of this check add up to more than "
                                                f"{DEFAULTS.check_bytes // 2**20} MiB; the grader reads no more of them",
                                   where=where)
            return answer
        except TimeoutError:
            self.close()
            if left <= timeout:
                why = f"was stopped: {used_up}"
            elif repeat:
                why = f"did not finish in {timeout:g} s (an earlier call of it timed out, so later ones get {timeout:g} s)"
            else:
                why = f"did not finish in {timeout:g} s (and did not stop when asked)"
            stopped[key] = StudentError(FailureKind.TIMEOUT, f"{where} {why}", where=where)
            self._shared.timed_out.add(where)
            raise stopped[key] from None
        except (EOFError, OSError, CodecError) as exc:
            self._crashed(where, exc)
        finally:
            self._shared.spent[module] += time.monotonic() - started

    def _crashed(self, where: str, exc: Exception):
        worker = self._shared.worker
        # A protocol break is reported as such however the worker ended (only a memory kill, read
        # without waiting, comes first): waiting for its end would only spend the module's budget.
        ending = worker.ending(0.0 if isinstance(exc, CodecError) else 1.0) if worker else {}
        tail = worker.output_tail() if worker else ""
        self.close()
        detail = f"\n--- output before it stopped ---\n{printable(tail)}" if tail else ""
        if ending.get("kind") == FailureKind.MEMORY:
            ceiling = DEFAULTS.worker_total_memory_bytes / 2**30
            raise StudentError(FailureKind.MEMORY, f"the processes running your code went over the {ceiling:g} GiB memory "
                                         f"ceiling during {where}, and the kernel stopped one{detail}", where=where)
        if isinstance(exc, CodecError):
            raise StudentError(FailureKind.PROTOCOL, f"the process running your code wrote something other than the grader's "
                                           f"answers on its channel during {where} ({exc}); nothing more was read from "
                                           f"it{detail}", where=where) from None
        if "signal" in ending:
            name = ending["signal"]
            how = f"was killed by {name} ({signal.strsignal(signal.Signals[name]).lower()})"
        elif "exit_code" in ending:
            how = f"exited with code {ending['exit_code']} (os._exit, or a library that ends the process)"
        else:
            how = f"stopped answering ({type(exc).__name__}: {exc})"
        raise StudentError(FailureKind.CRASHED, f"the process running your code {how} during {where}{detail}",
                           where=where, **ending) from None

    def _answer(self, answer: bytes, where: str, key: bytes):
        """The value of an answer to the call ``key``; StudentError for the student's errors and
        malformed answers. Decoding is the submission's work: its time counts against the budget."""
        started = time.monotonic()
        try:
            message = decode_frame(answer)
        except CodecError as exc:  # the channel was tampered with: nothing more from this worker
            self._crashed(where, exc)
        finally:
            self._shared.spent[module_of(where)] += time.monotonic() - started
        if not isinstance(message, dict) or ("ok" not in message and "error" not in message):
            raise StudentError(FailureKind.BAD_VALUE, f"{where}: malformed answer from the worker")
        if "error" in message:
            raise self._stop_repeats(error_from(message["error"], where), where, key)
        for event in stand_in_events(message.get("stood_in")):
            if event not in self._shared.stood_in:
                self._shared.stood_in.append(event)
        return answer_value(message)

    def _stop_repeats(self, error: StudentError, where: str, key: bytes) -> StudentError:
        """A call that timed out, or a module whose import did, is not asked again: later calls get
        ``error``. The worker that was interrupted is not used again (its state is what the
        interruption left)."""
        if error.kind == FailureKind.TIMEOUT:
            for stop in error.failure.loading or (key,):
                self._shared.stopped[stop] = error
            self._shared.timed_out.add(where)
            self.close()
        return error

    def _wrap(self, value, origin: str):
        """Modules in an answer as :class:`Handle` objects named by ``origin``, what the judge called
        to get them: their calls are charged, and named in messages, by that, never by the type name
        the worker reports (student code can claim any ``__module__``)."""
        if isinstance(value, HandleRef):
            return Handle(self, value, origin)
        if isinstance(value, list):
            return [self._wrap(v, origin) for v in value]
        if isinstance(value, tuple):
            return tuple(self._wrap(v, origin) for v in value)
        return value

    @property
    def notes(self) -> list[str]:
        """What the submission did that costs nothing but is worth saying (once)."""
        printed = self._shared.printed + (self._shared.worker.printed.total if self._shared.worker else 0)
        if printed > DEFAULTS.printed_note_bytes:
            return [f"your code printed {printed / 2**20:.0f} MiB; the grader read it and dropped it "
                    "(printing costs nothing, but slows your code down)"]
        return []

    def close(self) -> None:
        worker, self._shared.worker = self._shared.worker, None
        self._shared.loaded = set()
        if worker is not None:
            self._shared.printed += worker.printed.total
            worker.close()


def module_of(where: str) -> str:
    """The module a call goes to ("module" for "module.Layer.forward")."""
    return where.split(".")[0]


def error_from(error, where: str) -> StudentError:
    """The StudentError of a worker's error answer; its text is the student's and escaped as such."""
    error = error if isinstance(error, dict) else {}
    said = {key: printable(str(error.get(key, default))[:4000]) for key, default in
            (("message", "failed"), ("type", ""), ("where", where), ("trace", ""),
             ("file", ""), ("phase", ""), ("called_from", ""))}
    line = error.get("line")
    loading = error.get("loading")
    kind = FailureKind.reported_by_worker(error.get("kind", FailureKind.EXCEPTION))
    if kind == FailureKind.MEMORY:  # the ceiling is the judge's to name
        said["message"] = (f"{where} ran out of memory: a process running your code may use "
                           f"{DEFAULTS.worker_memory_bytes / 2**30:g} GiB ({said['message']})")
    return StudentError(kind, said["message"], said["type"], said["where"], said["trace"], file=said["file"],
                        line=line if isinstance(line, int) and not isinstance(line, bool) else 0, phase=said["phase"],
                        called_from=said["called_from"][:200],
                        loading=tuple(printable(str(f))[:200] for f in loading[:10]) if isinstance(loading, list) else ())


def stand_in_events(said) -> list[dict]:
    """The stand-in events of a worker's answer, as the judge keeps them (the worker runs student code:
    anything else is dropped, the text escaped)."""
    if not isinstance(said, list):
        return []
    return [{"submodule": printable(str(e.get("submodule", "")))[:100], "part": printable(str(e.get("part", "")))[:100],
             "why": printable(str(e.get("why", "")))[:400], "file": printable(str(e.get("file", "")))[:100],
             "line": e["line"] if isinstance(e.get("line"), int) and not isinstance(e.get("line"), bool) else 0}
            for e in said[:20] if isinstance(e, dict)]


def contains_handle(value) -> bool:
    if isinstance(value, HandleRef):
        return True
    if isinstance(value, (list, tuple)):
        return any(contains_handle(v) for v in value)
    if isinstance(value, dict):
        return any(contains_handle(v) for v in value.values())
    return False


class RemoteModule:
    def __init__(self, student: RemoteCode, module: str):
        self._student, self._module = student, module

    def __getattr__(self, name: str) -> RemoteFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        return RemoteFunction(self._student, f"{self._module}.{name}")


class RemoteFunction:
    """A function or class of the submission, called through the worker."""

    def __init__(self, student: RemoteCode, target: str):
        self._student, self.target = student, target

    def __call__(self, *args, **kwargs):
        return self._student.request({"op": "call", "target": self.target, "args": list(args), "kwargs": kwargs})

    def with_args(self, *args, **kwargs) -> tuple:
        """Call and return ``(result, args)``, the arguments as the call left them."""
        answer = self._shaped(self._student.request({"op": "call", "target": self.target, "args": list(args),
                                                     "kwargs": kwargs, "echo_args": True}), result=object, args=list)
        return answer["result"], answer["args"]

    def counting(self, names: tuple[str, ...], *args, **kwargs) -> tuple:
        """Call and return ``(result, {name: calls})``: how often the call used each library function."""
        answer = self._shaped(self._student.request({"op": "call", "target": self.target, "args": list(args),
                                                     "kwargs": kwargs, "count": list(names)}), result=object, counts=dict)
        return answer["result"], self._shaped(answer["counts"], **dict.fromkeys(names, int))

    def grad(self, *args, upstream=None, **kwargs) -> dict:
        """Call, backpropagate ``upstream`` (default: ones) and return
        ``{"output", "inputs": [grad per argument]}``."""
        return self._shaped(self._student.request({"op": "grad", "target": self.target, "args": list(args),
                                                   "kwargs": kwargs, "upstream": upstream}), output=object, inputs=list)

    def _shaped(self, answer, **fields: type) -> dict:
        """``answer`` if it is a dict with ``fields`` of these types: the worker runs student code, so a
        malformed answer is the submission's failure (``bad_value``), never a check that broke."""
        if not (isinstance(answer, dict) and all(k in answer and isinstance(answer[k], t) for k, t in fields.items())):
            raise StudentError(FailureKind.BAD_VALUE, f"{self.target}: malformed answer from the worker", where=self.target)
        return answer


@dataclass(frozen=True)
class SublayerCall:
    """One call of a watched submodule during a layer's forward (:meth:`Handle.with_sublayer_calls`):
    its arguments as it got them and its answer as it gave it (tensors, plain scalars, None for
    anything else)."""

    submodule: str  # the layer's name for it ("self_attn")
    args: tuple
    kwargs: dict
    output: object

    def argument(self, index: int, name: str):
        """The argument at position ``index``, or passed as ``name``; None when not given."""
        return self.args[index] if index < len(self.args) else self.kwargs.get(name)

    @staticmethod
    def well_formed(said) -> bool:
        """A record as the worker writes it (student code shares its process: anything else is a forgery),
        its tensors no larger than a layer's answers (a tensor of 0 bytes may claim any shape)."""
        def value(v) -> bool:
            if isinstance(v, torch.Tensor):
                return v.dim() <= 8 and all(size <= 2**16 for size in v.shape) and v.numel() <= 2**24
            return v is None or isinstance(v, (bool, int, float))

        return (isinstance(said, dict) and isinstance(said.get("submodule"), str) and isinstance(said.get("args"), list)
                and isinstance(said.get("kwargs"), dict) and "output" in said
                and all(value(v) for v in [*said["args"], *said["kwargs"].values(), said["output"]]))


class Handle:
    """An ``nn.Module`` the submission built; it lives in the worker.

    ``origin`` is what the judge called to get it ("module.Layer"; "module.Layer.child" for a
    submodule): its calls are charged to that module's budget and named by it. ``type_name`` is
    the class the worker says it is: a claim, for checks of form only."""

    def __init__(self, student: RemoteCode, ref: HandleRef, origin: str):
        self._student, self._ref, self.origin = student, ref, origin
        self.type_name = ref.type_name

    def _method(self, name: str, *args, **kwargs):
        return self._student.request({"op": "method", "handle": self._ref.id, "name": name,
                                      "args": list(args), "kwargs": kwargs, "target": f"{self.origin}.{name}"})

    def submodule(self, name: str) -> Handle:
        """The submodule ``name`` ("body", "layers.0") of this module, as a handle of its own."""
        ref = self._student.request({"op": "method", "handle": self._ref.id, "name": "submodule", "args": [name],
                                     "kwargs": {}, "target": f"{self.origin}.submodule"}, wrap=False)
        if not isinstance(ref, HandleRef):
            raise StudentError(FailureKind.BAD_VALUE, f"{self.origin}.{name} is not a module", where=f"{self.origin}.{name}")
        return Handle(self._student, ref, f"{self.origin}.{name}")

    def __call__(self, *args, **kwargs):
        return self._method("forward", *args, **kwargs)

    def using(self, student: RemoteCode) -> Handle:
        """This module, its calls made through ``student`` (a seeded or streaming view of the same
        submission)."""
        return Handle(student, self._ref, self.origin)

    def train(self, mode: bool = True) -> Handle:
        self._method("train", mode)
        return self

    def eval(self) -> Handle:
        return self.train(False)

    def state_dict(self) -> dict:
        return self._method("state_dict")

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        self._method("load_state_dict", state, strict=strict)

    def structure(self) -> dict:
        return self._method("structure")

    def standing_in(self, parts: dict[str, str], **arguments) -> Handle:
        """This layer, its submodules ``parts`` (``{"block.norm": "norm"}``: which lab part each one's
        module is) answered by the lab's stand-in for that part whenever their own call raises or
        answers with the wrong shape or dtype (see :attr:`RemoteCode.stood_in`); ``arguments`` go to
        every stand-in (``num_heads``). Without stand-ins declared, the layer as it is."""
        code = self._student._shared.stand_ins
        if code is not None:
            wired = {name: [part, code.functions[part]] for name, part in parts.items() if part in code.functions}
            self._method("stand_in", wired, code.source, arguments)
        return self

    def with_sublayer_calls(self, *args, **kwargs) -> tuple:
        """Forward, and the calls it made, in order, of the submodules a stand-in watches
        (:meth:`standing_in`): ``(output, [SublayerCall])``, what each sub-layer got and gave, so a
        check can judge a layer's wires one by one."""
        if self._student._shared.stand_ins is None:
            raise RuntimeError("a layer's sub-layer calls are watched by its stand-ins: declare `stand_in` for the "
                               "parts it uses in lab.toml")
        where = f"{self.origin}.forward"
        answer = self._student.request({"op": "method", "handle": self._ref.id, "name": "forward", "args": list(args),
                                        "kwargs": kwargs, "target": where, "sublayer_calls": True})
        calls = answer.get("sublayer_calls") if isinstance(answer, dict) else None
        if not (isinstance(calls, list) and all(SublayerCall.well_formed(c) for c in calls)):
            raise StudentError(FailureKind.BAD_VALUE, f"{where}: malformed answer from the worker", where=where)
        return answer["result"], [SublayerCall(printable(c["submodule"])[:100], tuple(c["args"]), c["kwargs"],
                                               c["output"]) for c in calls]

    def grad(self, *args, upstream=None, computed: tuple[int, ...] = (), **kwargs) -> dict:
        """Forward, backpropagate ``upstream`` and return ``{"output", "inputs", "parameters": {name:
        grad}}``; the arguments at the indices ``computed`` reach the call as values a layer computed
        (non-leaf tensors), the others as the caller's own leaves."""
        request = {"op": "grad", "handle": self._ref.id, "args": list(args), "kwargs": kwargs, "upstream": upstream,
                   "target": f"{self.origin}.forward"}
        return self._student.request({**request, "computed": list(computed)} if computed else request)
