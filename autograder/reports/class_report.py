"""The class report (``report.html``): what an instructor acts on after a grading run.

One self-contained page (no server, no network; one small inline script sorts the table): the
distribution of totals with full marks as a bar of its own; the mean of every part; every student
with a link to their feedback and flags for what deserves a look (passes the public checks but
fails the hidden ones; lost points to time-outs or crashes; code reaching into internals, with
file and line); each known mistake with the students
who made it; checks that no one passes, marked as suspect (a broken check or a lesson to revisit);
and the pairs of submissions that are near-copies (:mod:`autograder.reports.similarity`).
"""

from __future__ import annotations

import statistics

from autograder.lab import Lab
from autograder.reports.feedback import TEMPLATES, state
from autograder.reports.histogram import histogram_svg
from autograder.reports.records import problem, upload_problems
from autograder.results import TROUBLE, UNCONFINED_WARNING, FailureKind, SubmissionResult
from autograder.text import one_line


def flags(record: SubmissionResult) -> list[dict]:
    """What in a student's record deserves the instructor's look: ``{"text", "anchor"}`` each, the
    anchor the place on the student's feedback page that shows the evidence ("" for its top)."""
    said: list[dict] = []

    def say(text: str, anchor: str = "") -> None:
        said.append({"text": text, "anchor": anchor})

    checks = record.checks
    failed = [c for c in checks if not c.passed]
    broken: dict[str, str] = {}  # "did not import: <module>.py line N" (as the status says it): its part
    for check in failed:
        found = problem(check.failure)
        if found and found[0] in ("did not import", "missing"):
            broken.setdefault(f"{found[0]}: {found[1]}", check.part)
    for text, part in broken.items():
        say(text, f"#part-{part}")
    untouched = [p.id for p in record.parts.values()
                 if p.checks and all(c.kind == FailureKind.NOT_IMPLEMENTED for c in p.checks)]
    if untouched:
        say(f"not started: {', '.join(untouched)}", f"#part-{untouched[0]}")
    notes = upload_problems(record.notes)
    if notes:
        say(f"upload: {notes[0]}" + (f" (and {len(notes) - 1} more notes)" if len(notes) > 1 else ""))
    lost = sum(c.points for c in failed if c.kind in TROUBLE)
    if lost:
        say(f"lost {lost:g} points to time-outs or crashes")
    reaches = record.reaches
    if reaches:
        first = reaches[0]
        say(f"reaches into internals (could lift a ban): {first['file']} line {first['line']}, {first['what']}"
            + (f", and {len(reaches) - 1} more" if len(reaches) > 1 else ""))
    public = [c for c in checks if not c.hidden]
    hidden = [c for c in checks if c.hidden]
    if public and hidden and all(c.passed for c in public) and sum(c.passed for c in hidden) < len(hidden) / 2:
        say("passes every public check, fails most hidden ones")
    return said


def near_copies(similar: dict | None) -> dict[str, list[dict]]:
    """Each student's near-copies as flags, ``{"text", "href"}``, one per module, naming the member of
    the group the student is closest to; the href is the group on this page, its code side by side."""
    copies: dict[str, list[dict]] = {}
    for group in (similar or {}).get("groups", []):
        for student in group["keys"]:
            closest = max((p for p in group["pairs"] if student in p["keys"]), key=lambda p: p["similarity"])
            other = closest["second"] if closest["keys"][0] == student else closest["first"]
            copies.setdefault(student, []).append(
                {"text": f"near-copy: {group['module']}, {100 * closest['similarity']:.0f}% shared with {other}",
                 "anchor": "", "href": f"#{group['anchor']}"})
    return copies


def class_report(lab: Lab, records: list[SubmissionResult], links: dict[str, str], similar: dict | None = None,
                 removed: tuple[str, ...] = (), unstable: dict[str, list[str]] | None = None) -> str:
    """``links``: each student's feedback page, relative to the report; ``similar``: the near-copies
    (:func:`autograder.reports.similarity.near_copies`; None leaves the section out); ``removed``: the
    students whose reports this run removed (no longer in the submissions); ``unstable``: the checks whose
    verdict changed between runs of ``make grade REPEAT=n`` (``{"part: check": [students]}``)."""
    everyone = sorted(records, key=lambda r: r.student)
    # Who handed nothing in is listed apart and left out of every statistic: a 0 would pull the means.
    absent = [{"name": one_line(r.student), "link": links.get(r.student, "")} for r in everyone if not r.handed_in]
    records = [r for r in everyone if r.handed_in]
    totals = [r.total for r in records]
    copies = near_copies(similar)
    students = [{"name": one_line(r.student), "link": links.get(r.student, ""), "total": r.total,
                 "state": state(r.total, r.max_total), "status": r.status,
                 "flags": flags(r) + copies.get(r.student, []),
                 "parts": [r.parts[p].points for p in lab.part_ids]} for r in records]
    parts = []
    for part in lab.part_ids:
        got = [r.parts[part].points for r in records]
        top = max((r.parts[part].max_points for r in records), default=0.0)
        parts.append({"id": part, "title": lab.part(part).title, "max": top, "mean": statistics.fmean(got) if got else 0.0,
                      "full": sum(g >= top for g in got) if top else 0})
    outcomes: dict[tuple[str, str], list[bool]] = {}
    hidden: dict[tuple[str, str], bool] = {}
    for record in records:
        for check in record.checks:
            outcomes.setdefault((check.part, check.name), []).append(check.passed)
            hidden[check.part, check.name] = check.hidden
    checks = [{"part": part, "name": name, "hidden": hidden[part, name], "rate": sum(passed) / len(passed),
               "suspect": len(passed) > 1 and not any(passed)} for (part, name), passed in outcomes.items()]
    checks.sort(key=lambda c: (lab.part_ids.index(c["part"]), c["name"]))
    mistakes: dict[str, dict] = {}
    for record in records:
        for part in lab.part_ids:
            for mistake in record.parts[part].misconceptions:
                entry = mistakes.setdefault(mistake["id"], {**mistake, "part": part, "students": []})
                entry["students"].append(one_line(record.student))
    view = {"lab": lab.title, "count": len(records), "max_points": lab.max_points, "absent": absent,
            "mean": statistics.fmean(totals) if totals else 0.0, "median": statistics.median(totals) if totals else 0.0,
            "full": sum(t >= lab.max_points for t in totals), "histogram": histogram_svg(totals, lab.max_points),
            "parts": parts, "students": students, "part_ids": lab.part_ids,
            "flagged": [s for s in students if s["flags"]],
            "mistakes": sorted(mistakes.values(), key=lambda m: -len(m["students"])),
            "checks": checks, "suspect": [c for c in checks if c["suspect"]],
            "hardest": sorted(checks, key=lambda c: c["rate"])[:10], "similar": similar,
            "unconfined": [one_line(r.student) for r in records if r.unconfined], "unconfined_warning": UNCONFINED_WARNING,
            "removed": [one_line(name) for name in removed],
            "unstable": [{"check": check, "students": [one_line(s) for s in students]}
                         for check, students in (unstable or {}).items()]}
    return TEMPLATES.get_template("class_report.html").render(view=view)
