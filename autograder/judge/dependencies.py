"""Which other parts' modules may have cost a part its failed checks: the feedback of that part
says so in one line (a part whose module builds a class of another part's module; a module that
does not import fails the checks of every part that imports it). Works on check entries as the
plugin and the reports hold them (``part``, ``passed``, ``failure``)."""

from __future__ import annotations

from autograder.lab import Lab


def dependencies(lab: Lab, part: str, checks: list[dict]) -> list[dict]:
    """Other parts' modules that may have cost ``part`` its failed checks (of ``checks``): those
    its failures stopped inside (the failure's file) and those it builds on (``uses`` in
    lab.toml) that failed checks too. ``[{"part", "stopped_inside": count, "failed_too": bool}]``."""
    failed = [c for c in checks if not c["passed"]]
    if not any(c["part"] == part for c in failed):
        return []
    found = []
    for other in lab.part_ids:
        stopped = sum(c["part"] == part and c.get("failure", {}).get("file") == f"{other}.py" for c in failed)
        failed_too = any(c["part"] == other for c in failed)
        if other != part and (stopped or (other in lab.part(part).uses and failed_too)):
            found.append({"part": other, "stopped_inside": stopped, "failed_too": failed_too})
    return found


def dependency_sentence(part: str, dependency: dict) -> str:
    other, stopped = dependency["part"], dependency["stopped_inside"]
    if stopped:
        why = f"{stopped} failed check{'s' if stopped > 1 else ''} of {part} stopped inside {other}.py"
        why += f", and {other}'s own checks fail too" if dependency["failed_too"] else ""
    else:
        why = f"{part} builds on {other}.py, whose own checks fail"
    return f"{why}. Fix {other} first: these checks may pass then."
