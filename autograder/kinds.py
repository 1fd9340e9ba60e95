"""Why a check failed, declared once: each :class:`FailureKind` with everything it means (:data:`KINDS`).

The worker writes kinds from here (this module imports neither torch nor a stage), the judge
decides the rest, and records, reports and platforms read what a kind means from its entry,
never from its name or its wording: a new kind is one entry (tests/test_kinds.py walks every
entry through every consumer).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum


class FailureKind(StrEnum):
    """Why a check failed. The student's code: it raised (``exception``), is a stub
    (``not_implemented``), its module did not import or is missing, a call ran out of time or
    memory, the process running it crashed or broke the protocol, an answer could not be read
    (``bad_value``, ``too_large``), a call was refused (``forbidden``: the code reaches into
    internals) or was malformed (``bad_request``). The check's verdict: ``wrong``. The kit's own
    bug: ``check_error``."""

    WRONG = "wrong"
    EXCEPTION = "exception"
    NOT_IMPLEMENTED = "not_implemented"
    IMPORT = "import"
    MISSING = "missing"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    CRASHED = "crashed"
    PROTOCOL = "protocol"
    BAD_VALUE = "bad_value"
    TOO_LARGE = "too_large"
    BAD_REQUEST = "bad_request"
    FORBIDDEN = "forbidden"
    CHECK_ERROR = "check_error"

    @property
    def meaning(self) -> Kind:
        return KINDS[self]

    @classmethod
    def reported_by_worker(cls, said: object) -> FailureKind:
        """The kind a worker's error answer names; the worker runs student code, so a kind only the
        judge may decide (a crash, a wrong answer, a broken check) or none at all is an exception."""
        return cls(said) if isinstance(said, str) and said in KINDS and KINDS[said].from_worker else cls.EXCEPTION


# Why the class report says a student needs a look, most urgent first (reports.class_report: "Needs a look").
NEEDS = ("could not be graded in full", "struggling", "well below the class", "integrity")
NOT_GRADED, STRUGGLING, BELOW, INTEGRITY = NEEDS


class Flag(Enum):
    """How the class report flags a student's failures of a kind (reports.class_report.flags), and
    under which of :data:`NEEDS`."""

    NAMED = (NOT_GRADED, "each named as the status column says it")
    POINTS_LOST = (NOT_GRADED, "the points they cost, added up")
    NOT_STARTED = (STRUGGLING, "a part every check of which failed so")

    @property
    def need(self) -> str:
        return self.value[0]


@dataclass(frozen=True)
class Kind:
    kind: FailureKind
    # How grades.csv's status column names it (it costs points beyond a wrong answer); None: the points say it.
    status: str | None = None
    # What to look at next (make check, the notebook); "{where}", "{file}", "{line}" are the failure's.
    # "": what the check verifies.
    hint: str = ""
    from_worker: bool = False  # a worker's error answer may name it (the rest only the judge decides)
    verdict: bool = False  # the check's verdict on an answer, not an error of the code (JUnit: a failure)
    stops: bool = False  # it ended or stopped the student's process: the first thing to fix
    said_once: bool = False  # it says the same to every check that meets it: the feedback says it once
    timing: bool = False  # it depends on the machine's timing: a run that met it is not replayed
    diagnosable: bool = False  # a known mistake's mutant may fail the same way (judge.misconceptions)
    flag: Flag | None = None  # how the class report flags it (None: the points say it)


KINDS: dict[FailureKind, Kind] = {entry.kind: entry for entry in (
    Kind(FailureKind.WRONG, verdict=True),
    Kind(FailureKind.EXCEPTION, from_worker=True, diagnosable=True),
    Kind(FailureKind.NOT_IMPLEMENTED, from_worker=True, said_once=True, flag=Flag.NOT_STARTED,
         hint="{where} still raises NotImplementedError; its docstring states the contract (shapes, dtype, what to "
              "return)."),
    Kind(FailureKind.IMPORT, "did not import", from_worker=True, said_once=True, flag=Flag.NAMED,
         hint="the module does not import: see {file} line {line}; `python <module>.py` shows the error too."),
    # A missing name costs only its checks' points; a missing file is named in the status (reports.records.problem).
    Kind(FailureKind.MISSING, "missing", from_worker=True, said_once=True, flag=Flag.NAMED),
    Kind(FailureKind.TIMEOUT, "timed out", from_worker=True, stops=True, timing=True, flag=Flag.POINTS_LOST,
         hint="look for a loop that never ends (or work that grows much faster than the input)."),
    Kind(FailureKind.MEMORY, "out of memory", from_worker=True, stops=True, flag=Flag.POINTS_LOST,
         hint="your code used too much memory: look for a tensor that grows with every loop, or a huge shape."),
    Kind(FailureKind.CRASHED, "crashed", stops=True, timing=True, flag=Flag.POINTS_LOST,
         hint="the process running your code ended: look for os._exit, sys.exit at the top level, or a native "
              "crash."),
    Kind(FailureKind.PROTOCOL, "broke the protocol", flag=Flag.POINTS_LOST),
    Kind(FailureKind.BAD_VALUE, "unreadable answer", from_worker=True),
    Kind(FailureKind.TOO_LARGE, "unreadable answer"),
    Kind(FailureKind.BAD_REQUEST, from_worker=True),
    Kind(FailureKind.FORBIDDEN, from_worker=True),
    Kind(FailureKind.CHECK_ERROR, "a check broke"),
)}
