"""Which other parts' modules a part's failed checks lead to: the feedback of that part says so
in one line. "depends on X" only when X fails its own checks (a part whose module builds a class
of X's; a module that does not import fails the checks of every part that imports it); when X
passes them, where the failure surfaced and the part's own line that called into X. Works on
check results (:class:`autograder.results.CheckResult`), the judge's and the reports' alike."""

from __future__ import annotations

from autograder.lab import Lab
from autograder.results import CheckResult


def dependencies(lab: Lab, part: str, checks: list[CheckResult]) -> list[dict]:
    """Other parts' modules that ``part``'s failed checks (of ``checks``) lead to: those its
    failures stopped inside (the failure's file) and those it builds on (``uses`` in lab.toml)
    that failed checks too. ``[{"part", "stopped_inside": count, "failed_too": bool,
    "called_from": the part's own line that led there, when known}]``."""
    failed = [c for c in checks if not c.passed]
    if not any(c.part == part for c in failed):
        return []
    found = []
    for other in lab.part_ids:
        inside = [c for c in failed if c.part == part and c.failure and c.failure.file == f"{other}.py"]
        failed_too = any(c.part == other for c in failed)
        if other != part and (inside or (other in lab.part(part).uses and failed_too)):
            called_from = next((c.failure.called_from for c in inside if c.failure.called_from), "")
            found.append({"part": other, "stopped_inside": len(inside), "failed_too": failed_too,
                          "called_from": called_from})
    return found


def dependency_label(dependency: dict) -> str:
    """The line's opening words: "depends on X" only when X fails its own checks."""
    other = dependency["part"]
    return f"depends on {other}" if dependency["failed_too"] else f"surfaced inside {other}.py"


def dependency_sentence(part: str, dependency: dict) -> str:
    other, stopped = dependency["part"], dependency["stopped_inside"]
    if not dependency["failed_too"]:
        called = dependency.get("called_from")
        return (f"{stopped} failed check{'s' if stopped > 1 else ''} of {part} stopped inside {other}.py, whose own "
                f"checks pass: look at how {part}.py calls it{f' ({called})' if called else ''}.")
    if stopped:
        why = f"{stopped} failed check{'s' if stopped > 1 else ''} of {part} stopped inside {other}.py"
        why += f", and {other}'s own checks fail too" if dependency["failed_too"] else ""
    else:
        why = f"{part} builds on {other}.py, whose own checks fail"
    return f"{why}. Fix {other} first: these checks may pass then."


def stand_ins(part: str, checks: list[CheckResult]) -> list[dict]:
    """Where ``part``'s public checks (of ``checks``) ran with a stand-in answering for a sub-part that
    failed (:class:`autograder.results.StandIn`; a hidden check's would tell its inputs), one line per used
    part, with the first reason: ``[{"label", "sentence"}]``."""
    found: dict[str, dict] = {}
    for check in (c for c in checks if c.part == part and not c.hidden):
        for stood in check.stood_in:
            entry = found.setdefault(stood.part, {"submodules": [], "checks": set(), "first": stood})
            entry["checks"].add(check.name)
            if stood.submodule not in entry["submodules"]:
                entry["submodules"].append(stood.submodule)
    lines = []
    for other, entry in found.items():
        first, count = entry["first"], len(entry["checks"])
        place = f" ({first.file} line {first.line})" if first.line else ""
        lines.append({"label": f"stood in for {other}", "sentence": (
            f"in {count} check{'s' if count > 1 else ''} of {part}, your {', '.join(entry['submodules'])} "
            f"({other}.py) failed (first: {first.submodule} {first.why}{place}); the lab's stand-in for {other} "
            f"(public code) answered for {'them' if len(entry['submodules']) > 1 else 'it'} there, so {part} was "
            f"judged on its own wiring. Fix {other}: its own checks say how.")})
    return lines
