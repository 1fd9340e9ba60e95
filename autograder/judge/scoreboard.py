"""What a judge says when its checks are done: the points table and, per part, the first failure of each
function the student wrote with its hint (``make check``), and the run's results written for the
batch and the platforms (:class:`Scoreboard`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autograder.judge.dependencies import dependencies, dependency_label, dependency_sentence, stand_ins
from autograder.judge.session import FAILED_CALLS, LAB, NOTES, REACHES, SANDBOX, refusal
from autograder.results import (UNCONFINED_WARNING, CheckResult, Diagnosis, Failure, FailureKind, RunResults,
                                files_unconfined, total, write_run)
from autograder.text import printable


def first_failures(failed: list[CheckResult]) -> tuple[list[CheckResult], dict[str, int]]:
    """What ``make check`` shows of a part's failed checks: the first failure of each function the student
    has written (a check failed on values stands for its part's values), and the stubs' calls, each said
    once with how many checks they cost."""
    shown, seen, stubs = [], set(), {}
    for check in failed:
        failure = check.failure
        if failure is not None and failure.kind == FailureKind.NOT_IMPLEMENTED:
            stubs[failure.where or check.name] = stubs.get(failure.where or check.name, 0) + 1
            continue
        key = failure.where if failure is not None and not failure.kind.meaning.verdict and failure.where else "values"
        if key not in seen:
            seen.add(key)
            shown.append(check)
    return shown, stubs


def hint(check: CheckResult) -> str:
    """What to look at next for a failed check: the concept behind the known mistake it matches,
    its kind's hint (a stub, an import error, a time-out), else what the check verifies."""
    if check.diagnoses:
        return check.diagnoses[0].hint
    failure = check.failure or Failure(FailureKind.CHECK_ERROR)
    if failure.kind.meaning.hint:
        return failure.kind.meaning.hint.format(where=failure.where or "it", file=failure.file or "it",
                                                line=failure.line or "?")
    return f"this check verifies: {check.about}" if check.about else "compare your result with the docstring."


class Scoreboard:
    """Collects each check's verdict, prints the points table and writes the run's results."""

    def __init__(self, config, diagnoser):
        self.config, self.diagnoser = config, diagnoser  # diagnoser(config): the judge of known mistakes, or None
        self.results: dict[str, CheckResult] = {}  # by node id, in the order they ran

    def pytest_runtest_logreport(self, report):
        props = dict(report.user_properties)
        if "part" not in props:
            return
        check = self.results.setdefault(report.nodeid, CheckResult(
            props["part"], props["check"], props["points"], True, props["hidden"], about=props["about"],
            id=report.nodeid))
        check.replayed = check.replayed or props.get("replayed", False)
        check.stood_in = check.stood_in or props.get("stood_in", ())
        if report.failed or (report.skipped and report.when == "call"):
            check.passed = False
            # Without the known mistakes: the reports say those once per part.
            check.message = check.message or printable(props.get("message") or str(report.longrepr or "skipped"))[:4000]
        if report.failed and check.failure is None:
            check.failure = props.get("failure") or Failure(FailureKind.CHECK_ERROR)

    def diagnose(self) -> None:
        """Name the known mistakes of each part's failed checks (:meth:`Diagnoser.diagnose`), once.
        A public check's diagnosis weighs the public checks alone: what a student reads before
        grades are published must not depend on what a hidden check sent."""
        failed_calls = self.config.stash.get(FAILED_CALLS, {})
        judge = self.diagnoser(self.config) if failed_calls else None
        self.config.stash[FAILED_CALLS] = {}
        if judge is None:
            return
        for part in self.config.stash[LAB].part_ids:
            failed = [c for c in self.results.values() if c.part == part and c.id in failed_calls]
            for hidden, weighed in ((False, [c for c in failed if not c.hidden]), (True, failed)):
                for check, mistakes in zip(weighed, judge.diagnose(part, [failed_calls[c.id] for c in weighed])):
                    if check.hidden == hidden:
                        check.diagnoses = tuple(Diagnosis(m.id, m.title, m.hint) for m in mistakes)

    def pytest_terminal_summary(self, terminalreporter):
        if not self.results:
            return
        self.diagnose()
        lab = self.config.stash[LAB]
        checks = list(self.results.values())
        parts = RunResults(lab.name, checks).parts_run(lab)
        write = terminalreporter.write_line
        hidden = any(check.hidden for check in checks)
        terminalreporter.section(f"{lab.name} lab: points of the public and hidden checks" if hidden else
                                 f"{lab.name} lab: points of the public checks (your grade adds hidden ones)")
        write(f"{'part':<12} {'points':>13}   checks passed")
        for part, row in parts.items():
            write(f"{part:<12} {row.points:>6g} / {row.max_points:<4g}   {row.passed} / {len(row.checks)}")
        write(f"{'total':<12} {total(checks, earned=True):>6g} / {total(checks):<4g}")
        first_part = None
        for part, row in parts.items():
            failed = sorted((c for c in row.checks if not c.passed), key=lambda c: c.hidden)  # public ones first
            written, stubs = first_failures(failed)
            first_part = first_part or (part if failed else None)
            for first in written:
                write("")
                write(f"{part}: failing check: {first.name}", bold=True)
                for line in first.message.strip().split("\n")[:8]:
                    write(f"  {line}")
                if first.diagnoses:
                    write(f"  known mistake: {first.diagnoses[0].title}")
                write(f"  hint: {hint(first)}")
            if stubs:
                write("")
                write(f"{part}: not implemented yet: " + ", ".join(f"{where} ({count} check{'s' * (count > 1)})"
                                                                   for where, count in stubs.items()))
                if not written:  # where to start
                    write(f"  hint: {hint(next(c for c in failed if c.failure and c.failure.kind == FailureKind.NOT_IMPLEMENTED))}")
            if failed:
                for dependency in dependencies(lab, part, checks):
                    write(f"  {dependency_label(dependency)}: {dependency_sentence(part, dependency)}")
            for stood in stand_ins(part, row.checks):
                write(printable(f"{part}: {stood['label']}: {stood['sentence']}"))
        write("")
        for reach in self.config.stash.get(REACHES, [])[:5]:
            write(printable(f"not allowed: {reach.file} line {reach.line}: your code {reach.what}, reaching into internals "
                            "(the checks that forbid a library function or count calls give no points)"), red=True)
        sandbox = self.config.stash.get(SANDBOX, None)
        if sandbox and sandbox["missing"]:
            write("warning: student code ran without " + "; ".join(sandbox["missing"]), yellow=True)
        if files_unconfined(sandbox):
            write(UNCONFINED_WARNING, red=True)
        # Last: what to do next is what a student reads first when the run ends.
        if first_part is None:
            write(f"Every check passed: {total(checks, earned=True):g} / {total(checks):g}.", green=True, bold=True)
        else:
            write(f"{total(checks, earned=True):g} / {total(checks):g} so far. Next: the first failure in {first_part} "
                  f"above, then make check PART={first_part} again (VERBOSE=1 shows every failing check).", bold=True)

    def pytest_sessionfinish(self):
        out = self.config.getoption("results_json")
        if out and not refusal:
            self.diagnose()
            lab = self.config.stash[LAB]
            run = RunResults(lab.name, list(self.results.values()), self.config.stash.get(SANDBOX, None),
                             self.config.stash.get(NOTES, []),
                             [dataclasses.asdict(r) for r in self.config.stash.get(REACHES, [])])
            write_run(Path(out), run, lab)

