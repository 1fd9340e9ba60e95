"""A judge that starts clean, so that its zygote is forked from it instead of importing torch again.

The zygote, parent of every worker, must hold nothing of the judge's: not its environment (a
grader's tokens), not its arguments, nothing it has read. Started as a program of its own
(:meth:`Zygote.start`) it imports torch a second time: 1-2 CPU-seconds a judge, and most of the
wait for a ``make check`` while the two imports share the cores.

So an entry point that judges calls :func:`restart_clean` once its arguments hold. The process
replaces itself (``execve``: the same pid, standard streams and limits) by ``python -m
autograder.harness.clean_start`` with the zygote's environment, what it had (environment,
arguments, working folder, import path) waiting unread in a memory file. A batch that starts
judges of its own (a grading lane) starts each as that clean process at once (:func:`start_clean`:
one interpreter start and the entry's imports fewer, a tenth of a second of every run). The clean process imports
torch and the worker code, prepares what workers inherit (:func:`autograder.harness.zygote.prepare`:
torch's lazy first uses, which the judge's gradient checks need too, then ``gc.freeze``), forks the
zygote (:func:`autograder.harness.zygote.serve_forked`, which closes that file and the standard
streams), and only then reads what it had back and runs its entry point again, as the judge, with
torch imported and its zygote ready.

So the judge runs with the zygote's interpreter settings and preparation: hash seed 0, the C.UTF-8
locale, torch on one thread, what was loaded before the fork frozen; ``PYTHON*`` variables read at
start-up (``PYTHONWARNINGS``, ``PYTHONDEVMODE``) do not apply to it, though it has them back for
whatever it starts. Its import path is the one it had (a lane its batch started: the interpreter's own,
with the batch's ``PYTHONPATH`` in front, as a plain start puts it; other variables that shape the path,
such as ``PYTHONHOME`` or a user site, are the zygote's). Unbuffered output is restored; whether
bytecode is written is the caller's from the start (torch's included).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import resource
import runpy
import signal
import socket
import subprocess
import sys

from autograder.course import KIT_ROOT
from autograder.ending import end_without_finalizing
from autograder.harness import sandbox
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
        return subprocess.Popen([*clean_command(held, entry), str(memory_bytes)], cwd=KIT_ROOT,
                                env=sandbox.ENVIRONMENT, pass_fds=(held,), **popen)
    finally:
        os.close(held)


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
    bytecode = "no-bytecode" if sys.dont_write_bytecode else "bytecode"
    return [sys.executable, "-m", __name__, str(held), entry, bytecode]


def carry_on(held: int) -> None:
    """The clean process: torch and the worker code, prepared, the zygote forked, then the entry point
    run as it was started."""
    # Importing torch makes objects none of which is garbage, and the collector's passes over them cost a tenth
    # of the import (1.14 -> 1.01 CPU-s): it is off until they are frozen.
    gc.disable()
    from autograder.harness import zygote  # torch and the worker code: the judge's and, forked, the zygote's

    zygote.prepare()  # torch's lazy first uses (autograd's, for the checks' gradients too) paid once, for both
    gc.enable()  # prepare() froze what is loaded: collections walk only what comes after
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
    with open(held, "rb") as waiting:
        state = json.loads(waiting.read())
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
    if len(sys.argv) > 4:  # argv[4], from start_clean: the address-space limit its entry would have set itself
        resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[4]), int(sys.argv[4])))
    carry_on(int(sys.argv[1]))  # argv[2], the entry, is for `ps`: the memory file says it too
