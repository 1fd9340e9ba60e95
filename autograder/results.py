"""A grade as data: what one check, one part and one submission got, read and written here only.

The judge (:mod:`autograder.judge.plugin`) turns each check's verdict into a :class:`CheckResult`
and writes a run's results (:func:`write_run`, the file ``make check --results-json`` and a
grading lane write); batch grading reads them back (:func:`read_run`) into a
:class:`SubmissionResult`, the record every report and platform renders from (feedback,
class report, Gradescope, Classroom, the gradebook, grades.csv), kept as ``summary.json``
(:meth:`SubmissionResult.to_json` / :meth:`SubmissionResult.from_json`). Totals are
properties: computed in one place, never stored apart from the checks they add up. One batch
run over a cohort is a :class:`CohortRun`: its records and what the run itself noticed.

A hidden check's result keeps its name, points and what it checks, never its message in the
record: its inputs and expected values never reach a file a student can see.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from autograder.files import write_atomically
from autograder.kinds import FailureKind
from autograder.lab import Lab


# What a worker's sandbox reports when it proved its files confined (autograder.harness.sandbox): a record
# whose run lacks it was graded with --no-confinement, and every report says so.
FILE_CONFINEMENT = "file confinement, proven before student code (nothing outside its view listed or written)"


def files_unconfined(sandbox: dict | None) -> bool:
    """Did the code run where its files were not confined (a worker that proved it would have refused)?"""
    return sandbox is not None and FILE_CONFINEMENT not in sandbox.get("enforced", [])


UNCONFINED_WARNING = ("graded WITHOUT file confinement (--no-confinement): this code could read and write the "
                      "grader's files, other submissions and their reports; trust this grade only for code you trust")

@dataclass(frozen=True)
class Failure:
    """What made a check fail, as data (reports and hints never parse messages)."""

    kind: FailureKind
    where: str = ""  # the call ("module.function")
    type: str = ""  # the exception's type (for check_error: the judge's)
    cause: str = ""  # check_error: why a worker did not start, in the kit's words (WorkerDidNotStart)
    file: str = ""  # the submission's file and line where it happened
    line: int = 0
    phase: str = ""  # "import": while a module was loading
    loading: tuple[str, ...] = ()  # a hung import: the files that never finished loading
    signal: str = ""  # a crash: the signal that ended the process ("SIGSEGV")
    exit_code: int | None = None  # ... or the code it exited with
    called_from: str = ""  # the submission's outermost line, when ``file`` is another module ("model.py line 4")
    relation: str = ""  # a wrong answer: how its values relate to the expected ones (judge.relations)
    picture: dict | None = field(default=None, compare=False)  # ... and, for a public check, both side by side

    def data(self) -> dict:
        """The fields that say something, as JSON holds them."""
        return {key: list(value) if isinstance(value, tuple) else str(value) if key == "kind" else value
                for key, value in dataclasses.asdict(self).items() if value not in ("", 0, (), None) or key == "kind"}

    @classmethod
    def from_data(cls, data: dict) -> Failure:
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {key: tuple(value) if key == "loading" else value for key, value in data.items() if key in known}
        return cls(**{**fields, "kind": FailureKind(data.get("kind", FailureKind.CHECK_ERROR))})


@dataclass(frozen=True)
class Diagnosis:
    """A known mistake a failed check's answers match (:mod:`autograder.judge.misconceptions`)."""

    id: str
    title: str
    hint: str


@dataclass(frozen=True)
class StandIn:
    """A sub-part the student wrote that failed inside a part built on it, where the lab's stand-in
    (public code, ``lab.toml``) answered for it so the part was judged on its own wiring."""

    part: str  # the used part (a part id of lab.toml)
    submodule: str  # the layer's submodule it answered for ("norm1")
    why: str  # "raised RuntimeError: ...", "answered shape (2, 5) where (2, 5, 8) was expected"
    file: str = ""  # where the student's sub-part raised
    line: int = 0

    @classmethod
    def from_data(cls, data: dict) -> StandIn:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


@dataclass
class CheckResult:
    part: str
    name: str
    points: float  # what the check is worth
    passed: bool
    hidden: bool = False
    message: str = ""  # why it failed, in the student's words ("" for a hidden check in a record)
    about: str = ""  # what it checks, in one line (all a student learns of a hidden check)
    failure: Failure | None = None
    diagnoses: tuple[Diagnosis, ...] = ()
    id: str = ""  # pytest's node id (a run's results only)
    replayed: bool = False  # passed by replay (autograder.judge.replay; a run's results only)
    stood_in: tuple[StandIn, ...] = ()  # sub-parts a stand-in answered for while it ran

    @property
    def earned(self) -> float:
        return self.points if self.passed else 0.0

    @property
    def kind(self) -> FailureKind | None:
        return self.failure.kind if self.failure else None

    def to_json(self) -> dict:
        """The check as a run's results and a record hold it (one form; a record's copy: :meth:`recorded`). Its
        known mistakes by id: the part says each one's title and hint (:attr:`PartResult.misconceptions`)."""
        return {"part": self.part, "name": self.name, "hidden": self.hidden, "points": self.points,
                "passed": self.passed, "message": self.message, "about": self.about,
                **({} if self.passed else {"failure": self.failure.data() if self.failure else {},
                                           "diagnoses": [d.id for d in self.diagnoses]}),
                **({"stood_in": [dataclasses.asdict(s) for s in self.stood_in]} if self.stood_in else {}),
                **({"id": self.id} if self.id else {}), **({"replayed": True} if self.replayed else {})}

    @classmethod
    def from_json(cls, data: dict, known: dict[str, Diagnosis]) -> CheckResult:
        """The check :meth:`to_json` wrote; ``known``: the mistakes its part says, by id."""
        return cls(data["part"], data["name"], data["points"], data["passed"], data["hidden"], data["message"],
                   data.get("about", ""), Failure.from_data(data["failure"]) if data.get("failure") else None,
                   tuple(known[i] for i in data.get("diagnoses", []) if i in known), data.get("id", ""),
                   data.get("replayed", False), tuple(StandIn.from_data(s) for s in data.get("stood_in", [])))

    def recorded(self) -> CheckResult:
        """The check as a record keeps it: without the run's node id and replay, and a hidden check without
        its message and stand-ins (they name its inputs and their sizes)."""
        return dataclasses.replace(self, id="", replayed=False,
                                   **({"message": "", "stood_in": ()} if self.hidden else {}))


def total(checks: list[CheckResult], earned: bool = False) -> float:
    """The points ``checks`` are worth (with ``earned``: the points they got)."""
    return round(sum(c.earned if earned else c.points for c in checks), 6)


@dataclass
class PartResult:
    """One part's checks; a part whose checks never ran is worth its weight and earns nothing."""

    id: str
    weight: float
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def points(self) -> float:
        return sum((c.earned for c in self.checks), 0.0)

    @property
    def max_points(self) -> float:
        return sum((c.points for c in self.checks), 0.0) if self.checks else self.weight

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.checks)

    @property
    def misconceptions(self) -> list[dict]:
        """The known mistakes its failed checks matched, each with how many it explains, most first."""
        found: dict[str, dict] = {}
        for check in self.checks:
            for mistake in () if check.passed else check.diagnoses:
                found.setdefault(mistake.id, {**dataclasses.asdict(mistake), "checks": 0})["checks"] += 1
        return sorted(found.values(), key=lambda m: -m["checks"])


NOT_HANDED_IN = "not handed in"
# The format of summary.json: a record of another format is not read (its student is graded again).
RECORD_FORMAT = 2


@dataclass
class SubmissionResult:
    """One student's grade in one lab: the record every report renders from (``summary.json``)."""

    lab: str
    student: str
    parts: dict[str, PartResult]  # in the lab's teaching order
    handed_in: bool = True
    status: str = "graded"  # what cost points beyond wrong answers (reports.records.status_of)
    public_status: str = "graded"  # ... as a student may read it before hidden results are published
    notes: list[str] = field(default_factory=list)  # what staging and the run noticed; costs nothing
    reaches: list[dict] = field(default_factory=list)  # where the code reaches into internals (judge.internals)
    seconds: float = 0.0
    unconfined: bool = False  # its code ran where its files were not confined (--no-confinement)
    provenance: dict = field(default_factory=dict)  # what produced it (autograder.batch.provenance)

    @property
    def checks(self) -> list[CheckResult]:
        return [check for part in self.parts.values() for check in part.checks]

    @property
    def total(self) -> float:
        return round(sum(p.points for p in self.parts.values()), 6)

    @property
    def max_total(self) -> float:
        return round(sum(p.max_points for p in self.parts.values()), 6)

    def to_json(self) -> dict:
        """The record as ``summary.json`` holds it; a hidden check's message is never written."""
        return {
            "format": RECORD_FORMAT, "provenance": self.provenance,
            "lab": self.lab, "student": self.student, "handed_in": self.handed_in, "status": self.status,
            "public_status": self.public_status, "notes": self.notes, "reaches": self.reaches,
            "parts": {p.id: {"points": p.points, "max_points": p.max_points, "misconceptions": p.misconceptions}
                      for p in self.parts.values()},
            "total": self.total, "max_total": self.max_total, "seconds": round(self.seconds, 3),
            "unconfined": self.unconfined,
            "checks": [c.recorded().to_json() for c in self.checks],
        }

    @classmethod
    def from_json(cls, data: dict) -> SubmissionResult:
        if data.get("format") != RECORD_FORMAT:
            raise ValueError(f"a record of format {data.get('format')!r}, not {RECORD_FORMAT}")
        parts = {}
        for part, row in data["parts"].items():
            checks = [CheckResult.from_json(c, known_mistakes(row)) for c in data["checks"] if c["part"] == part]
            parts[part] = PartResult(part, row["max_points"], checks)
        return cls(data["lab"], data["student"], parts, data.get("handed_in", True), data["status"],
                   data.get("public_status", data["status"]), data.get("notes", []), data.get("reaches", []),
                   data.get("seconds", 0.0), data.get("unconfined", False), data.get("provenance", {}))


def known_mistakes(part: dict) -> dict[str, Diagnosis]:
    """The known mistakes a part's JSON says (:attr:`PartResult.misconceptions`), by id."""
    return {m["id"]: Diagnosis(m["id"], m["title"], m["hint"]) for m in part.get("misconceptions", [])}


def read_record(folder: Path) -> SubmissionResult | None:
    """The record in ``folder/summary.json``; None when there is none (or it cannot be read)."""
    try:
        return SubmissionResult.from_json(json.loads((folder / "summary.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass
class CohortRun:
    """One batch run of one lab over a cohort (:func:`autograder.batch.grade.grade`): every student's
    record, how many were graded this time or skipped as unchanged, and what stopped the rest."""

    lab: str
    records: list[SubmissionResult]  # every student with a record, graded now or before
    graded: int
    skipped: int
    replayed_checks: int = 0
    ungraded: dict[str, str] = field(default_factory=dict)  # student -> why no record was written
    warnings: list[str] = field(default_factory=list)  # limits this machine could not enforce
    seconds: float = 0.0
    again: str = ""  # why students graded before were graded again (autograder.batch.provenance.why_again)
    removed: list[str] = field(default_factory=list)  # students whose reports were removed: no longer submitted
    unstable: dict[str, list[str]] = field(default_factory=dict)  # "part: check": students whose verdict changed

    @property
    def students(self) -> int:
        return len(self.records)

    @property
    def mean(self) -> float:
        """The mean total of the students who handed the lab in (0 when nobody did)."""
        handed = [r.total for r in self.records if r.handed_in]
        return statistics.fmean(handed) if handed else 0.0


def write_record(folder: Path, record: SubmissionResult) -> None:
    write_atomically(folder / "summary.json", json.dumps(record.to_json(), indent=1))


@dataclass
class RunResults:
    """What one run of the checks on one submission found (the judge's file): every check's result
    and what the run noticed besides."""

    lab: str
    checks: list[CheckResult]
    sandbox: dict | None = None  # what the worker's sandbox enforced and could not ({"enforced", "missing"})
    notes: list[str] = field(default_factory=list)
    reaches: list[dict] = field(default_factory=list)

    @property
    def replayed(self) -> int:
        return sum(c.replayed for c in self.checks)

    def parts(self, lab: Lab) -> dict[str, PartResult]:
        """Every part of ``lab`` with its checks of this run, in the lab's order (one never run: none)."""
        return {part.id: PartResult(part.id, part.weight, [c for c in self.checks if c.part == part.id])
                for part in lab.parts}

    def parts_run(self, lab: Lab) -> dict[str, PartResult]:
        """The parts of ``lab`` some check of this run belongs to (a run of one part: that part)."""
        return {part: result for part, result in self.parts(lab).items() if result.checks}


def write_run(path: Path, run: RunResults, lab: Lab) -> None:
    """The judge's results file: the run's checks, with their full messages and diagnoses."""
    parts = run.parts_run(lab)
    payload = {"lab": run.lab,
               "parts": {p.id: {"points": p.points, "max_points": p.max_points, "passed": p.passed,
                                "checks": len(p.checks), "misconceptions": p.misconceptions} for p in parts.values()},
               "total": round(sum(p.points for p in parts.values()), 6),
               "max_total": round(sum(p.max_points for p in parts.values()), 6),
               "sandbox": run.sandbox, "notes": run.notes, "reaches": run.reaches, "replayed": run.replayed,
               "checks": [c.to_json() for c in run.checks]}
    write_atomically(path, json.dumps(payload, indent=1))


def read_run(path: Path) -> RunResults:
    data = json.loads(path.read_text())
    known = {i: d for part in data["parts"].values() for i, d in known_mistakes(part).items()}
    return RunResults(data["lab"], [CheckResult.from_json(c, known) for c in data["checks"]], data.get("sandbox"),
                      data.get("notes", []), data.get("reaches", []))
