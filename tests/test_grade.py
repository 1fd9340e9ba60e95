"""`make grade`: reports, resumption, determinism, bad input; on the demo cohort and on broken uploads."""

import csv
import dataclasses
import importlib.metadata
import io
import json
import os
import platform
import shutil
import signal
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.batch import grade as batch
from autograder.batch import outputs, pool, provenance, staging
from autograder.batch.grade import grade
from autograder.batch.jobs import Failed, Graded
from autograder.batch.lane import Lane
from autograder.files import copy_modules, digest_files, folder_for_workers
from autograder.batch.verify import verify
from autograder.lab import Lab
from autograder.limits import DEFAULTS, amount
from autograder.harness.transport import WorkerDidNotStart
from autograder.harness.sandbox import views_of_their_own
from autograder.judge import plugin
from autograder.judge.misconceptions import Diagnoser, load_catalogue
from autograder.results import CheckResult, CohortRun, RunResults, write_run
from conftest import DEMO, KIT, LAB, LABS, PARTS, SOLUTIONS, grades_table, hang

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast

FULL_MARKS = {"ada", "ben", "chen"}


@pytest.fixture(scope="session")
def demo(course):
    return course[0] / LAB.name, course[1]  # the first lab's reports


# The second lab's demo students: 001's own encoder and decoder (chen), the unbiased variance (dara), the mask
# read as F.scaled_dot_product_attention reads it (eli), pre-norm (fay), a decoder that sees the future (gus),
# half the lab not started (hana); four students handed in no transformer/ folder.
TRANSFORMER_DEMO = {"ada": (100, set()), "ben": (100, set()),
                    "chen": (None, {"encoder.document_feed_forward", "decoder.document_cross_attention"}),
                    "dara": (None, {"layernorm.unbiased_variance"}), "eli": (None, {"attention.mask_polarity_flipped"}),
                    "fay": (None, {"encoder.pre_norm"}), "gus": (None, {"decoder.no_causal_mask"}), "hana": (30, set())}


def test_the_second_lab_is_graded_from_its_folder_with_the_same_code(course):
    out, run = course
    table = grades_table(out / "transformer")
    assert list(csv.reader(io.StringIO((out / "transformer" / "grades.csv").read_text())))[0] == \
        ["student", "layernorm", "feedforward", "attention", "encoder", "decoder", "total", "max_total", "status", "notes"]
    for student, row in table.items():
        total, mistakes = TRANSFORMER_DEMO.get(student, (0, set()))
        if total is not None:
            assert float(row["total"]) == total, row
        else:
            assert 0 < float(row["total"]) < 100, row
        summary = json.loads((out / "transformer" / "students" / student / "summary.json").read_text())
        assert {m["id"] for part in summary["parts"].values() for m in part["misconceptions"]} == mistakes, student
        if student not in TRANSFORMER_DEMO:
            assert (row["status"], summary["handed_in"], row["max_total"]) == ("not handed in", False, "100"), row
    course_table = grades_table(out)
    assert float(course_table["ada"]["total"]) == 200 and float(course_table["hana"]["transformer"]) == 30
    # Not handed in is a missing value in the course's table, not a 0; the total is of what was handed in.
    assert (course_table["ivan"]["transformer"], course_table["ivan"]["not handed in"]) == ("", "transformer")
    assert float(course_table["ivan"]["total"]) == float(course_table["ivan"]["attention"])
    assert course_table["ada"]["not handed in"] == ""


def test_the_demo_cohort_is_graded_and_the_summary_says_where_the_reports_are(demo):
    out, run = demo
    assert f"reports in {out}" in run.stdout
    for lab in LABS:  # each progress line names its lab
        assert f"{lab.name}: graded 1/" in run.stderr, run.stderr[-2000:]
    table = grades_table(out)
    assert sorted(table) == sorted(p.name for p in DEMO.iterdir())
    assert list(csv.reader(io.StringIO((out / "grades.csv").read_text())))[0] == \
        ["student", *PARTS, "total", "max_total", "status", "notes"]
    for student, row in table.items():
        assert (float(row["total"]) == 100) == (student in FULL_MARKS), row
        assert sum(float(row[p]) for p in PARTS) == pytest.approx(float(row["total"]))
    course = list(csv.DictReader(io.StringIO((out.parent / "grades.csv").read_text())))  # one total per lab
    assert {row["student"]: row[LAB.name] for row in course} == {s: row["total"] for s, row in table.items()}


def test_each_mistake_costs_points_in_its_own_part(demo):
    table = grades_table(demo[0])
    for student, part in (("eli", "softmax"), ("fay", "masking"), ("gus", "dropout"), ("hana", "heads"),
                          ("ivan", "softmax"), ("lea", "heads")):
        assert float(table[student][part]) < {"softmax": 15, "masking": 20, "dropout": 10, "heads": 25}[part], student
    assert float(table["june"]["total"]) == 0


def test_bad_uploads_are_graded_on_what_they_have_and_reported_in_status(demo):
    table = grades_table(demo[0])
    assert table["ada"]["status"] == "graded" and table["ada"]["notes"] == ""
    notes = table["kai"]["notes"]  # what staging left out or noticed costs nothing by itself ...
    for fragment in ("not UTF-8", "a link to another folder's file", "conftest.py", "not a valid notebook"):
        assert fragment in notes, notes
    assert table["kai"]["status"] == "missing: dropout.py, masking.py"  # ... a module that is not there does
    assert float(table["kai"]["scores"]) == 10
    assert table["ivan"]["status"].startswith("did not import: softmax.py line ")


def test_results_json_is_gradescope_and_hides_hidden_checks(demo):
    for folder in (demo[0] / "students" / "eli", demo[0] / "students" / "ada"):
        results = json.loads((folder / "results.json").read_text())
        assert set(results) >= {"score", "execution_time", "output", "tests"}
        assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))
        for test in results["tests"]:
            assert set(test) >= {"name", "score", "max_score", "status", "visibility"}
            if test["visibility"] == "after_published":  # what it checks, in one line; nothing in the top level
                assert test["output"].startswith("checks: ") and "\n" not in test["output"], test
                assert test["name"].split(": ", 1)[1] not in results["output"]
        assert "public checks" in results["output"].splitlines()[0]  # no total that hidden checks are part of
        assert any(t["visibility"] == "after_published" for t in results["tests"])


def test_feedback_names_failed_public_checks_and_hidden_ones_by_name_only(demo):
    feedback = (demo[0] / "students" / "eli" / "feedback.md").read_text()
    assert "## softmax:" in feedback and "test_softmax_is_numerically_stable" in feedback
    assert "hidden checks:" in feedback
    source = (KIT / "source" / "attention" / "tests" / "test_softmax.py").read_text()
    hidden_code = source[source.index("### BEGIN HIDDEN TESTS"):]
    assert "random_tensor(" in hidden_code and "random_tensor(" not in feedback
    assert (demo[0] / "students" / "eli" / "feedback.html").read_text().startswith("<!doctype html>")


def test_class_report_opens_without_a_server(demo):
    report = (demo[0] / "report.html").read_text()
    assert "<svg" in report and "Most failed" in report and "http" not in report.split("<svg")[0].lower()
    assert 'href="students/eli/feedback.html"' in report  # every student's feedback, one click away


# The demo students wrote these mistakes by hand, not as edits of the reference: the diagnosis
# matches what their code computes, not how it is written.
HAND_WRITTEN_MISTAKES = {"eli": "softmax.no_max_shift", "fay": "masking.tril_mask", "gus": "dropout.no_rescaling",
                         "hana": "heads.view_without_transpose", "lea": "softmax.no_exponential"}


def test_feedback_and_class_report_name_the_known_mistakes(demo):
    out = demo[0]
    for student in sorted(p.name for p in DEMO.iterdir()):
        summary = json.loads((out / "students" / student / "summary.json").read_text())
        found = {m["id"] for row in summary["parts"].values() for m in row["misconceptions"]}
        expected = {HAND_WRITTEN_MISTAKES[student]} if student in HAND_WRITTEN_MISTAKES else set()
        assert found == expected, student
    feedback = (out / "students" / "fay" / "feedback.md").read_text()
    masking = feedback[feedback.index("## masking"):]
    masking = masking[:masking.index("\n## ")]
    assert masking.count("Known mistake: `tril` instead of `triu`") == 1 and "True in the mask means" in masking
    said = int(masking.split("(matches ")[1].split()[0])
    assert said == masking.count("\n- ✗ ") > 0  # as many failed checks as it says, each listed once
    assert masking.index("Known mistake") < masking.index("- ✗ ")  # the diagnosis first, then the checks
    report = (out / "report.html").read_text()
    common = report[report.index("Known mistakes"):]
    assert all(mistake in common for mistake in HAND_WRITTEN_MISTAKES.values())
    assert "fay" in common[common.index("masking.tril_mask") - 400:common.index("masking.tril_mask") + 200]


def reference_cohort(folder, students=("amy", "bo")):
    for student in students:
        shutil.copytree(SOLUTIONS, folder / student / "attention", ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    return folder


def test_a_re_run_grades_again_exactly_what_changed_and_says_why(tmp_path):
    cohort, out = reference_cohort(tmp_path / "cohort"), tmp_path / "out"
    first = grade(LAB, cohort, out, jobs=1, stream=io.StringIO())  # what is graded, not how: one lane
    assert first.graded == 2
    again = grade(LAB, cohort, out, jobs=1, stream=io.StringIO())
    assert (again.graded, again.skipped, again.again) == (0, 2, "")
    softmax = cohort / "bo" / "attention" / "softmax.py"
    softmax.write_text(softmax.read_text() + "# one more line\n")
    changed = grade(LAB, cohort, out, jobs=1, stream=io.StringIO())
    assert (changed.graded, changed.skipped, changed.again) == (1, 1, "")  # a changed submission is no news
    # Each input of a grade in turn: both students are staged again, and the line names what changed.
    now = provenance.run_provenance(LAB, DEFAULTS, True)
    assert json.loads((outputs.student_folder(out, "amy") / outputs.FINGERPRINT).read_text()) == \
        {**now, "submission": json.loads((outputs.student_folder(out, "amy") / "summary.json").read_text())[
            "provenance"]["submission"]}
    for field in ("kit", "lab", "settings", "python", "torch", "packages", "machine"):
        staged, _, why = staging.stage_cohort(LAB, staging.discover(LAB, cohort), folder_for_workers(tmp_path), out,
                                            False, {**now, field: "another"})
        assert ([s.student for s, *_ in staged], why) == (["amy", "bo"], {"amy": [field], "bo": [field]})
        assert provenance.why_again("attention", why) == \
            f"attention: {provenance.CHANGED[field]} changed since these grades: grading 2 again"
    # What the provenance is made of follows what it names.
    assert provenance.run_provenance(LAB, dataclasses.replace(DEFAULTS, call_timeout=3.0), True)["settings"] != \
        now["settings"] != provenance.run_provenance(LAB, DEFAULTS, False)["settings"]
    assert (now["torch"], now["python"], now["machine"]) == (importlib.metadata.version("torch"),
                                                             platform.python_version(), platform.machine())
    replayed_or_not = {**now, "replay": False}  # recorded, not a reason to grade again
    staged, *_ = staging.stage_cohort(LAB, staging.discover(LAB, cohort), folder_for_workers(tmp_path), out, False,
                                    replayed_or_not)
    assert staged == [] and provenance.run_provenance(LAB, DEFAULTS, True, replay=False)["replay"] is False
    kit = shutil.copytree(KIT / "autograder", tmp_path / "kit", ignore=shutil.ignore_patterns("__pycache__"))
    digest = digest_files(kit)
    (kit / ".ipynb_checkpoints").mkdir()  # what an editor or JupyterLab leaves beside the code changes nothing
    for leftover in (".ipynb_checkpoints/text-checkpoint.py", "text.py~", ".text.py.swp", "text.py.orig"):
        (kit / leftover).write_text("x = 1\n")
    assert digest == digest_files(kit)
    (kit / "text.py").write_text((kit / "text.py").read_text() + "\n")
    assert digest == digest_files(KIT / "autograder") != digest_files(kit)
    # A fingerprint that cannot be read is said so, not blamed on the kit.
    stamp = outputs.student_folder(out, "amy") / outputs.FINGERPRINT
    kept = stamp.read_text()
    stamp.write_text("{damaged")
    _, _, why = staging.stage_cohort(LAB, staging.discover(LAB, cohort), folder_for_workers(tmp_path), out, False, now)
    assert provenance.why_again("attention", why) == ("attention: the record of what produced them (a .fingerprint "
                                                      "missing or unreadable) changed since these grades: grading 1 again")
    stamp.write_text(kept)
    # A real run under other limits grades both again and says so; a record of another format is graded again.
    stream = io.StringIO()
    limits = grade(LAB, cohort, out, jobs=1, stream=stream, limits=dataclasses.replace(DEFAULTS, call_timeout=9.0))
    assert limits.graded == 2 and stream.getvalue().startswith(
        "attention: the limits or options changed since these grades: grading 2 again\n"), stream.getvalue()
    record = outputs.student_folder(out, "bo") / "summary.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "format": 1}))
    older = grade(LAB, cohort, out, jobs=1, stream=io.StringIO(), limits=dataclasses.replace(DEFAULTS, call_timeout=9.0))
    assert (older.graded, older.again) == (1, "attention: the reports' format changed since these grades: grading 1 again")
    # --force: everyone is staged to be graded again, whatever the reports say (what is staged is graded: above).
    forced, *_ = staging.stage_cohort(LAB, staging.discover(LAB, cohort), folder_for_workers(tmp_path), out, True, now)
    assert [submission.student for submission, *_ in forced] == ["amy", "bo"]


def test_an_output_folder_holds_one_cohorts_reports_and_nothing_else(tmp_path):
    out = tmp_path / "out"
    (out / "transformer" / "students" / "zoe").mkdir(parents=True)  # another cohort's lab, this cohort has none of
    (out / "transformer" / "report.html").write_text("another cohort")
    said = io.StringIO()
    batch.grade_course(LABS, reference_cohort(tmp_path / "term1"), out, jobs=1, stream=said)
    assert sorted(p.name for p in out.iterdir()) == [".autograder-output", ".removed", "attention", "grades.csv"]
    assert f"transformer: not handed in by this cohort: the reports of another cohort moved to {out}/.removed/" \
        "transformer\n" in said.getvalue()
    [run] = batch.grade_course(LABS, reference_cohort(tmp_path / "term2", ("amy",)), out, jobs=1, stream=io.StringIO())
    assert run.removed == ["bo"] and [p.name for p in (out / "attention" / "students").iterdir()] == ["amy"]
    assert (out / ".removed" / "attention" / "bo" / "summary.json").is_file()  # inside OUT (a container mounts it alone)
    assert (out / ".removed" / "transformer" / "report.html").read_text() == "another cohort"
    assert "the reports of 1 student no longer in the submissions (bo)" in (out / "attention" / "report.html").read_text()
    # A folder that holds anything else is refused, not written.
    foreign = tmp_path / "thesis"
    foreign.mkdir()
    (foreign / "chapter1.tex").write_text("mine")
    with pytest.raises(outputs.ForeignOutput, match="holds files the kit did not write \\(chapter1.tex\\)"):
        batch.grade_course(LABS, tmp_path / "term2", foreign, jobs=1, stream=io.StringIO())
    assert [p.name for p in foreign.iterdir()] == ["chapter1.tex"]
    # A folder of labs that is not the kit's outputs (the kit's own source/), an instructor's own grades.csv.
    with pytest.raises(outputs.ForeignOutput, match="attention/lab.toml"):
        outputs.claim_output(KIT / "source", LABS)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "grades.csv").write_text("name,final grade from the registrar\n")
    with pytest.raises(outputs.ForeignOutput, match="not the course's table"):
        batch.grade_course(LABS, tmp_path / "term2", mine, jobs=1, stream=io.StringIO())


def lab_with_checks(tmp_path, monkeypatch, edit):
    """The kit sees LAB's checks copied and ``test_scores.py`` edited (``edit(text)``); the real property."""
    checks = shutil.copytree(LAB.source, tmp_path / LAB.name, ignore=shutil.ignore_patterns("__pycache__")) / "tests"
    (checks / "test_scores.py").write_text(edit((checks / "test_scores.py").read_text()))
    real = Lab.checks
    monkeypatch.setattr(Lab, "checks", property(lambda lab: checks if lab.name == LAB.name else real.fget(lab)))
    return real


@pytest.mark.skipif(os.getuid() != 0, reason="workers under user ids of their own need root")
def test_a_grader_whose_umask_hides_its_files_grades_as_any_other(tmp_path):
    """As root on a hardened server (umask 077, files the grader makes are its own alone): the workers,
    under user ids of their own, still read the staged copies and their own view; the reports stay private."""
    cohort = reference_cohort(tmp_path / "cohort", students=("amy",))
    for path in [cohort, *cohort.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    hardened = lambda: os.umask(0o077)  # noqa: E731 - the grader's shell
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", "--lab", LAB.name, "--submissions", str(cohort),
                          "--out", str(tmp_path / "out")], cwd=KIT, capture_output=True, text=True, timeout=600,
                         preexec_fn=hardened)
    assert run.returncode == 0, run.stderr[-3000:]
    assert float(grades_table(tmp_path / "out" / LAB.name)["amy"]["total"]) == 100
    assert (tmp_path / "out" / LAB.name / "grades.csv").stat().st_mode & 0o077 == 0
    checked = subprocess.run([sys.executable, "-m", "autograder", "check", "--submission", str(SOLUTIONS), "--part",
                              "scores"], cwd=KIT, capture_output=True, text=True, timeout=600, preexec_fn=hardened)
    assert checked.returncode == 0, checked.stdout[-3000:]
    # An instructor checks one such upload: its files are the grader's alone, so the workers get a copy of their own
    # (they read "scores.py is missing" in the folder itself), removed after.
    upload, scratch = cohort / "amy" / LAB.name, tmp_path / "tmp"
    scratch.mkdir()
    checked = subprocess.run([sys.executable, "-m", "autograder", "check", "--lab", LAB.name, "--submission", str(upload),
                              "--part", "scores"], cwd=KIT, capture_output=True, text=True, timeout=600,
                             preexec_fn=hardened, env={**os.environ, "TMPDIR": str(scratch)})
    assert checked.returncode == 0 and "Every check passed" in checked.stdout, checked.stdout[-3000:]
    assert [path.name for path in scratch.iterdir() if path.is_dir()] == []  # the user ids' lock files stay
    # An upload that is itself a link is not followed as root (whoever owns the folder above could aim it anywhere).
    (tmp_path / "linked").symlink_to(SOLUTIONS)
    linked = subprocess.run([sys.executable, "-m", "autograder", "check", "--lab", LAB.name, "--submission",
                             str(tmp_path / "linked"), "--part", "scores"], cwd=KIT, capture_output=True, text=True,
                            timeout=600)
    assert linked.returncode != 0 and f"note: {LAB.name}/ is a link" in linked.stderr, linked.stderr[-3000:]


def test_copies_made_for_workers_are_theirs_to_read_whatever_the_source_allows(tmp_path):
    source = tmp_path / "reference"
    source.mkdir(mode=0o700)
    (source / "scores.py").write_text("x = 1\n")
    (source / "scores.py").chmod(0o600)
    copied = copy_modules(source, tmp_path / "mutant")
    assert (copied.stat().st_mode & 0o777, (copied / "scores.py").stat().st_mode & 0o777) == (0o755, 0o644)


def test_the_reference_solution_proves_the_environment_before_a_cohort_is_graded(tmp_path, monkeypatch):
    """A check whose expected values this environment gets otherwise (simulated: one doubled) fails the
    reference first: nothing is graded, and the message names the check and the packages found."""
    real = lab_with_checks(tmp_path, monkeypatch, lambda text: text.replace(
        "expect_document(scores, QUERY2_SCORES,", "expect_document(scores, 2 * QUERY2_SCORES,"))
    monkeypatch.setattr(batch, "unpinned", lambda: ["torch 2.11.0 (pinned 2.13.0)"])
    cohort, out = reference_cohort(tmp_path / "cohort", ("amy",)), tmp_path / "out"
    with pytest.raises(batch.EnvironmentUnproven) as refused:
        grade(LAB, cohort, out, jobs=1, stream=io.StringIO())
    said = str(refused.value)
    assert said.startswith("attention: the reference solution gets 98.5/100 here, failing test_query_scores_match_document "
                           "(scores: "), said
    assert "every student graded here would lose the same points. Found torch 2.11.0 (pinned 2.13.0)" in said, said
    assert not (out / "students").exists() and not (out / outputs.REFERENCE_PROOF).exists()
    # In the right environment the proof is kept, and not made again under the same provenance.
    monkeypatch.setattr(Lab, "checks", real)
    grade(LAB, cohort, out, jobs=1, stream=io.StringIO())
    proof = (out / outputs.REFERENCE_PROOF).stat().st_mtime_ns
    grade(LAB, cohort, out, jobs=1, stream=io.StringIO(), force=True)
    assert (out / outputs.REFERENCE_PROOF).stat().st_mtime_ns == proof


def test_a_check_that_does_not_run_here_refuses_the_run_as_one_that_fails(tmp_path, monkeypatch):
    """Full marks of the checks that ran are not the lab's when one did not run (simulated: not collected)."""
    lab_with_checks(tmp_path, monkeypatch, lambda text: text.replace(
        "def test_query_scores_match_document(", "def not_collected_query_scores_match_document("))
    with pytest.raises(batch.EnvironmentUnproven, match=re.escape(
            "attention: the reference solution's run held checks worth 98.5 of the lab's 100 points: some checks did not "
            "run here")):
        grade(LAB, reference_cohort(tmp_path / "cohort", ("amy",)), tmp_path / "out", jobs=1, stream=io.StringIO())


def test_staged_copies_are_found_by_their_workers_alone(tmp_path):
    """The staging root is passed through, not listed, and each copy (the reference's too) lies in a folder of a
    random name: another local user finds none of them (they were staging/0, staging/1, ..., staging/reference)."""
    cohort = reference_cohort(tmp_path / "cohort", ("amy", "bo"))
    root = folder_for_workers(tmp_path, prefix="staging-")
    _, staged, _ = staging.stage_cohort(LAB, staging.discover(LAB, cohort), root, tmp_path / "out", False, {})
    assert root.stat().st_mode & 0o777 == 0o711
    for folder in staged.values():
        assert folder.parent.parent == root and folder.parent.name not in ("0", "1") and len(folder.parent.name) >= 8
        assert (folder.parent.stat().st_mode & 0o777, folder.stat().st_mode & 0o777) == (0o711, 0o755)


@pytest.mark.skipif(not views_of_their_own(DEFAULTS), reason="workers here reach their copies by their paths")
def test_where_workers_have_views_of_their_own_nobody_passes_through_to_their_copies(tmp_path, monkeypatch):
    """The random names show in /proc/<worker>/mountinfo, which any local user reads: where each worker sees its
    copy through a view of its own, the staging root and the mutants' root are closed (0700), and grading works."""
    modes, made = [], batch.folder_for_workers

    def recorded(*where, **how):
        folder = made(*where, **how)
        modes.append(folder.stat().st_mode & 0o777)
        return folder
    monkeypatch.setattr(batch, "folder_for_workers", recorded)
    graded = grade(LAB, reference_cohort(tmp_path / "cohort", ("amy",)), tmp_path / "out", jobs=1, stream=io.StringIO())
    assert graded.records[0].total == 100 and modes[0] == 0o700  # the staging root, made first
    diagnoser = Diagnoser(load_catalogue(LAB.checks), SOLUTIONS, confined=True)
    try:
        diagnoser.runner("reference")
        assert diagnoser.folder.stat().st_mode & 0o777 == 0o700
    finally:
        diagnoser.close()


def test_a_reference_whose_workers_did_not_start_is_refused_saying_why(tmp_path, monkeypatch):
    """A worker that could not start (a local user took torch's cache folder, say) fails every check on the
    grader's side: the refusal says why once, in the kit's words carried as data (never a check's own text),
    and blames this machine, not the checks."""
    why = ("a worker did not start (OSError: the zygote did not start the worker: the first use of torch.optim "
           "failed in the grader (FileExistsError: [Errno 17] File exists: '/tmp/torchinductor_root'))")
    did_not_start = plugin.failure_of(WorkerDidNotStart(why), "WorkerDidNotStart", hidden=False)
    assert plugin.failure_of(KeyError("a check's value"), "KeyError", hidden=False).cause == ""

    class NoWorkerStarts:
        def grade(self, staged, raw):
            write_run(raw, RunResults(LAB.name, [CheckResult(part.id, f"test_{part.id}", 1.0, False, message="(a student's words)",
                                                             failure=did_not_start) for part in LAB.parts]), LAB)
            return Graded(str(raw))

    monkeypatch.setattr(batch, "unpinned", lambda: [])
    with pytest.raises(batch.EnvironmentUnproven) as refused:
        batch.prove_environment(LAB, tmp_path / "out", {"kit": "k"}, NoWorkerStarts(),
                                batch.stage_reference(LAB, folder_for_workers(tmp_path), DEFAULTS))
    said, first = str(refused.value), LAB.parts[0].id
    assert f"failing test_{first} ({first}: a worker of the grader's did not start), " in said, said
    assert said.count(why) == 1 and "(a student's words)" not in said, said
    assert said.endswith("Every package is the pinned version: this machine or the limits are at fault."), said


def test_a_later_lab_refused_says_which_labs_were_graded(tmp_path, monkeypatch):
    """The transformer's proof fails after the attention lab was graded: the refusal carries what was
    graded (the command says "graded attention ..., not the rest", not "nothing graded")."""
    cohort = reference_cohort(tmp_path / "cohort", ("amy",))
    shutil.copytree(SOLUTIONS.parent / "transformer", cohort / "amy" / "transformer",
                    ignore=shutil.ignore_patterns("tests", "*.ipynb"))

    def grade_or_refuse(lab, *arguments, **options):
        if lab.name == "transformer":
            raise batch.EnvironmentUnproven("transformer: the reference solution gets 90/100 here")
        return CohortRun(lab.name, [], graded=0, skipped=0)

    monkeypatch.setattr(batch, "grade", grade_or_refuse)
    with pytest.raises(batch.EnvironmentUnproven) as refused:
        batch.grade_course(LABS, cohort, tmp_path / "out", jobs=1, stream=io.StringIO())
    assert refused.value.graded == ("attention",)


# A check that passes and fails in turn (judge-side state: each run's fresh lanes evaluate it once more).
FLAKY = """
import os, pathlib


def test_query_scores_match_document(student):
    state = pathlib.Path(os.environ["FLAKY_CHECK_STATE"])
    runs = int(state.read_text()) if state.exists() else 0
    state.write_text(str(runs + 1))
    assert runs % 2 == 0, "a flaky check"


def _replaced_by_the_flaky_one(student):"""


def test_a_grade_is_verified_later_and_a_flaky_check_is_named_unstable(tmp_path, monkeypatch):
    cohort, out = reference_cohort(tmp_path / "cohort", ("amy", "bo")), tmp_path / "out"
    grade(LAB, cohort, out, jobs=1, stream=io.StringIO())
    same = verify(LAB, cohort, out)
    assert same.identical and [v.line("attention") for v in same.verdicts] == [
        "attention: amy: identical (100/100)", "attention: bo: identical (100/100)"]
    # A submission changed since: what differs, and that the submission did.
    softmax = cohort / "bo" / "attention" / "softmax.py"
    softmax.write_text(softmax.read_text().replace("dim=dim", "dim=0", 1))
    changed = verify(LAB, cohort, out, students=["bo"])
    [line] = [v.line("attention") for v in changed.verdicts]
    assert line.startswith("attention: bo: differs (recorded 100, now ") and "passed -> failed" in line, line
    assert line.endswith("since it was recorded: the submission changed"), line
    # A flaky check (it passes and fails in turn): REPEAT=3 names it, and nothing else.
    monkeypatch.setenv("FLAKY_CHECK_STATE", str(tmp_path / "flaky"))
    lab_with_checks(tmp_path, monkeypatch, lambda text: text.replace("\n\ndef test_query_scores_match_document(student):",
                                                                     FLAKY, 1))
    repeated = grade(LAB, reference_cohort(tmp_path / "again"), tmp_path / "flaky-out", jobs=1, stream=io.StringIO(),
                     repeat=3)
    assert list(repeated.unstable) == ["scores: test_query_scores_match_document"], repeated.unstable
    report = (tmp_path / "flaky-out" / "report.html").read_text()
    assert "Unstable checks" in report and "scores: test_query_scores_match_document</code>: amy" in report


def test_a_count_of_runs_below_one_and_verifying_nothing_are_refused(tmp_path):
    """--repeat 0 would grade nothing and --jobs 0 hang; verify on a folder with no grades has nothing to
    prove: each is one line and exit status 2, not a silent success."""
    for arguments in (["grade", "--repeat", "0"], ["grade", "--jobs", "-1"], ["verify", "--repeat", "x"]):
        run = subprocess.run([sys.executable, "-m", "autograder", *arguments, "--out", str(tmp_path / "out")], cwd=KIT,
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and "is not a whole number of 1 or more" in run.stderr, run.stderr
    run = subprocess.run([sys.executable, "-m", "autograder", "verify", "--out", str(tmp_path / "empty")], cwd=KIT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "nothing to verify" in run.stderr, run.stderr


def test_verify_refuses_a_linked_folder_as_grading_does_and_reads_prefixed_folders(tmp_path):
    """cy's attention/ is a link to the solutions: grading refuses it, and verifying must too (a copy of its
    target would be graded 100 and called a difference); folders named as Classroom 50 clones them. Verifying stages
    the cohort's folders as grading does (it copied them whole: a FIFO stopped it, a sparse file filled the disk)."""
    cohort, out = tmp_path / "download", tmp_path / "out"
    reference_cohort(cohort, ("ml-attention-amy",))
    os.mkfifo(cohort / "ml-attention-amy" / "attention" / "pipe")
    with open(cohort / "ml-attention-amy" / "attention" / "big.bin", "wb") as sparse:
        sparse.truncate(2 * 1024**3)
    (cohort / "ml-attention-cy").mkdir()
    (cohort / "ml-attention-cy" / "attention").symlink_to(SOLUTIONS)
    grade(LAB, cohort, out, jobs=1, stream=io.StringIO(), strip_prefix="ml-attention-")
    checked = verify(LAB, cohort, out, strip_prefix="ml-attention-")
    assert [v.line("attention") for v in checked.verdicts] == ["attention: amy: identical (100/100)",
                                                               "attention: cy: identical (0/100)"]


def test_debug_keeps_each_lanes_log_bounded_and_a_dead_lane_says_where_to_look(tmp_path):
    """make grade DEBUG=1: each lane's log holds every job's pytest output and timing (the reference's
    proof first), cut at Limits.lane_log_bytes; without it, a lane that dies says how to keep one."""
    cohort, out, said = reference_cohort(tmp_path / "cohort"), tmp_path / "out", io.StringIO()
    grade(LAB, cohort, out, jobs=1, stream=said, debug=True)
    log = (out / outputs.DEBUG_FOLDER / "lane-1.log").read_text()
    assert f"attention: each lane's log goes to {out / outputs.DEBUG_FOLDER}/" in said.getvalue()
    assert len(re.findall(r"^== .*: pytest exit code 0 after [0-9.]+ s$", log, re.MULTILINE)) == 3, log[:2000]
    assert "Every check passed: 100 / 100." in log  # what pytest said
    grade(LAB, cohort, out, jobs=1, stream=io.StringIO(), debug=True, force=True,
          limits=dataclasses.replace(DEFAULTS, lane_log_bytes=1500))  # a job's output is about 900 bytes
    cut = (out / outputs.DEBUG_FOLDER / "lane-1.log").read_text()
    assert len(cut.encode()) <= 1500 and cut.endswith(f"[the log is cut here: over {amount(1500, 'bytes')}]\n")
    lane = Lane(LAB, DEFAULTS)
    staged = staging_copy(cohort / "amy" / "attention", tmp_path / "staged")
    lane.start()
    send = lane.proc.stdin.flush
    def send_then_kill():  # the lane dies holding the job, however fast it would have graded it
        send()
        lane.proc.kill()
    lane.proc.stdin.flush = send_then_kill
    answer = lane.grade(staged, tmp_path / "raw.json")
    lane.close()
    assert answer == Failed("the grading process stopped (make grade DEBUG=1 keeps each lane's log)")


@given(lines=st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=300).map(lambda text: text + "\n")),
       bound=st.integers(60, 2000), before=st.integers(0, 2000))
def test_a_lanes_log_never_outgrows_its_bound_and_says_where_it_was_cut(tmp_path_factory, lines, bound, before):
    """Whatever a lane writes, and however much its earlier starts wrote (``before``): the log's bytes stay
    within ``lane_log_bytes``, and it is what the lane said, whole lines, up to the line that says it was cut."""
    lane = Lane(LAB, dataclasses.replace(DEFAULTS, lane_log_bytes=bound), log=tmp_path_factory.mktemp("log") / "lane.log")
    lane.log.write_text("x" * (before - 1) + "\n" if before else "")
    lane.logged = before
    lane.keep_log(iter(lines))
    written = lane.log.read_bytes()[before:].decode()
    cut = f"[the log is cut here: over {amount(bound, 'bytes')}]\n"
    assert len(lane.log.read_bytes()) <= max(before, bound)
    kept = written.removesuffix(cut)
    assert "".join(lines).startswith(kept) and (kept == "".join(lines) or written.endswith(cut) or before > bound - len(cut))


def staging_copy(folder, target):
    shutil.copytree(folder, target / "attention")
    return target / "attention"


def test_classroom50_clones_are_graded_with_every_check_into_scores_to_enter(tmp_path):
    """The folder `gh teacher download` writes: one clone of each student's repository, named
    <classroom>-<assignment>-<username>, the lab's folder inside (the student bundle's layout), its
    result.json and results.json beside it, and scores.csv at the top."""
    download = tmp_path / "download"
    for username in ("ada", "bo", "cy"):
        clone = download / f"ml101-attention-{username}"
        (clone / ".git").mkdir(parents=True)
        (clone / "README.md").write_text("the bundle's other files")
        (clone / "result.json").write_text("{}")
        (clone / "results.json").write_text("[]")
        if username != "cy":  # cy accepted the assignment and pushed nothing of the lab
            shutil.copytree(SOLUTIONS, clone / "attention", ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    (download / "scores.csv").write_text("username,first_name,last_name,email,section,score,max_score\n")
    softmax = download / "ml101-attention-bo" / "attention" / "softmax.py"
    softmax.write_text(softmax.read_text().replace("dim=dim", "dim=0", 1))
    out = tmp_path / "out"
    [run] = batch.grade_course(LABS, download, out, jobs=1, stream=io.StringIO(), strip_prefix="ml101-attention-")
    assert sorted(r.student for r in run.records) == ["ada", "bo", "cy"]
    assert any(c.hidden for c in run.records[0].checks)  # every check, hidden ones too
    assert (out / "attention" / "students" / "bo" / "feedback.html").is_file()  # the usual reports
    rows = list(csv.DictReader((out / "attention" / "classroom50-overrides.csv").open()))
    assert [(r["username"], r["max_score"]) for r in rows] == [("ada", "200"), ("bo", "200"), ("cy", "200")]  # times 2
    assert rows[0]["score"] == "200" and 0 < int(rows[1]["score"]) < 200 and rows[2]["score"] == "0"


def test_progress_says_how_long_the_rest_should_take():
    stream = io.StringIO()
    progress = pool.Progress("attention", 3, stream)
    progress.started -= 6  # two students took 6 s
    progress.step("amy", "graded")
    progress.step("bo", "graded")
    progress.step("cy", "graded")
    lines = stream.getvalue().splitlines()
    assert lines[1] == "attention: graded 2/3, about 3 s left: bo: graded" and lines[2] == "attention: graded 3/3: cy: graded"


def test_scores_do_not_depend_on_jobs_order_or_the_graders_pytest_settings(tmp_path, demo, monkeypatch):
    """One lane in another order, in a shell whose pytest settings stop at the first failing check and load
    a plugin that is not there: the demo run's scores."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x")
    monkeypatch.setenv("PYTEST_PLUGINS", "a_plugin_of_the_graders_own_projects")
    subset = tmp_path / "subset"
    for student in ("lea", "eli", "dara"):
        shutil.copytree(DEMO / student, subset / student, symlinks=True)
    grade(LAB, subset, tmp_path / "serial", jobs=1, stream=io.StringIO())
    for student in ("lea", "eli", "dara"):
        mine = json.loads((tmp_path / "serial" / "students" / student / "results.json").read_text())
        theirs = json.loads((demo[0] / "students" / student / "results.json").read_text())
        assert [(t["name"], t["score"]) for t in mine["tests"]] == [(t["name"], t["score"]) for t in theirs["tests"]]


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path):
    cohort = tmp_path / "cohort"
    for i in range(6):
        shutil.copytree(SOLUTIONS, cohort / f"s{i}" / "attention", ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    out = tmp_path / "out"
    run = subprocess.Popen([sys.executable, "-m", "autograder", "grade", "--submissions", str(cohort), "--out", str(out),
                            "--jobs", "1"], cwd=KIT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    deadline = time.monotonic() + 300
    # A student is finished when its fingerprint is written (last, after every report): wait for that,
    # not for results.json, or the kill can land between the two and no student counts as finished.
    while not list(out.glob(f"{LAB.name}/students/*/.fingerprint")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    out = out / LAB.name  # the lab's reports
    finished = {p.parent.name for p in out.glob("students/*/.fingerprint")}
    assert 1 <= len(finished) < 6
    resumed = grade(LAB, cohort, out, jobs=2, stream=io.StringIO())
    assert resumed.skipped == len(finished) and resumed.graded == 6 - len(finished)
    assert all(row["total"] == "100" for row in grades_table(out).values())


def every_function_hangs(folder: Path) -> Path:
    """``folder``: the reference solution with every function hanging until its call's time-out."""
    shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    for module in folder.glob("*.py"):
        module.write_text(module.read_text().replace("):\n", "):\n" + hang()))
    return folder


def test_a_terminated_run_records_nothing_it_had_not_finished_and_leaves_no_copy(tmp_path):
    """SIGTERM (kill, a cancelled CI job) ends make grade as Ctrl-C does, in a line: what was graded is kept, the grades
    in flight are stopped, not recorded, and no lane takes another (they went on and recorded 0, "error:
    FileNotFoundError", for every student left, their copies removed under them: a run resumed later skipped them; a
    student whose every function loops held the run 327 s), and nothing is left in TMPDIR. The same for a SIGTERM to the
    whole process group (timeout, systemd), which ends the lanes' judges before they clean up after themselves; the run
    resumed after it goes on from what was finished."""
    cohort, out, scratch = tmp_path / "cohort", tmp_path / "out", tmp_path / "tmp"
    for i in range(24):
        shutil.copytree(SOLUTIONS, cohort / f"s{i:02}" / "attention", ignore=shutil.ignore_patterns("tests", "*.ipynb"))
        with open(cohort / f"s{i:02}" / "attention" / "softmax.py", "a") as module:
            module.write(f"# {i}\n")  # no replay: each takes its time
    every_function_hangs(cohort / "a_loops" / "attention")  # graded first, by one lane, while the other grades the rest
    scratch.mkdir()
    fingerprints = f"{LAB.name}/students/*/.fingerprint"
    for whole_group in (False, True):
        before = {path.parent.name for path in out.glob(fingerprints)}
        run = subprocess.Popen([sys.executable, "-m", "autograder", "grade", "--submissions", str(cohort), "--out",
                                str(out), "--jobs", "2"], cwd=KIT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "TMPDIR": str(scratch)}, start_new_session=True)
        deadline = time.monotonic() + 300
        while len(list(out.glob(fingerprints))) <= len(before) and time.monotonic() < deadline:
            time.sleep(0.1)
        (os.killpg if whole_group else os.kill)(run.pid, signal.SIGTERM)
        printed, said = run.communicate(timeout=120)  # it held 327 s
        assert run.returncode == 130 and said.endswith("interrupted: what was finished is kept (the same command again "
                                                       "goes on from there)\n") and "Traceback" not in said, \
            (whole_group, printed[-2000:], said[-2000:])
        assert [path.name for path in scratch.iterdir() if path.is_dir()] == [], whole_group
        recorded = {path.parent.name: json.loads(path.read_text())["status"]
                    for path in out.glob(f"{LAB.name}/students/*/summary.json")}
        assert before < set(recorded) and len(recorded) < 25 and set(recorded.values()) == {"graded"} and \
            "a_loops" not in recorded, (whole_group, recorded, printed[-2000:], said[-2000:])


# `make grade` with the lab's reference solution at argv[1] (here one whose every function hangs) and its arguments after.
WITH_REFERENCE = """
import sys
from pathlib import Path

from autograder.__main__ import main
from autograder.ending import run_to_end
from autograder.lab import Lab

Lab.reference = property(lambda lab: Path(sys.argv[1]))
run_to_end(lambda: main(sys.argv[2:]))
"""


def test_an_interrupt_while_the_reference_is_graded_ends_the_run_at_once(tmp_path):
    """SIGTERM (or Ctrl-C) while the reference solution proves the machine, before any student: the proof's lane is
    killed, not waited for (the run waited up to 10 s for the proof to end, then killed it; a lab whose reference
    takes longer held it that long)."""
    reference = every_function_hangs(tmp_path / "reference" / "attention")
    shutil.copytree(SOLUTIONS, tmp_path / "cohort" / "ada" / "attention", ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    run = subprocess.Popen([sys.executable, "-c", WITH_REFERENCE, str(reference), "grade", "--lab", LAB.name,
                            "--submissions", str(tmp_path / "cohort"), "--out", str(tmp_path / "out"), "--jobs", "1"],
                           cwd=KIT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "grading the reference solution first" in run.stderr.readline()
        time.sleep(2)  # its lane started and grading the reference (each call hangs until its 10 s time-out)
        run.send_signal(signal.SIGTERM)
        printed, said = run.communicate(timeout=8)  # under the 10 s it waited
    finally:
        run.kill()
        run.wait()
    assert run.returncode == 130 and said.startswith("interrupted: what was finished is kept"), (printed, said)
    assert not (tmp_path / "out" / LAB.name / "students").exists()


def test_every_lane_of_a_run_makes_its_folders_in_the_runs(tmp_path, monkeypatch):
    """The lanes that grade a cohort again (--repeat, verify --repeat) make their folders in the run's too: killed by an
    interrupt, theirs were left in TMPDIR."""
    from autograder.batch import pool

    started = []
    monkeypatch.setattr(pool, "grade_in_lanes", lambda lab, todo, out, lanes, progress: started.extend(lanes))
    pool.regraded(LAB, [], {}, 2, DEFAULTS, True, True, tmp_path)
    assert [lane.folders for lane in started] == [tmp_path, tmp_path]


def test_broken_inputs_never_stop_the_batch(tmp_path):
    cohort = tmp_path / "cohort"
    (cohort / "empty").mkdir(parents=True)
    (cohort / "no_attention_folder" / "other").mkdir(parents=True)
    huge = cohort / "huge" / "attention"
    shutil.copytree(SOLUTIONS, huge, ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    with open(huge / "scores.py", "ab") as handle:
        handle.truncate(50 * 1024 * 1024)
    helper = cohort / "helper" / "attention"
    shutil.copytree(SOLUTIONS, helper, ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    (helper / "conftest.py").write_text("import pytest\n")
    (helper / "document_tensors.py").write_text("raise SystemExit\n")
    run = grade(LAB, cohort, tmp_path / "out", jobs=1, stream=io.StringIO())  # one lane meets every input
    assert run.students == 4
    table = grades_table(tmp_path / "out")
    assert table["empty"]["total"] == "0" and table["empty"]["status"] == "not handed in"
    assert "scores.py: too large (over 1 MiB)" in table["huge"]["notes"] and table["huge"]["status"] == "missing: scores.py"
    assert table["huge"]["scores"] == "0"
    assert float(table["huge"]["total"]) == 90
    assert "conftest.py: not part of the assignment" in table["helper"]["notes"]
    assert table["helper"]["total"] == "100"


COUNTING_SOFTMAX = '''

_served = 0
_correct_softmax = softmax


def softmax(scores, dim=-1):
    """Right on four calls out of five: its answers depend on how many calls it has served."""
    global _served
    _served += 1
    weights = _correct_softmax(scores, dim)
    return weights * 1.5 if _served % 5 == 0 else weights
'''


def test_replayed_checks_score_exactly_as_full_runs(tmp_path):
    """In a lane, a check answered byte for byte as on an earlier passing run passes by replay
    (autograder.judge.replay). Verdicts and messages must be those of a full run: on copies of the
    reference (the second copy replays every check), full marks written in other styles, typical
    mistakes, and a submission whose answers depend on how many calls it has served (if a replay
    made its worker answer a request twice, or skip one, its failures would move). A second copy of a
    mistaken submission gets its diagnoses from the lane's memo (autograder.judge.misconceptions): in
    the opposite order the other copy does, and each must read as the full run's."""
    cohort = tmp_path / "cohort"
    for name in ("a_reference", "a_reference_again"):
        shutil.copytree(SOLUTIONS, cohort / name / "attention", ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    for student in ("ben", "chen", "eli", "hana"):
        shutil.copytree(DEMO / student, cohort / student, symlinks=True)
    shutil.copytree(DEMO / "hana", cohort / "hana_again", symlinks=True)
    counting = cohort / "zed" / "attention"
    shutil.copytree(SOLUTIONS, counting, ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    with open(counting / "softmax.py", "a") as module:
        module.write(COUNTING_SOFTMAX)

    students = sorted(p.name for p in cohort.iterdir())
    backwards = tmp_path / "backwards"  # the same cohort, graded in the opposite order
    for rank, student in enumerate(reversed(students)):
        shutil.copytree(cohort / student, backwards / f"{rank:02d}-{student}", symlinks=True)

    full = grade(LAB, cohort, tmp_path / "full", jobs=1, stream=io.StringIO(), replay=False)
    assert full.replayed_checks == 0
    checks = len(json.loads((tmp_path / "full" / "students" / "a_reference" / "results.json").read_text())["tests"])
    for folder, run in ((cohort, "replayed"), (backwards, "replayed-backwards")):
        replayed = grade(LAB, folder, tmp_path / run, jobs=1, stream=io.StringIO())
        assert replayed.replayed_checks > checks  # a whole copy of the reference, and more
        for rank, student in enumerate(reversed(students)):
            name = student if folder is cohort else f"{rank:02d}-{student}"
            mine, theirs = (json.loads(path.read_text()) for path in (
                tmp_path / run / "students" / name / "results.json", tmp_path / "full" / "students" / student / "results.json"))
            assert mine["tests"] == theirs["tests"], (run, student)
    assert 0 < float(grades_table(tmp_path / "full")["zed"]["softmax"]) < 15
    for run in ("full", "replayed-backwards"):  # the memo's answer (second copy graded) as the first copy's
        names = ("hana", "hana_again") if run == "full" else [f"{rank:02d}-{student}" for rank, student in
                                                              enumerate(reversed(students)) if student.startswith("hana")]
        hana, hana_again = ({c["name"]: c.get("diagnoses") for c in json.loads(
            (tmp_path / run / "students" / name / "summary.json").read_text())["checks"]} for name in names)
        assert hana == hana_again and any(hana.values()), run


def test_a_report_that_cannot_be_written_stops_only_its_student(tmp_path, monkeypatch):
    cohort = tmp_path / "cohort"
    for student in ("a_full_disk", "b_fine"):
        shutil.copytree(SOLUTIONS, cohort / student / "attention", ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    write_student = pool.write_student

    def disk_full_for_one(lab, folder, record, stamp):
        if record.student == "a_full_disk":
            raise OSError(28, "No space left on device")
        write_student(lab, folder, record, stamp)

    monkeypatch.setattr(pool, "write_student", disk_full_for_one)
    run = grade(LAB, cohort, tmp_path / "out", jobs=1, stream=io.StringIO())
    assert [r.student for r in run.records] == ["b_fine"]
    assert list(run.ungraded) == ["a_full_disk"] and run.ungraded["a_full_disk"].startswith("OSError")


def test_bench_prints_the_reference_copies_the_demo_cohort_and_nbgrader_beside_it(monkeypatch, capsys):
    """`make bench`'s figures, on the smallest run that has them all (its option help: test_check), in the
    lab whose checks and notebook run faster (transformer: 5 s of the suite's 30): one copy autograded by the
    real nbgrader (which asserts that every notebook ran without an error, so the race is fair) and graded
    by the kit. Its five timed `import torch` runs are left out (a second each): the ratio's divisor is given."""
    from autograder.__main__ import main
    from autograder.batch import bench

    monkeypatch.setattr(bench, "torch_import_seconds", lambda: 2.0)
    assert main(["bench", "--lab", "transformer", "--copies", "2", "--jobs", "1", "--full-copies", "0",
                 "--nbgrader-copies", "1"]) == 0
    printed = capsys.readouterr().out
    assert "(transformer: reference solution, 1 jobs)" in printed and "python -c 'import torch':    2.000 s" in printed
    assert "ratio marginal / import:" in printed and "the demo cohort cycled to 2: total" in printed
    assert "  nbgrader autograde " in printed and "  autograder grade " in printed
    assert "ratio grade / nbgrader:" in printed


def test_a_notebook_that_raised_is_told_from_one_that_ran(tmp_path):
    """The bench's fairness check: nbgrader's time counts only if every notebook ran to its end."""
    from autograder.batch.bench import notebook_errors

    def notebook(*outputs):
        path = tmp_path / "run.ipynb"
        path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ""},
                                              {"cell_type": "code", "outputs": list(outputs)}]}))
        return path

    assert notebook_errors(notebook({"output_type": "stream", "text": "fine"})) == []
    assert notebook_errors(notebook({"output_type": "error", "ename": "ModuleNotFoundError"})) == ["ModuleNotFoundError"]
