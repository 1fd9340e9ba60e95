"""What a check sent to the student's code and got back, as the judge records it: each call's
encoded request and its outcome (:class:`Recording`), for the diagnosis of a failure
(:mod:`autograder.judge.misconceptions`) and for replay (:mod:`autograder.judge.replay`); and the
judge's keeping of one check at a time (:class:`CheckLog`).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from autograder.harness.codec import decode_frame
from autograder.harness.messages import answer_from_wire
from autograder.results import FailureKind


@dataclass(frozen=True)
class Outcome:
    """What one request gave: the answer as received (encoded; empty when none came: a
    time-out, a crash) and, for an error, ``(kind, exception type)``."""

    answer: bytes = b""
    error: tuple[str, str] | None = None

    @property
    def value(self):
        return answer_from_wire(decode_frame(self.answer), "").value


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


@dataclass
class CheckLog:
    """The current check, as the judge keeps it: whether its first request is still to be sent (it makes
    the worker forget earlier checks), its recording (when recording), the answers a replay already got
    for it, the bytes of its answers so far and where a stand-in answered in it."""

    fresh: bool = False
    recording: Recording | None = None
    answered: collections.deque = field(default_factory=collections.deque)  # (frame, answer) a replay asked
    answer_bytes: int = 0
    stood_in: list = field(default_factory=list)

    def begin(self, record: bool) -> None:
        self.fresh, self.answer_bytes, self.stood_in = True, 0, []
        self.answered.clear()
        self.recording = Recording() if record else None

    def end(self) -> Recording:
        recording, self.recording = self.recording, None
        self.answered.clear()
        return recording or Recording()

    def preanswered(self, frame: bytes) -> bytes | None:
        """The answer a replay got for ``frame``, when the check asks as the replay did (raised when it was
        an error); None from the first request that differs on (the check asks for real from there)."""
        if not self.answered:
            return None
        asked, answer = self.answered.popleft()
        if asked != frame:
            self.answered.clear()
            if self.recording is not None:
                self.recording.diverged = True
            return None
        if isinstance(answer, Exception):
            raise answer
        return answer

    def keep(self, call: Call) -> None:
        if self.recording is not None:
            self.recording.calls.append(call)
