"""Check replay: a grading lane does not judge the same answers twice.

A check is a deterministic function of what it gets from the student: the answers to its
requests and the sources it reads. Its inputs come from fixed seeds and private generators;
its property examples from one fixed hypothesis seed (and no "local constants", see the
plugin); the judge's torch RNG is reseeded before each check; the reference solution is fixed
and has no time budget to run out of. So when a submission answers a check's requests byte
for byte as an earlier submission did on a run where that check passed, the check would pass
again, and the judge's side of it (drawing examples, computing expected values with trusted
torch and the reference) need not run.

:meth:`Replays.replay` asks the student's worker the requests of the check's earlier passing
runs, one at a time, for as long as the answers match one of those runs; when a run is
matched to its end, the check has passed. The student's code still runs for every request:
only the judge's work is saved. At the first answer no earlier run got, the check runs for
real; the answers already received are handed to it (:meth:`RemoteCode.preanswer`), so the
worker sees exactly the requests a run without replay would have sent, and the score cannot
depend on the order in which submissions are graded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from autograder.harness.recording import Recording
from autograder.harness.remote import RemoteCode, StudentError

# Passing runs kept per check: one per way of answering (students who compute in a different
# order get different bits). A few ways per class are common; the least recently matched
# run makes room for a new one.
RUNS_PER_CHECK = 8


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def source_digest(text: str | None) -> bytes | None:
    return None if text is None else digest(text.encode())


@dataclass(frozen=True)
class PassingRun:
    steps: tuple[tuple[bytes, str, bytes], ...]  # (request frame, what it calls, digest of the answer)
    sources: tuple[tuple[str, bytes | None], ...]  # (module, digest of its text) for each source the check read


class Replays:
    """The passing runs of each check seen by this process (a grading lane)."""

    def __init__(self):
        self.runs: dict[object, list[PassingRun]] = {}
        # Checks that once asked other than an earlier run with the same answers: not
        # deterministic after all, so never replayed again in this process.
        self.distrusted: set = set()

    def remember(self, key, recording: Recording) -> None:
        """Keep a passing run of the check ``key`` (runs with a time-out or a crash are not kept:
        they depend on the clock)."""
        if recording.diverged:
            self.distrusted.add(key)
            self.runs.pop(key, None)
        if key in self.distrusted or not recording.replayable:
            return
        runs = self.runs.setdefault(key, [])  # most recently matched first
        known = {frame: frame for run in runs for frame, _, _ in run.steps}  # one copy of a frame runs share
        run = PassingRun(tuple((known.get(c.frame, c.frame), c.where, digest(c.outcome.answer)) for c in recording.calls),
                         tuple(sorted((module, source_digest(text)) for module, text in recording.sources.items())))
        if run not in runs:
            runs.insert(0, run)
            del runs[RUNS_PER_CHECK:]

    def replay(self, key, student: RemoteCode) -> bool:
        """True when the student answered every request of an earlier passing run of ``key``
        as that run was answered (the check passes); False when the check must run."""
        runs = self.runs.get(key, [])
        # Sources first, as a check may choose its requests by them (the staged sources of a
        # submission do not change while it is graded: workers cannot write them).
        modules = {module for run in runs for module, _ in run.sources}
        current = {module: source_digest(student.source(module, record=False)) for module in modules}
        candidates = [run for run in runs if all(current[module] == seen for module, seen in run.sources)]
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
