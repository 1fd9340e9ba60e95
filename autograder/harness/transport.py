"""The judge's channel to the worker that serves a submission (:class:`Channel`): started on first use and
again after a crash, one frame out and its answer back, and what a worker's end means for the student."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autograder.harness.budget import Allowance, module_of
from autograder.harness.codec import CodecError
from autograder.harness.processes import WorkerProcess
from autograder.harness.student_error import StudentError
from autograder.harness.zygote_client import Zygote
from autograder.limits import Limits
from autograder.results import FailureKind
from autograder.text import printable, still_running


class WorkerDidNotStart(RuntimeError):
    """A worker could not be started, or ended before its first words: no student code had run yet, so the
    check broke on the grader's side (``check_error``, which the instructor's grades name), not the student's."""


@dataclass
class Channel:
    """The worker process of a folder of modules (``confined``: forked into a sandbox), with ``loads`` (the
    submission's modules each module loads) given it at its start; ``progress`` is told, while a call has
    not answered, that it still runs."""

    root: Path
    confined: bool
    loads: dict
    limits: Limits
    progress: Callable[[str], None] | None = None
    worker: WorkerProcess | None = None
    sandbox: dict | None = None  # what every worker's sandbox enforced, and what any could not (all_workers)
    started: bool = False  # a worker was started (the first start waits for the zygote, uncharged)
    printed: int = 0  # bytes earlier workers printed

    def exchange(self, frame: bytes, where: str, allowance: Allowance, call_timeout: float) -> bytes:
        """Send ``frame``; the answer, undecoded. TimeoutError past ``allowance.wait``; EOFError, OSError or
        CodecError when the worker is gone or broke the protocol (see :meth:`crashed`)."""
        worker = self.worker or self.start(call_timeout)
        report, module = self.progress, module_of(where)
        return worker.exchange(frame, allowance.wait, report and (
            lambda waited: report(still_running(module, where, waited, allowance.timeout))))

    def ready(self) -> None:
        """Before the first call is charged: the zygote's own start (torch, the warm-up) is the grader's
        cost; a later one (code that killed it) is charged like any restart."""
        if not self.started:
            Zygote.shared().wait_ready(self.limits.start_timeout)
            self.started = True

    def start(self, call_timeout: float) -> WorkerProcess:
        try:
            self.worker = WorkerProcess(self.root, self.confined, self.limits)
            self.worker.greet(call_timeout, {module: sorted(modules) for module, modules in self.loads.items()}
                              if self.loads else None)
        except (EOFError, OSError, CodecError, ValueError) as exc:  # a time-out too: before any code of the student's
            printed = self.worker.output_tail() if self.worker else ""
            self.close()
            raise WorkerDidNotStart(f"a worker did not start ({type(exc).__name__}: {exc})"
                                    + (f"; it printed: {printable(printed)[-1000:]}" if printed else "")) from None
        self.sandbox = all_workers(self.sandbox, self.worker.report)
        return self.worker

    def crashed(self, where: str, exc: Exception):
        """Raise what the worker's end (or its broken channel: ``exc``) during ``where`` means."""
        worker = self.worker
        # A protocol break is reported as such however the worker ended (only a memory kill, read
        # without waiting, comes first): waiting for its end would only spend the module's budget.
        ending = worker.ending(0.0 if isinstance(exc, CodecError) else 1.0) if worker else {}
        tail = worker.output_tail() if worker else ""
        self.close()
        detail = f"\n--- output before it stopped ---\n{printable(tail)}" if tail else ""
        if ending.get("kind") == FailureKind.MEMORY:
            ceiling = self.limits.worker_total_memory_bytes / 2**30
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

    @property
    def printed_total(self) -> int:
        """Bytes every worker so far printed."""
        return self.printed + (self.worker.printed.total if self.worker else 0)

    def close(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            self.printed += worker.printed.total
            worker.close()


def all_workers(so_far: dict | None, report: dict | None) -> dict | None:
    """A channel's workers' sandbox reports as one: what each of them enforced, and what any of them could not. The
    last one's alone hid what a restarted worker lacked and the first had, or the other way round (a memory cgroup that
    another grader's claim removed before the worker joined it)."""
    if so_far is None or report is None:
        return report if so_far is None else so_far
    said, enforced = so_far.get("missing", []), report.get("enforced", [])
    return {**report, "enforced": [e for e in so_far.get("enforced", []) if e in enforced],
            "missing": [*said, *(m for m in report.get("missing", []) if m not in said)]}
