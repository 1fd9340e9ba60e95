"""What the reports are made of: one record per student (a :class:`SubmissionResult`, built from
the run's results) and the class's tables (``grades.csv``; the course's across labs).

A record keeps a hidden check's name, points and what it checks, never its message: its inputs
and expected values never reach a file a student can see.
"""

from __future__ import annotations

import csv
import io

from autograder.lab import Lab
from autograder.limits import Limits
from autograder.results import (NOT_HANDED_IN, CheckResult, CohortRun, Failure, FailureKind, RunResults,
                                SubmissionResult, files_unconfined)
from autograder.text import csv_cell, one_line

def problem(failure: Failure | None) -> tuple[str, str] | None:
    """How a failed check's failure reads in the status column, as (what went wrong, where); None
    for the ordinary ones (a wrong answer, an exception, a stub, a missing name), which the points
    already say."""
    label = failure and failure.kind.meaning.status
    if not label or (failure.kind == FailureKind.MISSING and not failure.file):
        return None
    where = failure.where or "?"
    if failure.loading:
        return label, f"loading {', '.join(failure.loading)}"
    if failure.kind == FailureKind.CRASHED:
        how = failure.signal or (f"exit code {failure.exit_code}" if failure.exit_code is not None else "stopped")
        return label, f"{where} ({how})"
    if failure.kind in (FailureKind.IMPORT, FailureKind.MISSING):
        return label, (failure.file or where) + (f" line {failure.line}" if failure.line else "")
    return label, where


# Staging's note on a file a submission holds besides the lab's (a README, a lab.toml): harmless,
# unless it is Python (a conftest.py or a module named like a library could change what runs).
EXTRA_FILE = "not part of the assignment, not graded"


def bounded_notes(notes: list[str], limits: Limits) -> list[str]:
    """``notes`` as one printable line each of at most ``Limits.note_characters``, the first
    ``Limits.submission_notes`` of them, then how many more: a submission or an upload of 100,000
    stray files makes a short list, not a 5 MB page (or a CSV cell Python's csv module refuses)."""
    lines = [one_line(note) for note in notes]
    kept = [line if len(line) <= limits.note_characters else line[:limits.note_characters - 1] + "…"
            for line in lines[:limits.submission_notes]]
    more = len(lines) - limits.submission_notes
    return [*kept, f"and {more} more files noted, not listed"] if more > 0 else kept


def upload_problems(notes: list[str]) -> list[str]:
    """The notes worth an instructor's look: all but harmless extra files."""
    return [note for note in notes if not (note.endswith(EXTRA_FILE) and not note.split(": ", 1)[0].endswith(".py"))]


def status_of(checks: list[CheckResult], reaches: list[dict], problems: list[tuple[str, str]], error: str | None,
              handed_in: bool = True) -> str:
    """``graded`` when nothing went wrong; ``not handed in``; otherwise what cost points beyond wrong answers."""
    if not handed_in:
        return NOT_HANDED_IN
    if error:
        return "error: " + one_line(error.strip().splitlines()[-1][:200])
    found: dict[str, list[str]] = {}  # "timed out": ["<module>.<function>", ...]
    failures = [problem(c.failure) for c in checks if not c.passed]
    reached = [("reaches into internals", r["file"]) for r in reaches]  # lines: the report
    for kind, what in [*problems, *filter(None, failures), *reached]:
        if what not in found.setdefault(kind, []):
            found[kind].append(what)
    said = [f"{kind}: {', '.join(what)}" if any(what) else kind for kind, what in found.items()]
    return one_line("; ".join(said)) if said else "graded"


def student_record(lab: Lab, student: str, run: RunResults | None, problems: list[tuple[str, str]], notes: list[str],
                   error: str | None, seconds: float, handed_in: bool = True) -> SubmissionResult:
    """Everything the reports need about one student, from the run of their checks. A student who
    handed in nothing (``handed_in=False``), or whose checks never ran, gets 0 of the lab's real
    maximum."""
    run = run or RunResults(lab.name, [])
    checks, reaches = run.checks, run.reaches
    return SubmissionResult(
        lab.name, student, run.parts(lab), handed_in, status_of(checks, reaches, problems, error, handed_in),
        # What a student may read before hidden results are published: a hidden check's time-out or
        # crash names its call, which code could make depend on the hidden inputs.
        status_of([c for c in checks if not c.hidden], reaches, problems, error, handed_in),
        [*notes, *run.notes], reaches, seconds, files_unconfined(run.sandbox))


def hidden_line(check: CheckResult) -> str:
    """All a student learns about a hidden check: what it checks (never its inputs or expected values)."""
    return f"checks: {check.about}" if check.about else "a hidden check"


def grades_csv(lab: Lab, records: list[SubmissionResult]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", *lab.part_ids, "total", "max_total", "status", "notes"])
    for record in sorted(records, key=lambda r: r.student):
        writer.writerow([csv_cell(record.student), *(f"{record.parts[p].points:g}" for p in lab.part_ids),
                         f"{record.total:g}", f"{record.max_total:g}", csv_cell(record.status),
                         csv_cell(one_line("; ".join(record.notes)))])
    return out.getvalue()


def course_csv(runs: list[CohortRun]) -> str:
    """The course's table: one row per student, one total per lab graded, empty for a lab not handed
    in (a spreadsheet's missing value, not a 0), then the total of what was handed in and the labs
    not handed in."""
    labs = [run.lab for run in runs]
    totals = {(run.lab, record.student): record.total if record.handed_in else None
              for run in runs for record in run.records}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", *labs, "total", NOT_HANDED_IN])
    for student in sorted({student for _, student in totals}):
        mine = [totals.get((lab, student)) for lab in labs]
        missing = [lab for lab, total in zip(labs, mine) if total is None]
        writer.writerow([csv_cell(student), *("" if t is None else f"{t:g}" for t in mine),
                         f"{round(sum(t for t in mine if t is not None), 6):g}", " ".join(missing)])
    return out.getvalue()
