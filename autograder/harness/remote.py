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

import contextlib
import copy
import dataclasses
import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autograder.harness.budget import Budgets, module_of
from autograder.harness.codec import CodecError, HandleRef, decode_frame, encode
from autograder.harness.handles import Handle, RemoteModule
from autograder.harness.messages import CONTINUE_STREAM, Build, Call, MessageError, Request, WorkerError, answer_from_wire
from autograder.harness.recording import Call as Asked
from autograder.harness.recording import CheckLog, Outcome, Recording
from autograder.harness.rules import Rules
from autograder.harness.student_error import StudentError, error_from
from autograder.harness.transport import Channel
from autograder.limits import DEFAULTS, Limits
from autograder.results import FailureKind


@dataclass
class Shared:
    """What a :class:`RemoteCode` and its seeded and streaming views share: one worker, one budget,
    one check at a time, one set of rules."""

    channel: Channel
    rules: Rules
    budgets: Budgets
    check: CheckLog = field(default_factory=CheckLog)
    memo: dict | None = None  # the answers of function calls, by request (memoize; None: off)
    stand_ins: StandInCode | None = None  # the lab's public code that may answer for a failing sub-part


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
    (`make check`: a hang is not a silent terminal). ``limits`` are the run's (:class:`Limits`, from its
    entry point): ``timeout`` and ``budget`` default to its call time-out and module budget, and the rest
    (a repeat's time-out, what one check's answers may add up to, the worker's resources) are read from it.
    """

    def __init__(self, root, timeout: float | None = None, confined: bool = False, budget: float | None = None,
                 memoize: bool = False, seed: int | None = None, total_budget: float = math.inf, reaches: tuple = (),
                 loads: dict[str, frozenset[str]] | None = None, stand_ins: StandInCode | None = None,
                 progress: Callable[[str], None] | None = None, limits: Limits = DEFAULTS,
                 _shared: Shared | None = None):
        self.root, self.limits = Path(root).resolve(), limits
        self.timeout = limits.call_timeout if timeout is None else timeout
        self.budget = limits.module_budget if budget is None else budget
        self.confined, self.total_budget = confined, total_budget
        self._seed, self._streaming = seed, False
        self._shared = _shared if _shared is not None else Shared(
            Channel(self.root, confined, loads or {}, limits, progress), Rules(tuple(reaches), loads or {}),
            Budgets(limits), memo={} if memoize else None, stand_ins=stand_ins)

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
        rules = self._shared.rules
        before, rules.forbid = rules.forbid, names
        try:
            yield
        finally:
            rules.forbid = before

    def seeded(self, seed: int) -> RemoteCode:
        """The same submission, with every call made right after ``torch.manual_seed(seed)``."""
        return RemoteCode(self.root, self.timeout, self.confined, self.budget, seed=seed, total_budget=self.total_budget,
                          limits=self.limits,
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
        built = self.request(Build(specs=wire, seed=seed), wrap=False)
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
        recording = self._shared.check.recording
        if record and recording is not None:
            recording.sources[module] = text
        return text

    @property
    def reaches(self) -> tuple:
        """Where the judge's scan found the submission reaching into internals (see the class)."""
        return self._shared.rules.reaches

    @property
    def stood_in(self) -> list[dict]:
        """Where, in the current check, a stand-in answered for a sub-part of the submission, and why
        (:meth:`Handle.standing_in`): ``[{"submodule", "part", "why", "file", "line"}]``, each once."""
        return list(self._shared.check.stood_in)

    @property
    def sandbox(self) -> dict | None:
        """What the worker's sandbox enforced ({"enforced", "missing"}), once a worker has started."""
        return self._shared.channel.sandbox

    # -- requests ------------------------------------------------------------------------------
    def request(self, request: Request, wrap: bool = True):
        """Send one request (:mod:`autograder.harness.messages`); the answer, with modules as
        :class:`Handle` objects (or, with ``wrap=False``, as the raw :class:`HandleRef`)."""
        request = self._stamped(request)
        where = request.where
        if self._shared.rules.reaches:
            self._shared.rules.keep(request, module_of(where), self.close)
        encoded = encode(request.to_wire())
        key = hashlib.sha256(encoded).digest()  # the call, whichever check makes it
        memo = self._shared.memo
        if memo is not None and isinstance(request, Call) and not request.echo_args:
            if key not in memo:
                answer = self._answer(self.ask(self._frame(request, encoded), where, key), where, key)
                if contains_handle(answer):
                    return self._wrap(answer, where) if wrap else answer
                memo[key] = answer
            return copy.deepcopy(memo[key])
        frame = self._frame(request, encoded)
        answer = b""  # stays empty when no answer came (a time-out, a crash, the budget)
        try:
            answer = self._shared.check.preanswered(frame) or self.ask(frame, where, key)
            value = self._answer(answer, where, key)
        except StudentError as error:
            self._shared.check.keep(Asked(frame, where, Outcome(answer, (error.kind, error.type_name))))
            raise
        self._shared.check.keep(Asked(frame, where, Outcome(answer)))
        return self._wrap(value, where) if wrap else value

    def _stamped(self, request: Request) -> Request:
        """``request`` with this view's seed (unless it has one: a recorded request sent again) and the
        library functions forbidden now (unless it names its own)."""
        changes = {}
        if request.seed is None:
            changes["seed"] = self._seed
        if self._streaming:
            self._seed = CONTINUE_STREAM
        if self._shared.rules.forbid and not request.forbid:
            changes["forbid"] = list(self._shared.rules.forbid)
        return dataclasses.replace(request, **changes) if changes else request

    def _frame(self, request: Request, encoded: bytes) -> bytes:
        """The request as sent: ``encoded``, or, for the first one of a check that reaches the worker,
        encoded again marked fresh (the only request encoded twice)."""
        if not self._shared.check.fresh:
            return encoded
        self._shared.check.fresh = False
        return encode(dataclasses.replace(request, fresh=True).to_wire())

    # -- one check at a time --------------------------------------------------------------------
    def begin_check(self, record: bool = True) -> None:
        """A check starts: its first request makes the worker forget earlier checks' modules,
        and (with ``record``) its requests, answers and source reads are kept until :meth:`end_check`."""
        self._shared.check.begin(record)

    def end_check(self) -> Recording:
        """What the check sent and got since :meth:`begin_check` (empty when not recording)."""
        return self._shared.check.end()

    def preanswer(self, frame: bytes, answer: bytes | StudentError) -> None:
        """``frame`` was already asked (by a replay): the check's own identical request gets
        ``answer`` without asking again, so the worker sees each request once."""
        self._shared.check.answered.append((frame, answer))

    # -- the worker ------------------------------------------------------------------------------
    def ask(self, frame: bytes, where: str, key: bytes | None = None) -> bytes:
        """Send an encoded request; the worker's answer, undecoded. StudentError when there
        is no answer (time-out, crash, budget used up) or when this very call (``key``: what it
        asks; default: its frame), or the import of its module, timed out before: then at once,
        with the same message. A time-out costs only the calls that hang: another call of the
        same function is asked, in a fresh worker, within ``Limits.repeat_timeout``."""
        key = key or hashlib.sha256(frame).digest()
        budgets, channel, check = self._shared.budgets, self._shared.channel, self._shared.check
        allowance = budgets.allowance(where, key, self.timeout, self.budget, self.total_budget)
        channel.ready()
        started = time.monotonic()  # a worker's fork and sandbox are charged: restarts after crashes are bounded
        try:
            answer = channel.exchange(frame, where, allowance, self.timeout)
            check.answer_bytes += len(answer)
            if check.answer_bytes > self.limits.check_bytes:  # what the judge would hold for one check
                raise StudentError(FailureKind.TOO_LARGE, f"{where}: the answers of this check add up to more than "
                                                f"{self.limits.check_bytes // 2**20} MiB; the grader reads no more of them",
                                   where=where)
            return answer
        except TimeoutError:
            self.close()
            raise budgets.ran_out(where, key, allowance) from None
        except (EOFError, OSError, CodecError) as exc:
            self._crashed(where, exc)
        finally:
            budgets.spent[module_of(where)] += time.monotonic() - started

    def _crashed(self, where: str, exc: Exception):
        self._shared.rules.loaded = set()
        self._shared.channel.crashed(where, exc)

    def _answer(self, answer: bytes, where: str, key: bytes):
        """The value of an answer to the call ``key``; StudentError for the student's errors and
        malformed answers. Decoding is the submission's work: its time counts against the budget."""
        started = time.monotonic()
        try:
            message = answer_from_wire(decode_frame(answer), where)
        except CodecError as exc:  # the channel was tampered with: nothing more from this worker
            self._crashed(where, exc)
        except MessageError:
            raise StudentError(FailureKind.BAD_VALUE, f"{where}: malformed answer from the worker") from None
        finally:
            self._shared.budgets.spent[module_of(where)] += time.monotonic() - started
        if isinstance(message, WorkerError):
            error = error_from(message, where, self.limits.worker_memory_bytes)
            if self._shared.budgets.stop_repeats(error, where, key):
                self.close()
            raise error
        for event in message.stood_in:
            if event not in self._shared.check.stood_in:
                self._shared.check.stood_in.append(event)
        return message.value

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
        printed = self._shared.channel.printed_total
        if printed > self.limits.printed_note_bytes:
            return [f"your code printed {printed / 2**20:.0f} MiB; the grader read it and dropped it "
                    "(printing costs nothing, but slows your code down)"]
        return []

    def close(self) -> None:
        self._shared.rules.loaded = set()
        self._shared.channel.close()


def contains_handle(value) -> bool:
    if isinstance(value, HandleRef):
        return True
    if isinstance(value, (list, tuple)):
        return any(contains_handle(v) for v in value)
    if isinstance(value, dict):
        return any(contains_handle(v) for v in value.values())
    return False
