"""The reports as their readers use them: the class report an instructor acts on, a student's
feedback page, the similarity of submissions; checked in a real browser (headless Chromium)."""

import io
import json
import re
import shutil
import subprocess

import pytest

from autograder.batch.grade import grade
from autograder.reports.class_report import flags
from autograder.reports.feedback import feedback_markdown, feedback_view
from autograder.reports.heatmap import NEGATIVE, heatmap_svg
from autograder.reports.histogram import bins, histogram_svg
from autograder.reports.similarity import similarity
from conftest import KIT, LAB, SOLUTIONS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_full_marks_have_a_bar_of_their_own_and_every_count_is_inside_the_picture():
    assert bins([100, 95, 90, 0, 9.5], 100)[-2:] == [("90–100", 2), ("100", 1)]
    svg = histogram_svg([100] * 7 + [55], 100)
    counts = [(float(y), int(n)) for y, n in re.findall(r"y='([\d.]+)' font-size='11' text-anchor='middle'>(\d+)<", svg)]
    assert (7 in [n for _, n in counts]) and all(y > 11 for y, _ in counts)  # 11 px: the font, above y=0 is clipped
    assert ">students<" in svg and "total points" in svg  # both axes are named


def record(checks):
    return {"checks": [{"part": "p", "name": f"c{i}", "points": 1.0, "hidden": hidden, "passed": passed,
                        **({} if passed else {"failure": {"kind": kind}})} for i, (hidden, passed, kind) in enumerate(checks)]}


def texts(record) -> list[str]:
    return [flag["text"] for flag in flags(record)]


def test_a_hard_coder_and_points_lost_to_time_outs_are_flagged():
    hard_coder = record([(False, True, None)] * 3 + [(True, False, "wrong")] * 3)
    assert texts(hard_coder) == ["passes every public check, fails most hidden ones"]
    assert texts(record([(False, True, None), (True, False, "timeout"), (True, True, None)])) == \
        ["lost 1 points to time-outs or crashes"]
    assert texts(record([(False, False, "wrong"), (True, False, "wrong")])) == []  # just wrong: nothing to look at


def test_a_module_that_does_not_import_a_part_not_started_and_upload_notes_need_a_look():
    """Each reason once, pointing at its evidence on the student's feedback page."""
    broken = {"kind": "import", "file": "softmax.py", "line": 49}
    student = {"notes": ["README.md: not part of the assignment, not graded", "conftest.py: not part of the assignment, "
                         "not graded", "notes.txt: not UTF-8"], "checks": [
        {"part": "softmax", "name": f"c{i}", "points": 1.0, "hidden": False, "passed": False, "failure": broken}
        for i in range(3)] + [
        {"part": "dropout", "name": f"d{i}", "points": 1.0, "hidden": i == 1, "passed": False,
         "failure": {"kind": "not_implemented"}} for i in range(2)] + [
        {"part": "heads", "name": "h", "points": 1.0, "hidden": False, "passed": False,
         "failure": {"kind": "not_implemented"}}, {"part": "heads", "name": "h2", "points": 1.0, "hidden": False,
                                                   "passed": True}]}
    assert flags(student) == [
        {"text": "did not import: softmax.py line 49", "anchor": "#part-softmax"},
        {"text": "not started: dropout", "anchor": "#part-dropout"},
        {"text": "upload: conftest.py: not part of the assignment, not graded (and 1 more notes)", "anchor": ""}]


def renamed(code: str) -> str:
    """A copy that hides nothing but the names: every local variable gets another one."""
    for old, new in (("scores", "s_mat"), ("weights", "attn_w"), ("shift", "mx"), ("exps", "e"), ("dim", "axis")):
        code = re.sub(rf"\b{old}\b", new, code)
    return code


def test_a_copy_with_renamed_variables_is_found_and_independent_solutions_are_not(tmp_path):
    staged = {}
    for student in ("ann", "ben", "cat"):
        staged[student] = tmp_path / student
        shutil.copytree(LAB.release, staged[student], ignore=shutil.ignore_patterns("tests", "*.ipynb", "Makefile"))
    ben = KIT / "examples" / "submitted" / "ben" / "attention"  # a demo student's own, independent solution
    shutil.copy(ben / "softmax.py", staged["ann"] / "softmax.py")
    (staged["ben"] / "softmax.py").write_text(renamed((ben / "softmax.py").read_text()))
    assert (staged["ben"] / "softmax.py").read_text() != (ben / "softmax.py").read_text()
    found = similarity(LAB, staged)
    pairs = {(p["module"], p["first"], p["second"]) for p in found["pairs"]}
    assert ("softmax.py", "ann", "ben") in pairs
    assert not any("cat" in pair for pair in pairs)  # the stubs: the given code never counts
    assert not any("the reference solution" in pair for pair in pairs)  # ben's own work is not the reference
    shown = next(p for p in found["pairs"] if p["module"] == "softmax.py")
    assert "<mark>" in shown["first_code"] and "<script" not in shown["first_code"]


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
        return {"part": "softmax", "name": name, "hidden": False, "points": points, "passed": False,
                "message": message, "about": "", "failure": {"kind": kind}, "diagnoses": []}

    checks = [check("test_a", "import", broken), check("test_b", "import", broken, 2.0), check("test_c", "import", broken),
              check("test_d", "not_implemented", "not implemented yet: scores.f"),
              check("test_e", "not_implemented", "not implemented yet: scores.g"),
              check("test_f", "wrong", "expected 1, got 2"), check("test_g", "wrong", "expected 1, got 2")]
    record = {"student": "ann", "status": "graded", "notes": [], "checks": checks, "handed_in": True,
              "parts": {part: {"points": 0.0, "max_points": LAB.part(part).weight, "misconceptions": []}
                        for part in LAB.part_ids}}
    failed = next(p for p in feedback_view(LAB, record)["parts"] if p["id"] == "softmax")["failed"]
    assert [(f["name"], f["also"], f["points"]) for f in failed] == [
        ("test_a", ["test_b", "test_c"], 4.0), ("test_d", [], 1.0), ("test_e", [], 1.0), ("test_f", [], 1.0),
        ("test_g", [], 1.0)]
    page = feedback_markdown(LAB, record)
    assert page.count("could not be imported") == 1 and "`test_a` and 2 more checks (`test_b`, `test_c`) (4 pt)" in page
    assert page.count("line 86") == 1


@pytest.fixture(scope="module")
def cohort_reports(tmp_path_factory):
    """A small cohort graded: one right, one copying the reference with renamed names, one with a
    mistake that draws a picture (tril for triu), one that loops forever in one function, and one
    who handed nothing in."""
    root = tmp_path_factory.mktemp("reports")
    cohort = root / "cohort"
    for student in ("ann", "bo", "cy", "dee"):
        shutil.copytree(SOLUTIONS, cohort / student / "attention", ignore=shutil.ignore_patterns("tests", "*.ipynb", "Makefile"))
    softmax = cohort / "bo" / "attention" / "softmax.py"
    softmax.write_text(renamed(softmax.read_text()))
    masking = cohort / "cy" / "attention" / "masking.py"
    masking.write_text(masking.read_text().replace("torch.triu(", "torch.tril("))
    dropout = cohort / "dee" / "attention" / "dropout.py"
    dropout.write_text(dropout.read_text().replace('    """\n', '    """\n    while True:\n        pass\n', 1))
    (cohort / "eve").mkdir()  # a student of the course without an attention/ folder
    out = root / "out"
    grade(LAB, cohort, out, jobs=2, stream=io.StringIO())
    return out


def test_the_class_report_links_flags_and_lists_near_copies(cohort_reports):
    report = (cohort_reports / "report.html").read_text()
    for student in ("ann", "bo", "cy", "dee"):
        assert f'href="students/{student}/feedback.html"' in report
    students = report[report.index('id="students"'):report.index("Known mistakes")]
    dee = students[students.index(">dee<"):].split("</tr>")[0]
    assert "time-outs or crashes" in dee
    needs = report[report.index('id="needs"'):].split("</ul>")[0]  # the report opens with who needs a look
    assert report.index('id="needs"') < report.index("id='histogram'") and "1 needs a look" in report
    assert '<a href="students/dee/feedback.html">lost ' in needs and ">ann<" not in needs and ">eve<" not in needs
    groups = report[report.index('id="similar-groups"'):].split("</ul>")[0]
    assert "softmax.py</b>: ann, bo, cy, dee, the reference solution" in groups
    softmax = groups[groups.index("softmax.py</b>"):].split("</li>")[0]
    assert softmax.count('<details class="similar">') == 4  # each of the 5 with its closest, not all 10 pairs


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
    report = (cohort_reports / "report.html").read_text()
    assert "4 students handed in" in report
    absent = report[report.index('id="absent"'):].split("</p>")[0]
    assert "Not handed in (1" in absent and 'href="students/eve/feedback.html"' in absent
    students = report[report.index('id="students"'):report.index("Known mistakes")]
    assert ">eve<" not in students
    assert "eve,0,0,0,0,0,0,0,100,not handed in," in (cohort_reports / "grades.csv").read_text()


def test_a_mask_mistake_is_pictured_for_public_checks_only(cohort_reports):
    summary = json.loads((cohort_reports / "students" / "cy" / "summary.json").read_text())
    failed = [c for c in summary["checks"] if not c["passed"]]
    assert any(c["failure"].get("picture") for c in failed if not c["hidden"])
    assert not any(c["failure"].get("picture") for c in failed if c["hidden"])
    page = (cohort_reports / "students" / "cy" / "feedback.html").read_text()
    assert "class='heatmap'" in page and "<details>" in page


def render(page, tmp_path) -> tuple[str, str]:
    """The page as Chromium renders it (its DOM after scripts ran) and what its console said."""
    run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    shot = tmp_path / f"{page.stem}.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,1600",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 20_000  # a picture with something on it, not a blank page
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return run.stdout, "\n".join(console)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_the_reports_render_in_a_real_browser(cohort_reports, tmp_path):
    dom, console = render(cohort_reports / "report.html", tmp_path)
    assert console == ""
    assert 'id="histogram"' in dom and 'id="overview"' in dom and 'href="students/cy/feedback.html"' in dom
    dom, console = render(cohort_reports / "students" / "cy" / "feedback.html", tmp_path)
    assert console == ""
    assert 'id="summary"' in dom and 'class="heatmap"' in dom and "Known mistake" in dom
    dom, console = render(cohort_reports / "students" / "eve" / "feedback.html", tmp_path)
    assert console == "" and 'id="not-handed-in"' in dom and 'class="none" id="total"' in dom


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
