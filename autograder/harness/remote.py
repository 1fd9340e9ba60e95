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
import json
import itertools
import math
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.harness import cgroup, sandbox
from autograder.harness.codec import CONTINUE_STREAM, CodecError, HandleRef, decode_frame, encode, read_frame_bytes
from autograder.lab import KIT_ROOT
from autograder.limits import DEFAULTS
from autograder.results import Failure, FailureKind
from autograder.text import printable



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


PRINTED_NOTE_BYTES = 16 * 1024**2  # printing more is said once in the notes (it costs nothing)


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process that made the other end of ``sock`` (``SO_PEERCRED``)."""
    pid, _, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class Zygote:
    """The judge's handle on :mod:`autograder.harness.zygote`: confined workers, forked in milliseconds.

    Only the zygote holds the other end of the control socket (every worker closes it before
    student code runs), and an answer is still checked before it is believed: the request id
    it echoes, that the socket was made by the zygote (``SO_PEERCRED``) and that the pid is a
    child of the zygote. An answer that fails a check fails the worker it was for, and the
    zygote is replaced.
    """

    _shared: Zygote | None = None

    def __init__(self):
        control, child_end = socket.socketpair()
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.harness.zygote", str(child_end.fileno())],
                                     cwd=KIT_ROOT, pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL,
                                     env=dict(sandbox.ENVIRONMENT))  # the judge's environment stays with the judge
        child_end.close()
        self.control = control
        self.requests = itertools.count(1)
        self.uids = sandbox.UidPool() if os.getuid() == 0 else None

    @classmethod
    def shared(cls) -> Zygote:
        if cls._shared is None or cls._shared.proc.poll() is not None:
            cls._shared = cls()
        return cls._shared

    def fork(self, request: dict) -> tuple[socket.socket, int, int]:
        """A new confined worker: the judge's socket to it, the pipe it prints into and its pid."""
        request = {**request, "id": next(self.requests)}
        fds: list[int] = []
        try:
            self._send(request)
            message, fds, _, _ = socket.recv_fds(self.control, 4096, 4)
            answer = json.loads(message) if message.endswith(b"\n") else {}
            if answer.get("id") != request["id"] or "error" in answer:
                raise OSError(f"the zygote did not start the worker: {answer.get('error', 'no answer')}")
            pid = answer.get("pid")
            if len(fds) != 2 or not isinstance(pid, int) or pid <= 1 or parent_of(pid) != self.proc.pid:
                raise OSError("the zygote's answer did not check out")
            sock = socket.socket(fileno=fds[0])
            fds[0] = -1  # the socket owns it now
            if sock.family != socket.AF_UNIX or peer_pid(sock) != self.proc.pid:
                sock.close()
                raise OSError("the worker's socket was not made by the zygote")
        except (OSError, ValueError) as exc:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)
            self.replace()
            raise OSError(f"could not start a worker: {exc}") from None
        return sock, fds[1], pid

    def status_of(self, pid: int) -> int | None:
        """How the zygote's child ``pid`` ended (a wait status), once it has; None if unknown."""
        request = {"id": next(self.requests), "status_of": pid}
        try:
            self._send(request)
            answer = json.loads(self.control.recv(4096))
        except (OSError, ValueError):
            self.replace()
            return None
        status = answer.get("status") if answer.get("id") == request["id"] else None
        return status if isinstance(status, int) else None

    def _send(self, request: dict) -> None:
        """One request, a JSON line; its answer is due within the start time-out."""
        self.control.settimeout(DEFAULTS.start_timeout)
        self.control.sendall(json.dumps(request).encode() + b"\n")

    def replace(self) -> None:
        """Stop this zygote; the next fork starts a new one."""
        self.proc.kill()
        self.proc.wait()
        self.control.close()
        if Zygote._shared is self:
            Zygote._shared = None


class OutputTail:
    """The end of what a worker printed: kept for the message when it crashes."""

    def __init__(self, keep: int = 1500):
        self.keep, self.data, self.total = keep, bytearray(), 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        del self.data[:-self.keep]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace").strip()


class WorkerProcess:
    """One worker process, the socket to it and the pipe its output comes through; confined
    (forked into a sandbox by the zygote) or not (the reference solution)."""

    def __init__(self, root: Path, confined: bool):
        self.folder = Path(tempfile.mkdtemp(prefix="autograder-worker-"))
        self.proc, self.pidfd, self.uid, self.sock, self.output = None, None, None, None, None
        self.zygote, self.pid = None, 0
        self.cgroup: cgroup.WorkerCgroup | None = None
        self.missing: list[str] = []  # what the judge could not set up for its sandbox
        self.report: dict | None = None  # what its sandbox enforced, from its first words
        self.printed = OutputTail()
        if not confined:
            judge_end, worker_end = socket.socketpair()
            self.output, output_end = os.pipe()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "autograder.harness.worker", str(root), str(worker_end.fileno())],
                cwd=KIT_ROOT, stdin=subprocess.DEVNULL, stdout=output_end, stderr=output_end,
                pass_fds=(worker_end.fileno(),))
            self.sock = judge_end
            worker_end.close()
            os.close(output_end)
        else:
            scratch, view = self.folder / "scratch", self.folder / "view"
            scratch.mkdir()
            view.mkdir()
            self.folder.chmod(0o711)  # without a view of its own, a worker under its own user id must reach scratch/
            self.zygote = zygote = Zygote.shared()
            self.uid = zygote.uids.take() if zygote.uids is not None else None
            try:
                if self.uid is None:
                    raise OSError("the grader must run as root")
                self.cgroup = cgroup.WorkerCgroup(self.uid, DEFAULTS.worker_total_memory_bytes)
            except OSError as exc:
                self.missing.append(f"{sandbox.MEMORY_CEILING} ({exc})")
            try:
                self.sock, self.output, self.pid = zygote.fork(
                    {"root": str(root), "scratch": str(scratch), "view": str(view), "uid": self.uid,
                     "cgroup": self.cgroup and self.cgroup.procs})
            except OSError:
                self.close()
                raise
            self.pidfd = os.pidfd_open(self.pid)
            if parent_of(self.pid) != zygote.proc.pid:  # the pid was not reused before we held it
                os.close(self.pidfd)
                self.pidfd = None
                self.close()
                raise OSError("the worker ended before it started")
        self.sock.setblocking(False)
        os.set_blocking(self.output, False)

    def greet(self, timeout: float) -> None:
        """Read the worker's first words (what its sandbox enforced) and give it its call time-out."""
        hello = decode_frame(self.receive(DEFAULTS.start_timeout))
        self.report = hello.get("hello") if isinstance(hello, dict) else None
        if isinstance(self.report, dict):
            self.report["missing"] = [*self.missing, *self.report.get("missing", [])]
        self.exchange(encode({"op": "limits", "timeout": timeout}), DEFAULTS.start_timeout)

    def in_own_pid_namespace(self) -> bool:
        """Do all its processes die with it (PID 1 of a namespace of its own)?"""
        return isinstance(self.report, dict) and sandbox.PID_NAMESPACE in self.report.get("enforced", [])

    def exchange(self, frame: bytes, timeout: float) -> bytes:
        if self.cgroup is not None:
            self.cgroup.call_starts()
        self.sock.settimeout(timeout)
        self.sock.sendall(frame)
        self.sock.setblocking(False)
        return self.receive(timeout)

    def receive(self, timeout: float) -> bytes:
        """The next answer, undecoded; what the worker prints meanwhile is drained, so printing
        never blocks it."""
        deadline = time.monotonic() + timeout
        return read_frame_bytes(lambda n: self._read_exact(n, deadline))

    def _read_exact(self, n: int, deadline: float) -> bytes:
        chunks, remaining = [], n
        while remaining:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            waiting = [self.sock] if self.output is None else [self.sock, self.output]
            ready = select.select(waiting, [], [], left)[0]
            if self.output in ready:
                chunk = os.read(self.output, 1 << 16)
                if chunk:
                    self.printed.add(chunk)
                else:  # nothing more will be printed
                    os.close(self.output)
                    self.output = None
            if self.sock in ready:
                chunk = self.sock.recv(min(remaining, 1 << 20))
                if not chunk:
                    raise EOFError
                chunks.append(chunk)
                remaining -= len(chunk)
        return b"".join(chunks)

    def ending(self) -> dict:
        """How the worker ended, as :class:`Failure` fields: ``signal``, ``exit_code`` or, when the
        kernel stopped it at its memory ceiling, kind ``memory``; empty when it is still running."""
        if self.cgroup is not None and self.cgroup.oom_killed():
            return {"kind": FailureKind.MEMORY}
        if self.proc is not None:
            try:
                code = self.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                return {}
            return {"signal": signal.Signals(-code).name} if code < 0 else {"exit_code": code}
        if self.pidfd is None or not select.select([self.pidfd], [], [], 1.0)[0]:
            return {}
        status = self.zygote.status_of(self.pid)
        if status is None:
            return {}
        if os.WIFSIGNALED(status):
            return {"signal": signal.Signals(os.WTERMSIG(status)).name}
        return {"exit_code": os.waitstatus_to_exitcode(status)}

    def output_tail(self) -> str:
        return self.printed.text()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        if self.output is not None:
            os.close(self.output)
            self.output = None
        if self.pidfd is not None:  # PID 1 of its namespace: when it is gone, so is every process it started
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:  # it ended, and the zygote has collected it
                pass
            select.select([self.pidfd], [], [], 5.0)
            os.close(self.pidfd)
            self.pidfd = None
        if self.uid is not None and not self.in_own_pid_namespace():  # back-stop: a scan of /proc, 6 ms
            sandbox.sweep(range(self.uid, self.uid + 1))
        if self.cgroup is not None:  # empty now: its processes are gone
            self.cgroup.remove()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        try:
            shutil.rmtree(self.folder, ignore_errors=True)
        except RecursionError:  # a hostile tree deeper than Python recurses (without a view of its own)
            subprocess.run(["rm", "-rf", "--one-file-system", str(self.folder)], check=False)


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
    loads such code, and otherwise served by a worker in which such code never ran. ``memoize``
    keeps the answers of function calls (never of modules, which have state): for the reference
    solution, whose functions are pure and whose checks repeat the same derandomized calls for
    every submission.
    """

    def __init__(self, root, timeout: float = DEFAULTS.call_timeout, confined: bool = False,
                 budget: float = DEFAULTS.module_budget,
                 memoize: bool = False, seed: int | None = None, total_budget: float = math.inf, reaches: tuple = (),
                 loads: dict[str, frozenset[str]] | None = None, _shared=None):
        self.root = Path(root).resolve()
        self.timeout, self.confined, self.budget, self.total_budget = timeout, confined, budget, total_budget
        self._seed, self._streaming = seed, False
        self._shared = _shared if _shared is not None else {
            "worker": None, "sandbox": None, "spent": collections.Counter(), "memo": {} if memoize else None,
            "recording": None, "fresh": False, "answered": collections.deque(), "check_bytes": 0,
            "stopped": {}, "timed_out": set(), "printed": 0, "forbid": (), "reaches": tuple(reaches), "loads": loads or {},
            "loaded": set()}

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
        before, self._shared["forbid"] = self._shared["forbid"], names
        try:
            yield
        finally:
            self._shared["forbid"] = before

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
        recording = self._shared["recording"]
        if record and recording is not None:
            recording.sources[module] = text
        return text

    @property
    def reaches(self) -> tuple:
        """Where the judge's scan found the submission reaching into internals (see the class)."""
        return self._shared["reaches"]

    @property
    def sandbox(self) -> dict | None:
        """What the worker's sandbox enforced ({"enforced", "missing"}), once a worker has started."""
        return self._shared["sandbox"]

    # -- transport ------------------------------------------------------------------------------
    def _start(self) -> WorkerProcess:
        worker = WorkerProcess(self.root, self.confined)
        self._shared["worker"] = worker
        worker.greet(self.timeout)
        self._shared["sandbox"] = worker.report
        return worker

    def request(self, request: dict, wrap: bool = True):
        """Send one request (see :mod:`autograder.harness.worker`); the answer, with modules as
        :class:`Handle` objects (or, with ``wrap=False``, as the raw :class:`HandleRef`)."""
        request.setdefault("seed", self._seed)
        if self._streaming:
            self._seed = CONTINUE_STREAM
        if self._shared["forbid"]:
            request.setdefault("forbid", list(self._shared["forbid"]))
        where = str(request.get("target") or (request.get("specs") or [[request["op"]]])[0][0])
        if self._shared["reaches"]:
            self._keep_rules(request, module_of(where))
        encoded = encode(request)
        key = hashlib.sha256(encoded).digest()  # the call, whichever check makes it
        memo = self._shared["memo"]
        if memo is not None and request["op"] == "call" and not request.get("echo_args"):
            if key not in memo:
                answer = self._answer(self.ask(self._frame(request, encoded), where, key), where, key)
                if contains_handle(answer):
                    return self._wrap(answer, where) if wrap else answer
                memo[key] = answer
            return copy.deepcopy(memo[key])
        frame = self._frame(request, encoded)
        recording = self._shared["recording"]
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
        loads = self._shared["loads"].get(module, frozenset({module}))
        if request.get("forbid") or request.get("count"):
            reaches = [r for r in self._shared["reaches"] if Path(r.file).stem in loads]
            if reaches:
                first, more = reaches[0], len(reaches) - 1
                where = request.get("target", module)
                raise StudentError(FailureKind.FORBIDDEN, f"{where} was not run: your code {first.what} ({first.file} line "
                                                f"{first.line}{f', and {more} more' if more else ''}), reaching into the "
                                                "interpreter's, PyTorch's or the grader's internals. That is not "
                                                "allowed: the checks that forbid a library function or count calls "
                                                "give such code no points", where=where, file=first.file, line=first.line)
            if self._shared["loaded"] & {Path(r.file).stem for r in self._shared["reaches"]}:
                self.close()
        self._shared["loaded"] |= loads

    def _frame(self, request: dict, encoded: bytes) -> bytes:
        """The request as sent: ``encoded``, or, for the first one of a check that reaches the worker,
        encoded again marked fresh (the only request encoded twice)."""
        if not self._shared["fresh"]:
            return encoded
        request["fresh"] = True
        self._shared["fresh"] = False
        return encode(request)

    # -- one check at a time --------------------------------------------------------------------
    def begin_check(self, record: bool = True) -> None:
        """A check starts: its first request makes the worker forget earlier checks' modules,
        and (with ``record``) its requests, answers and source reads are kept until :meth:`end_check`."""
        self._shared["fresh"] = True
        self._shared["answered"].clear()
        self._shared["check_bytes"] = 0
        self._shared["recording"] = Recording() if record else None

    def end_check(self) -> Recording:
        """What the check sent and got since :meth:`begin_check` (empty when not recording)."""
        recording, self._shared["recording"] = self._shared["recording"], None
        self._shared["answered"].clear()
        return recording or Recording()

    def preanswer(self, frame: bytes, answer: bytes | StudentError) -> None:
        """``frame`` was already asked (by a replay): the check's own identical request gets
        ``answer`` without asking again, so the worker sees each request once."""
        self._shared["answered"].append((frame, answer))

    def _answered(self, frame: bytes) -> bytes | None:
        answered = self._shared["answered"]
        if not answered:
            return None
        asked, answer = answered.popleft()
        if asked != frame:  # the check took another path than the replay: ask for real from here
            answered.clear()
            if self._shared["recording"] is not None:
                self._shared["recording"].diverged = True
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
        stopped = self._shared["stopped"]
        for stop in (key, f"{module}.py"):
            if stop in stopped:
                raise stopped[stop]
        spent = self._shared["spent"]
        budgets = ((self.budget - spent[module], f"the calls into {module}.py used up their {self.budget:g} s budget"),
                   (self.total_budget - spent.total(),
                    f"the calls into your submission used up their {self.total_budget:g} s in total"))
        left, used_up = min(budgets)
        if left <= 0:
            raise StudentError(FailureKind.TIMEOUT, f"{where} not run: {used_up}", where=where)
        repeat = where in self._shared["timed_out"]
        timeout = min(self.timeout, DEFAULTS.repeat_timeout) if repeat else self.timeout
        started = time.monotonic()
        try:
            worker = self._shared["worker"] or self._start()
            # A repeat is not asked to stop at its shorter limit: it is stopped by the worker's end.
            answer = worker.exchange(frame, min(timeout + (0 if repeat else DEFAULTS.stop_grace), left))
            self._shared["check_bytes"] += len(answer)
            if self._shared["check_bytes"] > DEFAULTS.check_bytes:  # what the judge would hold for one check
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
            self._shared["timed_out"].add(where)
            raise stopped[key] from None
        except (EOFError, OSError, CodecError) as exc:
            self._crashed(where, exc)
        finally:
            self._shared["spent"][module] += time.monotonic() - started

    def _crashed(self, where: str, exc: Exception):
        worker = self._shared["worker"]
        ending = worker.ending() if worker else {}
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
            self._shared["spent"][module_of(where)] += time.monotonic() - started
        if not isinstance(message, dict) or ("ok" not in message and "error" not in message):
            raise StudentError(FailureKind.BAD_VALUE, f"{where}: malformed answer from the worker")
        if "error" in message:
            raise self._stop_repeats(error_from(message["error"], where), where, key)
        return answer_value(message)

    def _stop_repeats(self, error: StudentError, where: str, key: bytes) -> StudentError:
        """A call that timed out, or a module whose import did, is not asked again: later calls get
        ``error``. The worker that was interrupted is not used again (its state is what the
        interruption left)."""
        if error.kind == FailureKind.TIMEOUT:
            for stop in error.failure.loading or (key,):
                self._shared["stopped"][stop] = error
            self._shared["timed_out"].add(where)
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
        printed = self._shared["printed"] + (self._shared["worker"].printed.total if self._shared["worker"] else 0)
        if printed > PRINTED_NOTE_BYTES:
            return [f"your code printed {printed / 2**20:.0f} MiB; the grader read it and dropped it "
                    "(printing costs nothing, but slows your code down)"]
        return []

    def close(self) -> None:
        worker, self._shared["worker"] = self._shared["worker"], None
        self._shared["loaded"] = set()
        if worker is not None:
            self._shared["printed"] += worker.printed.total
            worker.close()


def module_of(where: str) -> str:
    """The module a call goes to ("module" for "module.Layer.forward")."""
    return where.split(".")[0]


def answer_value(message: dict):
    """What a call answered: its value, with the library calls it made when the request counted them."""
    if "counts" in message:
        return {"result": message["ok"], "counts": message["counts"]}
    return message["ok"]


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
                        line=line if isinstance(line, int) else 0, phase=said["phase"],
                        called_from=said["called_from"][:200],
                        loading=tuple(printable(str(f))[:200] for f in loading[:10]) if isinstance(loading, list) else ())


@dataclass(frozen=True)
class Outcome:
    """What one request gave: the answer as received (encoded; empty when none came: a
    time-out, a crash) and, for an error, ``(kind, exception type)``."""

    answer: bytes = b""
    error: tuple[str, str] | None = None

    @property
    def value(self):
        return answer_value(decode_frame(self.answer))


@dataclass(frozen=True)
class Call:
    """One request a check sent, encoded, and its outcome."""

    frame: bytes
    where: str  # what it calls ("module.function"), for messages without decoding the frame
    outcome: Outcome


@dataclass
class Recording:
    """What one check sent and got: its calls in order, and the sources it read."""

    calls: list[Call] = field(default_factory=list)
    sources: dict[str, str | None] = field(default_factory=dict)
    diverged: bool = False  # the check asked other than a replay with the same answers had asked

    @property
    def replayable(self) -> bool:
        """Did every call get an answer from the student's code (no time-out, no crash: both depend
        on timing)? Only such a run depends on nothing but the answers and the sources."""
        return all(c.outcome.answer and (c.outcome.error or ("",))[0] not in (FailureKind.CRASHED, FailureKind.TIMEOUT)
                   for c in self.calls)


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
        answer = self._student.request({"op": "call", "target": self.target, "args": list(args),
                                        "kwargs": kwargs, "echo_args": True})
        return answer["result"], answer["args"]

    def counting(self, names: tuple[str, ...], *args, **kwargs) -> tuple:
        """Call and return ``(result, {name: calls})``: how often the call used each library function."""
        answer = self._student.request({"op": "call", "target": self.target, "args": list(args),
                                        "kwargs": kwargs, "count": list(names)})
        return answer["result"], answer["counts"]

    def grad(self, *args, upstream=None, **kwargs) -> dict:
        """Call, backpropagate ``upstream`` (default: ones) and return
        ``{"output", "inputs": [grad per argument]}``."""
        return self._student.request({"op": "grad", "target": self.target, "args": list(args),
                                      "kwargs": kwargs, "upstream": upstream})


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

    def grad(self, *args, upstream=None, **kwargs) -> dict:
        """Forward, backpropagate ``upstream`` and return
        ``{"output", "inputs", "parameters": {name: grad}}``."""
        return self._student.request({"op": "grad", "handle": self._ref.id, "args": list(args), "kwargs": kwargs,
                                      "upstream": upstream, "target": f"{self.origin}.forward"})
