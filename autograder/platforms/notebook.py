"""What a lab's companion notebook asks of the kit: one part's public checks, run as ``make check`` runs
them, as data.

Each section of the notebook ends with its part's public checks (``deploy/lab/notebook_helpers.py``:
``checks``), so a section is green exactly when they pass. They run through the command line, in a
process of their own, as ``make check PART=<part>``: confined, in the judge's workers, never in the
notebook's kernel; its results file is read back (:func:`autograder.results.read_run`), never its text.
Every part's checks run at once, and again only when a file they judge changes (:func:`run_part`).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autograder.course import KIT_ROOT
from autograder.files import digest_files
from autograder.judge.scoreboard import first_failures, hint
from autograder.results import CheckResult, FailureKind, read_run
from autograder.text import one_line


@dataclass(frozen=True)
class PartChecks:
    """A part's public checks as one run left them, or, when none ran, why (``refused``)."""

    checks: list[CheckResult]
    refused: str = ""

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    @property
    def written_fails(self) -> bool:
        """Does a check fail on a function already written (not only on stubs)?"""
        return any(not c.passed and (c.failure is None or c.failure.kind != FailureKind.NOT_IMPLEMENTED)
                   for c in self.checks)

    def shown(self) -> tuple[list[tuple[CheckResult, str]], dict[str, int]]:
        """What ``make check`` shows of the failures: the first of each function written, with its hint,
        and the stubs' calls with how many checks each costs."""
        written, stubs = first_failures([check for check in self.checks if not check.passed])
        return [(check, hint(check)) for check in written], stubs


# The last run of the public checks per folder, by the digest of what they judged (the modules and tests/).
_last_run: dict[Path, tuple[str, list[CheckResult] | str]] = {}


def run_part(submission: Path, part: str, timeout: float = 600) -> PartChecks:
    """``part``'s public checks on the modules in ``submission`` (checked against its ``tests/``). Every
    part's are run at once, and again only once a file they judge has changed: a notebook's Run All starts
    one judge, not one a section (about 3 s, not 1.6 s a part)."""
    submission = submission.resolve()
    digest = digest_files(submission)
    last = _last_run.get(submission)
    if last is None or last[0] != digest:
        last = _last_run[submission] = (digest, run_public_checks(submission, timeout))
    ran = last[1]
    if isinstance(ran, str):
        return PartChecks([], ran)
    own = [check for check in ran if check.part == part]
    return PartChecks(own) if own else PartChecks([], f"this lab has no part {part}; make check names its parts")


def run_public_checks(submission: Path, timeout: float) -> list[CheckResult] | str:
    """Every public check on the modules in ``submission``, run as ``make check`` runs them; or, when none
    ran, why (in the command's own words)."""
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results.json"
        try:
            ran = subprocess.run([sys.executable, "-m", "autograder", "check", "--submission", str(submission),
                                  "--results-json", str(results)],
                                 cwd=KIT_ROOT, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"the checks took longer than {timeout:g} s; make check says more"
        if not results.is_file():  # nothing judged (no confinement on this machine): its own words
            said = [line for line in ran.stderr.splitlines() if line.strip()]
            return one_line(said[-1] if said else "make check ran no check")
        # A reference's tests/ holds the hidden checks too: the notebook's verdict is the public checks'.
        return [check for check in read_run(results).checks if not check.hidden]
