"""The lanes a run grades in (:mod:`autograder.batch.lane`: one judge process each), fed from one queue:
each student's files are written as soon as that student is graded; one submission never stops the
batch. Also what a run says while it waits (:class:`Progress`) and the cohort graded again to find
unstable checks (``make grade REPEAT=n``).
"""

from __future__ import annotations

import dataclasses
import io
import queue
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.batch.jobs import Failed, Graded
from autograder.batch.lane import Lane
from autograder.batch.outputs import student_folder, write_student
from autograder.batch.staging import Submission
from autograder.lab import Lab
from autograder.limits import Limits
from autograder.reports.records import student_record
from autograder.results import SubmissionResult, read_record, read_run
from autograder.text import one_line


class Progress:
    """A bar on a terminal, plain lines otherwise."""

    def __init__(self, lab: str, total: int, stream):
        self.lab, self.total, self.done, self.stream = lab, total, 0, stream
        self.tty = stream.isatty()
        self.lock = threading.Lock()
        self.started = time.monotonic()

    def left(self) -> str:
        """The time the rest should take at the pace so far ("", once done)."""
        if self.done >= self.total:
            return ""
        seconds = (time.monotonic() - self.started) / self.done * (self.total - self.done)
        return f", about {seconds / 60:.0f} min left" if seconds >= 90 else f", about {seconds:.0f} s left"

    def step(self, student: str, outcome: str) -> None:
        with self.lock:
            self.done += 1
            if self.tty:
                filled = int(30 * self.done / max(self.total, 1))
                self.stream.write(f"\r{self.lab} [{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total}"
                                  f"{self.left():<20} {one_line(student)[:30]:<30}")
                if self.done == self.total:
                    self.stream.write("\n")
            else:
                self.stream.write(f"{self.lab}: graded {self.done}/{self.total}{self.left()}: {one_line(student)}: "
                                  f"{one_line(outcome)}\n")
            self.stream.flush()


INTERRUPT_GRACE = 1.0  # s: a signal reaches the run's main thread within milliseconds


@dataclass
class LaneRun:
    """What the lanes of one run learnt besides each student's files."""
    warnings: set[str] = field(default_factory=set)  # what no worker's sandbox could enforce
    replayed: int = 0  # checks that passed by replay
    ungraded: dict[str, str] = field(default_factory=dict)  # student: why the run could not grade or write them


def grade_in_lanes(lab: Lab, todo: list[tuple[Submission, Path, dict]], out: Path, lanes: list[Lane],
                   progress: Progress) -> LaneRun:
    """Grade ``todo`` in ``lanes`` (closed when done); write each student's files (and fingerprint) as soon as
    graded."""
    work: queue.Queue = queue.Queue()
    for item in todo:
        work.put(item)
    seen = LaneRun()
    lock = threading.Lock()
    # Interrupted (Ctrl-C, SIGTERM): a grade in flight may be the interruption's doing (a lane killed with it, its
    # staged copy about to be removed): none is recorded, and no lane takes another submission.
    stopping = threading.Event()

    def grade_submission(lane: Lane, submission: Submission, staged: Path, stamp: dict) -> str | None:
        clock = time.monotonic()
        raw_file = staged.parent / "raw.json"
        # Nothing handed in, or a link instead of a folder: nothing to run, the status says why.
        if stopping.is_set():  # taken just before the run was interrupted: no judge started for it
            return None
        answer = None if submission.problems or not submission.handed_in else lane.grade(staged, raw_file)
        run = read_run(raw_file) if isinstance(answer, Graded) and raw_file.is_file() else None
        with lock:
            if run and run.sandbox:
                seen.warnings.update(run.sandbox["missing"])
            seen.replayed += run.replayed if run else 0
        record = dataclasses.replace(student_record(
            lab, submission.student, run, submission.problems, submission.notes,
            answer.error if isinstance(answer, Failed) else None,
            time.monotonic() - clock, submission.handed_in), provenance=stamp)
        # A lane ended by the signal that interrupts the run (sent to the whole process group: timeout, kill -TERM
        # -<pgid>) can fail its grade before this run knows it is interrupted: a failed lane waits a moment for that.
        if stopping.is_set() or (isinstance(answer, Failed) and stopping.wait(INTERRUPT_GRACE)):
            return None  # not recorded, nor counted as graded
        write_student(lab, student_folder(out, submission.student), record, stamp)
        return record.status

    def lane_loop(lane: Lane) -> None:
        try:
            while not stopping.is_set():
                try:
                    submission, staged, stamp = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    status = grade_submission(lane, submission, staged, stamp)
                except Exception as exc:  # noqa: BLE001 - one submission never stops the batch
                    seen.ungraded[submission.student] = f"{type(exc).__name__}: {exc}"
                    status = f"not graded ({type(exc).__name__}: {exc})"
                if status is not None:
                    progress.step(submission.student, status)
        finally:
            lane.close()

    run_lanes(lanes, lane_loop, stopping)
    return seen


def run_lanes(lanes: list[Lane], lane_loop, stopping: threading.Event) -> None:
    """``lane_loop(lane)`` in a thread a lane, until every one ends. Interrupted (Ctrl-C, SIGTERM): ``stopping`` is
    set and every lane's judge killed, again until its thread ends (it may start one between two kills), so a grade in
    flight ends now, not after its calls' time-outs (a student's endless loops held a SIGTERM'd run 327 s); the lanes
    make their folders in the run's (:class:`Lane`'s ``folders``), removed after. Each thread says it ended with an
    event: a join that a signal interrupts may take a running thread for ended (Python 3.11)."""
    ended = [threading.Event() for _ in lanes]

    def run(lane: Lane, done: threading.Event) -> None:
        try:
            lane_loop(lane)
        finally:
            done.set()

    for lane, done in zip(lanes, ended):
        threading.Thread(target=run, args=(lane, done)).start()
    try:
        for done in ended:
            # Awake every moment: a signal the kernel hands to another thread of this process reaches Python's handler
            # only when the main thread runs again (blocked, it slept through a SIGTERM until every lane had ended).
            while not done.wait(0.2):
                pass
    except BaseException:
        stopping.set()
        while not all(done.is_set() for done in ended):
            for lane in lanes:
                lane.kill()
            time.sleep(0.05)
        raise


def regraded(lab: Lab, cohort: list[Submission], staged_folders: dict[str, Path], jobs: int, limits: Limits,
             replay: bool, files_required: bool, folders: Path) -> dict[str, SubmissionResult]:
    """The cohort's staged submissions graded once more, in ``jobs`` fresh lanes (their folders in ``folders``, the
    run's), into a folder of its own: every student's record."""
    with tempfile.TemporaryDirectory(prefix="autograder-again-") as folder:
        out = Path(folder)
        handed_in = [(s, staged_folders[s.student], {}) for s in cohort if not s.problems and s.handed_in]
        grade_in_lanes(lab, handed_in, out, [Lane(lab, limits, replay, files_required, folders=folders)
                                             for _ in range(jobs)], Progress(lab.name, 0, io.StringIO()))
        return {s.student: record for s, *_ in handed_in if (record := read_record(student_folder(out, s.student)))}


def unstable_checks(lab: Lab, records: list[SubmissionResult], again: list[dict[str, SubmissionResult]]
                    ) -> dict[str, list[str]]:
    """``{"part: check": [students]}``: the checks whose verdict for a student is not the same in every run
    (``records``, then each of ``again``): the check's fault, or the platform's, never the student's."""
    unstable: dict[str, list[str]] = {}
    for record in records:
        verdicts = {(c.part, c.name): {c.passed} for c in record.checks}
        for run in again:
            for check in run[record.student].checks if record.student in run else ():
                verdicts.setdefault((check.part, check.name), set()).add(check.passed)
        for (part, name), seen in verdicts.items():
            if len(seen) > 1:
                unstable.setdefault(f"{part}: {name}", []).append(record.student)
    return {check: unstable[check] for check in sorted(unstable, key=lambda c: (lab.part_ids.index(c.split(":")[0]), c))}
