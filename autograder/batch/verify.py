"""``python -m autograder verify``: is a recorded grade what the kit gives that submission today?

The submissions behind an output folder (all its students, or some) are graded again, into a folder of
their own, and each student's grade is compared with the one recorded in ``OUT``: identical, or which
checks, points and status differ, and what changed in between (the record's provenance against this
run's: :mod:`autograder.batch.provenance`). With ``repeat`` > 1 the submissions are graded that many times,
in other lanes, and the checks whose verdict changes between runs are named as unstable.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from autograder.batch.grade import grade
from autograder.batch.outputs import REFERENCE_PROOF, student_folder
from autograder.batch.staging import Chosen, discover
from autograder.batch.provenance import CHANGED, changes
from autograder.lab import Lab
from autograder.limits import DEFAULTS, JOBS, Limits
from autograder.results import SubmissionResult, read_record


@dataclass
class Verdict:
    """One student's recorded grade against today's."""

    student: str
    recorded: SubmissionResult | None
    now: SubmissionResult | None
    differences: list[str] = field(default_factory=list)  # empty: identical

    def line(self, lab: str) -> str:
        if self.recorded is None:
            return f"{lab}: {self.student}: no recorded grade in this folder"
        if self.now is None:
            return f"{lab}: {self.student}: could not be graded again"
        if not self.differences:
            return f"{lab}: {self.student}: identical ({self.now.total:g}/{self.now.max_total:g})"
        changed = [CHANGED[f] for f in changes(self.recorded.provenance or None, self.now.provenance)]
        since = f"; since it was recorded: {', '.join(changed)} changed" if changed else ""
        return (f"{lab}: {self.student}: differs (recorded {self.recorded.total:g}, now {self.now.total:g}): "
                f"{'; '.join(self.differences[:6])}{' ...' if len(self.differences) > 6 else ''}{since}")


def differences(recorded: SubmissionResult, now: SubmissionResult) -> list[str]:
    """What differs between two grades of one submission: status, then each check's verdict and points."""
    said = [f"status {recorded.status!r} -> {now.status!r}"] if recorded.status != now.status else []
    before = {(c.part, c.name): c for c in recorded.checks}
    after = {(c.part, c.name): c for c in now.checks}
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old is None or new is None:
            said.append(f"{key[1]} ({key[0]}) {'not run before' if old is None else 'not run now'}")
        elif (old.passed, old.points) != (new.passed, new.points):
            said.append(f"{key[1]} ({key[0]}) {'passed' if old.passed else 'failed'} -> "
                        f"{'passed' if new.passed else 'failed'}")
    return said


@dataclass
class Verification:
    lab: str
    verdicts: list[Verdict]
    unstable: dict[str, list[str]]  # "part: check": students (repeat > 1)

    @property
    def identical(self) -> bool:
        return not self.unstable and all(v.recorded and v.now and not v.differences for v in self.verdicts)


def verify(lab: Lab, submissions: Path, out: Path, students: list[str] | None = None, repeat: int = 1,
           jobs: int = JOBS, limits: Limits = DEFAULTS, files_required: bool = True,
           strip_prefix: str = "") -> Verification:
    """Grade again the submissions of ``students`` (default: every student ``out``, the lab's output folder,
    holds) found in ``submissions`` (its folders named as ``grade --strip-prefix`` read them), ``repeat``
    times, and compare each grade with the one ``out`` records."""
    recorded_students = sorted(p.name for p in (out / "students").iterdir()) if (out / "students").is_dir() else []
    chosen = set(students) if students else set(recorded_students)
    cohort = [s for s in discover(lab, submissions, strip_prefix) if s.student in chosen]
    with tempfile.TemporaryDirectory(prefix="autograder-verify-") as folder:
        regraded = Path(folder)
        if (out / REFERENCE_PROOF).is_file():  # proven under the same provenance: not graded again
            shutil.copy(out / REFERENCE_PROOF, regraded / REFERENCE_PROOF)
        # Graded from the cohort's own folders, staged as `grade` stages them (never copied as they are: a FIFO, a
        # sparse file or a link swapped in would be followed or read whole).
        run = grade(lab, submissions, regraded, jobs=jobs, force=True, limits=limits, stream=io.StringIO(),
                    class_files=False, files_required=files_required, repeat=repeat, shard=Chosen(frozenset(chosen)),
                    strip_prefix=strip_prefix) if cohort else None
        now = {s: read_record(student_folder(regraded, s)) for s in chosen}
    verdicts = []
    for student in sorted(chosen):
        recorded = read_record(student_folder(out, student))
        verdict = Verdict(student, recorded, now.get(student))
        if recorded is not None and verdict.now is not None:
            verdict.differences = differences(recorded, verdict.now)
        verdicts.append(verdict)
    return Verification(lab.name, verdicts, run.unstable if run else {})
