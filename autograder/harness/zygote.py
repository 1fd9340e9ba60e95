"""A clean process with torch already imported that forks confined workers on request.

Importing torch costs more than grading a submission; a worker forked from here pays it
never. The zygote holds nothing of the judge's (no checks, no expected tensors, no
reference, no environment: it runs with :data:`autograder.harness.sandbox.ENVIRONMENT`):
a forked worker inherits only torch and the worker code. A judge that started clean forks it
(:func:`serve_forked`, :mod:`autograder.harness.clean_start`); otherwise
:class:`autograder.harness.zygote_client.Zygote` starts it as
``python -m autograder.harness.zygote <socket fd> <judge pid>``. The judge asks by
the messages :mod:`autograder.harness.messages` declares (:class:`ForkConfined`, :class:`ForkTrusted`,
:class:`StatusOf`), one JSON line each; a worker forked is answered with its pid and, beside it
(``SCM_RIGHTS``), the judge's end of its socket and the read end of the pipe its output goes to. A confined
worker (:func:`autograder.harness.sandbox.spawn`) is a child of this process and PID 1 of its own namespace;
a trusted one (the reference solution) runs unconfined, and pays no torch import either.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys
from pathlib import Path

from autograder.harness import file_view, sandbox, syscalls
from autograder.harness.messages import ForkConfined, Forked, ForkTrusted, NotForked, Status, StatusOf, ZygoteMessage
from autograder.limits import Limits


def tie_to(judge: int) -> None:
    """End with the judge (pid ``judge``, our parent), and with it every sandbox; at once if it has
    ended already."""
    syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != judge:  # it ended before the line above
        os._exit(0)


if __name__ == "__main__":
    tie_to(int(sys.argv[2]))  # first, before a second of torch's import (an argument error just after it started us)

import torch  # noqa: E402 - imported once here so that every forked worker has it

from autograder.harness import guards, lab_imports, worker  # noqa: E402


def warm_up() -> None:
    """Pay torch's lazy first-use costs once, here (autograd's, the operator ban's), which every
    forked worker would pay again."""
    with torch.random.fork_rng(devices=[]):  # a judge that prepared before its fork keeps its random state
        _first_uses()


def _first_uses() -> None:
    layer = torch.nn.Linear(4, 4).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    weights = torch.sigmoid(layer(x) @ x.transpose(-2, -1))
    out = torch.where(weights > 0.3, weights * torch.bernoulli(torch.full_like(weights, 0.5)), torch.zeros_like(weights))
    worker.backpropagate(out, torch.ones_like(out))
    # The operator ban's first use, here: before confinement, whatever it loads lazily can still be read.
    with guards.ForbiddenOperators(frozenset()):
        torch.ones(2).amax(0)


KEPT_STATUSES = 256  # the judge asks right after a worker ended, or never


def reap(statuses: dict[int, int]) -> None:
    """Collect the sandboxes that have ended (their inits are our children), keeping how."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        statuses[pid] = status
        if len(statuses) > KEPT_STATUSES:
            del statuses[next(iter(statuses))]


def fork_trusted(root: str, worker_end: socket.socket, output_end: int) -> int:
    """An unconfined worker for trusted code in ``root``; its pid. It ends when the judge hangs up."""
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(output_end, 1)
            os.dup2(output_end, 2)
            sandbox.close_all_but(worker_end.fileno())  # not the zygote's control socket, nor others' ends
            worker.run(root, worker_end)
        finally:
            os._exit(0)
    return pid


def prepare() -> None:
    """What every worker inherits ready (done before the fork by a judge that started clean, whose
    own checks then find it ready too)."""
    torch.set_num_threads(1)  # before the first operation and any fork: tiny tensors, and lanes fill the cores
    warm_up()
    file_view.read_roots()  # resolved once here; every worker inherits the answers
    file_view.links_to_roots()
    # What is loaded so far lives as long as the process: out of the collector's way, so that no
    # collection walks torch's objects (in the judge, hypothesis runs one per process) nor writes
    # to the pages a worker or the judge shares with the zygote (a worker, a student's code runs any).
    gc.freeze()


def serve(control: socket.socket) -> None:
    prepare()
    serve_requests(control)


def serve_requests(control: socket.socket) -> None:
    """Serve each request on ``control`` (:data:`SERVE`), until the judge hangs up."""
    sys.dont_write_bytecode = True  # a judge that forked this one may write its bytecode; no worker writes any
    statuses: dict[int, int] = {}
    for line in control.makefile("rb"):
        reap(statuses)
        request = ZygoteMessage.from_line(line)  # only the judge holds the other end
        SERVE[type(request)](request, control, statuses)
    reap(statuses)  # the judge hung up, its workers ended: none is left for init to collect


def status_of(request: StatusOf, control: socket.socket, statuses: dict[int, int]) -> None:
    control.sendall(Status(id=request.id, status=statuses.pop(request.pid, None)).to_line())


def fork_worker(request: ForkConfined | ForkTrusted, control: socket.socket, statuses: dict[int, int]) -> None:
    """Fork the worker asked for; answer with its pid and, beside it, the judge's end of its socket and the
    read end of the pipe it prints into."""
    judge_end, worker_end = socket.socketpair()
    output, output_end = os.pipe()
    try:
        lab_imports.pay_for(request.lab_allows, request.temporary)  # once: every later worker of the lab has them paid
        if isinstance(request, ForkTrusted):
            pid = fork_trusted(request.root, worker_end, output_end)
        else:
            confinement = sandbox.Confinement(request.root, request.scratch, request.view, request.uid, request.cgroup,
                                              request.files_required, limits=Limits(**request.limits))
            pid = sandbox.spawn(confinement, worker_end, output_end,
                                # spawn runs it in the child it forks, before the zygote serves another request
                                lambda report: worker.run(confinement.submission, worker_end, report))
    except (OSError, lab_imports.FirstUseFailed) as exc:
        control.sendall(NotForked(id=request.id, error=str(exc)).to_line())
    else:
        socket.send_fds(control, [Forked(id=request.id, pid=pid).to_line()], [judge_end.fileno(), output])
    finally:
        for end in (judge_end, worker_end):
            end.close()
        os.close(output)
        os.close(output_end)


SERVE = {ForkConfined: fork_worker, ForkTrusted: fork_worker, StatusOf: status_of}


def serve_forked(control: socket.socket, judge: int, kit: Path) -> None:
    """Serve as the zygote of ``judge``, forked from it, prepared (:func:`prepare`), before it read
    anything of its own (:mod:`autograder.harness.clean_start`): keep only the control socket; write
    nowhere of the judge's."""
    tie_to(judge)
    devnull = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1, 2):
        os.dup2(devnull, stream)
    sandbox.close_all_but(control.fileno())  # the judge's waiting state among them, unread
    os.chdir(kit)  # as a zygote of its own runs
    serve_requests(control)  # prepared before the fork


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
