"""The class report (``report.html``): what an instructor acts on after a grading run.

One self-contained page (no server, no network; one small inline script sorts the table): first
every student an instructor should act on, most urgent first (:data:`NEEDS`: could not be graded,
struggling, well below the class, integrity), each reason linked to its evidence; the distribution of
totals with full marks as a bar of its own; the mean of every part; every student with a link to
their feedback; each known mistake with the students who made it; the checks to trust and to look at
(:mod:`autograder.reports.check_statistics`); and the groups of near-copies
(:mod:`autograder.reports.similarity`).
"""

from __future__ import annotations

import statistics

from autograder.lab import Lab
from autograder.reports.check_statistics import check_statistics
from autograder.reports.feedback import TEMPLATES, state
from autograder.reports.histogram import histogram_svg
from autograder.reports.records import problem, upload_problems
from autograder.kinds import BELOW, INTEGRITY, NEEDS, NOT_GRADED, STRUGGLING, Flag
from autograder.results import UNCONFINED_WARNING, SubmissionResult
from autograder.text import one_line


# A part a student struggles with earns less than this share of its points (a known mistake that costs
# 7 of 15 is trouble worth acting on); a total well below the class is in its lowest quarter and below
# this share of the lab's points.
LOW_SHARE = 0.6


def flags(record: SubmissionResult, low: float | None = None) -> list[dict]:
    """What in a student's record deserves the instructor's look: ``{"text", "anchor", "need"}`` each, the
    anchor the place on the student's feedback page that shows the evidence ("" for its top), ``need``
    one of :data:`NEEDS`; ``low``: the total below which a student is well below the class (None: no one)."""
    said: list[dict] = []

    def say(need: str, text: str, anchor: str = "") -> None:
        said.append({"text": text, "anchor": anchor, "need": need})

    checks = record.checks
    failed = [c for c in checks if not c.passed]
    if record.status.startswith("error"):
        say(NOT_GRADED, record.status)
    broken: dict[str, str] = {}  # "did not import: <module>.py line N" (as the status says it): its part
    for check in failed:
        found = problem(check.failure)
        if found and flag_of(check) == Flag.NAMED:
            broken.setdefault(f"{found[0]}: {found[1]}", check.part)
    for text, part in broken.items():
        say(Flag.NAMED.need, text, f"#part-{part}")
    notes = upload_problems(record.notes)
    if notes:
        say(NOT_GRADED, f"upload: {notes[0]}" + (f" (and {len(notes) - 1} more notes)" if len(notes) > 1 else ""))
    lost = sum(c.points for c in failed if flag_of(c) == Flag.POINTS_LOST)
    if lost:
        say(Flag.POINTS_LOST.need, f"lost {lost:g} points to time-outs or crashes")
    said_of = {part for part in broken.values()}
    untouched = [p.id for p in record.parts.values()
                 if p.checks and all(flag_of(c) == Flag.NOT_STARTED for c in p.checks)]
    if untouched:
        say(Flag.NOT_STARTED.need, f"not started: {', '.join(untouched)}", f"#part-{untouched[0]}")
    for part in record.parts.values():
        if part.id in said_of or part.id in untouched or not part.checks or part.points >= LOW_SHARE * part.max_points:
            continue
        say(STRUGGLING, f"{part.id} {part.points:g}/{part.max_points:g}" + why_low(part), f"#part-{part.id}")
    if low is not None and record.total < low:
        say(BELOW, f"total {record.total:g} of {record.max_total:g}, in the class's lowest quarter")
    reaches = record.reaches
    if reaches:
        first = reaches[0]
        say(INTEGRITY, f"reaches into internals (could lift a ban): {first['file']} line {first['line']}, "
            f"{first['what']}" + (f", and {len(reaches) - 1} more" if len(reaches) > 1 else ""))
    public = [c for c in checks if not c.hidden]
    hidden = [c for c in checks if c.hidden]
    if public and hidden and all(c.passed for c in public) and sum(c.passed for c in hidden) < len(hidden) / 2:
        say(INTEGRITY, "passes every public check, fails most hidden ones")
    return said


def flag_of(check) -> Flag | None:
    """How the class report flags a failed check by its kind (None: the points say it)."""
    return check.kind.meaning.flag if check.kind and not check.passed else None


def why_low(part) -> str:
    """What a part's failed checks say of its mistake: the known mistake most of them match, else how
    the first wrong answer's values relate to the expected ones ("" when neither is known)."""
    if part.misconceptions:
        return f": known mistake, {part.misconceptions[0]['title']}"
    relation = next((c.failure.relation for c in part.checks if not c.passed and c.failure and c.failure.relation), "")
    return f": {relation}" if relation else ""


def low_total(records: list[SubmissionResult], max_points: float) -> float | None:
    """The total below which a student is well below the class: its lower quartile, when that is below
    :data:`LOW_SHARE` of the points (a class whose lowest quarter does well has no one well below it)."""
    totals = [r.total for r in records]
    if len(totals) < 4:
        return None
    quartile = statistics.quantiles(totals, n=4, method="inclusive")[0]
    return min(quartile + 1e-9, LOW_SHARE * max_points)


def near_copies(similar: dict | None) -> dict[str, list[dict]]:
    """Each student's near-copies as one flag, ``{"text", "href", "need"}``: the group's member the student
    is closest to and the modules they share (a pair copied in six modules is one finding); the href is
    the group on this page, its code side by side."""
    copies: dict[str, list[dict]] = {}
    for group in (similar or {}).get("groups", []):
        for student in group["keys"]:
            closest = max((p for p in group["pairs"] if student in p["keys"]), key=lambda p: p["similarity"])
            other = closest["second"] if closest["keys"][0] == student else closest["first"]
            shared = ", ".join(f"{m['module']} {100 * m['similarity']:.0f}%" for m in closest["modules"])
            others = len(group["members"]) - 2
            copies.setdefault(student, []).append(
                {"text": f"near-copy of {other}: {shared}" + (f" (a group of {others + 2})" if others else ""),
                 "anchor": "", "href": f"#{group['anchor']}", "need": INTEGRITY})
    return copies


def needs_a_look(students: list[dict], absent: list[dict]) -> list[dict]:
    """Every student with a reason, most urgent first (then the lowest total): ``{"name", "link", "total",
    "needs": [{"need", "reasons"}]}``, each kind of need once, its reasons in the order found."""
    listed = [{**s, "flags": [{"text": "not handed in", "anchor": "", "need": NOT_GRADED}]} for s in absent]
    listed += [s for s in students if s["flags"]]
    for student in listed:
        student["needs"] = [{"need": need, "reasons": [f for f in student["flags"] if f["need"] == need]}
                            for need in NEEDS if any(f["need"] == need for f in student["flags"])]
    listed.sort(key=lambda s: (NEEDS.index(s["needs"][0]["need"]), s.get("total", 0.0), s["name"]))
    for number, student in enumerate(listed, 1):
        student["anchor"] = f"look-{number}"
    return listed


def class_report(lab: Lab, records: list[SubmissionResult], links: dict[str, str], similar: dict | None = None,
                 removed: tuple[str, ...] = (), unstable: dict[str, list[str]] | None = None,
                 checks: list[dict] | None = None) -> str:
    """``links``: each student's feedback page, relative to the report; ``similar``: the near-copies
    (:func:`autograder.reports.similarity.near_copies`; None leaves the section out); ``removed``: the
    students whose reports this run removed (no longer in the submissions); ``unstable``: the checks whose
    verdict changed between runs of ``make grade REPEAT=n`` (``{"part: check": [students]}``); ``checks``: the
    checks' statistics (:func:`autograder.reports.check_statistics.check_statistics`), when already made."""
    everyone = sorted(records, key=lambda r: r.student)
    # Who handed nothing in is listed apart and left out of every statistic: a 0 would pull the means.
    absent = [{"name": one_line(r.student), "link": links.get(r.student, "")} for r in everyone if not r.handed_in]
    records = [r for r in everyone if r.handed_in]
    totals = [r.total for r in records]
    copies, low = near_copies(similar), low_total(records, lab.max_points)
    students = [{"name": one_line(r.student), "link": links.get(r.student, ""), "total": r.total,
                 "state": state(r.total, r.max_total), "status": r.status,
                 "flags": flags(r, low) + copies.get(r.student, []),
                 "parts": [r.parts[p].points for p in lab.part_ids]} for r in records]
    parts = []
    for part in lab.part_ids:
        got = [r.parts[part].points for r in records]
        top = max((r.parts[part].max_points for r in records), default=0.0)
        parts.append({"id": part, "title": lab.part(part).title, "max": top, "mean": statistics.fmean(got) if got else 0.0,
                      "full": sum(g >= top for g in got) if top else 0})
    checks = check_statistics(lab, records) if checks is None else checks
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
            "needs": needs_a_look(students, absent), "low_share": LOW_SHARE,
            "mistakes": sorted(mistakes.values(), key=lambda m: -len(m["students"])),
            "checks": checks, "look": [c for c in checks if c["look"]],
            "hardest": sorted(checks, key=lambda c: c["rate"])[:10], "similar": similar,
            "unconfined": [one_line(r.student) for r in records if r.unconfined], "unconfined_warning": UNCONFINED_WARNING,
            "removed": [one_line(name) for name in removed],
            "unstable": [{"check": check, "students": [one_line(s) for s in students]}
                         for check, students in (unstable or {}).items()]}
    return TEMPLATES.get_template("class_report.html").render(view=view)
