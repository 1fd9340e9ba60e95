"""Fair grades: one mistake costs one mistake (issue: a loop zeroed correct parts, printing cost
points, the status column flagged the wrong students).

One cohort, graded once by the real command line: each student is the reference solution with
one mistake. Before per-module budgets and interrupted calls, a loop in ``heads.split_heads``
scored 21.5 (every later check "not run: budget used up"), a loop at import of ``dropout.py``
scored 2, and both were ``graded`` in the status column.
"""

import json
import shutil
import subprocess
import sys

import pytest

from autograder.lab import Lab
from autograder.limits import DEFAULTS
from conftest import KIT, LAB, PARTS, SOLUTIONS, grade, grades_table, hang, once_per_run, run_here, submission_with

# slow: grades, or starts processes (left out of make test-fast). One xdist worker runs the module (--dist loadgroup):
# another that needed the cohort graded once per run would idle on its lock while it is built (its lanes sleep through time-outs).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fairness")]

FULL = {"scores": 10, "softmax": 15, "projections": 20, "masking": 20, "dropout": 10, "heads": 25}
LOOP = hang()  # costs its calls' time-outs as a busy loop would (loop_at_import spins)

# student: (module, text appended to the reference module, the part it may cost, status)
MISTAKES = {
    "loop_scores": ("scores", "\ndef attention_scores(inputs):\n" + LOOP, "scores",
                    "timed out: scores.attention_scores"),
    "loop_softmax": ("softmax", "\ndef softmax(scores, dim=-1):\n" + LOOP, "softmax", "timed out: softmax.softmax"),
    "loop_projections": ("projections", "\ndef scaled_attention_weights(queries, keys):\n" + LOOP, "projections",
                         "timed out: projections.scaled_attention_weights"),
    "loop_masking": ("masking", "\ndef causal_average(x):\n" + LOOP, "masking", "timed out: masking.causal_average"),
    "loop_dropout": ("dropout", "\ndef dropout(x, p, keep_mask=None, generator=None, training=True):\n" + LOOP,
                     "dropout", "timed out: dropout.dropout"),
    "loop_heads": ("heads", "\ndef split_heads(x, num_heads):\n" + LOOP, "heads", "timed out: heads.split_heads"),
    "hang_above_0_4": ("dropout", "\n_dropout = dropout\n\n\ndef dropout(x, p, keep_mask=None, generator=None, "
                       "training=True):\n    if training and 0.4 < p < 1:\n        import time\n        while True:\n            time.sleep(1)\n"
                       "    return _dropout(x, p, keep_mask, generator, training)\n", "dropout",
                       "timed out: dropout.dropout"),
    "loop_at_import": ("dropout", "\nwhile True:\n    pass\n", "dropout", "timed out: loading dropout.py"),
    # In a part without a ban: code importing os gets no call of a part with one (judge.internals).
    "exit_at_import": ("projections", "\nimport os\nos._exit(0)\n", "projections", "crashed: projections."),
    "segfault": ("masking", "\nimport ctypes\ndef causal_mask(num_tokens):\n    ctypes.string_at(0)\n", "masking",
                 "crashed: masking.causal_mask (SIGSEGV)"),
    "scribbler": ("scores", "\nimport os, stat\n_matrix = attention_scores\ndef attention_scores(inputs):\n"
                  "    for fd in range(3, 64):  # garbage on every socket it holds: its own channel to the grader\n"
                  "        try:\n            if stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
                  "                os.write(fd, b'not a frame' * 8)\n        except OSError:\n            pass\n"
                  "    return _matrix(inputs)\n", "scores", "broke the protocol: scores.attention_scores"),
    # Just over what the notes say nothing about: much more only costs the calls' time-out, not what is tested.
    "printer": ("scores", f"\nimport sys\nsys.stdout.write('attention! ' * {DEFAULTS.printed_note_bytes // 11 + 10_000})\n",
                None, "graded"),
}

# student: (module, text appended): a mistake in masking.py that heads' wrapper (it builds
# masking.CausalAttention) pays for too, so heads' feedback must name masking.
MASKING_MISTAKES = {
    "masking_breaks_at_import": ("masking", "\nraise RuntimeError('half-finished')\n"),
    "masking_wrong_values": ("masking", "\n_forward = CausalAttention.forward\n"
                             "CausalAttention.forward = lambda self, x: 2 * _forward(self, x)\n"),
}


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    """The cohort of MISTAKES and MASKING_MISTAKES graded by `make grade`'s command, once per run."""
    def build(shared):
        cohort = shared / "cohort"
        for student, (module, appended, *_) in {**MISTAKES, **MASKING_MISTAKES}.items():
            folder = cohort / student / "attention"
            shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("tests", "*.ipynb", "Makefile"))
            (folder / f"{module}.py").write_text((folder / f"{module}.py").read_text() + appended)
        # Calls of 1 s, not 10: the loops cost their calls as they would, in a fraction of the time. Modules'
        # budgets of 10 s, not 60: a loop's later calls are refused sooner, yet hang_above_0_4's calls that
        # answer (after three of its calls hung, each with its worker's restart charged) are still asked.
        # The hangs sleep through their time-outs, so four lanes wait side by side on two cores (57 -> 34 s;
        # with the budget, about 25 s).
        run = run_here("grade", "--submissions", str(cohort), "--out", str(shared / "out"), "--jobs", "4", "--force",
                       "--call-timeout", "1", "--budget", "10")
        assert run.returncode == 0, run.stderr[-3000:]

    out = once_per_run(tmp_path_factory, "fairness", build) / "out" / LAB.name  # the lab's reports
    return out, grades_table(out)


@pytest.mark.parametrize("student", sorted(MISTAKES))
def test_one_mistake_costs_only_its_own_part_and_the_status_names_it(graded, student):
    _, table = graded
    row = table[student]
    _, _, costly, status = MISTAKES[student]
    for part in PARTS:
        if part != costly:
            assert float(row[part]) == FULL[part], (student, part, row)
    if costly:
        assert float(row[costly]) < FULL[costly], row
    assert row["status"].startswith(status), row


def test_code_that_never_ran_earns_nothing_in_its_part(graded):
    _, table = graded
    assert float(table["exit_at_import"]["projections"]) == 0
    assert float(table["loop_at_import"]["dropout"]) == 0


def test_printing_costs_nothing_and_is_said_once(graded):
    out, table = graded
    assert table["printer"]["total"] == "100"
    assert table["printer"]["notes"].count("printed") == 1, table["printer"]["notes"]


def test_a_failure_is_data_from_the_worker_to_the_results(graded):
    out, _ = graded
    summary = json.loads((out / "students" / "segfault" / "summary.json").read_text())
    raw_failures = [c for c in summary["checks"] if not c["passed"]]
    assert raw_failures and all(c["failure"]["kind"] == "crashed" and c["failure"]["signal"] == "SIGSEGV"
                                for c in raw_failures), raw_failures
    hung = json.loads((out / "students" / "loop_at_import" / "summary.json").read_text())
    failure = next(c["failure"] for c in hung["checks"] if not c["passed"])
    assert failure == {"kind": "timeout", "where": failure["where"], "file": "dropout.py", "line": failure["line"],
                       "phase": "import", "loading": ["dropout.py"]}, failure


def heads_feedback(out, student: str) -> str:
    feedback = (out / "students" / student / "feedback.md").read_text()
    return feedback[feedback.index("## heads"):].split("\n## ")[0]


def test_a_part_that_pays_for_another_modules_mistake_says_so_in_one_line(graded):
    out, table = graded
    broken = heads_feedback(out, "masking_breaks_at_import")
    assert float(table["masking_breaks_at_import"]["heads"]) < FULL["heads"]
    assert broken.count("depends on masking") == 1, broken
    assert "stopped inside masking.py" in broken, broken
    wrong = heads_feedback(out, "masking_wrong_values")
    assert float(table["masking_wrong_values"]["heads"]) < FULL["heads"]
    assert wrong.count("depends on masking") == 1 and "heads builds on masking.py" in wrong, wrong
    assert "depends on" not in heads_feedback(out, "loop_heads")  # heads' own mistake


def test_a_time_out_costs_only_the_calls_that_hang(graded):
    """dropout hangs for 0.4 < p < 1 only: its calls with p = 0, p = 1, out of range or in eval mode
    are asked again after the time-out, and answer."""
    out, table = graded
    summary = json.loads((out / "students" / "hang_above_0_4" / "summary.json").read_text())
    passed = {c["name"] for c in summary["checks"] if c["passed"]}
    assert {"test_dropout_p_zero_is_identity", "test_dropout_eval_mode_is_identity", "test_dropout_p_one_gives_zeros",
            "test_dropout_rejects_p_outside_unit_interval"} <= passed, passed
    assert 0 < float(table["hang_above_0_4"]["dropout"]) < FULL["dropout"], table["hang_above_0_4"]


def test_a_failure_inside_a_passing_part_names_the_callers_line_not_a_dependency(tmp_path):
    """The decoder hands cross-attention a key of the wrong shape: the error surfaces inside
    attention.py, whose own checks pass, so the line says where, and from which line of decoder.py."""
    transformer = Lab.load(KIT / "source" / "transformer")
    decoder = (transformer.reference / "decoder.py").read_text().replace(
        "self.cross_attn(x, memory, memory)", "self.cross_attn(x, memory.transpose(1, 2), memory)")
    submission = submission_with(tmp_path, {"decoder": decoder}, transformer)
    run = subprocess.run([sys.executable, "-m", "autograder", "check", "--lab", "transformer", "--submission",
                          str(submission), "--checks", str(transformer.checks)], cwd=KIT, capture_output=True,
                         text=True, timeout=900)
    line = next(n for n, text in enumerate(decoder.splitlines(), start=1) if "memory.transpose(1, 2)" in text)
    assert "surfaced inside attention.py: " in run.stdout and f"(decoder.py line {line})" in run.stdout, run.stdout
    assert "depends on attention" not in run.stdout, run.stdout


def test_form_that_does_not_change_behaviour_costs_nothing(tmp_path):
    """Parameter-free extra submodules (an `nn.ReLU()`, an `nn.Softmax(-1)`) and a creation order no
    seeded check needs: full points in lab 2 (each cost 2 to 2.5 points before)."""
    transformer = Lab.load(KIT / "source" / "transformer")
    feedforward = (transformer.reference / "feedforward.py").read_text()
    attention = (transformer.reference / "attention.py").read_text()
    encoder = (transformer.reference / "encoder.py").read_text()
    changed = {
        "feedforward": feedforward.replace("        self.linear1 = nn.Linear(d_model, d_ff)\n",
                                           "        self.linear1 = nn.Linear(d_model, d_ff)\n        self.relu = nn.ReLU()\n"),
        "attention": attention.replace("        self.dropout = nn.Dropout(dropout)\n",
                                       "        self.dropout = nn.Dropout(dropout)\n        self.softmax = nn.Softmax(-1)\n"),
        "encoder": encoder.replace("        self.norm1 = LayerNorm(d_model)\n        self.norm2 = LayerNorm(d_model)\n",
                                   "        self.norm2 = LayerNorm(d_model)\n        self.norm1 = LayerNorm(d_model)\n"),
    }
    assert all(changed[module] != text for module, text in (("feedforward", feedforward), ("attention", attention),
                                                              ("encoder", encoder)))
    results = grade(submission_with(tmp_path, changed, transformer), tmp_path / "results.json", lab=transformer)
    assert results["total"] == results["max_total"], [(c["name"], c["message"][:200]) for c in results["checks"]
                                                      if not c["passed"]]
