"""The result model (autograder/results.py) and every export rendered from it, on hand-built
results, and the limits (autograder/limits.py): nothing is graded here."""

import argparse
import csv
import io
import json
import re

import pytest

from autograder.platforms.gradescope import results_json
from autograder.reports.records import grades_csv, student_record
from autograder.results import (CheckResult, CohortRun, Diagnosis, Failure, FailureKind, PartResult, RunResults,
                                SubmissionResult, read_record, read_run, write_record, write_run)
from autograder.limits import DEFAULTS, Limits, add_options, from_options, markdown_table
from conftest import KIT, LAB

TRANSPOSED = Diagnosis("scores.transposed", "the keys transposed twice", "look at which dim is summed")
SECRET = "expected [[0.25, 0.75]] for the hidden input [[9.0, 1.0]]"


def checks() -> list[CheckResult]:
    """A run of every kind of result: passed, wrong with a diagnosis and a picture, hidden and
    wrong, timed out while loading, crashed, a part never reached."""
    picture = {"actual": [[1.0]], "expected": [[0.0]], "differ": [[1]], "slice": [], "rows": [0, 1], "cols": [0, 1],
               "shape": [1, 1], "mask": False}
    return [
        CheckResult("scores", "test_shape", 1.5, True, about="the shape", id="t::a"),
        CheckResult("scores", "test_values", 2.0, False, message="1 of 4 entries differ", about="the values",
                    failure=Failure(FailureKind.WRONG, relation="transposed", picture=picture),
                    diagnoses=(TRANSPOSED,), id="t::b"),
        CheckResult("scores", "test_hidden_values", 3.0, False, hidden=True, message=SECRET, about="other sizes",
                    failure=Failure(FailureKind.WRONG), diagnoses=(TRANSPOSED,), id="t::c"),
        CheckResult("softmax", "test_rows", 1.0, True, replayed=True, id="t::d"),
        CheckResult("softmax", "test_stable", 0.5, False, message="did not finish in 10 s",
                    failure=Failure(FailureKind.TIMEOUT, where="softmax.softmax", loading=("softmax.py",)), id="t::e"),
        CheckResult("projections", "test_qkv", 2.0, False, message="the process was killed",
                    failure=Failure(FailureKind.CRASHED, where="projections.project", signal="SIGSEGV"), id="t::f"),
    ]


def record() -> SubmissionResult:
    return student_record(LAB, "ann", RunResults(LAB.name, checks(), notes=["printed a lot"]), [],
                          ["README.md: not part of the assignment, not graded"], None, 1.23456)


def test_totals_are_the_sums_of_the_checks_and_a_part_never_run_keeps_its_weight():
    result = record()
    assert (result.parts["scores"].points, result.parts["scores"].max_points, result.parts["scores"].passed) == \
        (1.5, 6.5, 1)
    masking = result.parts["masking"]
    assert (masking.points, masking.max_points, masking.checks) == (0.0, LAB.part("masking").weight, [])
    assert result.total == 2.5
    assert result.max_total == round(6.5 + 1.5 + 2.0 + sum(LAB.part(p).weight for p in LAB.part_ids[3:]), 6)
    assert result.parts["scores"].misconceptions == [{"id": TRANSPOSED.id, "title": TRANSPOSED.title,
                                                      "hint": TRANSPOSED.hint, "checks": 2}]
    assert result.status == "timed out: loading softmax.py; crashed: projections.project (SIGSEGV)"
    assert result.public_status == result.status  # neither comes from a hidden check


def test_a_record_reads_back_as_it_was_written_and_never_holds_a_hidden_message(tmp_path):
    written = record()
    write_record(tmp_path, written)
    text = (tmp_path / "summary.json").read_text()
    assert "hidden input" not in text and '"message": "1 of 4 entries differ"' in text
    again = read_record(tmp_path)
    assert again.to_json() == written.to_json()
    assert [c.failure for c in again.checks] == [c.failure for c in written.checks]
    assert again.parts["scores"].checks[1].diagnoses == (TRANSPOSED,)
    assert read_record(tmp_path / "nowhere") is None


def test_a_run_reads_back_with_every_field(tmp_path):
    run = RunResults(LAB.name, checks(), {"enforced": ["a view"], "missing": []}, ["a note"],
                     [{"file": "scores.py", "line": 3, "what": "imports torch._C"}])
    write_run(tmp_path / "run.json", run, LAB)
    again = read_run(tmp_path / "run.json")
    assert again == run and again.replayed == 1
    assert json.loads((tmp_path / "run.json").read_text())["total"] == 2.5


def test_gradescope_gets_every_check_and_no_hidden_value():
    results = results_json(LAB, record())
    assert results["score"] == 2.5 and results["execution_time"] == 1.235
    tests = {t["name"]: t for t in results["tests"]}
    assert tests["scores: test_shape"] | {} == {
        "name": "scores: test_shape", "score": 1.5, "max_score": 1.5, "status": "passed", "visibility": "visible",
        "output": "", "output_format": "text"}
    hidden = tests["scores: test_hidden_values"]
    assert (hidden["score"], hidden["max_score"], hidden["visibility"], hidden["output"]) == \
        (0.0, 3.0, "after_published", "checks: other sizes")
    assert SECRET not in json.dumps(results)
    assert "hidden" not in results["output"].lower().split("public checks", 1)[0]  # the heading is the public one


def test_the_grades_table_has_a_row_per_record():
    rows = list(csv.DictReader(io.StringIO(grades_csv(LAB, [record()]))))
    assert [(r["student"], r["scores"], r["softmax"], r["total"], r["notes"]) for r in rows] == [
        ("ann", "1.5", "1", "2.5", "README.md: not part of the assignment, not graded; printed a lot")]


def test_a_student_who_handed_nothing_in_gets_zero_of_the_real_maximum():
    absent = student_record(LAB, "bo", None, [], [], None, 0.0, handed_in=False)
    assert (absent.total, absent.max_total, absent.status) == (0.0, LAB.max_points, "not handed in")
    assert PartResult("p", 4.0).max_points == 4.0


def test_a_cohorts_mean_counts_only_the_students_who_handed_in():
    absent = student_record(LAB, "bo", None, [], [], None, 0.0, handed_in=False)
    run = CohortRun(LAB.name, [record(), absent], graded=1, skipped=1)
    assert (run.students, run.mean) == (2, record().total)
    assert CohortRun(LAB.name, [absent], graded=1, skipped=0).mean == 0.0


def test_the_security_page_lists_the_limits_as_declared():
    page = (KIT / "docs" / "security.md").read_text()
    assert markdown_table() in page
    # The trust model names what is limited; the figures stand in the table alone, so they cannot drift.
    trust_model = page.split("\n## Trust model\n", 1)[1].split("\n## Limits\n", 1)[0]
    figures = set(re.findall(r"\| ([\d.,]+ (?:s|MiB|GiB|bytes)) \|", markdown_table()))
    restated = [f for f in figures if re.search(rf"(?<![\w.,]){re.escape(f)}(?!\w)", trust_model)]  # "2 s", not "12 s"
    assert figures and not restated, restated


def test_limits_travel_between_processes_as_generated_options():
    parser = argparse.ArgumentParser()
    add_options(parser.add_argument)
    assert from_options(parser.parse_args([])) == DEFAULTS
    chosen = Limits(call_timeout=1.5, module_budget=4.0)
    assert from_options(parser.parse_args(chosen.argv())) == chosen


CLASSROOM50_SCHEMA = json.loads((KIT / "tests" / "classroom50_result.schema.json").read_text())


def test_a_classroom50_result_holds_every_field_of_its_format_in_or_out_of_the_runner():
    """Whole points (every check's times the scale), names of at most 100 bytes and each once, and every field
    of classroom50/result/v1: from the runner's environment where it is set, else from GitHub's, else ``local``."""
    import jsonschema

    from autograder.platforms.ci import classroom50_result

    long = "test_" + "é" * 80  # 165 bytes: cut where a character ends
    run = RunResults(LAB.name, [*checks(), CheckResult("heads", long + "_a", 0.5, True, id="t::g"),
                                CheckResult("heads", long + "_b", 0.5, False, id="t::h")])
    rec = student_record(LAB, "ann", run, [], [], None, 0.0)
    runner = {"CLASSROOM": "ml101", "ASSIGNMENT": "attention", "SUBMISSION_TAG": "submit/2026-11-28T08-00-00Z-abc1234",
              "OWNER": "ann", "ASSIGNMENT_TYPE": "individual", "COMMIT_URL": "https://github.com/o/r/commit/abc1234",
              "RELEASE_URL": "https://github.com/o/r/releases/tag/submit%2Fx", "REVIEW_URL": "https://github.com/o/r/compare/a...b"}
    github = {"GITHUB_REPOSITORY": "o/ml101-attention-ann", "GITHUB_SHA": "abc1234", "GITHUB_REPOSITORY_OWNER": "o"}
    for env in (runner, github, {}):
        result = classroom50_result(LAB, rec, env, scale=2)
        jsonschema.validate(result, CLASSROOM50_SCHEMA)
        names = [t["test-name"] for t in result["tests"]]
        assert len(set(names)) == len(names) and all(len(n.encode()) <= 100 for n in names), names
        assert [t["max-score"] for t in result["tests"]] == [3, 4, 6, 2, 1, 4, 1, 1]
        assert (result["score"], result["max-score"]) == (3 + 2 + 1, 22)
    assert result["classroom"] == "local" and result["submission"] == "submit/local"
    assert classroom50_result(LAB, rec, runner)["review"] == runner["REVIEW_URL"]
    from_github = classroom50_result(LAB, rec, github)
    assert from_github["commit"] == "https://github.com/o/ml101-attention-ann/commit/abc1234"
    with pytest.raises(jsonschema.ValidationError):  # the schema does judge: no other top-level field
        jsonschema.validate({**result, "usernames": ["ann"]}, CLASSROOM50_SCHEMA)


def test_classroom50_scales_are_the_labs_own_and_the_public_checks_share_them():
    """Overrides (every check) and Releases (public checks) count in one scale, whoever handed in nothing."""
    from autograder.lab import all_labs
    from autograder.platforms.ci import classroom50_overrides_csv, declared_scale

    for lab in all_labs():
        assert declared_scale(lab.checks) == declared_scale(lab.release / "tests") == 2, lab.name
    nothing = student_record(LAB, "bo", None, [], [], None, 0.0, handed_in=False)
    rows = list(csv.reader(io.StringIO(classroom50_overrides_csv(LAB, [record(), nothing]))))
    assert rows[0] == ["username", "score", "max_score"] and rows[2] == ["bo", "0", str(round(LAB.max_points * 2))]


def test_a_classroom50_release_draws_pictures_as_text_and_fits_what_github_keeps():
    """GitHub renders a Release without data-URI images, and refuses a text over 125,000 characters."""
    from autograder.platforms.ci import RELEASE_BODY_LIMIT, classroom50_result, release_body

    rec = record()
    body = release_body(LAB, rec, classroom50_result(LAB, rec, {}, scale=2), 2)
    assert "data:image" not in body and "yours:\n      0\n  0  1*" in body and "expected:\n      0\n  0  0*" in body
    assert body.startswith(f"**{LAB.title}: ") and "| scores |" in body
    wordy = [CheckResult("heads", f"test_{i}", 0.5, False, message="x" * 2000, id=f"t::{i}") for i in range(100)]
    long = student_record(LAB, "ann", RunResults(LAB.name, wordy), [], [], None, 0.0)
    body = release_body(LAB, long, classroom50_result(LAB, long, {}, scale=2), 2)
    assert len(body) <= RELEASE_BODY_LIMIT and body.endswith("shows every failing check.**\n")
    assert body.count("```") % 2 == 0  # no block left open
