"""The reports as their readers use them: the class report an instructor acts on, a student's
feedback page, the similarity of submissions; checked in a real browser (headless Chromium)."""

import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from autograder.batch.grade import grade
from autograder.judge.misconceptions import load_catalogue
from autograder.reports.check_statistics import check_statistics, checks_csv
from autograder.kinds import NEEDS
from autograder.reports.class_report import flags, near_copies
from autograder.reports.feedback import feedback_html, feedback_markdown, feedback_view
from autograder.reports.heatmap import NEGATIVE, heatmap_svg
from autograder.reports.histogram import bins, histogram_svg
from autograder.reports.similarity import own_code, similarity
from autograder.limits import Limits
from autograder.results import CheckResult, Diagnosis, Failure, FailureKind, PartResult, SubmissionResult
from autograder.text import relation_sentence
from conftest import DEMO, KIT, LAB, LABS, SOLUTIONS, once_per_run, submission_with

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_full_marks_have_a_bar_of_their_own_and_every_count_is_inside_the_picture():
    assert bins([100, 95, 90, 0, 9.5], 100)[-2:] == [("90–100", 2), ("100", 1)]
    svg = histogram_svg([100] * 7 + [55], 100)
    counts = [(float(y), int(n)) for y, n in re.findall(r"y='([\d.]+)' font-size='11' text-anchor='middle'>(\d+)<", svg)]
    assert (7 in [n for _, n in counts]) and all(y > 11 for y, _ in counts)  # 11 px: the font, above y=0 is clipped
    assert ">students<" in svg and "total points" in svg  # both axes are named


def submission(checks: list[CheckResult], notes=()) -> SubmissionResult:
    """A record of ``checks`` (its parts those of the checks, then the lab's others, none run)."""
    parts: dict[str, PartResult] = {}
    for check in checks:
        parts.setdefault(check.part, PartResult(check.part, 0.0)).checks.append(check)
    for part in LAB.part_ids:
        parts.setdefault(part, PartResult(part, LAB.part(part).weight))
    return SubmissionResult(LAB.name, "ann", parts, notes=list(notes))


def record(checks):
    return submission([CheckResult("p", f"c{i}", 1.0, passed, hidden, failure=None if passed else Failure(FailureKind(kind)))
                       for i, (hidden, passed, kind) in enumerate(checks)])


def texts(record) -> list[str]:
    return [flag["text"] for flag in flags(record)]


def test_a_hard_coder_and_points_lost_to_time_outs_are_flagged():
    hard_coder = record([(False, True, None)] * 3 + [(True, False, "wrong")] * 3)
    assert texts(hard_coder) == ["p 3/6", "passes every public check, fails most hidden ones"]
    assert texts(record([(False, True, None), (True, False, "timeout"), (True, True, None)])) == \
        ["lost 1 points to time-outs or crashes"]
    assert texts(record([(False, True, None), (False, False, "wrong"), (True, True, None)])) == []  # 2/3: passable


def test_a_module_that_does_not_import_a_part_not_started_and_upload_notes_need_a_look():
    """Each reason once, pointing at its evidence on the student's feedback page."""
    broken = Failure(FailureKind.IMPORT, file="softmax.py", line=49)
    stub = Failure(FailureKind.NOT_IMPLEMENTED)
    student = submission(
        [CheckResult("softmax", f"c{i}", 1.0, False, failure=broken) for i in range(3)]
        + [CheckResult("dropout", f"d{i}", 1.0, False, hidden=i == 1, failure=stub) for i in range(2)]
        + [CheckResult("heads", "h", 1.0, False, failure=stub), CheckResult("heads", "h2", 1.0, True)],
        notes=["README.md: not part of the assignment, not graded", "conftest.py: not part of the assignment, "
               "not graded", "notes.txt: not UTF-8"])
    assert flags(student) == [
        {"text": "did not import: softmax.py line 49", "anchor": "#part-softmax", "need": "could not be graded in full"},
        {"text": "upload: conftest.py: not part of the assignment, not graded (and 1 more notes)", "anchor": "",
         "need": "could not be graded in full"},
        {"text": "not started: dropout", "anchor": "#part-dropout", "need": "struggling"},
        {"text": "heads 1/2", "anchor": "#part-heads", "need": "struggling"}]


def staged_demo(lab=LAB) -> dict:
    """The demo cohort's folders of ``lab``, as the batch stages them: written independently, in
    twelve styles, except gus's heads.py, chen's with every name renamed and the comments reworded."""
    return {folder.name: folder / lab.name for folder in sorted(DEMO.iterdir()) if (folder / lab.name).is_dir()}


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.name)
def test_only_the_renamed_copy_stands_out_in_the_demo_cohort(lab):
    found = similarity(lab, staged_demo(lab))
    pairs = {(p["module"], p["first"], p["second"]) for p in found["pairs"]}
    assert pairs == ({("heads.py", "chen", "gus")} if lab.name == "attention" else set())
    assert [m["module"] for m in found["modules"]] == list(lab.modules)
    assert all(m["baseline"] < 0.3 for m in found["modules"]), found["modules"]  # independent work shares little


def test_what_the_release_gives_is_never_shared_and_converging_answers_are_not_flagged(tmp_path):
    """Stubs (docstrings, signatures, the given lines) share nothing; six students handing in the same
    short correct module are the module's baseline, not six copies; one pair far above a low
    baseline is listed, and the same pair is not when every pair shares as much."""
    staged = {}
    for student in ("ann", "ben", "cat", "dan", "eve", "fin"):
        staged[student] = tmp_path / student
        shutil.copytree(LAB.release, staged[student], ignore=shutil.ignore_patterns("tests", "*.ipynb", "Makefile"))
    assert similarity(LAB, staged)["pairs"] == []  # the stubs
    for folder in staged.values():
        shutil.copy(SOLUTIONS / "softmax.py", folder / "softmax.py")
    converging = similarity(LAB, staged)
    softmax = next(m for m in converging["modules"] if m["module"] == "softmax.py")
    assert (softmax["baseline"], softmax["converged"], softmax["compared"]) == (1.0, True, 6)
    assert converging["pairs"] == []  # the module table says it of the module instead
    for student, folder in staged.items():  # now each their own, but ann and ben
        shutil.copy(DEMO / {"ann": "chen", "ben": "chen", "cat": "ada", "dan": "hana", "eve": "eli",
                            "fin": "lea"}[student] / "attention" / "heads.py", folder / "heads.py")
    copied = similarity(LAB, staged)
    assert {(p["module"], p["first"], p["second"]) for p in copied["pairs"]} == {("heads.py", "ann", "ben")}


def shown_module(found: dict, module: str) -> dict:
    """The first pair's ``module`` shown side by side in the near-copies ``found``."""
    return next(m for g in found["groups"] for p in g["pairs"] for m in p["modules"] if m["module"] == module)


def test_line_endings_leading_lines_and_comments_change_nothing(tmp_path):
    """What a Windows editor or a tidy student does to a file changes no finding and no mark: CRLF
    line endings, blank lines before the module's docstring, a comment after a given line."""
    def marks(found):
        heads = shown_module(found, "heads.py")
        return [re.findall(r"<mark>(.*?)</mark>", code, re.S) for code in (heads["first_code"], heads["second_code"])]

    plain = similarity(LAB, staged_demo())
    staged = {}
    for student, folder in staged_demo().items():
        staged[student] = tmp_path / student
        shutil.copytree(folder, staged[student], symlinks=True)
    for module in staged["gus"].glob("*.py"):
        module.write_bytes(b"\n\n" + module.read_bytes().replace(b"\n", b"\r\n"))
    heads = staged["chen"] / "heads.py"
    heads.write_text(heads.read_text().replace("import torch\n", "import torch  # the library\n", 1))
    for student in ("ivan", "lea"):  # the stubs, saved with CRLF: still the release's code
        shutil.copy(LAB.release / "dropout.py", staged[student] / "dropout.py")
        (staged[student] / "dropout.py").write_bytes((LAB.release / "dropout.py").read_bytes().replace(b"\n", b"\r\n"))
    edited = similarity(LAB, staged)
    assert [(p["module"], p["first"], p["second"]) for p in edited["pairs"]] == [("heads.py", "chen", "gus")]
    assert marks(edited) == marks(plain)
    assert own_code("import torch  # the library\nx = 1\n", {"import torch"}).split("\n")[0].strip() == ""


def marks_on_token_boundaries(code: str) -> list[str]:
    """Each ``<mark>`` of highlighted code that starts or ends inside a word (none should)."""
    cut = []
    for found in re.finditer(r"<mark>(.*?)</mark>", code, re.S):
        before, inside, after = code[:found.start()][-1:], found.group(1), code[found.end():][:1]
        if re.match(r"\w\w", before + inside[:1]) or re.match(r"\w\w", inside[-1:] + after):
            cut.append(inside)
    return cut


def test_the_shared_code_is_marked_on_token_boundaries_and_never_on_given_code():
    pair = shown_module(similarity(LAB, staged_demo()), "heads.py")
    for code in (pair["first_code"], pair["second_code"]):
        marked = "".join(re.findall(r"<mark>(.*?)</mark>", code, re.S))
        assert marked.count("\n") > 10 and marks_on_token_boundaries(code) == []
        assert "Inputs:" not in marked and "def split_heads" not in marked  # a docstring, a given signature
    assert marks_on_token_boundaries("tor<mark>ch.nn</mark>") == ["ch.nn"]  # the measure itself can fail


@pytest.mark.slow
def test_similarity_is_the_same_in_every_process():
    """copydetect hashes with Python's hash(), salted per process: the kit's fingerprints must not be."""
    script = ("import json, sys; sys.path.insert(0, 'tests'); from test_reports import staged_demo, similarity, LAB; "
              "found = similarity(LAB, staged_demo()); print(json.dumps([(p['module'], p['first'], p['second'], "
              "p['similarity']) for p in found['pairs']] + [m['baseline'] for m in found['modules']]))")
    runs = {subprocess.run([sys.executable, "-c", script], cwd=KIT, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(runs) == 1


def test_a_picture_reads_at_once():
    """Weights (never negative) on a sequential scale from 0, both signs on a diverging one; NaN and
    the infinities each a legend entry; column indices; the slice drawn and the shape written out."""
    picture = {"actual": [[0.5, "nan", 0.2], [0.1, 0.9, "inf"]], "expected": [[0.5, 0.3, 0.2], [0.1, 0.9, 0.0]],
               "differ": [[0, 1, 0], [0, 0, 1]], "slice": [1], "rows": [0, 2], "cols": [4, 7], "shape": [2, 2, 9],
               "mask": False}
    blue = "#{:02x}{:02x}{:02x}".format(*NEGATIVE)
    weights = heatmap_svg(picture)
    assert ">0</text>" in weights and ">0.9</text>" in weights and blue not in weights  # no half-used scale
    assert ">NaN</text>" in weights and ">∞</text>" in weights and ">−∞</text>" not in weights
    assert all(f">{column}</text>" in weights for column in (4, 5, 6))
    assert "drawn: [1, 0:2, 4:7] of a tensor of shape (2, 2, 9)" in weights
    signed = heatmap_svg({**picture, "actual": [[-0.5, 0.1, 0.2], [0.1, 0.9, 0.3]]})
    assert ">-0.9</text>" in signed and blue in signed and ">NaN</text>" not in signed


def test_each_fact_is_said_once_per_part():
    """A module that does not import tells every check the same: one entry for the part, naming the
    others; a function not implemented, one per function; wrong answers are never merged."""
    broken = "softmax.py could not be imported: SyntaxError: invalid syntax (at softmax.py line 86)"

    def check(name, kind, message, points=1.0):
        return CheckResult("softmax", name, points, False, message=message, failure=Failure(FailureKind(kind)))

    checks = [check("test_a", "import", broken), check("test_b", "import", broken, 2.0), check("test_c", "import", broken),
              check("test_d", "not_implemented", "not implemented yet: scores.f"),
              check("test_e", "not_implemented", "not implemented yet: scores.g"),
              check("test_f", "wrong", "expected 1, got 2"), check("test_g", "wrong", "expected 1, got 2")]
    record = submission(checks)
    failed = next(p for p in feedback_view(LAB, record)["parts"] if p["id"] == "softmax")["failed"]
    assert [(f["name"], f["also"], f["points"]) for f in failed] == [
        ("test_a", ["test_b", "test_c"], 4.0), ("test_d", [], 1.0), ("test_e", [], 1.0), ("test_f", [], 1.0),
        ("test_g", [], 1.0)]
    page = feedback_markdown(LAB, record)
    assert page.count("could not be imported") == 1 and "`test_a` and 2 more checks (`test_b`, `test_c`) (4 pt)" in page
    assert page.count("line 86") == 1


def test_a_diagnosis_is_explained_once():
    """Wrong answers keep an entry each, but the relation sentence of one diagnosis is shown once, by
    the first check seen that way, which names the others, and its picture once, by the first of them
    that has one (a shape compared has none); a check with no diagnosis keeps its picture."""
    picture = {"actual": [[1.0]], "expected": [[0.0]], "differ": [[1]], "slice": [], "rows": [0, 1], "cols": [0, 1],
               "shape": [1, 1], "mask": False}

    def check(name, relation="", diagnoses=(), pictured=True):
        said = relation_sentence(relation) if relation else ""
        return CheckResult("masking", name, 1.0, False, message=f"{name}: 1 of 1 entries differ{said}",
                           diagnoses=tuple(Diagnosis(d, d, "") for d in diagnoses),
                           failure=Failure(FailureKind.WRONG, relation=relation, picture=picture if pictured else None))

    turned = "your answer is the expected one transposed"
    checks = [check("test_a", turned, ["masking.tril_mask"]), check("test_b", turned, ["masking.tril_mask"]),
              check("test_c", "", ["masking.tril_mask"]), check("test_d", "", ["masking.tril_mask"]),
              check("test_e", turned), check("test_f"), check("test_g"),
              check("test_h", "your answer is the expected one negated", pictured=False),  # a shape compared
              check("test_i", "your answer is the expected one negated")]
    record = submission(checks)
    failed = next(p for p in feedback_view(LAB, record)["parts"] if p["id"] == "masking")["failed"]
    assert [(f["name"], f["same"], f["picture"] is not None, "Seen from the values" in f["message"]) for f in failed] == [
        ("test_a", ["test_b"], True, True), ("test_b", [], False, False), ("test_c", ["test_d"], True, False),
        ("test_d", [], False, False), ("test_e", [], True, True), ("test_f", [], True, False),
        ("test_g", [], True, False), ("test_h", ["test_i"], False, True), ("test_i", [], True, False)]
    page = feedback_markdown(LAB, record)
    assert page.count(turned) == 2 and "holds for 1 more check below (not repeated there): `test_b`." in page


@pytest.fixture(scope="session")
def cohort_reports(tmp_path_factory):
    """A small cohort graded: two demo students' own work, the second's heads.py a renamed copy of the
    first's (chen, gus); one with a known mistake that draws a picture (tril(ones) for triu(ones, diagonal=1))
    and one whose dropout
    loops forever on one input (p = 0.3), both on the reference's code; and one who handed nothing in. Graded
    once per test run; tests only read it."""
    def build(root):
        cohort = root / "cohort"
        for student, demo in (("ann", "chen"), ("bo", "gus")):
            shutil.copytree(DEMO / demo / "attention", cohort / student / "attention")
        for student in ("cy", "dee"):
            shutil.copytree(SOLUTIONS, cohort / student / "attention",
                            ignore=shutil.ignore_patterns("tests", "*.ipynb", "Makefile"))
        masking = cohort / "cy" / "attention" / "masking.py"
        masking.write_text(masking.read_text().replace("torch.triu(", "torch.tril(").replace(", diagonal=1)", ")"))
        dropout = cohort / "dee" / "attention" / "dropout.py"
        dropout.write_text(dropout.read_text().replace(  # on one input: one check's time-out, not every call's
            '    """\n', '    """\n    import time\n    while p == 0.3:\n        time.sleep(1)\n', 1))
        (cohort / "eve").mkdir()  # a student of the course without an attention/ folder
        grade(LAB, cohort, root / "out", jobs=2, stream=io.StringIO(), limits=Limits(call_timeout=1.0))  # dee loops

    return once_per_run(tmp_path_factory, "report-cohort", build) / "out"


@pytest.mark.slow
def test_the_class_report_links_flags_and_lists_near_copies(cohort_reports):
    report = (cohort_reports / "report.html").read_text()
    for student in ("ann", "bo", "cy", "dee"):
        assert f'href="students/{student}/feedback.html"' in report
    students = report[report.index('id="students"'):report.index("Known mistakes")]
    dee = students[students.index(">dee<"):].split("</tr>")[0]
    assert "timed out: dropout.dropout" in dee and '<a href="#look-2">could not be graded in full, integrity</a>' in dee
    lines = needs_lines(report)  # the report opens with who needs a look, most urgent first
    assert report.index('id="needs"') < report.index("id='histogram'") and "5 need a look" in report
    assert [line.split(" ")[0].rstrip(":") for line in lines] == ["eve", "dee", "cy", "bo", "ann"], lines
    assert lines[0] == "eve: could not be graded in full: not handed in"
    assert lines[1].startswith("dee (99): could not be graded in full: lost 1 points to time-outs or crashes · integrity")
    assert lines[4] == "ann (100): integrity: near-copy of bo: heads.py 100%"
    needs = report[report.index('id="needs"'):].split("</ol>")[0]
    ann = needs[needs.index(">ann<"):].split("</li>")[0]
    assert '<a href="#similar-1">near-copy of bo: heads.py 100%</a>' in ann and ann.count("near-copy") == 1
    groups = report[report.index('id="similar-groups"'):].split("</ul>")[0]
    assert groups.index('id="similar-1"><summary><b>ann, bo</b>: heads.py\n') < groups.index("the reference solution")
    # cy and dee hand in the reference's code: one group with it, whatever the number of modules, after ann and bo
    assert '<b>cy, dee, the reference solution</b>: dropout.py, heads.py, masking.py, projections.py, scores.py, ' \
        'softmax.py' in groups
    reference = groups[groups.index("<b>cy, dee, the reference solution"):].split("</li>")[0]
    assert reference.count("cy and dee: softmax.py") == 1 and reference.count("softmax.py, 100% shared") == 2
    cy = needs[needs.index(">cy<"):].split("</li>")[0]  # each of the 3 with its closest, not all 3 pairs
    assert "near-copy of the reference solution: dropout.py 100%" in cy and cy.count("near-copy") == 1


@pytest.fixture(scope="session")
def class_of_eight(tmp_path_factory):
    """The class "Needs a look" was found wanting on: two hand in the reference, five one known mistake
    each (all of them on the reference's code, so every pair shares nearly everything), one a softmax.py
    that does not parse, one an empty folder. Graded once per test run."""
    mistakes = {"fox": ("softmax", "no_max_shift"), "gia": ("masking", "tril_mask"), "hal": ("dropout", "no_rescaling"),
                "ida": ("heads", "view_without_transpose"), "jon": ("projections", "no_scaling")}
    catalogue = load_catalogue(LAB.checks)

    def build(root):
        cohort = root / "cohort"
        for student in ("ann", "bo"):
            submission_with(cohort / student, {}, name=LAB.name)
        for student, (part, name) in mistakes.items():
            known = next(m for m in catalogue[part] if m.name == name)
            submission_with(cohort / student, {part: known.apply((LAB.reference / f"{part}.py").read_text())},
                            name=LAB.name)
        submission_with(cohort / "kim", {"softmax": (LAB.reference / "softmax.py").read_text() + "\ndef broken(:\n"},
                        name=LAB.name)
        (cohort / "lu" / LAB.name).mkdir(parents=True)
        grade(LAB, cohort, root / "out", jobs=1, stream=io.StringIO())  # one lane: one judge start

    return once_per_run(tmp_path_factory, "class-of-eight", build) / "out"


def needs_lines(report: str) -> list[str]:
    """The "Needs a look" list as text, one line per student."""
    listed = report[report.index('<ol id="needs">'):].split("</ol>")[0]
    return [" ".join(re.sub(r"<[^>]+>", "", item).split()) for item in re.findall(r'<li id="look-\d+">(.*?)</li>', listed, re.S)]


@pytest.mark.slow
def test_needs_a_look_lists_every_student_to_act_on_most_urgent_first(class_of_eight):
    """Who could not be graded first, then each part a student struggles with, with the known mistake
    named; a class that hands in the reference's code (every pair sharing nearly everything) makes no
    near-copy finding, per module or otherwise; the two who hand in the very same code are not listed."""
    report = (class_of_eight / "report.html").read_text()
    lines = needs_lines(report)
    assert [line.split(" ")[0].rstrip(":") for line in lines] == ["lu", "kim", "gia", "ida", "jon", "hal"], lines
    assert "could not be graded in full: not handed in" in lines[0]
    assert "could not be graded in full: did not import: softmax.py line" in lines[1]
    assert "struggling: masking 4/20: known mistake, `tril` instead of `triu`" in lines[2]
    assert lines[3].startswith("ida (86): struggling: heads 11/25: known mistake, split_heads views straight")
    assert lines[5] == "hal (93.5): struggling: dropout 3.5/10: known mistake, the kept values are not scaled by 1 / (1 - p)"
    assert "near-copy" not in report[report.index('id="needs"'):report.index('id="students"')]
    assert "6 need a look" in report  # not fox: softmax without the max shift costs 1.5 of 15
    for line in lines:  # each kind of reason once per student
        assert all(line.count(need) <= 1 for need in NEEDS)
    items = report[report.index('<ol id="needs">'):].split("</ol>")[0]
    assert 'href="students/gia/feedback.html#part-masking"' in items  # each reason opens its evidence
    students = report[report.index('id="students"'):report.index("Known mistakes")]
    gia = students[students.index(">gia<"):].split("</tr>")[0]
    assert re.search(r'<a href="#look-\d">struggling</a>', gia)


def test_a_pair_copied_in_every_module_is_one_finding(tmp_path):
    """Judged per pair across the lab: two students who wrote the same code in every module are one
    group and one flag each, naming every module, not one finding per module."""
    staged = {}
    for student, demo in (("ann", "chen"), ("bo", "chen"), ("cy", "ada"), ("dee", "hana"), ("eve", "eli"),
                          ("fin", "lea")):
        staged[student] = tmp_path / student
        shutil.copytree(DEMO / demo / LAB.name, staged[student])
    found = similarity(LAB, staged)
    assert len({p["module"] for p in found["pairs"]}) > 3  # the pair stands out in many modules ...
    assert [(g["members"], len(g["pairs"])) for g in found["groups"]] == [(["ann", "bo"], 1)]  # ... one finding
    copies = near_copies(found)
    assert [len(copies[s]) for s in ("ann", "bo")] == [1, 1]
    assert copies["ann"][0]["text"].startswith("near-copy of bo: ") and all(
        f"{m['module']} 100%" in copies["ann"][0]["text"] for m in found["groups"][0]["pairs"][0]["modules"])


def test_check_statistics_flag_a_check_no_one_passes_and_one_the_strong_fail():
    """A check that separates the class is trusted; one that every student fails, or that the strong
    fail while the weak pass, is one to look at (and a class too small to say is not judged)."""
    def student(name, passes):
        checks = [CheckResult("scores", f"test_{i}", 1.0, ok) for i, ok in enumerate(passes)]
        return SubmissionResult(LAB.name, name, {"scores": PartResult("scores", 10.0, checks)})

    # test_0 separates (the strong pass), test_1 no one passes, test_2 only the weak pass.
    outcomes = [(True, False, False)] * 4 + [(False, False, True)] * 3
    fillers = [[True] * n for n in (9, 8, 7, 6, 2, 1, 0)]
    records = [student(f"s{i}", [*three, *filler]) for i, (three, filler) in enumerate(zip(outcomes, fillers))]
    rows = {row["name"]: row for row in check_statistics(LAB, records)}
    assert rows["test_0"]["separation"] > 0.5 and rows["test_0"]["look"] == ""
    assert rows["test_1"]["look"].startswith("passed by no one")
    assert rows["test_2"]["separation"] < -0.5 and rows["test_2"]["look"].startswith("the stronger students fail")
    assert check_statistics(LAB, records[:4])[2]["separation"] is None  # four students say nothing
    table = checks_csv(list(rows.values())).splitlines()
    assert table[0] == "part,check,hidden,points,students,passed,pass_rate,separation,look"
    assert next(row for row in table if row.startswith("scores,test_2,")).startswith("scores,test_2,false,1,7,3,0.429,-")


@pytest.mark.slow
def test_a_student_who_handed_nothing_in_is_not_a_green_zero(cohort_reports):
    """Not handed in is its own state: 0 of the lab's real maximum, said first, in red, and left out of
    the class's figures (a 0 would pull the means down), listed apart."""
    summary = json.loads((cohort_reports / "students" / "eve" / "summary.json").read_text())
    assert (summary["handed_in"], summary["status"], summary["total"], summary["max_total"]) == \
        (False, "not handed in", 0, LAB.max_points)
    assert {part: row["max_points"] for part, row in summary["parts"].items()} == \
        {part.id: part.weight for part in LAB.parts}
    assert (cohort_reports / "students" / "eve" / "feedback.md").read_text().startswith(
        f"# {LAB.title}: not handed in, 0 / {LAB.max_points:g}")
    gradescope = json.loads((cohort_reports / "students" / "eve" / "results.json").read_text())
    assert gradescope["score"] == 0 and "not handed in" in gradescope["output"].splitlines()[0]
    page = (cohort_reports / "students" / "eve" / "feedback.html").read_text()
    assert 'id="not-handed-in"' in page and f'class="none" id="total">0 / {LAB.max_points:g}<' in page
    assert "What cost points" not in page  # the state is said once, at the top
    # What was looked for and found, instead of six empty parts.
    looked = page[page.index('id="looked-for"'):].split("</p>")[0]
    assert "Looked for a folder <code>attention/</code> holding your modules (<code>scores.py</code>" in looked
    assert "found no <code>attention/</code> folder, or an empty one" in looked and "<section" not in page
    assert 'href="#part-' not in page  # no link to a section that is not there
    assert "Looked for a folder `attention/`" in (cohort_reports / "students" / "eve" / "feedback.md").read_text()
    report = (cohort_reports / "report.html").read_text()
    assert "4 students handed in" in report
    absent = report[report.index('id="absent"'):].split("</p>")[0]
    assert "Not handed in (1" in absent and 'href="students/eve/feedback.html"' in absent
    students = report[report.index('id="students"'):report.index("Known mistakes")]
    assert ">eve<" not in students
    assert "eve,0,0,0,0,0,0,0,100,not handed in," in (cohort_reports / "grades.csv").read_text()


@pytest.mark.slow
def test_a_mask_mistake_is_pictured_for_public_checks_only(cohort_reports):
    summary = json.loads((cohort_reports / "students" / "cy" / "summary.json").read_text())
    failed = [c for c in summary["checks"] if not c["passed"]]
    assert any(c["failure"].get("picture") for c in failed if not c["hidden"])
    assert not any(c["failure"].get("picture") for c in failed if c["hidden"])
    page = (cohort_reports / "students" / "cy" / "feedback.html").read_text()
    assert "class='heatmap'" in page and "<details>" in page


def render(page, tmp_path, fragment: str = "") -> tuple[str, str]:
    """The page as Chromium renders it (its DOM after scripts ran) and what its console said;
    ``fragment``: opened at that place, as a link to it opens it."""
    shot = tmp_path / f"{page.stem}.png"
    shot.unlink(missing_ok=True)  # a page of the same name rendered before: its picture says nothing of this one
    picture = ["--hide-scrollbars", "--window-size=1200,1600", f"--screenshot={shot}"]
    run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                          *([] if fragment else picture), "--dump-dom", page.as_uri() + fragment],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    if fragment:  # the picture is of the page's top, not of the place the fragment scrolls to
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", *picture, page.as_uri()],
                       capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 20_000  # a picture with something on it, not a blank page
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return run.stdout, "\n".join(console)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_the_reports_render_in_a_real_browser(cohort_reports, tmp_path):
    dom, console = render(cohort_reports / "report.html", tmp_path, "#similar-1")
    assert console == ""
    assert 'id="histogram"' in dom and 'id="overview"' in dom and 'href="students/cy/feedback.html"' in dom
    needs = dom[dom.index('id="needs"'):].split("</ol>")[0]
    assert needs.count('<li id="look-') == 5 and 'href="#similar-1"' in needs and "lost " in needs
    group = dom[dom.index('id="similar-1"') - 40:].split("</li>")[0]
    assert re.search(r'<details class="group" id="similar-1" open="">', group)  # the link opened it
    assert group.count("<mark>") > 5 and marks_on_token_boundaries(group) == []
    assert spills(cohort_reports / "report.html", tmp_path) == []
    dom, console = render(cohort_reports / "students" / "cy" / "feedback.html", tmp_path)
    assert console == ""
    assert 'id="summary"' in dom and 'class="heatmap"' in dom and "Known mistake" in dom
    assert spills(cohort_reports / "students" / "cy" / "feedback.html", tmp_path) == []
    dom, console = render(cohort_reports / "students" / "eve" / "feedback.html", tmp_path)
    assert console == "" and 'id="not-handed-in"' in dom and 'class="none" id="total"' in dom


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_the_class_reports_fit_the_page_in_a_real_browser(class_of_eight, course, tmp_path):
    """The class of eight's report and the demo course's (12 students, every part a column), as Chromium
    lays them out at 1280 px: tables within the page's column, no student's row a tower of flags."""
    dom, console = render(class_of_eight / "report.html", tmp_path)
    assert console == "" and dom.count('<li id="look-') == 6
    for report in (class_of_eight / "report.html", *(course[0] / lab.name / "report.html" for lab in LABS)):
        assert spills(report, tmp_path) == [], report


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_the_students_table_sorts_by_the_clicked_column(cohort_reports, tmp_path):
    """The report's own script, run by Chromium: one click on "total" sorts up, a second one down."""
    report = (cohort_reports / "report.html").read_text()
    for clicks, order in ((1, sorted), (2, lambda totals: sorted(totals, reverse=True))):
        page = tmp_path / f"clicked_{clicks}" / "report.html"
        page.parent.mkdir()
        click = ('<script>const th = [...document.querySelectorAll("#students th")].find(h => h.textContent === "total");'
                 + " th.click();" * clicks + "</script>")
        page.write_text(report.replace("</body>", click + "</body>"))
        dom, console = render(page, tmp_path)
        assert console == ""
        table = dom[dom.index('id="students"'):].split("</table>")[0]
        totals = [float(t) for t in re.findall(r'data-sort="([0-9.]+)"><b>', table)]
        assert len(totals) == 4 and len(set(totals)) > 1 and totals == order(totals), (clicks, totals)


# Run in the page by Chromium: what spills out. The page must not scroll sideways in a 1280 px
# window, no table may be wider than the page's column nor a student's row taller than a few lines, no text of a picture may leave the picture, a glyph written in a cell stays inside it, and the
# students' status cells read as plain text (a one-word status on one line, tinted only as its row is).
OVERFLOW = """<script>
document.querySelectorAll("details").forEach(details => details.open = true);  // what opens must fit too
const spills = [];
if (document.documentElement.scrollWidth > document.documentElement.clientWidth)
  spills.push("the page is " + document.documentElement.scrollWidth + " px wide");
document.querySelectorAll("svg.heatmap").forEach(svg => svg.querySelectorAll("text").forEach(text => {
  const box = text.getBBox(), cell = text.previousElementSibling;
  if (box.x < 0 || box.y < 0 || box.x + box.width > svg.width.baseVal.value || box.y + box.height > svg.height.baseVal.value)
    spills.push("outside its picture: " + text.textContent);
  const inCell = cell && cell.tagName === "rect" && cell.getAttribute("width") === "18"
    && Math.abs(Number(text.getAttribute("x")) - Number(cell.getAttribute("x")) - 9) < 1;  // a glyph centred in it
  if (inCell && box.width > 18)
    spills.push("wider than its cell: " + text.textContent);
}));
const body = document.body.getBoundingClientRect().right - parseFloat(getComputedStyle(document.body).paddingRight);
document.querySelectorAll("table").forEach(table => {  // every table within the page's column
  if (table.getBoundingClientRect().right > body + 1) spills.push("a table is wider than the page's column: " + table.id);
});
document.querySelectorAll("#students tr").forEach(row => {  // a student's row reads as one line or a few
  if (row.getBoundingClientRect().height > 100) spills.push("a tall row: " + row.cells[0].textContent);
});
document.querySelectorAll("#students td:nth-child(" + ([...document.querySelectorAll("#students th")]
    .findIndex(th => th.textContent === "status") + 1) + ")").forEach(cell => {  // a status reads as text
  const range = document.createRange();
  range.selectNodeContents(cell);
  if (!cell.textContent.includes(" ") && range.getClientRects().length > 1)
    spills.push("a one-word status wraps: " + cell.textContent);
  if (getComputedStyle(cell).backgroundColor !== getComputedStyle(cell.parentElement.cells[0]).backgroundColor)
    spills.push("a status is tinted apart from its row: " + cell.textContent);
});
document.body.dataset.spills = JSON.stringify(spills);
</script>"""


def spills(page, tmp_path) -> list[str]:
    """What overflows ``page`` (a copy with :data:`OVERFLOW` appended), as Chromium lays it out at 1280 px."""
    measured = tmp_path / f"measured-{page.stem}.html"
    measured.write_text(page.read_text().replace("</body>", OVERFLOW + "</body>"))
    run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000",
                          "--dump-dom", measured.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'data-spills="([^"]*)"', run.stdout)
    assert found, run.stderr[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"'))


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_a_picture_with_nan_on_a_sequential_scale_reads_in_a_browser(tmp_path):
    """Weights with NaN, +inf and a long value, on a feedback page in Chromium: a sequential scale
    (no diverging blue), NaN and the infinity as legend entries, and nothing leaves its cell, its
    picture or the window."""
    values = [[0.5, "nan", 0.2, 0.1234567], [0.1, 0.9, "inf", 0.0]]
    picture = {"actual": values, "expected": [[0.5, 0.3, 0.2, 0.0], [0.1, 0.9, 0.0, 0.0]],
               "differ": [[0, 1, 0, 1], [0, 0, 1, 0]], "slice": [0], "rows": [0, 2], "cols": [0, 4],
               "shape": [2, 2, 4], "mask": False}
    record = submission([CheckResult(
        "masking", "test_weights", 1.0, False, failure=Failure(FailureKind.WRONG, picture=picture),
        message="weights: 3 of 8 entries differ" + " (a long line that must wrap, not widen the page)" * 20)])
    page = tmp_path / "feedback.html"
    page.write_text(feedback_html(LAB, record))
    dom, console = render(page, tmp_path)
    assert console == ""
    svg = dom[dom.index('class="heatmap"'):].split("</svg>")[0]
    blue = "#{:02x}{:02x}{:02x}".format(*NEGATIVE)
    assert blue not in svg and ">NaN</text>" in svg and ">∞</text>" in svg and "drawn: [0, 0:2, 0:4]" in svg
    assert spills(page, tmp_path) == []
    too_wide = tmp_path / "too-wide.html"  # the measure itself can fail
    too_wide.write_text(page.read_text().replace("</body>", '<div style="width: 3000px">x</div></body>'))
    assert spills(too_wide, tmp_path)[0].startswith("the page is")
