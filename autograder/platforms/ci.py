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
from urllib.parse import quote

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
    # The checks' runner and the judge (torch: 1.6 s): only where they run (a batch reads this module for
    # its overrides' CSV).
    import pytest

    from autograder.judge.plugin import checks_command_line, run_checks

    checks = submission / "tests"
    lab = Lab.load(checks.parent)
    with tempfile.TemporaryDirectory(prefix="autograder-ci-") as tmp:
        results = Path(tmp) / "results.json"
        code = run_checks(checks_command_line(checks, submission, None, str(results)) + ["--tb=no", "-q"])
        ran = code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and results.is_file()
        run = read_run(results) if ran else RunResults(lab.name, [])
    error = None if ran else f"the checks could not run (pytest exit code {int(code)}); see the job's log"
    return lab, student_record(lab, "you", run, [], [], error, 0.0)


def junit_xml(lab: Lab, record: SubmissionResult) -> bytes:
    """One test case per check (class name: its part); a wrong value is a failure, any other way of
    failing (an exception, a time-out, a stub) an error."""
    suite = ET.Element("testsuite", name=lab.name, tests=str(len(record.checks)),
                       failures=str(sum(not c.passed and kind(c).meaning.verdict for c in record.checks)),
                       errors=str(sum(not c.passed and not kind(c).meaning.verdict for c in record.checks)))
    for check in record.checks:
        case = ET.SubElement(suite, "testcase", classname=f"{lab.name}.{check.part}", name=check.name)
        if not check.passed:
            tag = "failure" if kind(check).meaning.verdict else "error"
            ET.SubElement(case, tag, message=check.message.split("\n")[0][:300], type=str(kind(check))).text = check.message
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def kind(check: CheckResult) -> FailureKind:
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


def scale_of(points) -> int:
    """The smallest whole factor that makes each of ``points`` whole (Classroom 50 counts integers)."""
    return math.lcm(1, *(Fraction(p).limit_denominator(100).denominator for p in points))


def declared_scale(checks: Path) -> int:
    """The scale of every check declared in ``checks/points.toml``: the same for every student, whatever
    ran (a student who handed in nothing has no check's result to read it from)."""
    import tomllib

    declared = tomllib.loads((checks / "points.toml").read_text(encoding="utf-8"))
    return scale_of(points for part in declared.values() if isinstance(part, dict) for points in part.values())


def result_test_names(record: SubmissionResult) -> list[str]:
    """Each check's name as Classroom 50 shows it: ``part: check``, no control character, at most 100 bytes
    of UTF-8, each name once (a name cut short that meets another gets a number)."""
    names, seen = [], set()
    for check in record.checks:
        name = "".join(c for c in f"{check.part}: {check.name}" if ord(c) >= 0x20 and ord(c) != 0x7F)
        cut, n = name.encode()[:100].decode("utf-8", "ignore"), 1
        while cut in seen:
            n += 1
            suffix = f" ({n})"
            cut = name.encode()[:100 - len(suffix)].decode("utf-8", "ignore") + suffix
        seen.add(cut)
        names.append(cut)
    return names


def classroom50_result(lab: Lab, record: SubmissionResult, env: dict | None = None, scale: int | None = None) -> dict:
    """``result.json`` in ``classroom50/result/v1``: every check a test of whole points (times ``scale``,
    by default :func:`scale_of` theirs). The fields come from the runner's environment where it sets them
    (it stamps ``owner``, ``assignment_type`` and ``datetime`` again itself); outside it, from the
    ``GITHUB_*`` variables, else ``local``, so the file always holds every field of the format."""
    env = os.environ if env is None else env
    scale = scale or scale_of(check.points for check in record.checks)
    tests = [{"test-name": name, "passed": check.passed, "score": round(check.points * scale) if check.passed else 0,
              "max-score": round(check.points * scale), "part": check.part}
             for name, check in zip(result_test_names(record), record.checks, strict=True)]
    repository = f"{env.get('GITHUB_SERVER_URL', 'https://github.com')}/{env['GITHUB_REPOSITORY']}" \
        if env.get("GITHUB_REPOSITORY") else None
    submission = env.get("SUBMISSION_TAG") or "submit/local"
    commit = env.get("COMMIT_URL") or (f"{repository}/commit/{env['GITHUB_SHA']}" if repository and env.get("GITHUB_SHA")
                                       else "local")
    release = env.get("RELEASE_URL") or (f"{repository}/releases/tag/{quote(submission, safe='')}" if repository
                                         else commit)
    owner = env.get("OWNER") or env.get("USERNAME") or env.get("GITHUB_REPOSITORY_OWNER") or "local"
    return {"schema": CLASSROOM50_SCHEMA, "classroom": env.get("CLASSROOM") or "local",
            "assignment": env.get("ASSIGNMENT") or lab.name,
            "assignment_type": env.get("ASSIGNMENT_TYPE") or "individual", "owner": owner,
            "submission": submission, "commit": commit, "release": release, "review": env.get("REVIEW_URL") or commit,
            "datetime": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "score": sum(t["score"] for t in tests), "max-score": sum(t["max-score"] for t in tests), "tests": tests}


def classroom50_overrides_csv(lab: Lab, records: list[SubmissionResult]) -> str:
    """``username,score,max_score``, every check counted (hidden ones too), in Classroom 50's whole points
    (the scale of the public checks' result.json): what a teacher enters as overrides."""
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(["username", "score", "max_score"])
    scale = declared_scale(lab.checks)
    for record in sorted(records, key=lambda r: r.student):
        writer.writerow([csv_cell(record.student), round(record.total * scale), round(record.max_total * scale)])
    return table.getvalue()


RELEASE_BODY_LIMIT = 125_000  # characters GitHub keeps of a Release's text (a longer one fails to publish)
TEXT_PICTURE = 8  # rows and columns of a picture drawn as text, around its first differing entry


def picture_text(picture: dict) -> str:
    """A failed comparison's picture as text (GitHub shows no image in a data URI): the student's values and the
    expected ones, at most :data:`TEXT_PICTURE` rows and columns around the first that differs, each differing
    entry marked ``*``; a fenced block, indented to sit in a list item."""
    differ = picture["differ"]
    first = next((r, c) for r, row in enumerate(differ) for c, bad in enumerate(row) if bad)

    def window(size: int, around: int) -> range:
        start = max(0, min(around - TEXT_PICTURE // 2, size - TEXT_PICTURE))
        return range(start, min(size, start + TEXT_PICTURE))

    rows, cols = window(len(differ), first[0]), window(len(differ[0]), first[1])

    def shown(value) -> str:
        value = float(value)
        return ("True" if value else "False") if picture["mask"] else f"{value:.4g}"

    cells = {panel: [[shown(picture[panel][r][c]) + ("*" if differ[r][c] else " ") for c in cols] for r in rows]
             for panel in ("actual", "expected")}
    width = max(len(cell) for grid in cells.values() for line in grid for cell in line)
    row0, col0 = picture["rows"][0], picture["cols"][0]
    where = ", ".join([*(str(i) for i in picture["slice"]), f"{row0 + rows.start}:{row0 + rows.stop}",
                       f"{col0 + cols.start}:{col0 + cols.stop}"])
    label = max(len(str(row0 + r)) for r in rows)
    lines = [f"[{where}] of a tensor of shape ({', '.join(map(str, picture['shape']))}); * marks an entry that differs"]
    for panel, title in (("actual", "yours"), ("expected", "expected")):
        lines += ["", title + ":", " " * label + "  " + " ".join(f"{col0 + c:>{width}}" for c in cols)]
        lines += [f"{row0 + r:>{label}}  " + " ".join(f"{cell:>{width}}" for cell in line) for r, line in zip(rows, cells[panel])]
    return "\n  ".join(["```text", *lines, "```"])


def release_body(lab: Lab, record: SubmissionResult, result: dict, scale: int) -> str:
    """The Release text the student reads: the score as Classroom 50 counts it (``scale`` times the lab's
    points), then the feedback page, its pictures as text; cut, and said so, where GitHub would refuse it."""
    scaled = f" (every check's points times {scale}, so each is whole: {record.total:g}/{record.max_total:g})" \
        if scale > 1 else ""
    body = f"**{lab.title}: {result['score']}/{result['max-score']}**{scaled}\n\n" \
           f"{feedback_markdown(lab, record, picture=picture_text)}"
    if len(body) <= RELEASE_BODY_LIMIT:
        return body
    cut = "\n\n**The feedback stops here: a Release holds 125,000 characters. `make check VERBOSE=1` on your machine " \
          "shows every failing check.**\n"
    kept = body[:RELEASE_BODY_LIMIT - len(cut)]
    return kept[:kept.rfind("\n- ")] + cut  # at a check's start: no fence left open


def run(submission: Path, classroom50: bool = False) -> int:
    """Run the public checks once and write their results where the service in use shows them (see the module)."""
    lab, record = public_run(submission)
    markdown = feedback_markdown(lab, record)
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "junit.xml").write_bytes(junit_xml(lab, record))
    (REPORTS / "feedback.md").write_text(markdown, encoding="utf-8")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and not classroom50:  # Classroom 50's runner puts release-body.md there itself
        with open(summary, "a", encoding="utf-8") as page:
            page.write(markdown + "\n")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(record, submission.name):
            print(line, flush=True)
    print(f"{lab.name}: {record.total:g}/{record.max_total:g}; feedback in {REPORTS / 'feedback.md'}")
    if classroom50:
        if not record.checks:  # no check ran: an error of the grading, not a score of 0 (nor a pass of 0/0)
            print(f"classroom50: {record.status}; no result.json written")
            return 2
        scale = declared_scale(submission / "tests")
        result = classroom50_result(lab, record, scale=scale)
        Path("result.json").write_text(json.dumps(result, indent=1))
        Path("release-body.md").write_text(release_body(lab, record, result, scale), encoding="utf-8")
        return 0  # graded: pass or fail is in result.json
    return 0 if record.total >= record.max_total else 1
