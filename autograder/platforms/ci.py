"""CI where students are: the public checks run once in a student's repository, and their results
are written where each service shows them. All of it is made from the run's data (the checks'
results), never from printed text.

``python -m autograder ci-run --submission <lab folder>`` (``make ci`` in the student bundle) writes
``ci-results/junit.xml`` (GitLab's ``artifacts:reports:junit``, any JUnit reader) and
``ci-results/feedback.md`` (the feedback page in Markdown); where ``$GITHUB_STEP_SUMMARY`` is set it
appends that Markdown to the job's summary, and on GitHub Actions it annotates the student's own
lines with the failures that name one. Its exit status is 1 when a check failed, so the push shows
red. With ``--classroom50`` (``make classroom50``: what a Classroom 50 ``autograder.py`` runs) it
writes ``./result.json`` (``classroom50/result/v1``: whole points, every check scaled alike) and
``./release-body.md`` (the Release text the student reads) and exits 0: "graded".
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
import os
import tempfile
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path

from autograder.judge.plugin import checks_command_line
from autograder.lab import Lab
from autograder.reports.feedback import feedback_markdown
from autograder.reports.records import student_record
from autograder.results import CheckResult, FailureKind, RunResults, SubmissionResult, read_run
from autograder.text import csv_cell

REPORTS = Path("ci-results")  # beside the student's folders: what the workflows keep as artifacts
CLASSROOM50_SCHEMA = "classroom50/result/v1"
ANNOTATIONS = 10  # GitHub shows at most 10 error annotations of a step


def public_run(submission: Path) -> tuple[Lab, SubmissionResult]:
    """The public checks of ``submission`` (a lab's folder, its checks in ``tests/``) run once: the record."""
    import pytest  # the checks' runner: only where they run (a batch reads this module for its overrides' CSV)

    checks = submission / "tests"
    lab = Lab.load(checks.parent)
    with tempfile.TemporaryDirectory(prefix="autograder-ci-") as tmp:
        results = Path(tmp) / "results.json"
        code = pytest.main(checks_command_line(checks, submission, None, str(results)) + ["--tb=no", "-q"])
        ran = code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and results.is_file()
        run = read_run(results) if ran else RunResults(lab.name, [])
    error = None if ran else f"the checks could not run (pytest exit code {int(code)}); see the job's log"
    return lab, student_record(lab, "you", run, [], [], error, 0.0)


def junit_xml(lab: Lab, record: SubmissionResult) -> bytes:
    """One test case per check (class name: its part); a wrong value is a failure, any other way of
    failing (an exception, a time-out, a stub) an error."""
    suite = ET.Element("testsuite", name=lab.name, tests=str(len(record.checks)),
                       failures=str(sum(not c.passed and kind(c) == FailureKind.WRONG for c in record.checks)),
                       errors=str(sum(not c.passed and kind(c) != FailureKind.WRONG for c in record.checks)))
    for check in record.checks:
        case = ET.SubElement(suite, "testcase", classname=f"{lab.name}.{check.part}", name=check.name)
        if not check.passed:
            tag = "failure" if kind(check) == FailureKind.WRONG else "error"
            ET.SubElement(case, tag, message=check.message.split("\n")[0][:300], type=str(kind(check))).text = check.message
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def kind(check: CheckResult) -> str:
    return check.failure.kind if check.failure else FailureKind.WRONG


def github_annotations(record: SubmissionResult, folder: str) -> list[str]:
    """``::error`` workflow commands on the student's lines: each failed check whose failure names a file
    and line of theirs, once per line, at most :data:`ANNOTATIONS`."""
    def escaped(text: str, property_: bool = False) -> str:
        text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        return text.replace(":", "%3A").replace(",", "%2C") if property_ else text

    said, lines = set(), []
    for check in record.checks:
        failure = check.failure
        if check.passed or failure is None or not failure.file or not failure.line or (failure.file, failure.line) in said:
            continue
        said.add((failure.file, failure.line))
        lines.append(f"::error file={escaped(f'{folder}/{failure.file}', True)},line={failure.line},"
                     f"title={escaped(f'{check.part}: {check.name}', True)}::{escaped(check.message[:2000])}")
    return lines[:ANNOTATIONS]


def scale_of(record: SubmissionResult) -> int:
    """The smallest whole factor that makes every check's points whole (Classroom 50 counts integers)."""
    return math.lcm(1, *(Fraction(check.points).limit_denominator(100).denominator for check in record.checks))


def classroom50_result(lab: Lab, record: SubmissionResult, env: dict | None = None) -> dict:
    """``result.json`` in ``classroom50/result/v1``: every check a test of whole points (scaled by
    :func:`scale_of`); the runner stamps ``owner`` and ``assignment_type`` itself."""
    env = os.environ if env is None else env
    scale = scale_of(record)
    tests = [{"test-name": f"{check.part}: {check.name}".encode()[:100].decode("utf-8", "ignore"),
              "passed": check.passed, "score": round(check.points * scale) if check.passed else 0,
              "max-score": round(check.points * scale), "part": check.part} for check in record.checks]
    commit = env.get("COMMIT_URL", "")
    return {"schema": CLASSROOM50_SCHEMA, "classroom": env.get("CLASSROOM", ""), "assignment": env.get("ASSIGNMENT", lab.name),
            "submission": env.get("SUBMISSION_TAG") or "submit/local", "commit": commit,
            "release": env.get("RELEASE_URL", commit), "review": env.get("REVIEW_URL", commit),
            "datetime": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "score": sum(t["score"] for t in tests), "max-score": sum(t["max-score"] for t in tests), "tests": tests}


def classroom50_overrides_csv(lab: Lab, records: list[SubmissionResult]) -> str:
    """``username,score,max_score``, every check counted (hidden ones too), in Classroom 50's whole points
    (the scale of the public checks' result.json): what a teacher enters as overrides."""
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(["username", "score", "max_score"])
    for record in sorted(records, key=lambda r: r.student):
        scale = scale_of(record)
        writer.writerow([csv_cell(record.student), round(record.total * scale), round(record.max_total * scale)])
    return table.getvalue()


def release_body(lab: Lab, record: SubmissionResult, result: dict) -> str:
    """The Release text the student reads: the score as Classroom 50 counts it, then the feedback."""
    scale = scale_of(record)
    scaled = f" (every check's points times {scale}, so each is whole: {record.total:g}/{record.max_total:g})" \
        if scale > 1 else ""
    return f"**{lab.title}: {result['score']}/{result['max-score']}**{scaled}\n\n{feedback_markdown(lab, record)}"


def run(submission: Path, classroom50: bool = False) -> int:
    """Run the public checks once and write their results where the service in use shows them (see the module)."""
    lab, record = public_run(submission)
    markdown = feedback_markdown(lab, record)
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "junit.xml").write_bytes(junit_xml(lab, record))
    (REPORTS / "feedback.md").write_text(markdown, encoding="utf-8")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as page:
            page.write(markdown + "\n")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(record, submission.name):
            print(line, flush=True)
    print(f"{lab.name}: {record.total:g}/{record.max_total:g}; feedback in {REPORTS / 'feedback.md'}")
    if classroom50:
        result = classroom50_result(lab, record)
        Path("result.json").write_text(json.dumps(result, indent=1))
        Path("release-body.md").write_text(release_body(lab, record, result), encoding="utf-8")
        return 0  # graded: pass or fail is in result.json
    return 0 if record.total >= record.max_total else 1
