"""Every failure kind, walked through every consumer of what it means (autograder/kinds.py): a kind
is one entry, and each consumer reads that entry, never the kind's name or its wording."""

import ast
import re
import xml.etree.ElementTree as ET

import pytest

from autograder.harness.codec import decode_frame, encode
from autograder.harness.recording import Call, Outcome, Recording
from autograder.harness.remote import StudentError
from autograder.judge.checks import CheckFailure
from autograder.judge.plugin import verdict_of
from autograder.judge.scoreboard import hint
from autograder.kinds import KINDS, FailureKind, Flag
from autograder.platforms.ci import junit_xml
from autograder.platforms.gradescope import results_json
from autograder.kinds import NEEDS
from autograder.reports.class_report import flags
from autograder.reports.feedback import feedback_markdown, once_per_fact
from autograder.reports.records import problem, student_record
from autograder.results import CheckResult, Failure, RunResults, SubmissionResult
from conftest import KIT, LAB

PART = LAB.part_ids[0]
FAILURE = {"where": "m.f", "file": "m.py", "line": 3}  # where a failure of any kind happened


def failed(kind: FailureKind, name: str = "c", points: float = 1.0) -> CheckResult:
    return CheckResult(PART, name, points, False, message=f"{kind} in m.f", about="what it checks",
                       failure=Failure(kind, **FAILURE))


def graded(checks: list[CheckResult]) -> SubmissionResult:
    return student_record(LAB, "ann", RunResults(LAB.name, checks), [], [], None, 1.0)


def test_every_kind_has_one_entry():
    assert list(KINDS) == list(FailureKind)
    assert all(entry.kind is kind for kind, entry in KINDS.items())
    assert all(flag.need in NEEDS for flag in Flag)


@pytest.mark.parametrize("kind", list(FailureKind))
def test_the_worker_names_a_kind_only_when_it_may_and_it_reads_back(kind):
    """A worker runs student code: a kind only the judge decides (a crash, a wrong answer, a broken
    check) it claims reads back as an exception."""
    said = decode_frame(encode({"error": {"kind": kind}}))["error"]["kind"]
    assert FailureKind.reported_by_worker(said) == (kind if kind.meaning.from_worker else FailureKind.EXCEPTION)


def test_a_worker_names_nothing_else():
    for claimed in ("nonsense", None, ["timeout"], 3):
        assert FailureKind.reported_by_worker(claimed) == FailureKind.EXCEPTION, claimed


def test_the_worker_writes_kinds_from_the_table_and_only_its_own():
    """No kind spelled as a string, and none the worker may not name."""
    tree = ast.parse((KIT / "autograder" / "harness" / "worker.py").read_text())
    named = {node.attr for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "FailureKind"}
    assert named and all(FailureKind[name].meaning.from_worker for name in named)
    written = [value for node in ast.walk(tree) if isinstance(node, ast.Dict)
               for key, value in zip(node.keys, node.values) if isinstance(key, ast.Constant) and key.value == "kind"]
    written += [node.args[0] for node in ast.walk(tree) if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name) and node.func.id == "RequestError"]
    assert written and not any(isinstance(value, ast.Constant) for value in written)


@pytest.mark.parametrize("kind", list(FailureKind))
def test_a_kind_reads_the_same_in_the_record_the_status_and_the_exports(kind):
    entry = kind.meaning
    record = graded([failed(kind), CheckResult(PART, "ok", 1.0, True)])
    assert SubmissionResult.from_json(record.to_json()).checks[0].kind is kind
    found = problem(record.checks[0].failure)
    assert (found and found[0]) == entry.status  # the label, or None: the points say it
    assert record.status == (f"{found[0]}: {found[1]}" if found else "graded")
    said = feedback_markdown(LAB, record, hidden=False)
    assert ("What cost points beyond wrong answers" in said) == bool(entry.status)
    case = ET.fromstring(junit_xml(LAB, record)).find(".//testcase[@name='c']")
    assert [(child.tag, child.get("type")) for child in case] == [("failure" if entry.verdict else "error", kind)]
    gradescope = {test["name"]: test for test in results_json(LAB, record)["tests"]}
    assert gradescope[f"{PART}: c"]["status"] == "failed" and gradescope[f"{PART}: c"]["output"] == f"{kind} in m.f"


@pytest.mark.parametrize("kind", list(FailureKind))
def test_a_kind_says_its_hint_and_is_said_once_when_it_says_the_same_to_every_check(kind):
    check = failed(kind)
    wanted = kind.meaning.hint.format(where="m.f", file="m.py", line=3) or "this check verifies: what it checks"
    assert hint(check) == wanted
    shown = once_per_fact([failed(kind, "c1"), failed(kind, "c2")])
    assert len(shown) == (1 if kind.meaning.said_once else 2)


@pytest.mark.parametrize("kind", list(FailureKind))
def test_the_class_report_flags_a_kind_by_its_entry(kind):
    """A part every check of which failed so: named (as the status says it), its points counted lost,
    not started, or low (the points say it)."""
    said = [(f["need"], f["text"]) for f in flags(graded([failed(kind, "c1"), failed(kind, "c2")]))]
    flag = kind.meaning.flag
    named = f"{problem(failed(kind).failure)[0]}: {problem(failed(kind).failure)[1]}" if flag == Flag.NAMED else ""
    assert said == {
        Flag.NAMED: [(Flag.NAMED.need, named)],
        Flag.POINTS_LOST: [(Flag.POINTS_LOST.need, "lost 2 points to time-outs or crashes"),
                           ("struggling", f"{PART} 0/2")],
        Flag.NOT_STARTED: [(Flag.NOT_STARTED.need, f"not started: {PART}")],
        None: [("struggling", f"{PART} 0/2")]}[flag]


@pytest.mark.parametrize("kind", list(FailureKind))
def test_a_stopping_kind_is_the_verdict_among_several_and_a_timing_one_is_not_replayed(kind):
    failures = [CheckFailure("wrong"), StudentError(FailureKind.EXCEPTION, "raised"), StudentError(kind, "failed")]

    class Caught:
        value = ExceptionGroup("several", failures)
    assert (verdict_of(Caught) is failures[-1]) == kind.meaning.stops
    calls = [Call(b"", "m.f", Outcome(b"answer", (kind, "")))]
    assert Recording(calls=calls).replayable == (not kind.meaning.timing)


def test_no_consumer_decides_by_a_kinds_wording():
    """The status labels are the table's: no module compares one of its own with what it reads."""
    labels = {entry.status for entry in KINDS.values() if entry.status}
    compared = [f"{path.relative_to(KIT)}: {node.value!r}"
                for path in sorted((KIT / "autograder").rglob("*.py"))
                for comparison in ast.walk(ast.parse(path.read_text())) if isinstance(comparison, ast.Compare)
                for node in ast.walk(comparison) if isinstance(node, ast.Constant) and node.value in labels]
    assert compared == []


def test_the_grading_page_names_every_failure_kind_in_order():
    said = (KIT / "docs" / "grading.md").read_text().split("`FailureKind`:", 1)[1].split(";", 1)[0]
    assert re.findall(r"`(\w+)`", said) == [kind.value for kind in FailureKind]
