"""The judge's handle on the zygote (:mod:`autograder.harness.zygote`), and the checks that an answer
came from the process it claims to.

Apart from the worker processes (:mod:`autograder.harness.processes`) because it imports no torch:
an entry point starts the zygote first (:meth:`Zygote.shared`), and the zygote's torch import
and warm-up then run while the judge imports torch, pytest and the checks itself.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import socket
import struct
import subprocess
import sys
import time

from autograder.course import KIT_ROOT
from autograder.harness import sandbox, worker_uids
from autograder.harness.messages import Forked, ForkConfined, ForkTrusted, Status, StatusOf, ZygoteMessage


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


class ForkedChild:
    """What :class:`subprocess.Popen` offers the judge (``pid``, ``poll``, ``wait``, ``kill``), for
    a zygote it forked itself (:mod:`autograder.harness.clean_start`)."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._collect(os.WNOHANG)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self._collect(0)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:  # never a signal to a pid that may have been given to another process
            os.kill(self.pid, signal.SIGKILL)

    def _collect(self, options: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, options)
        except ChildProcessError:  # collected already, by someone else: ended all the same
            self.returncode = -signal.SIGKILL
            return
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)


class Zygote:
    """The judge's handle on :mod:`autograder.harness.zygote`: confined workers, forked in milliseconds.

    Only the zygote holds the other end of the control socket (every worker closes it before
    student code runs), and an answer is still checked before it is believed: the request id
    it echoes, that the socket was made by the zygote (``SO_PEERCRED``) and that the pid is a
    child of the zygote. An answer that fails a check fails the worker it was for, and the
    zygote is replaced.
    """

    _shared: Zygote | None = None

    def __init__(self, control: socket.socket, proc: subprocess.Popen | ForkedChild):
        self.control, self.proc = control, proc
        self.requests = itertools.count(1)
        self.uids = worker_uids.UidPool() if os.getuid() == 0 else None
        self.ready = False  # it has answered once (wait_ready)

    @classmethod
    def start(cls) -> Zygote:
        """A zygote of its own: ``python -m autograder.harness.zygote``, which imports torch itself
        (a judge that started clean forks one instead: :mod:`autograder.harness.clean_start`)."""
        control, child_end = socket.socketpair()
        # Nothing of the judge's: not its environment, nor its output (a lane's is the batch's answer
        # pipe; a student's terminal is not the zygote's to write to). Workers print into pipes of their own.
        proc = subprocess.Popen([sys.executable, "-m", "autograder.harness.zygote", str(child_end.fileno()),
                                 str(os.getpid())], cwd=KIT_ROOT, pass_fds=(child_end.fileno(),),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=dict(sandbox.ENVIRONMENT))
        child_end.close()
        return cls(control, proc)

    @classmethod
    def forked(cls, control: socket.socket, pid: int) -> Zygote:
        """The zygote this process forked itself (:mod:`autograder.harness.clean_start`), as the shared one."""
        cls._shared = cls(control, ForkedChild(pid))
        return cls._shared

    @classmethod
    def held(cls) -> bool:
        """Does this process have a zygote already (a forked one, or one started)?"""
        return cls._shared is not None

    @classmethod
    def shared(cls) -> Zygote:
        if cls._shared is None or cls._shared.proc.poll() is not None:
            cls._shared = cls.start()
        return cls._shared

    @classmethod
    def stop_shared(cls) -> None:
        """Hang up on the shared zygote and wait for it to end, having collected the workers that ended
        (killed if it takes more than a second): a judge that ends leaves no process behind, not even
        one for init to collect."""
        zygote, cls._shared = cls._shared, None
        if zygote is None:
            return
        zygote.control.close()
        deadline = time.monotonic() + 1.0
        while zygote.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        zygote.replace()  # kills only one still running

    def fork(self, request: ForkConfined | ForkTrusted, timeout: float) -> tuple[socket.socket, int, int]:
        """A new worker: the judge's socket to it, the pipe it prints into and its pid; the zygote's answer
        is due within ``timeout`` seconds."""
        request = dataclasses.replace(request, id=next(self.requests))
        fds: list[int] = []
        try:
            self._send(request, timeout)
            line, fds, _, _ = socket.recv_fds(self.control, 4096, 4)
            answer = self._answer(request, line)
            if not isinstance(answer, Forked):
                raise OSError(f"the zygote did not start the worker: {getattr(answer, 'error', 'no answer')}")
            if len(fds) != 2 or not isinstance(answer.pid, int) or answer.pid <= 1 or parent_of(answer.pid) != self.proc.pid:
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
        return sock, fds[1], answer.pid

    def wait_ready(self, timeout: float) -> None:
        """Return once the zygote serves (it answers nothing before torch is imported and warmed up), or
        ``timeout`` seconds have passed (it is replaced then)."""
        if not self.ready:
            self.status_of(0, timeout)
            self.ready = Zygote._shared is self  # no answer replaced it: its successor is not ready yet

    def status_of(self, pid: int, timeout: float) -> int | None:
        """How the zygote's child ``pid`` ended (a wait status), once it has; None if unknown."""
        request = StatusOf(id=next(self.requests), pid=pid)
        try:
            self._send(request, timeout)
            answer = self._answer(request, self.control.recv(4096))
        except (OSError, ValueError):
            self.replace()
            return None
        return answer.status if isinstance(answer, Status) and isinstance(answer.status, int) else None

    def _send(self, request: ZygoteMessage, timeout: float) -> None:
        self.control.settimeout(timeout)
        self.control.sendall(request.to_line())

    @staticmethod
    def _answer(request: ZygoteMessage, line: bytes) -> ZygoteMessage | None:
        """The zygote's answer to ``request`` (None: an answer to another, or a line cut short)."""
        answer = ZygoteMessage.from_line(line) if line.endswith(b"\n") else None
        return answer if answer is not None and answer.id == request.id else None

    def replace(self) -> None:
        """Stop this zygote; the next fork starts a new one."""
        self.proc.kill()
        self.proc.wait()
        self.control.close()
        if Zygote._shared is self:
            Zygote._shared = None
