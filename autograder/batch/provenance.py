"""What produced a grade: the kit's code, the lab, the limits and options that shape a grade, the
Python and packages it ran on, and the submission. Each student's record carries it (``summary.json``'s
``provenance``, and the ``.fingerprint`` written last); a re-run grades again every student whose
provenance differs from the run's, and says in one line what changed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import tomllib
from functools import cache
from pathlib import Path

from autograder.course import KIT_ROOT
from autograder.files import digest_files
from autograder.lab import DECLARATION, Lab
from autograder.limits import Limits
# What each field is, in the words of the line that says why a run grades again.
CHANGED = {"kit": "the kit's code", "lab": "the lab (checks, points, reference, known mistakes)",
           "settings": "the limits or options", "python": "Python", "torch": "torch", "packages": "the packages",
           "machine": "the processor's architecture",
           "submission": "the submission", "format": "the reports' format",
           "stamp": "the record of what produced them (a .fingerprint missing or unreadable)"}


def installed_pins() -> dict[str, str]:
    """The installed version of each package requirements.txt pins (what the grader runs on; not whatever
    else the interpreter's path holds, which differs between a command and a test run)."""
    pins = KIT_ROOT / "requirements.txt"  # a copy of the kit may hold only its code
    pinned = re.findall(r"^([A-Za-z0-9_.\-]+)==", pins.read_text(), re.MULTILINE) if pins.is_file() else ["torch"]
    found = {}
    for name in pinned:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "missing"
    return found


@cache
def environment() -> dict:
    """The kit (its version and a digest of its code), Python and the installed packages (torch by name:
    the checks' expected values are its)."""
    packages = sorted(f"{name}=={version}" for name, version in installed_pins().items())
    project = KIT_ROOT / "pyproject.toml"  # the kit's own checkout (not in the bundles, whose code digest says it)
    version = tomllib.loads(project.read_text())["project"]["version"] if project.is_file() else ""
    # The architecture: float arithmetic (and torch's kernels) differ between x86-64 and arm64.
    return {"kit_version": version, "kit": digest_files(KIT_ROOT / "autograder"), "python": platform.python_version(),
            "machine": platform.machine(),
            "torch": importlib.metadata.version("torch"),
            "packages": hashlib.sha256("\n".join(packages).encode()).hexdigest()}


def run_provenance(lab: Lab, limits: Limits, files_required: bool, replay: bool = True) -> dict:
    """What a run's grades of ``lab`` depend on besides each submission; ``replay`` is recorded, not compared
    (a check passed by replay earns what running it earns: tests/test_replay.py), so turning it off for one
    run grades nobody again."""
    settings = json.dumps({"limits": dataclasses.asdict(limits), "files_required": files_required}, sort_keys=True)
    return {**environment(), "lab": digest_files(lab.checks, lab.reference, also=(lab.source / DECLARATION,)),
            "settings": hashlib.sha256(settings.encode()).hexdigest(), "replay": replay}


def submission_digest(staged: Path, notes: list[str]) -> str:
    """The staged submission's files and what staging noticed."""
    digest = hashlib.sha256()
    for path in sorted(staged.iterdir()):
        digest.update(os.fsencode(path.name) + b"\0" + path.read_bytes())
    digest.update(json.dumps(notes).encode())
    return digest.hexdigest()


def read_stamp(path: Path) -> dict | None:
    """A student's ``.fingerprint`` (the provenance of its grade); None when absent or of an older kit."""
    try:
        stamp = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def changes(before: dict | None, now: dict) -> list[str]:
    """What differs between a grade's provenance and this run's, among the fields ``now`` holds, by field
    name (``CHANGED``); a grade whose provenance cannot be read is said so ("stamp"), not blamed on the kit."""
    if before is None:
        return ["stamp"]
    return [field for field in CHANGED if field in now and before.get(field) != now[field]]


def why_again(lab: str, changed: dict[str, list[str]]) -> str | None:
    """One line: what changed since the grades a run grades again (``changed``: student -> fields), or
    None when only new or changed submissions are graded."""
    counts = {field: sum(field in fields for fields in changed.values()) for field in CHANGED if field != "submission"}
    said = [CHANGED[field] for field, count in counts.items() if count]
    again = sum(any(field != "submission" for field in fields) for fields in changed.values())
    if not said:
        return None
    listed = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"
    return f"{lab}: {listed} changed since these grades: grading {again} again"
