"""The judge's time policy for the calls into a submission (:class:`Budgets`): each module's budget and the
submission's, the time-out of one call, and the calls not asked again because they (or their module's
import) timed out."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from autograder.harness.student_error import StudentError
from autograder.limits import Limits
from autograder.results import FailureKind


def module_of(where: str) -> str:
    """The module a call goes to ("module" for "module.Layer.forward")."""
    return where.split(".")[0]


@dataclass(frozen=True)
class Allowance:
    """What one call may take: ``timeout`` (its own limit), ``left`` (what its budgets have left, and
    ``used_up``: which budget that is, in words) and whether it is a ``repeat`` of a call that timed out."""

    timeout: float
    left: float
    used_up: str
    repeat: bool
    grace: float  # Limits.stop_grace: how long a worker that does not stop when asked is waited for

    @property
    def wait(self) -> float:
        """How long the judge waits for the answer: a repeat is not asked to stop at its shorter limit (the
        worker's end stops it); any other call gets the grace of a worker that stops when asked."""
        return min(self.timeout + (0 if self.repeat else self.grace), self.left)

    def why_stopped(self) -> str:
        if self.left <= self.timeout:
            return f"was stopped: {self.used_up}"
        if self.repeat:
            return f"did not finish in {self.timeout:g} s (an earlier call of it timed out, so later ones get {self.timeout:g} s)"
        return f"did not finish in {self.timeout:g} s (and did not stop when asked)"


@dataclass
class Budgets:
    """Seconds charged per module (the judge's clock, charged to the module the judge named); the calls and
    the files whose import hung, with the time-out each got; the calls that timed out (asked again within
    ``Limits.repeat_timeout``)."""

    limits: Limits  # the run's: a repeat's time-out, the grace
    spent: collections.Counter = field(default_factory=collections.Counter)
    stopped: dict = field(default_factory=dict)
    timed_out: set = field(default_factory=set)

    def allowance(self, where: str, key: bytes, timeout: float, budget: float, total_budget: float) -> Allowance:
        """What the call ``key`` into ``where`` may take; StudentError at once when it (or the import of its
        module) timed out before, with the same message, or when a budget is used up."""
        module = module_of(where)
        for stop in (key, f"{module}.py"):
            if stop in self.stopped:
                raise self.stopped[stop]
        budgets = ((budget - self.spent[module], f"the calls into {module}.py used up their {budget:g} s budget"),
                   (total_budget - self.spent.total(),
                    f"the calls into your submission used up their {total_budget:g} s in total"))
        left, used_up = min(budgets)
        if left <= 0:
            raise StudentError(FailureKind.TIMEOUT, f"{where} not run: {used_up}", where=where)
        repeat = where in self.timed_out
        return Allowance(min(timeout, self.limits.repeat_timeout) if repeat else timeout, left, used_up, repeat,
                         self.limits.stop_grace)

    def ran_out(self, where: str, key: bytes, allowance: Allowance) -> StudentError:
        """The call the judge stopped waiting for: its error, which its later calls get too."""
        self.stopped[key] = StudentError(FailureKind.TIMEOUT, f"{where} {allowance.why_stopped()}", where=where)
        self.timed_out.add(where)
        return self.stopped[key]

    def stop_repeats(self, error: StudentError, where: str, key: bytes) -> bool:
        """A call that timed out in the worker, or a module whose import did, is not asked again: later
        calls get ``error``. True when it did (the worker that was interrupted must not be used again: its
        state is what the interruption left)."""
        if error.kind != FailureKind.TIMEOUT:
            return False
        for stop in error.failure.loading or (key,):
            self.stopped[stop] = error
        self.timed_out.add(where)
        return True
