"""How the kit's processes end: without the interpreter's finalization, which frees every module one by
one (a judge's torch: a third of a second; a batch's jinja2, numpy and copydetect: 50 ms), once what a
normal exit does first is done. Light to import: every command ends here."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

from autograder import shortcuts


def run_to_end(main: Callable[[], int]) -> NoReturn:
    """Run a command's ``main`` and end (:func:`end_without_finalizing`). SIGTERM (``kill``, ``timeout``, a cancelled
    CI job) interrupts it as Ctrl-C does (it left its copies of student code in /tmp): what it finished is kept, what it
    had not is neither recorded nor left behind, and it says so in a line, not a traceback."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        status = main()
    except KeyboardInterrupt:
        print("interrupted: what was finished is kept (the same command again goes on from there)", file=sys.stderr)
        status = 130  # as a shell reports Ctrl-C
    end_without_finalizing(status)


def end_without_finalizing(status) -> NoReturn:
    """End this process as ``sys.exit(status)`` would, less the finalization: the kernel frees it all at
    once (a shortcut: :mod:`autograder.shortcuts`, ``no_finalizing``). As normal exit does first: threads
    joined, what was registered to run at exit run (a judge's workers closed, their folders removed); then
    a judge's zygote is stopped, the output flushed (120 when it cannot be, as Python's own exit says)."""
    code, fast = 1, shortcuts.on("no_finalizing")
    try:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
        if fast:
            atexit._run_exitfuncs()
        zygotes = sys.modules.get("autograder.harness.zygote_client")  # a judge's: never imported only to end
        if zygotes is not None:
            with contextlib.suppress(Exception):
                zygotes.Zygote.stop_shared()
        if status is None:
            code = 0
        elif isinstance(status, int):
            code = status
        else:  # as sys.exit("message") does
            print(status, file=sys.stderr)
        for stream in {sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__} - {None}:
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - said by the exit status, as Python's own exit says it
                code = code or 120
    finally:
        if fast:
            os._exit(code)
    sys.exit(code)  # AUTOGRADER_PLAIN=1: Python's own exit, which runs what was registered and finalizes
