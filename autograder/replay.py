"""Check replay: a grading lane does not judge the same answers twice.

A check is a deterministic function of what it gets from the student: the answers to its
requests and the sources it reads (its inputs come from fixed seeds and private generators,
its property examples from one fixed hypothesis seed, the reference solution is fixed). So
when a submission answers a check's requests byte for byte as an earlier submission did on a
run where that check passed, the check would pass again, and the judge's side of it (drawing
examples, computing expected values with trusted torch and the reference) need not run.

:meth:`Replays.replay` asks the student's worker the requests of the check's earlier passing
runs, one at a time, for as long as the answers match one of those runs; when a run is
matched to its end, the check has passed. The student's code still runs for every request:
only the judge's work is saved. At the first answer no earlier run got, the check runs for
real; the answers already received are handed to it (:meth:`Student.preanswer`), so the
worker sees exactly the requests a run without replay would have sent, and the score cannot
depend on the order in which submissions are graded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from autograder.student import Recording, Student, StudentError

# Passing runs kept per check: one per way of answering (students who compute in a different
# order get different bits). A few ways per class are common; the least recently matched
# run makes room for a new one.
RUNS_PER_CHECK = 8


def digest(answer: bytes) -> bytes:
    return hashlib.blake2b(answer, digest_size=16).digest()


@dataclass(frozen=True)
class PassingRun:
    sources: tuple[tuple[str, str | None], ...]
    steps: tuple[tuple[bytes, str, bytes], ...]  # (request frame, what it calls, digest of the answer)


class Replays:
    """The passing runs of each check seen by this process (a grading lane)."""

    def __init__(self):
        self.runs: dict[object, list[PassingRun]] = {}

    def remember(self, key, recording: Recording) -> None:
        """Keep a passing run of the check ``key`` (runs with a time-out or a crash are not kept:
        they depend on the clock)."""
        if not recording.replayable:
            return
        run = PassingRun(tuple(sorted(recording.sources.items())),
                         tuple((c.frame, c.where, digest(c.outcome.answer)) for c in recording.calls))
        runs = self.runs.setdefault(key, [])  # most recently matched first
        if run not in runs:
            runs.insert(0, run)
            del runs[RUNS_PER_CHECK:]

    def replay(self, key, student: Student) -> bool:
        """True when the student answered every request of an earlier passing run of ``key``
        as that run was answered (the check passes); False when the check must run."""
        runs = self.runs.get(key, [])
        candidates = [run for run in runs if all(student.source(module) == text for module, text in run.sources)]
        step = 0
        while candidates:
            matched = [run for run in candidates if len(run.steps) == step]
            if matched:
                runs.remove(matched[0])
                runs.insert(0, matched[0])
                return True
            frame, where, _ = candidates[0].steps[step]
            try:
                answer = student.ask(frame, where)
            except StudentError as error:
                student.preanswer(frame, error)
                return False
            student.preanswer(frame, answer)
            seen = (frame, where, digest(answer))
            candidates = [run for run in candidates if run.steps[step] == seen]
            step += 1
        return False
