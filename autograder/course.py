"""The course directory, one authority for where things are and how they are fenced: the kit's
root, the folders ``nbgrader_config.py`` names (source, release, solution, submitted) and the
fences nbgrader cuts (solutions, hidden tests), read from that same file through traitlets.
nbgrader itself (0.6 s to import, and not a student's dependency) is imported only to build a
release (:mod:`autograder.authoring.release`).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

KIT_ROOT = Path(__file__).resolve().parent.parent
CONFIG = "nbgrader_config.py"


@cache
def course_config():
    from traitlets.config.loader import PyFileConfigLoader  # 50 ms: not for processes that need KIT_ROOT only

    return PyFileConfigLoader(CONFIG, path=str(KIT_ROOT)).load_config()


def directory(kind: str) -> Path:
    """The course's ``source``, ``release``, ``solution`` or ``submitted`` folder, as configured."""
    return KIT_ROOT / course_config().CourseDirectory[f"{kind}_directory"]


def fences(preprocessor: str, begin: str, end: str) -> tuple[str, str]:
    """The course's fence strings for ``preprocessor`` (``ClearSolutions``, ``ClearHiddenTests``)."""
    section = course_config()[preprocessor]
    return section[begin], section[end]


def solution_fences() -> tuple[str, str]:
    return fences("ClearSolutions", "begin_solution_delimeter", "end_solution_delimeter")


def hidden_test_fences() -> tuple[str, str]:
    return fences("ClearHiddenTests", "begin_test_delimeter", "end_test_delimeter")


def fenced_lines(text: str, begin: str, end: str) -> list[range]:
    """1-based line ranges strictly inside ``begin``/``end`` fences."""
    spans, start = [], None
    for number, line in enumerate(text.split("\n"), start=1):
        if begin in line:
            start = number + 1
        elif end in line and start is not None:
            spans.append(range(start, number))
            start = None
    return spans


def hidden_line_ranges(text: str) -> list[range]:
    """The lines of hidden checks in a checks file (a hidden check is one whose ``def`` is inside)."""
    return fenced_lines(text, *hidden_test_fences())


def solution_line_ranges(text: str) -> list[range]:
    return fenced_lines(text, *solution_fences())


def run_command(command: list[str], cwd: Path, quiet: bool = False, env: dict[str, str] | None = None) -> None:
    """Run ``command`` in ``cwd``, its output discarded; ``quiet`` keeps its warnings too, unless it fails."""
    run = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE if quiet else None, text=True)
    if run.returncode:
        said = f": {run.stderr[-2000:]}" if run.stderr else ""
        raise RuntimeError(f"{' '.join([Path(command[0]).name, *command[1:]])} failed (exit status {run.returncode}){said}")


def run_nbgrader(*args: str, course: Path = KIT_ROOT, quiet: bool = False) -> None:
    """The real ``nbgrader`` command of this venv, in ``course``'s directory (by default this course's)."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}  # nbgrader runs `alembic`
    run_command([str(bin_dir / "nbgrader"), *args, "--log-level=WARN"], course, quiet, env)


def unpinned() -> list[str]:
    """The installed packages whose versions are not requirements.txt's pins, torch first, and Python
    when it is not one the kit is tested on: ``["torch 2.11.0 (pinned 2.13.0)", ...]``."""
    def name(text: str) -> str:
        return re.sub(r"[-_.]+", "-", text).lower()

    installed = {name(dist.metadata["Name"]): dist.version for dist in importlib.metadata.distributions()}
    found = []
    pins = KIT_ROOT / "requirements.txt"  # a copy of the kit may hold only its code
    for line in (pins.read_text() if pins.is_file() else "").splitlines():
        pin = re.match(r"([A-Za-z0-9_.\-]+)==(\S+)", line)
        # A local label is the same release (PEP 440: ==2.13.0 accepts torch's 2.13.0+cpu).
        if pin and installed.get(name(pin[1]), "").split("+")[0] != pin[2]:
            found.append((name(pin[1]) != "torch", f"{pin[1]} {installed.get(name(pin[1]), 'missing')} (pinned {pin[2]})"))
    python = platform.python_version_tuple()[:2]
    if python not in (("3", "11"), ("3", "12"), ("3", "13")):
        found.append((True, f"Python {platform.python_version()} (tested: 3.11, 3.12, 3.13)"))
    return [said for _, said in sorted(found, key=lambda item: item[0])]
