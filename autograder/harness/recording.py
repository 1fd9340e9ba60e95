"""What a check sent to the student's code and got back, as the judge records it: each call's
encoded request and its outcome (:class:`Recording`), for the diagnosis of a failure
(:mod:`autograder.judge.misconceptions`) and for replay (:mod:`autograder.judge.replay`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autograder.harness.codec import decode_frame
from autograder.results import FailureKind


def answer_value(message: dict):
    """What a call answered: its value, with the library calls it made when the request counted them, or
    the calls of its watched submodules when the request asked for them."""
    if "counts" in message:
        return {"result": message["ok"], "counts": message["counts"]}
    if "sublayer_calls" in message:
        return {"result": message["ok"], "sublayer_calls": message["sublayer_calls"]}
    return message["ok"]


@dataclass(frozen=True)
class Outcome:
    """What one request gave: the answer as received (encoded; empty when none came: a
    time-out, a crash) and, for an error, ``(kind, exception type)``."""

    answer: bytes = b""
    error: tuple[str, str] | None = None

    @property
    def value(self):
        return answer_value(decode_frame(self.answer))


@dataclass(frozen=True)
class Call:
    """One request a check sent, encoded, and its outcome."""

    frame: bytes
    where: str  # what it calls ("module.function"), for messages without decoding the frame
    outcome: Outcome


@dataclass
class Recording:
    """What one check sent and got: its calls in order, and the sources it read."""

    calls: list[Call] = field(default_factory=list)
    sources: dict[str, str | None] = field(default_factory=dict)
    diverged: bool = False  # the check asked other than a replay with the same answers had asked

    @property
    def replayable(self) -> bool:
        """Did every call get an answer from the student's code (no time-out, no crash: both depend
        on timing)? Only such a run depends on nothing but the answers and the sources."""
        return all(c.outcome.answer and not (c.outcome.error and FailureKind(c.outcome.error[0]).meaning.timing)
                   for c in self.calls)
