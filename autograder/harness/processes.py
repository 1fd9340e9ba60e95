"""The worker processes the judge talks to: one worker process, forked by the zygote
(:mod:`autograder.harness.zygote_client`), with its socket and output (:class:`WorkerProcess`).
What the calls into a worker mean is :mod:`autograder.harness.remote`'s.
"""

from __future__ import annotations

import dataclasses
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from autograder.harness import cgroup, sandbox, worker_uids
from autograder.harness.codec import Unread, decode_frame, encode, read_frame_bytes
from autograder.harness.messages import Configure, ForkConfined, ForkTrusted, Hello
from autograder.harness.zygote_client import Zygote, parent_of
from autograder.limits import PROGRESS_SECONDS, Limits
from autograder.results import FailureKind


class OutputTail:
    """The end of what a worker printed: kept for the message when it crashes."""

    def __init__(self, keep: int):
        self.keep, self.data, self.total = keep, bytearray(), 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        del self.data[:-self.keep]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace").strip()


class Progress:
    """Tells ``report`` every PROGRESS_SECONDS how many seconds an answer has been awaited."""

    def __init__(self, report: Callable[[float], None]):
        self.report, self.start = report, time.monotonic()
        self.due = self.start + PROGRESS_SECONDS

    def wait(self, left: float) -> float:
        """How long to wait for the worker before the clock is looked at again (``left``: till its deadline)."""
        now = time.monotonic()
        if now >= self.due:
            self.report(now - self.start)
            while self.due <= now:
                self.due += PROGRESS_SECONDS
        return min(left, self.due - now)


class WorkerProcess:
    """One worker process, forked by the zygote, the socket to it and the pipe its output comes
    through; confined (in a sandbox) or not (the reference solution)."""

    # A confined worker whose files the sandbox cannot confine serves nothing (sandbox.Unconfined), unless
    # the grader opted out for code it trusts (--no-confinement: then every report says so).
    files_required = True
    # What the lab allows beyond the scan's libraries (lab.toml): the zygote pays their first uses before it forks
    # a worker (autograder.harness.lab_imports), or each worker would, within a student's call.
    lab_allows: frozenset[str] = frozenset()

    def __init__(self, root: Path, confined: bool, limits: Limits):
        self.limits = limits
        # Resolved: its scratch and view are mounted at these paths in the worker's view, where no link leads.
        self.folder = Path(tempfile.mkdtemp(prefix="autograder-worker-")).resolve()
        self.pidfd, self.uid, self.sock, self.output = None, None, None, None
        self.cgroup: cgroup.WorkerCgroup | None = None
        self.missing: list[str] = []  # what the judge could not set up for its sandbox
        self.report: dict | None = None  # what its sandbox enforced, from its first words
        self.printed = OutputTail(limits.output_tail_bytes)
        self.unread = Unread()  # what came from its socket beyond the pieces read so far
        self.zygote = zygote = Zygote.shared()
        paid = {"lab_allows": sorted(self.lab_allows), "temporary": tempfile.gettempdir()}  # the zygote's first uses
        if not confined:  # trusted code: forked by the zygote too (no torch import), without a sandbox
            request = ForkTrusted(root=str(root), **paid)
        else:
            scratch, view = self.folder / "scratch", self.folder / "view"
            scratch.mkdir()
            view.mkdir()
            self.folder.chmod(0o711)  # without a view of its own, a worker under its own user id must reach scratch/
            self.uid = zygote.uids.take() if zygote.uids is not None else None
            try:
                if self.uid is None:
                    raise OSError("the grader must run as root")
                self.cgroup = cgroup.WorkerCgroup(self.uid, limits.worker_total_memory_bytes)
            except OSError as exc:
                self.missing.append(f"{sandbox.MEMORY_CEILING} ({exc})")
            request = ForkConfined(root=str(root), scratch=str(scratch), view=str(view), uid=self.uid,
                                   cgroup=self.cgroup and self.cgroup.procs, files_required=self.files_required,
                                   limits=dataclasses.asdict(limits), **paid)
        try:
            self.sock, self.output, self.pid = zygote.fork(request, limits.start_timeout)
        except OSError:
            self.close()
            raise
        try:
            self.pidfd = os.pidfd_open(self.pid)
        except OSError:  # it ended already
            self.close()
            raise
        if parent_of(self.pid) != zygote.proc.pid:  # the pid was not reused before we held it
            os.close(self.pidfd)
            self.pidfd = None
            self.close()
            raise OSError("the worker ended before it started")
        self.sock.setblocking(False)
        os.set_blocking(self.output, False)

    def greet(self, timeout: float, imports: dict[str, list[str]] | None = None) -> None:
        """Read the worker's first words (what its sandbox enforced) and give it its call time-out and
        the submission's modules each module imports (:class:`autograder.harness.messages.Configure`)."""
        self.report = Hello.from_wire(decode_frame(self.receive(self.limits.start_timeout))).report
        if isinstance(self.report, dict) and self.report.get("refused"):
            raise sandbox.Unconfined(self.report["refused"])
        if isinstance(self.report, dict):
            self.report["missing"] = [*self.missing, *self.report.get("missing", [])]
        self.exchange(encode(Configure(timeout=timeout, imports=imports, frame_bytes=self.limits.frame_bytes,
                                       header_bytes=self.limits.header_bytes).to_wire()), self.limits.start_timeout)

    def in_own_pid_namespace(self) -> bool:
        """Do all its processes die with it (PID 1 of a namespace of its own)?"""
        return isinstance(self.report, dict) and sandbox.PID_NAMESPACE in self.report.get("enforced", [])

    def exchange(self, frame: bytes, timeout: float, progress: Callable[[float], None] | None = None) -> bytes:
        if self.cgroup is not None:
            self.cgroup.call_starts()
        self.sock.settimeout(timeout)
        self.sock.sendall(frame)
        self.sock.setblocking(False)
        return self.receive(timeout, progress)

    def receive(self, timeout: float, progress: Callable[[float], None] | None = None) -> bytes:
        """The next answer, undecoded; what the worker prints meanwhile is drained, so printing
        never blocks it. ``progress`` hears, every PROGRESS_SECONDS, how long the answer has been awaited."""
        deadline = time.monotonic() + timeout
        waiting = Progress(progress) if progress else None
        return read_frame_bytes(lambda n: self._read_exact(n, deadline, waiting), self.limits.frame_bytes,
                                self.limits.header_bytes)

    def _read_exact(self, n: int, deadline: float, progress: Progress | None) -> bytes:
        while want := self.unread.wanted(n):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            waiting = [self.sock] if self.output is None else [self.sock, self.output]
            ready = select.select(waiting, [], [], progress.wait(left) if progress else left)[0]
            if self.output in ready:
                chunk = os.read(self.output, 1 << 16)
                if chunk:
                    self.printed.add(chunk)
                else:  # nothing more will be printed
                    os.close(self.output)
                    self.output = None
            if self.sock in ready:
                self.unread.add(self.sock.recv(want))
        return self.unread.take(n)

    def ending(self, grace: float) -> dict:
        """How the worker ended, as :class:`Failure` fields: ``signal``, ``exit_code`` or, when the
        kernel stopped it at its memory ceiling, kind ``memory``; empty when it is still running
        ``grace`` seconds from now (its channel closes a moment before the kernel reports it ended)."""
        if self.cgroup is not None and self.cgroup.oom_killed():
            return {"kind": FailureKind.MEMORY}
        if self.pidfd is None or not select.select([self.pidfd], [], [], grace)[0]:
            return {}
        status = self.zygote.status_of(self.pid, self.limits.start_timeout)
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
            worker_uids.sweep(range(self.uid, self.uid + 1))
        if self.cgroup is not None:  # empty now: its processes are gone
            self.cgroup.remove()
        try:
            shutil.rmtree(self.folder, ignore_errors=True)
        except RecursionError:  # a hostile tree deeper than Python recurses (without a view of its own)
            subprocess.run(["rm", "-rf", "--one-file-system", str(self.folder)], check=False)
