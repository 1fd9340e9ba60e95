"""A judge that starts clean, so that its zygote is forked from it instead of importing torch again.

The zygote, parent of every worker, must hold nothing of the judge's: not its environment (a
grader's tokens), not its arguments, nothing it has read. Started as a program of its own
(:meth:`Zygote.start`) it imports torch a second time: 1-2 CPU-seconds a judge, and most of the
wait for a ``make check`` while the two imports share the cores.

So an entry point that judges calls :func:`restart_clean` once its arguments hold. The process
replaces itself (``execve``: the same pid, standard streams and limits) by ``python -m
autograder.harness.clean_start`` with the zygote's environment, what it had (environment,
arguments, working folder, import path) waiting unread in a memory file. The clean process imports
torch and the worker code, prepares what workers inherit (:func:`autograder.harness.zygote.prepare`:
torch's lazy first uses, which the judge's gradient checks need too, then ``gc.freeze``), forks the
zygote (:func:`autograder.harness.zygote.serve_forked`, which closes that file and the standard
streams), and only then reads what it had back and runs its entry point again, as the judge, with
torch imported and its zygote ready.

A batch that starts judges of its own (grading lanes) has each forked, already clean, by its judge server
(:class:`JudgeServer`, :func:`start_clean`): one clean process a batch that imports and prepares torch once
and forks a judge for each lane, which then forks its zygote and reads its memory file as above. A lane's
start is a fork, not 1-2 CPU-seconds of imports, and the lanes share torch's pages until they write them;
``ps`` shows each as the server's command line (``clean_start serve``). Where no server can be had (no
pidfd), each lane is started as a clean process of its own.

So the judge runs with the zygote's interpreter settings and preparation: hash seed 0, the C.UTF-8
locale, torch on one thread, what was loaded before the fork frozen; ``PYTHON*`` variables read at
start-up (``PYTHONWARNINGS``, ``PYTHONDEVMODE``) do not apply to it, though it has them back for
whatever it starts. Its import path is the one it had (a lane its batch started: the interpreter's own,
with the batch's ``PYTHONPATH`` in front, as a plain start puts it; other variables that shape the path,
such as ``PYTHONHOME`` or a user site, are the zygote's). Unbuffered output is restored; whether
bytecode is written is the caller's from the start (torch's included).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import itertools
import json
import os
import resource
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
import weakref
from typing import NoReturn

from autograder.course import KIT_ROOT
from autograder.ending import end_without_finalizing
from autograder.harness import sandbox
from autograder.harness.messages import ForkJudge, Forked, MessageError, NotForked, Status, StatusOf, ZygoteMessage
from autograder.harness.zygote_client import Zygote


def restart_clean(entry: str) -> None:
    """Have a zygote for a judge in this process. Run as ``python -m <entry>`` (no interpreter option,
    no wrapper such as a debugger, which a restart would drop), the process starts again clean and
    forks it (this call returns in the restarted process); otherwise it starts one of its own."""
    if Zygote.held():  # started clean: its zygote is forked already
        return
    main = getattr(sys.modules["__main__"], "__spec__", None)
    started_as_entry = main is not None and main.name == entry and \
        sys.orig_argv[1:3] == ["-m", entry.removesuffix(".__main__")]
    if not started_as_entry or not hasattr(os, "memfd_create"):
        Zygote.shared()
        return
    here, held = os.getcwd(), None
    try:
        held = waiting_state(entry, sys.argv[1:], here, sys.path, getattr(sys.stdout, "write_through", False),
                             across_exec=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os.chdir(KIT_ROOT)  # where `-m autograder...` is found; the folder is given back
        os.execve(sys.executable, clean_command(held, entry), sandbox.ENVIRONMENT)
    except OSError:  # no memory file here (a seccomp profile), or no execve: a zygote of its own
        if held is not None:
            os.close(held)
        os.chdir(here)
        Zygote.shared()


def start_clean(entry: str, argv: list[str], memory_bytes: int, **popen) -> subprocess.Popen:
    """Start ``python -m <entry> <argv>`` in the kit's folder as a judge that starts clean, with this
    process's environment and an address space of at most ``memory_bytes`` (its zygote's too): as
    :func:`restart_clean` would have it restart, without the first start. Where no memory file can be
    made, the entry is started as it is (and has a zygote of its own)."""
    held = None
    if hasattr(os, "memfd_create"):
        with contextlib.suppress(OSError):
            # Closed on exec but for this child (pass_fds): the batch's other threads start processes too.
            held = waiting_state(entry, argv, str(KIT_ROOT), None, bool(os.environ.get("PYTHONUNBUFFERED")),
                                 across_exec=False)
    if held is None:
        return subprocess.Popen([sys.executable, "-m", entry, *argv], cwd=KIT_ROOT, **popen)
    try:
        with contextlib.suppress(OSError):  # no server here (no pidfd): a clean process of its own
            if (served := JudgeServer.fork(held, memory_bytes, **popen)) is not None:
                return served
        return subprocess.Popen([*clean_command(held, entry), str(memory_bytes)], cwd=KIT_ROOT,
                                env=sandbox.ENVIRONMENT, pass_fds=(held,), **popen)
    finally:
        os.close(held)


class JudgeServer:
    """The clean process every judge a batch starts is forked from (``python -m autograder.harness.clean_start
    serve``, :func:`serve`): torch and the worker code imported and prepared once a batch, not once a lane (a
    lane's start: a fork, not 1-2 CPU-seconds), and shared by the lanes' memory until they write it. It holds
    nothing of any judge's: a judge's state (its memory file) is read only by the child forked for it, after
    that child has forked its zygote. One a process (a batch, or a process that grades several times), started
    on first use; it ends when the process hangs up."""

    _shared: JudgeServer | None = None
    _lock = threading.Lock()  # the batch's threads start lanes at once

    def __init__(self):
        self.control, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([sys.executable, "-m", __name__, "serve", str(server_end.fileno()), bytecode()],
                                     cwd=KIT_ROOT, env=sandbox.ENVIRONMENT, pass_fds=(server_end.fileno(),),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server_end.close()
        self.requests = itertools.count(1)

    @classmethod
    def fork(cls, held: int, memory_bytes: int, stdin=None, stdout=None, stderr=None, text: bool = False,
             **other) -> ServedJudge | None:
        """A judge forked with the memory file ``held`` and these standard streams (None: this process's,
        ``subprocess.PIPE`` or ``subprocess.DEVNULL``); None for other options of Popen's. OSError if the
        server cannot start it."""
        if other or not hasattr(os, "pidfd_open") or \
                any(s not in (None, subprocess.PIPE, subprocess.DEVNULL) for s in (stdin, stdout, stderr)):
            return None
        ends = [standard_stream(s, number) for number, s in enumerate((stdin, stdout, stderr))]
        try:
            with cls._lock:
                for attempt in (1, 2):  # one that ended before it had the request is replaced once
                    if cls._shared is None or cls._shared.proc.poll() is not None:
                        if cls._shared is None:
                            atexit.register(cls.stop_shared)
                        else:
                            cls._shared.control.close()
                        cls._shared = cls()
                    server = cls._shared
                    try:
                        answer, pidfd = server.ask(ForkJudge(id=next(server.requests), memory_bytes=memory_bytes),
                                                   [held, *(child for child, _ in ends)])
                        break
                    # Only then: a server that had the request may have forked a judge, which must not have a twin
                    # on the same streams; that judge sees its input end, as these ends close below.
                    except NotDelivered:
                        server.proc.wait()  # ask() killed it
                        if attempt == 2:
                            raise
            if not isinstance(answer, Forked) or pidfd is None:
                raise OSError(f"the judge server did not start the judge: {getattr(answer, 'error', 'no answer')}")
        except BaseException:
            for _, mine in ends:
                if mine is not None:
                    os.close(mine)
            raise
        finally:
            for child, _ in ends:
                os.close(child)
        os.set_inheritable(pidfd, False)
        return ServedJudge(server, answer.pid, pidfd, *(None if mine is None else our_end(mine, number, text)
                                                        for number, (_, mine) in enumerate(ends)))

    @classmethod
    def stop_shared(cls) -> None:
        """Hang up on the server and wait for it to end (killed after a second): a batch that ends leaves
        no server behind. Its judges end when the batch closes their input."""
        server, cls._shared = cls._shared, None
        if server is not None:
            server.control.close()
            try:
                server.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                server.proc.kill()
                server.proc.wait()

    def ask(self, request: ZygoteMessage, fds: list[int] = ()) -> tuple[ZygoteMessage, int | None]:
        """Send ``request`` (with ``fds``) and read its answer: what it is, and the descriptor it came with."""
        try:
            self.control.settimeout(START_TIMEOUT)
            try:
                socket.send_fds(self.control, [request.to_line()], fds)
            except OSError as exc:
                raise NotDelivered(exc) from None
            line, got, _, _ = socket.recv_fds(self.control, 4096, 1)
            answer = ZygoteMessage.from_line(line) if line else None
            if answer is None or answer.id != request.id:
                for fd in got:
                    os.close(fd)
                raise OSError("the judge server ended" if answer is None else "the judge server answered another request")
        except (OSError, MessageError) as exc:
            self.proc.kill()  # ended or out of step: the next judge is forked by a new one
            if isinstance(exc, NotDelivered):
                raise
            raise OSError(f"the judge server did not answer: {exc}") from None
        return answer, (got[0] if got else None)

    def status_of(self, pid: int) -> int | None:
        with self._lock:
            answer, _ = self.ask(StatusOf(id=next(self.requests), pid=pid))
        return answer.status if isinstance(answer, Status) else None


# The first fork waits for the server's imports (seconds on a busy machine).
START_TIMEOUT = 120.0


class NotDelivered(OSError):
    """A request the judge server never had (it had ended): another server may be asked again."""


def our_end(fd: int, number: int, text: bool):
    """This process's end of a judge's standard stream ``number``, as Popen opens it."""
    if text:
        return open(fd, "w" if number == 0 else "r", encoding="utf-8")
    return open(fd, "wb" if number == 0 else "rb", buffering=0)


def standard_stream(kind, number: int) -> tuple[int, int | None]:
    """The judge's end of its standard stream ``number`` (0-2), and this process's end of it (a pipe's), if any."""
    if kind is None:
        return os.dup(number), None
    if kind == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDWR), None
    read, write = os.pipe()
    return (read, write) if number == 0 else (write, read)


class ServedJudge:
    """What :class:`subprocess.Popen` offers a batch (``pid``, the standard streams, ``poll``, ``wait``,
    ``kill``, ``communicate``), for a judge its server forked: watched through a pidfd (a pid the judge's
    end freed is never signalled), its exit status asked of the server, its parent."""

    def __init__(self, server: JudgeServer, pid: int, pidfd: int, stdin, stdout, stderr):
        self.server, self.pid, self.pidfd = server, pid, pidfd
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self.release = weakref.finalize(self, os.close, pidfd)  # once: when it is waited for, or forgotten

    def poll(self) -> int | None:
        return self.wait(0.0) if self.returncode is None and self._ended(0.0) else self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._ended(timeout):
                raise subprocess.TimeoutExpired(f"judge {self.pid}", timeout)
            try:
                status = self.server.status_of(self.pid)
            except OSError:  # the server ended: it took the status along
                status = None
            self.returncode = -signal.SIGKILL if status is None else os.waitstatus_to_exitcode(status)
            self.release()
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it has ended, not yet been waited for
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple:
        """As Popen's, for a judge that prints into one pipe at most (read to its end, then waited for)."""
        if self.stdin is not None:
            self.stdin.close()
        if self.stdout is not None and self.stderr is not None:
            raise ValueError("a served judge's two output pipes are read by its batch's threads, not here")
        read = [stream.read() if stream is not None else None for stream in (self.stdout, self.stderr)]
        self.wait(timeout)
        return tuple(read)

    def _ended(self, timeout: float | None) -> bool:
        return bool(select.select([self.pidfd], [], [], timeout)[0])


def serve(control: socket.socket) -> NoReturn:
    """The judge server: prepared once (:func:`prepare`), then a judge forked for each :class:`ForkJudge`, until
    its batch hangs up; its judges' ends collected and kept for :class:`StatusOf`, as the zygote keeps its
    workers'."""
    from autograder.harness import zygote

    prepare()
    statuses: dict[int, int] = {}
    while True:
        try:
            line, fds, _, _ = socket.recv_fds(control, 4096, 4)
        except OSError:
            line, fds = b"", []
        zygote.reap(statuses)
        if not line:
            os._exit(0)  # its judges go on: each ends when its batch closes its input
        request = None
        try:
            request = ZygoteMessage.from_line(line)
            if isinstance(request, StatusOf):
                zygote.status_of(request, control, statuses)
            elif isinstance(request, ForkJudge) and len(fds) == 4:
                pid = os.fork()
                if pid == 0:
                    become_judge(control, fds, request.memory_bytes)
                pidfd = os.pidfd_open(pid)  # before any reaping: the pid is still this one's child
                try:
                    socket.send_fds(control, [Forked(id=request.id, pid=pid).to_line()], [pidfd])
                finally:
                    os.close(pidfd)
            else:
                raise MessageError("not a request to a judge server")
        except (OSError, MessageError) as exc:
            control.send(NotForked(id=request.id if request else 0, error=str(exc)).to_line())
        finally:
            for fd in fds:
                os.close(fd)


def become_judge(control: socket.socket, fds: list[int], memory_bytes: int) -> NoReturn:
    """The child of the judge server: its standard streams and address-space limit, then the clean process's
    own course (:func:`carry_on`) with the memory file ``fds[0]``."""
    try:
        control.close()
        held, *streams = fds
        for number, stream in enumerate(streams):
            os.dup2(stream, number)
            os.close(stream)
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        carry_on(held)
    except BaseException:
        traceback.print_exc()  # into the lane's standard error: its log with --debug
    finally:
        os._exit(70)  # carry_on ends the process itself; this only if it could not start


def waiting_state(entry: str, argv: list[str], cwd: str, path: list[str] | None, write_through: bool,
                  across_exec: bool) -> int:
    """A memory file holding what the judge had (``path`` None: the import path its own start gives it),
    inherited by the clean process, which reads it only after its zygote is forked: kept open across
    ``execve`` (``across_exec``), or closed on exec but for the child it is passed to."""
    state = json.dumps({"entry": entry, "argv": argv, "environ": dict(os.environ), "cwd": cwd, "path": path,
                        "write_through": write_through}).encode()
    made = os.memfd_create("autograder-judge", 0 if across_exec else os.MFD_CLOEXEC)
    try:
        with open(made, "wb", closefd=False) as waiting:
            waiting.write(state)
        os.lseek(made, 0, os.SEEK_SET)
        # Never fd 0-2, which a process started with a standard stream closed has free: the clean process's
        # own standard streams would replace it.
        return fcntl.fcntl(made, fcntl.F_DUPFD if across_exec else fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(made)


def clean_command(held: int, entry: str) -> list[str]:
    """The clean process's command line: the entry's name too, for `ps` (the zygote's then says whose it
    is), and whether the caller writes bytecode."""
    return [sys.executable, "-m", __name__, str(held), entry, bytecode()]


def bytecode() -> str:
    """Whether this process writes bytecode, as a clean process's command line says it (its argv[3])."""
    return "no-bytecode" if sys.dont_write_bytecode else "bytecode"


def prepare() -> None:
    """Torch and the worker code, imported and prepared: the judge's and, forked, its zygote's."""
    # Importing torch makes objects none of which is garbage, and the collector's passes over them cost a tenth
    # of the import (1.14 -> 1.01 CPU-s): it is off until they are frozen.
    gc.disable()
    from autograder.harness import zygote

    zygote.prepare()  # torch's lazy first uses (autograd's, for the checks' gradients too) paid once, for both
    gc.enable()  # prepare() froze what is loaded: collections walk only what comes after


def carry_on(held: int) -> None:
    """The clean process, prepared (:func:`prepare`): the zygote forked, then the entry point run as it was
    started."""
    from autograder.harness import zygote

    # Child exits are collected (a SIG_IGN inherited across execve would have the kernel reap the zygote
    # unseen, and a handle could not tell it ended).
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    control, zygote_end = socket.socketpair()
    judge = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            control.close()
            zygote.serve_forked(zygote_end, judge, KIT_ROOT)
        finally:
            os._exit(0)
    zygote_end.close()
    Zygote.forked(control, pid)
    # Read from its start, not the file's shared offset: a judge whose server died before it answered has a
    # twin started by other means, and each reads it whole.
    state = json.loads(os.pread(held, os.fstat(held).st_size, 0))
    os.close(held)
    os.chdir(state["cwd"])
    os.environ.clear()
    os.environ.update(state["environ"])
    if state["path"] is None:  # started by its batch (start_clean): PYTHONPATH goes after the entry's folder,
        # as a plain start puts it: an empty entry is the working folder, a repeated one stays where it came first
        # (the entry's folder, added last by a plain start, is not compared)
        extra = [os.path.abspath(folder) for folder in os.environ["PYTHONPATH"].split(os.pathsep)] \
            if os.environ.get("PYTHONPATH") else []
        sys.path[:] = [sys.path[0], *dict.fromkeys([*extra, *sys.path[1:]])]
    else:
        sys.path[:] = state["path"]
    if state["write_through"]:  # started unbuffered (-u is not carried over, PYTHONUNBUFFERED came back too late)
        sys.stdout.reconfigure(write_through=True)
        sys.stderr.reconfigure(write_through=True)
    sys.argv[1:] = state["argv"]
    try:
        runpy.run_module(state["entry"], run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as stop:
        status = stop.code
    end_without_finalizing(status)


if __name__ == "__main__":
    # As its caller would, the judge caches the bytecode of what it imports (torch's modules, its own, the
    # checks' rewritten asserts), though the zygote's environment forbids it: the clean process is the only
    # one of a judge's that imports torch, and one that never cached it would compile torch again in every run
    # (3.1 s instead of 1.7 s of a `make check`). The zygote and its workers write none (zygote.serve_requests).
    sys.dont_write_bytecode = sys.argv[3] == "no-bytecode"
    if sys.argv[1] == "serve":  # a batch's judge server (JudgeServer): argv[2] is its control socket
        serve(socket.socket(fileno=int(sys.argv[2])))
    if len(sys.argv) > 4:  # argv[4], from start_clean: the address-space limit its entry would have set itself
        resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[4]), int(sys.argv[4])))
    prepare()
    carry_on(int(sys.argv[1]))  # argv[2], the entry, is for `ps`: the memory file says it too
