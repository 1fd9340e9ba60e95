"""What the judge makes of a failure on the student's side (:class:`StudentError`), from whatever part of the
judge's side of the boundary saw it (:mod:`autograder.harness.remote` and the modules it is made of)."""

from __future__ import annotations

from autograder.harness.messages import WorkerError
from autograder.results import Failure, FailureKind


class StudentError(Exception):
    """The student's code failed: ``message`` in the student's words, ``failure`` the facts."""

    def __init__(self, kind: FailureKind, message: str, type_name: str = "", where: str = "", trace: str = "",
                 **details):
        super().__init__(message)
        self.failure = Failure(FailureKind(kind), where, type_name, **details)
        self.trace = trace

    @property
    def kind(self) -> FailureKind:
        return self.failure.kind

    @property
    def type_name(self) -> str:
        return self.failure.type

    @property
    def where(self) -> str:
        return self.failure.where


def error_from(error: WorkerError, where: str, memory_bytes: int) -> StudentError:
    """The StudentError of a worker's error answer (its text already escaped: WorkerError.from_wire)."""
    kind = FailureKind.reported_by_worker(error.kind)
    message = error.message
    if kind == FailureKind.MEMORY:  # the ceiling is the judge's to name
        message = (f"{where} ran out of memory: a process running your code may use "
                   f"{memory_bytes / 2**30:g} GiB ({message})")
    return StudentError(kind, message, error.type, error.where, error.trace, file=error.file, line=error.line,
                        phase=error.phase, called_from=error.called_from, loading=error.loading)
