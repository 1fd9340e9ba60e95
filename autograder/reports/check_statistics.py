"""Which checks to trust: per check, how many students pass it and how well passing it separates the
class (the correlation of passing with the rest of the total, as an item analysis does), and the
checks an instructor should look at before trusting their points (``checks.csv``, the class report).
"""

from __future__ import annotations

import csv
import io
import statistics

from autograder.lab import Lab
from autograder.results import SubmissionResult

# A check is one to look at when no one passes it (a broken check, or a lesson to revisit), or when the
# stronger students fail it more than the weaker ones: passing it correlates with the rest of the total
# below this, over at least SEPARATION_STUDENTS students of whom at least two pass and two fail (fewer
# say nothing: one student's chance decides the sign).
MISLEADING = -0.3
SEPARATION_STUDENTS = 5


def separation(passed: list[bool], rest: list[float]) -> float | None:
    """The correlation of passing a check with the rest of each student's total (point-biserial); None
    where either does not vary, or too few students pass or fail to say anything."""
    if len(passed) < SEPARATION_STUDENTS or min(sum(passed), len(passed) - sum(passed)) < 2 or len(set(rest)) < 2:
        return None
    return statistics.correlation([float(p) for p in passed], rest)


def check_statistics(lab: Lab, records: list[SubmissionResult]) -> list[dict]:
    """Every check of the students who handed in, in the lab's order: ``{"part", "name", "hidden",
    "points", "students", "passed", "rate", "separation", "look"}``; ``look`` says why the check deserves
    a look ("" when it does not)."""
    outcomes: dict[tuple[str, str], list[tuple[bool, float]]] = {}
    about: dict[tuple[str, str], tuple[bool, float]] = {}
    for record in records:
        for check in record.checks:
            outcomes.setdefault((check.part, check.name), []).append((check.passed, record.total - check.earned))
            about[check.part, check.name] = (check.hidden, check.points)
    rows = []
    for (part, name), seen in outcomes.items():
        passed, rest = [p for p, _ in seen], [r for _, r in seen]
        separates = separation(passed, rest)
        look = ("passed by no one: a broken check, or a lesson to revisit" if len(passed) > 1 and not any(passed)
                else "the stronger students fail it more than the weaker ones: is it right?"
                if separates is not None and separates <= MISLEADING else "")
        rows.append({"part": part, "name": name, "hidden": about[part, name][0], "points": about[part, name][1],
                     "students": len(passed), "passed": sum(passed), "rate": sum(passed) / len(passed),
                     "separation": separates, "look": look})
    return sorted(rows, key=lambda row: (lab.part_ids.index(row["part"]), row["name"]))


def checks_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["part", "check", "hidden", "points", "students", "passed", "pass_rate", "separation", "look"])
    for row in rows:
        writer.writerow([row["part"], row["name"], str(row["hidden"]).lower(), f"{row['points']:g}", row["students"],
                         row["passed"], f"{row['rate']:.3f}",
                         "" if row["separation"] is None else f"{row['separation']:.3f}", row["look"]])
    return out.getvalue()
