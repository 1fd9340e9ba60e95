"""A clean process with torch already imported that forks confined workers on request.

Importing torch costs more than grading a submission; a worker forked from here pays it
never. The zygote holds nothing of the judge's (no checks, no expected tensors, no
reference): a forked worker inherits only torch and the worker code. It is started by
:class:`Zygote` as ``python -m autograder.zygote <socket fd>``; each request is one JSON line
``{"root", "scratch", "log", "slot"}`` and each answer a JSON line ``{"pid"}`` that carries the
judge's end of the new worker's socket (``SCM_RIGHTS``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

import torch  # noqa: F401 - imported once here so that every forked worker has it

from autograder import worker


def warm_up() -> None:
    """Pay torch's lazy first-use costs once, here: the first backward with an explicit upstream
    gradient imports sympy and mpmath (0.3-0.5 s), which every forked worker would pay again."""
    layer = torch.nn.Linear(4, 4).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    scores = torch.softmax(layer(x) @ x.transpose(-2, -1), dim=-1)
    out = torch.where(scores > 0.3, torch.nn.functional.dropout(scores, 0.5), torch.zeros_like(scores))
    out.backward(torch.ones_like(out))


def serve(control: socket.socket) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    torch.set_num_threads(1)  # before any fork: tiny tensors, and lanes already fill the cores
    warm_up()
    requests = control.makefile("rb")
    for line in requests:
        request = json.loads(line)
        judge_end, worker_end = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            try:
                control.close()
                judge_end.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                worker.run(request["root"], worker_end, request)
            finally:
                os._exit(0)
        worker_end.close()
        socket.send_fds(control, [json.dumps({"pid": pid}).encode() + b"\n"], [judge_end.fileno()])
        judge_end.close()


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
