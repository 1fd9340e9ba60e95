"""The rules the judge keeps for a submission that reaches into internals (:mod:`autograder.judge.internals`):
code that could lift the rules a worker enforces (forbidden and counted library calls) from inside is
never in a worker that serves a request carrying one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autograder.harness.messages import Request
from autograder.harness.student_error import StudentError
from autograder.results import FailureKind


@dataclass
class Rules:
    """``reaches``: where the scan found the source reaching into internals (objects with ``file``, ``line``
    and ``what``); ``loads``: the submission's modules each module loads (itself included); ``loaded``: the
    modules the current worker has loaded; ``forbid``: the library functions calls may not use now."""

    reaches: tuple = ()
    loads: dict = field(default_factory=dict)
    loaded: set = field(default_factory=set)
    forbid: tuple = ()

    def keep(self, request: Request, module: str, close: Callable[[], None]) -> None:
        """Before ``request`` into ``module`` is sent: refuse it if it carries a rule (a forbidden or counted
        library function) that code ``module`` loads could lift; ``close`` the current worker if such code
        was loaded into it by earlier calls."""
        loads = self.loads.get(module, frozenset({module}))
        if request.forbid or request.count:
            reaches = [r for r in self.reaches if Path(r.file).stem in loads]
            if reaches:
                first, more = reaches[0], len(reaches) - 1
                where = getattr(request, "target", "") or module
                raise StudentError(FailureKind.FORBIDDEN, f"{where} was not run: your code {first.what} ({first.file} line "
                                                f"{first.line}{f', and {more} more' if more else ''}), reaching into the "
                                                "interpreter's, PyTorch's or the grader's internals. That is not "
                                                "allowed: the checks that forbid a library function or count calls "
                                                "give such code no points", where=where, file=first.file, line=first.line)
            if self.loaded & {Path(r.file).stem for r in self.reaches}:
                close()  # it forgets what was loaded
        self.loaded |= loads
