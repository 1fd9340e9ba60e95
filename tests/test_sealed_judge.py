"""Sealed judging (issue 21): what a submission's process says can neither lift a rule nor reach
past its own submission. Each attack is graded by the real command line in one lane *before* an
honest twin and a stub student (students are graded in name order: ``a_`` first; those graded with
the default limits share one cohort, ``attacked``), and each test fails on the kit before the
defence it names.
"""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from autograder.harness.remote import RemoteCode, StudentError
from autograder.lab import Lab
from conftest import KIT, LAB, grades_table, hang, once_per_run, run_here

# slow: grades, or starts processes (left out of make test-fast). One xdist worker runs the module (--dist loadgroup):
# another that needed the cohort graded once per run would idle on its lock while it is built (one lane).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sealed-judge-cohort")]

TRANSFORMER = Lab.load(KIT / "source" / "transformer")


def cohort(tmp_path: Path, lab: Lab, attackers: dict[str, dict[str, str]]) -> Path:
    """``attackers`` (the reference with some modules replaced), an honest twin and a stub student."""
    root = tmp_path / "cohort"
    students = {**attackers, "b_honest": {}}
    for student, replaced in students.items():
        folder = root / student / lab.name
        folder.mkdir(parents=True)
        for module in lab.reference.glob("*.py"):
            shutil.copy(module, folder / module.name)
        for name, text in replaced.items():
            (folder / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")
    shutil.copytree(lab.release, root / "c_stubs" / lab.name, ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    return root


def run_grade(submissions: Path, out: Path, lab: Lab, *options: str, process: bool = False):
    """`make grade` on ``submissions`` (the cohort of :func:`cohort`) into ``out``; ``process``: as a process of its
    own, whose whole output the caller reads (:func:`conftest.run_here` says what it leaves out)."""
    argv = ["grade", "--submissions", str(submissions), "--out", str(out), "--lab", lab.name, "--jobs", "1", "--force",
            *options]
    run = subprocess.run([sys.executable, "-m", "autograder", *argv], cwd=KIT, capture_output=True, text=True,
                         timeout=900) if process else run_here(*argv)
    assert run.returncode == 0, run.stderr[-3000:]
    table = grades_table(out / lab.name)
    assert table["b_honest"]["total"] == "100" and table["c_stubs"]["total"] == "0", table
    assert_no_grader_internals(out / lab.name / "students")
    return run


# What a student reads never shows the grader's machine: its paths, its tracebacks.
GRADER_INTERNALS = (str(KIT), sys.prefix, "site-packages", "/tmp/autograder-", "Traceback (most recent call last)")


def assert_no_grader_internals(students: Path) -> None:
    for path in students.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not [leak for leak in GRADER_INTERNALS if leak in text], \
                (path, [text[max(0, text.index(leak) - 200):text.index(leak) + 200] for leak in GRADER_INTERNALS
                        if leak in text])


@pytest.fixture(scope="session")
def attacked(tmp_path_factory) -> tuple[Path, str]:
    """The attacks graded with the default limits, in one cohort: each attacker (the tests below say
    which) before the honest twin and the stub student in one lane, and ``z_softmax_gc`` after them.
    Graded once per run (a lane's start costs more than two students); returns the reports' folder
    (its parent holds ``cohort/``) and what the run printed."""
    def build(shared):
        softmax = (LAB.reference / "softmax.py").read_text()
        dropout = (LAB.reference / "dropout.py").read_text().replace("def dropout(", "def _dropout(")
        heads = (LAB.reference / "heads.py").read_text()
        flagged = {module: (LAB.reference / f"{module}.py").read_text() + "\nimport gc\n" for module in ("heads", "softmax")}
        attackers = {
            "a_dispatch": {"softmax": softmax + DISPATCH_LIFTER},
            "a_heads_gc": {"heads": flagged["heads"]},
            "a_hog": {"softmax": softmax.replace("def context_vectors(", "def _context_vectors(") + FLAKY_HOG},
            "a_inference": {"softmax": softmax + INFERENCE_LIFTER},
            "a_plain": {"softmax": softmax + PLAIN_SOFTMAX},
            "a_recorder": {"dropout": dropout + RECORDER,
                           "heads": heads.replace("def split_heads(", "def _split_heads(") + TELLER},
            "z_softmax_gc": {"softmax": flagged["softmax"]},
        }
        run = run_grade(cohort(shared, LAB, attackers), shared / "out", LAB, process=True)
        (shared / "printed").write_text(run.stdout + run.stderr)

    shared = once_per_run(tmp_path_factory, "sealed-judge-cohort", build)
    table = grades_table(shared / "out" / LAB.name)
    for student in table.keys() - {"b_honest", "c_stubs"}:  # whatever one attacker did, the next was unharmed
        assert all(float(table[student][part]) == LAB.part(part).weight for part in ("scores", "projections", "masking")), \
            table[student]
    return shared / "out", (shared / "printed").read_text()


def checks_of(out: Path, lab: Lab, student: str) -> dict[str, dict]:
    summary = json.loads((out / lab.name / "students" / student / "summary.json").read_text())
    return {check["name"]: check for check in summary["checks"]}


# 3. The judge names what it charges: every instance of this class claims a module of its own, and
# each of its calls hangs. Charged by the claimed names, each instance had a fresh budget (one
# student took 735 s of grading); charged to what the judge called, heads.py has one budget.
BUDGET_THIEF = """
import itertools

_names = itertools.count()


class _Hanging(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, *args, **kwargs):
        HANG


def MultiHeadAttentionWrapper(*args, **kwargs):
    return type("MultiHeadAttentionWrapper", (_Hanging,), {"__module__": f"made_up_{next(_names)}"})()


def MultiHeadAttention(*args, **kwargs):
    return type("MultiHeadAttention", (_Hanging,), {"__module__": f"made_up_{next(_names)}"})()
""".replace("        HANG\n", hang("        "))


def test_calls_are_charged_to_what_the_judge_called_not_to_claimed_names(tmp_path):
    heads = (LAB.reference / "heads.py").read_text()
    thief = heads[:heads.index("class MultiHeadAttentionWrapper")] + BUDGET_THIEF  # split/merge_heads kept
    out = tmp_path / "out"
    run_grade(cohort(tmp_path, LAB, {"a_thief": {"heads": thief}}), out, LAB,
              "--call-timeout", "1", "--budget", "4")
    failed = [c for c in checks_of(out, LAB, "a_thief").values() if c["part"] == "heads" and not c["passed"]]
    assert failed
    places = {c["failure"]["where"] for c in failed if c["failure"].get("where")}
    assert places and all(place.startswith("heads.") for place in places), places  # never made_up_<n>
    # Every call into heads.py together within its budget, plus the grader's own work.
    assert json.loads((out / LAB.name / "students" / "a_thief" / "summary.json").read_text())["seconds"] < 4 + 60


def test_a_submission_cannot_spend_more_than_its_total(tmp_path):
    """The judge's clock bounds the whole submission, whatever the modules' budgets allow: the calls
    (and the forks of their workers; the zygote's own start is the grader's) until 2.5 s, then nothing."""
    for name in ("one", "two", "three", "four"):
        (tmp_path / f"{name}.py").write_text("def spin():\n" + hang())
    code = RemoteCode(tmp_path, timeout=1.0, budget=10.0, total_budget=2.5)
    try:
        errors = []
        for call in (code.one.spin, code.two.spin, code.three.spin, code.four.spin):
            try:
                call()
            except StudentError as error:
                errors.append(error)
    finally:
        code.close()
    assert [e.kind for e in errors] == ["timeout"] * 4
    assert "did not finish in 1 s" in str(errors[0]), errors[0]
    assert "not run: the calls into your submission used up their 2.5 s in total" in str(errors[-1]), errors


# 3. Structure claims: private copies of the lab's layers that claim its class names, while the lab's
# own modules are stubs. The type names the worker reports are a claim; the judge builds the lab's
# own module with the submodule's weights and compares what the two compute.
def spoofed_encoder() -> str:
    copies = []
    for module, classes in (("layernorm", ("LayerNorm",)), ("feedforward", ("FeedForward",)),
                            ("attention", ("MultiHeadAttention",))):
        text = (TRANSFORMER.reference / f"{module}.py").read_text()
        copies.append(text)
        copies += [f"{cls}.__module__ = {module!r}\n" for cls in classes]
    encoder = (TRANSFORMER.reference / "encoder.py").read_text()
    kept = [line for line in encoder.splitlines() if not line.startswith(("from attention", "from feedforward",
                                                                         "from layernorm"))]
    return "\n".join(copies) + "\n" + "\n".join(kept) + "\n"


def test_a_layer_reuses_the_labs_modules_by_what_they_compute_not_by_their_claimed_names(tmp_path):
    stubs = {module: (TRANSFORMER.release / f"{module}.py").read_text() for module in ("attention", "feedforward",
                                                                                       "layernorm")}
    out = tmp_path / "out"
    run_grade(cohort(tmp_path, TRANSFORMER, {"a_spoofer": {"encoder": spoofed_encoder(), **stubs}}), out, TRANSFORMER)
    checks = checks_of(out, TRANSFORMER, "a_spoofer")
    assert checks["test_encoder_matches_torch_document_setup"]["passed"]  # its copies compute well
    structure = checks["test_encoder_structure"]
    assert not structure["passed"] and "not implemented yet" in structure["message"], structure


# 4. Hidden inputs: dropout records every input it is given; a public check of heads, later in the
# run, raises what was recorded. Its message must be the same with or without the hidden checks.
RECORDER = """
SEEN = []


def dropout(x, p, keep_mask=None, generator=None, training=True):
    SEEN.append((tuple(x.shape), float(p)))
    return _dropout(x, p, keep_mask, generator, training)
"""
TELLER = """

def split_heads(x, num_heads):
    from dropout import SEEN
    raise RuntimeError(f"seen so far: {SEEN}")
"""


def test_nothing_a_hidden_check_sends_reaches_a_public_checks_message(attacked, tmp_path):
    out, _ = attacked
    graded = {name: c["message"] for name, c in checks_of(out, LAB, "a_recorder").items() if not c["hidden"]}
    public = subprocess.run([sys.executable, "-m", "autograder", "check", "--submission",
                             str(out.parent / "cohort" / "a_recorder" / LAB.name), "--checks", str(LAB.release / "tests"),
                             "--results-json", str(tmp_path / "public.json")], cwd=KIT, capture_output=True, text=True,
                            timeout=900)
    assert (tmp_path / "public.json").is_file(), public.stdout[-3000:]
    alone = {c["name"]: c["message"] for c in json.loads((tmp_path / "public.json").read_text())["checks"]}
    told = [name for name, message in graded.items() if "seen so far" in message]
    assert told, graded
    for name in told:
        assert graded[name] == alone[name], (name, graded[name][:500], alone[name][:500])


# 6. A worker killed for memory inside a property-based check: the failing example fails otherwise
# when hypothesis runs it again (first an exception, then the memory ceiling), which hypothesis
# reports as a FlakyFailure. That was "a check broke", with the judge's traceback and paths.
FLAKY_HOG = """

_calls = [0]


def context_vectors(inputs, weights):
    if inputs.dim() == 3:
        _calls[0] += 1
        if _calls[0] == 1:
            raise ValueError("the first batched call fails")
        hog = []
        while True:
            hog.append(bytearray(256 * 1024 * 1024))
    return _context_vectors(inputs, weights)
"""


def test_a_memory_kill_in_a_property_check_says_so_without_grader_internals(attacked):
    out, printed = attacked
    batched = checks_of(out, LAB, "a_hog")["test_context_vectors_batched"]
    assert batched["failure"]["kind"] == "memory", batched
    assert "GiB" in batched["message"], batched["message"]  # the ceiling named
    assert grades_table(out / LAB.name)["a_hog"]["status"].startswith("out of memory"), grades_table(out / LAB.name)["a_hog"]
    assert str(KIT) not in printed  # and the student's files: run_grade


# 1. Bans lifted from inside the worker: leave its dispatch modes and call the kernel behind the
# library's name, or empty its guards through gc. Such code earns no more than code that uses the
# library plainly, and the class report names the file and line for review.
DISPATCH_LIFTER = """

import torch
from torch.utils._python_dispatch import _disable_current_modes


def softmax(scores, dim=-1):
    with _disable_current_modes():
        return torch._C._VariableFunctions.softmax(scores, dim)
"""
INFERENCE_LIFTER = """

import torch


def softmax(scores, dim=-1):
    with torch.inference_mode():  # the dispatch mode does not see inference tensors
        return torch.softmax(scores, dim).clone()
"""
PLAIN_SOFTMAX = """

def softmax(scores, dim=-1):
    return torch.softmax(scores, dim)
"""
GC_LIFTER = """

import gc
import torch.nn.functional as F


def layer_norm(x, weight, bias, eps=1e-5):
    for guard in gc.get_objects():
        if type(guard).__name__ == "Guards":
            guard.forbidden = frozenset()
        elif type(guard).__name__ == "ForbiddenOperators":
            guard.names = frozenset()
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
"""
PLAIN_LAYER_NORM = """

import torch.nn.functional as F


def layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
"""


def flagged_cells(out: Path, lab: Lab) -> dict[str, str]:
    """Each student's reasons under the class report's "Needs a look", as the page shows them ("" for a
    student not listed there)."""
    page = BeautifulSoup((out / lab.name / "report.html").read_text(), "html.parser")
    cells = {row.select_one("td").get_text(strip=True): "" for row in page.select("#students tbody tr")}
    for item in page.select("#needs li"):
        cells[item.select_one("b").get_text(strip=True)] = item.get_text(" ", strip=True)
    return cells


def test_a_lifted_ban_earns_no_more_than_the_library_used_plainly_and_is_flagged(attacked, tmp_path):
    layernorm = (TRANSFORMER.reference / "layernorm.py").read_text()
    transformer = {"a_gc": {"layernorm": layernorm + GC_LIFTER}, "a_plain": {"layernorm": layernorm + PLAIN_LAYER_NORM}}
    run_grade(cohort(tmp_path, TRANSFORMER, transformer), tmp_path / "out", TRANSFORMER)
    # Each lab's attackers, and every student the report flags (the shared cohort's gc importers too).
    for lab, out, attackers, part, plain, flagged in (
            (LAB, attacked[0], ("a_dispatch", "a_inference", "a_plain"), "softmax", "a_plain",
             {"a_dispatch", "a_inference", "a_heads_gc", "z_softmax_gc"}),
            (TRANSFORMER, tmp_path / "out", tuple(transformer), "layernorm", "a_plain", {"a_gc"})):
        table, flags = grades_table(out / lab.name), flagged_cells(out, lab)
        assert float(table[plain][part]) < lab.part(part).weight, table[plain]  # the ban holds on plain use
        module = f"{part}.py"
        for attacker in set(attackers) - {plain}:
            assert float(table[attacker][part]) <= float(table[plain][part]), (attacker, table[attacker], table[plain])
            assert f"reaches into internals (could lift a ban): {module} line" in flags[attacker], flags[attacker]
        assert {student for student, cell in flags.items() if "internals" in cell} == flagged, flags


# The red team's round on the defences above. A flag costs the banned checks of the module that
# reaches into internals (and of those loading it), not every part's; and the score of flagged code
# does not depend on an honest twin graded before it (replay bypassed the refusal).
def test_a_flag_costs_its_own_modules_banned_checks_whatever_the_order(attacked):
    out, _ = attacked
    table, flags = grades_table(out / LAB.name), flagged_cells(out, LAB)
    assert table["a_heads_gc"]["total"] == "100", table["a_heads_gc"]  # heads has no ban; softmax's stays whole
    assert float(table["z_softmax_gc"]["softmax"]) <= 5.5, table["z_softmax_gc"]  # no more than torch.softmax
    assert "heads.py line" in flags["a_heads_gc"] and "softmax.py line" in flags["z_softmax_gc"], flags
    assert "reaches into internals: softmax.py" in table["z_softmax_gc"]["status"], table["z_softmax_gc"]


# Hidden inputs through what a student reads before hidden results are published: a hidden check's
# time-out names its call in the status, and how much its calls printed is a number.
PROBE = """

_forward = CausalAttention.forward


def _probing(self, x):
    if tuple(x.shape) == (2, 9, 6):  # a shape only a hidden check uses (test_causal_attention_matches_sdpa)
        print("y" * (17 * 2**20))
        HANG
    return _forward(self, x)


CausalAttention.forward = _probing
""".replace("        HANG\n", hang("        "))


def test_what_hidden_checks_caused_is_not_in_the_feedback_shown_before_publication(tmp_path):
    out = tmp_path / "out"
    masking = (LAB.reference / "masking.py").read_text() + PROBE
    # It hangs until its call's time-out: 5 s, not 10, still lets its 17 MiB print finish on a busy machine.
    run_grade(cohort(tmp_path, LAB, {"a_probe": {"masking": masking}}), out, LAB, "--call-timeout", "5")
    assert "timed out: masking.CausalAttention.forward" in grades_table(out / LAB.name)["a_probe"]["status"]  # the probe ran
    shown = json.loads((out / LAB.name / "students" / "a_probe" / "results.json").read_text())["output"]
    assert "timed out" not in shown and "your code printed" not in shown, shown


def test_the_order_of_known_mistakes_before_publication_depends_on_public_checks_alone():
    """The second red team: two mistakes tied on public checks, one of them also matched by a
    hidden check (which code can make depend on a hidden input): the order shown before
    publication must not change with the hidden matches."""
    from autograder.reports.feedback import feedback_view
    from autograder.reports.records import student_record
    from autograder.results import CheckResult, Diagnosis, Failure, FailureKind, RunResults

    def record(hidden_matches: str):
        mistakes = {"a": Diagnosis("scores.a", "A", ""), "b": Diagnosis("scores.b", "B", "")}
        wrong = Failure(FailureKind.WRONG)
        checks = [CheckResult("scores", f"test_{i}", 1.0, False, message="wrong", failure=wrong,
                              diagnoses=(mistakes[m],)) for i, m in enumerate("aabb")]
        checks.append(CheckResult("scores", "test_hidden", 1.0, False, hidden=True, failure=wrong,
                                  diagnoses=(mistakes[hidden_matches],)))
        return student_record(LAB, "a_probe", RunResults(LAB.name, checks), [], [], None, 1.0)

    shown = [[m["id"] for m in feedback_view(LAB, record(matched), hidden=False)["parts"][0]["mistakes"]]
             for matched in "ab"]
    assert shown[0] == shown[1], shown
