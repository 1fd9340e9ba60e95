"""Where the kit reaches into a library's private internals to save time, declared once: each shortcut
with what it reaches, what it saves (measured on 2026-11-28, a 2-core Linux machine, the pinned
versions), and one switch that turns them all off, ``AUTOGRADER_PLAIN=1``, with grades unchanged
(``tests/test_shortcuts.py`` holds each claim on the pinned versions, and the grades equal).

Not shortcuts, and kept under the switch: hypothesis's local constants turned off (judge/plugin.py:
without it a grade would depend on which modules the process imported) and torch's dispatch mode
(harness/guards: how a ban holds below every Python name).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PLAIN = os.environ.get("AUTOGRADER_PLAIN") == "1"


@dataclass(frozen=True)
class Shortcut:
    reaches: str  # the private internals it relies on
    saves: str  # measured


SHORTCUTS = {
    "no_dynamo": Shortcut(
        "torch's TorchDispatchMode._should_skip_dynamo, a private hook read when a mode class is made (torch 2.13)",
        "1.0-1.4 s of every judge: the first banned call no longer imports torch._dynamo (about 800 modules)"),
    "no_finalizing": Shortcut(
        "atexit._run_exitfuncs, then os._exit: the interpreter's finalization skipped (Python 3.11-3.13)",
        "0.45 s of every process that imported torch (a judge, a lane, make check: 1.12 s to end, not 1.60 s)"),
}


def on(name: str) -> bool:
    """Whether the shortcut ``name`` (a key of :data:`SHORTCUTS`) is taken: always, unless AUTOGRADER_PLAIN=1."""
    if name not in SHORTCUTS:
        raise KeyError(f"no shortcut {name!r}: declare it in SHORTCUTS")
    return not PLAIN
