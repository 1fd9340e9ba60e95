"""What the reports are made of: one record per student (``summary.json``, from the lane's raw
results) and the class's tables (``grades.csv``; the course's across labs).

A record keeps a hidden check's name, points and what it checks, never its message: its inputs
and expected values never reach a file a student can see.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from autograder.lab import Lab
from autograder.text import csv_cell, one_line

# Failure kinds that cost points beyond a wrong answer, as the status column names them.
PROBLEM_NAMES = {"timeout": "timed out", "memory": "out of memory", "protocol": "broke the protocol",
                 "bad_value": "unreadable answer", "too_large": "unreadable answer", "check_error": "a check broke"}


def problem(failure: dict) -> tuple[str, str] | None:
    """How a failed check's failure reads in the status column, as (what went wrong, where); None
    for the ordinary ones (a wrong answer, an exception, a stub), which the points already say."""
    kind, where = failure.get("kind"), failure.get("where", "?")
    if kind == "timeout" and failure.get("loading"):
        return "timed out", f"loading {', '.join(failure['loading'])}"
    if kind == "crashed":
        how = failure.get("signal") or (f"exit code {failure['exit_code']}" if "exit_code" in failure else "stopped")
        return "crashed", f"{where} ({how})"
    if kind == "import":
        return "did not import", failure.get("file", where) + (f" line {failure['line']}" if "line" in failure else "")
    if kind == "missing" and failure.get("file"):
        return "missing", failure["file"]
    return (PROBLEM_NAMES[kind], where) if kind in PROBLEM_NAMES else None


NOT_HANDED_IN = "not handed in"
# Staging's note on a file a submission holds besides the lab's (a README, a lab.toml): harmless,
# unless it is Python (a conftest.py or a module named like a library could change what runs).
EXTRA_FILE = "not part of the assignment, not graded"


def upload_problems(notes: list[str]) -> list[str]:
    """The notes worth an instructor's look: all but harmless extra files."""
    return [note for note in notes if not (note.endswith(EXTRA_FILE) and not note.split(": ", 1)[0].endswith(".py"))]


def status_of(raw: dict | None, problems: list[str], error: str | None, handed_in: bool = True) -> str:
    """``graded`` when nothing went wrong; ``not handed in``; otherwise what cost points beyond wrong answers."""
    if not handed_in:
        return NOT_HANDED_IN
    if error:
        return "error: " + one_line(error.strip().splitlines()[-1][:200])
    found: dict[str, list[str]] = {}  # "timed out": ["<module>.<function>", ...]
    failures = [problem(c.get("failure") or {}) for c in (raw or {}).get("checks", []) if not c["passed"]]
    reached = [("reaches into internals", r["file"]) for r in (raw or {}).get("reaches", [])]  # lines: the report
    for kind, what in [*(said.partition(": ")[::2] for said in problems), *filter(None, failures), *reached]:
        if what not in found.setdefault(kind, []):
            found[kind].append(what)
    said = [f"{kind}: {', '.join(what)}" if any(what) else kind for kind, what in found.items()]
    return one_line("; ".join(said)) if said else "graded"


def student_record(lab: Lab, student: str, raw: dict | None, problems: list[str], notes: list[str],
                   error: str | None, seconds: float, handed_in: bool = True) -> dict:
    """Everything the reports need about one student, from the lane's raw results. A student who
    handed in nothing (``handed_in=False``), or whose checks never ran, gets 0 of the lab's real
    maximum."""
    order = lab.part_ids  # the teaching order
    checks = sorted(raw["checks"] if raw else [], key=lambda c: order.index(c["part"]))
    parts = {part: {"points": 0.0, "max_points": lab.part(part).weight} for part in order}
    for part, row in (raw or {}).get("parts", {}).items():
        parts[part] = {"points": row["points"], "max_points": row["max_points"]}
    for part in order:
        parts[part]["misconceptions"] = misconceptions([c for c in checks if c["part"] == part and not c["passed"]])
    return {
        "lab": lab.name,
        "student": student,
        "handed_in": handed_in,
        "status": status_of(raw, problems, error, handed_in),
        # What a student may read before hidden results are published: a hidden check's time-out or
        # crash names its call, which code could make depend on the hidden inputs.
        "public_status": status_of({**(raw or {}), "checks": [c for c in (raw or {}).get("checks", [])
                                                              if not c["hidden"]]}, problems, error, handed_in),
        "notes": [*notes, *(raw or {}).get("notes", [])],
        "reaches": (raw or {}).get("reaches", []),  # where the code reaches into internals (judge.internals)
        "parts": parts,
        "total": round(sum(p["points"] for p in parts.values()), 6),
        "max_total": round(sum(p["max_points"] for p in parts.values()), 6),
        "seconds": round(seconds, 3),
        "checks": [{"part": c["part"], "name": c["check"], "hidden": c["hidden"], "points": c["points"],
                    "passed": c["passed"], "message": "" if c["hidden"] else c["message"], "about": c.get("about", ""),
                    **({} if c["passed"] else {"failure": c.get("failure", {}),
                                               "diagnoses": [m["id"] for m in c.get("diagnoses", [])]})}
                   for c in checks],
    }


def misconceptions(failed: list[dict]) -> list[dict]:
    """The known mistakes the failed checks matched, most often matched first."""
    found: dict[str, dict] = {}
    for check in failed:
        for mistake in check.get("diagnoses", []):
            found.setdefault(mistake["id"], {**mistake, "checks": 0})["checks"] += 1
    return sorted(found.values(), key=lambda m: -m["checks"])


def points(checks: list[dict], passed: bool = False) -> float:
    """The points of ``checks`` (only of those passed, with ``passed``)."""
    return round(sum(c["points"] for c in checks if c["passed"] or not passed), 6)


def hidden_line(check: dict) -> str:
    """All a student learns about a hidden check: what it checks (never its inputs or expected values)."""
    return f"checks: {check['about']}" if check.get("about") else "a hidden check"


def handed_in(record: dict) -> bool:
    """Whether the student handed anything of the lab in (a record from before the field: yes)."""
    return record.get("handed_in", True)


def load_record(folder: Path) -> dict | None:
    try:
        return json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return None


def grades_csv(lab: Lab, records: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", *lab.part_ids, "total", "max_total", "status", "notes"])
    for record in sorted(records, key=lambda r: r["student"]):
        writer.writerow([csv_cell(record["student"]), *(f"{record['parts'][p]['points']:g}" for p in lab.part_ids),
                         f"{record['total']:g}", f"{record['max_total']:g}", csv_cell(record["status"]),
                         csv_cell(one_line("; ".join(record.get("notes", []))))])
    return out.getvalue()


def course_csv(runs: list[dict]) -> str:
    """The course's table: one row per student, one total per lab graded, empty for a lab not handed
    in (a spreadsheet's missing value, not a 0), then the total of what was handed in and the labs
    not handed in."""
    labs = [run["lab"] for run in runs]
    totals = {(run["lab"], record["student"]): record["total"] if handed_in(record) else None
              for run in runs for record in run["records"]}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", *labs, "total", NOT_HANDED_IN])
    for student in sorted({student for _, student in totals}):
        mine = [totals.get((lab, student)) for lab in labs]
        missing = [lab for lab, total in zip(labs, mine) if total is None]
        writer.writerow([csv_cell(student), *("" if t is None else f"{t:g}" for t in mine),
                         f"{round(sum(t for t in mine if t is not None), 6):g}", " ".join(missing)])
    return out.getvalue()
