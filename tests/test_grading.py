"""The checks grade correctly: reference 100, stubs 0, each wrong module caught, breakage contained."""

import io
import json
import os
import subprocess
import sys
import tomllib

import pytest
import torch

from autograder.course import hidden_line_ranges
from autograder.batch.grade import grade as grade_cohort
from autograder.harness.remote import RemoteCode, StudentError
from autograder.judge.misconceptions import Diagnoser, Misconception, load_catalogue
from autograder.results import FailureKind
from conftest import KIT, LAB, LABS, PARTS, SOLUTIONS, WRONG_MODULES, grade, once_per_run, submission_with

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast


def failed(results: dict, part: str | None = None) -> dict[str, str]:
    """Failed checks' messages by check id (``test_<part>.py::<check>``), or by name within ``part``."""
    return {c["name"] if part else c["id"]: c["message"] for c in results["checks"]
            if not c["passed"] and part in (None, c["part"])}


def test_reference_solution_scores_100(lab, solution_results):
    assert failed(solution_results) == {}
    assert solution_results["total"] == solution_results["max_total"] == 100
    assert list(solution_results["parts"]) == list(lab.part_ids)


def test_stubs_score_0_and_every_check_says_not_implemented(stub_results):
    assert stub_results["total"] == 0
    messages = failed(stub_results)
    assert len(messages) == len(stub_results["checks"])
    wrong = {check: msg for check, msg in messages.items() if not msg.startswith("not implemented yet: ")}
    assert wrong == {}


def test_stub_messages_name_the_part_and_function(stub_results):
    for check in stub_results["checks"]:
        stub = check["message"].removeprefix("not implemented yet: ").split("\n")[0]
        assert stub.split(".")[0] == check["part"], check


def test_points_declared_once_and_summing_to_the_weights(lab):
    points = tomllib.loads((lab.checks / "points.toml").read_text())
    assert list(points) == list(lab.part_ids) and lab.max_points == 100
    for part in lab.parts:
        assert sum(points[part.id].values()) == pytest.approx(part.weight), part


def test_every_check_has_points_and_every_points_entry_a_check(lab, solution_results):
    points = tomllib.loads((lab.checks / "points.toml").read_text())
    declared = {(part, name) for part in lab.part_ids for name in points[part]}
    collected = {(c["part"], c["name"]) for c in solution_results["checks"]}
    assert declared == collected


def test_every_part_has_public_and_hidden_checks(lab, solution_results):
    for part in lab.part_ids:
        kinds = {c["hidden"] for c in solution_results["checks"] if c["part"] == part}
        assert kinds == {True, False}, part


def test_every_hidden_check_says_in_one_line_what_it_checks(solution_results):
    """A failed hidden check shows only its docstring: each one has one."""
    hidden = [c for c in solution_results["checks"] if c["hidden"]]
    assert hidden and [c["name"] for c in hidden if not c["about"]] == []
    # In the student's words: the authors' "Contract: " and "Docstring: " openings are left out.
    assert [c["about"] for c in solution_results["checks"] if c["about"].startswith(("Contract:", "Docstring:"))] == []


def test_hidden_checks_are_the_ones_fenced_in_points_toml(lab, solution_results):
    text = (lab.checks / "points.toml").read_text()
    hidden_lines = {n for span in hidden_line_ranges(text) for n in span}
    fenced, part = set(), None
    for number, line in enumerate(text.split("\n"), start=1):
        if line.startswith("["):
            part = line.strip("[]")
        elif number in hidden_lines and "=" in line:
            fenced.add((part, line.split("=")[0].strip()))
    marked = {(c["part"], c["name"]) for c in solution_results["checks"] if c["hidden"]}
    assert marked == fenced


def test_every_size_a_hidden_check_varies_a_public_check_varies_too(lab, tmp_path):
    """No hidden surprise: each argument and tensor size the hidden checks vary (d_ff, d_ff / d_model, the
    heads, a batch dim, a dtype) or set to a value no public check uses, some public check varies too, so
    code that fixes it fails ``make check``."""
    out = tmp_path / "sizes.json"
    run = subprocess.run([sys.executable, str(KIT / "tests" / "request_sizes.py"), str(lab.reference), str(out)],
                         cwd=KIT, env={**os.environ, "PYTHONPATH": str(KIT)}, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0 and out.is_file(), run.stdout[-3000:] + run.stderr[-3000:]
    sizes = json.loads(out.read_text())
    assert sizes["hidden"] and sizes["public"]
    only_hidden = {name: {"hidden": values, "public": sizes["public"].get(name, [])}
                   for name, values in sizes["hidden"].items()
                   if not set(values) <= set(sizes["public"].get(name, [])) and len(sizes["public"].get(name, [])) < 2}
    assert only_hidden == {}


KNOWN_MISTAKES = {lab.name: load_catalogue(lab.checks) for lab in LABS}


def test_a_part_built_on_others_declares_its_end_to_end_checks(lab):
    points = tomllib.loads((lab.checks / "points.toml").read_text())
    for part in lab.parts:
        assert bool(part.uses) == bool(part.end_to_end), part  # judged on its wiring, save a declared share
        assert set(part.end_to_end) <= set(points[part.id]), part
        assert sum(points[part.id][check] for check in part.end_to_end) <= part.weight / 4, part  # a small share


def wrong_modules():
    """``(lab, part, mistake, its entry in mistakes.toml)`` for every module of the corpus."""
    for lab in LABS:
        for manifest in sorted((WRONG_MODULES / lab.name).glob("*/mistakes.toml")):
            for mistake, entry in tomllib.loads(manifest.read_text()).items():
                yield lab, manifest.parent.name, mistake, entry


def known_mistake(part: str, name: str, lab=LAB) -> Misconception | None:
    return next((m for m in KNOWN_MISTAKES[lab.name].get(part, []) if m.name == name), None)


def wrong_module(lab, part: str, mistake: str) -> str:
    """The mistake's module: the reference with a known mistake's edits, or the file of that name."""
    known = known_mistake(part, mistake, lab)
    if known is None:
        return (WRONG_MODULES / lab.name / part / f"{mistake}.py").read_text()
    return known.apply((lab.reference / f"{part}.py").read_text())


# The corpus's users run in one xdist worker (--dist loadgroup): another would idle on the lock while one lane grades it.
CORPUS = pytest.mark.xdist_group("wrong-modules")


@pytest.fixture(scope="session")
def wrong_modules_graded(tmp_path_factory) -> dict[tuple[str, str, str], dict]:
    """Every wrong module of the corpus (every known mistake among them), each the reference with that
    one module replaced, graded as one cohort per lab through the lanes, as a class is: one warm
    judge per lane instead of a cold ``autograder check`` per module. ``{(lab, part, mistake): the
    student's summary.json}``, graded once per run (:func:`conftest.once_per_run`)."""
    def build(shared):
        for lab in LABS:
            cohort = shared / "cohort" / lab.name
            for case_lab, part, mistake, _ in wrong_modules():
                if case_lab is lab:
                    submission_with(cohort / f"{part}-{mistake}", {part: wrong_module(lab, part, mistake)}, lab,
                                    name=lab.name)
            # One lane: a second costs a judge's start and learns the replays and diagnoses again (58 -> 53 CPU-s).
            grade_cohort(lab, cohort, shared / "graded" / lab.name, jobs=1, stream=io.StringIO())

    shared = once_per_run(tmp_path_factory, "wrong-modules", build)
    return {(lab.name, part, mistake): json.loads(
        (shared / "graded" / lab.name / "students" / f"{part}-{mistake}" / "summary.json").read_text())
        for lab, part, mistake, _ in wrong_modules()}


def failed_in(summary: dict, part: str) -> dict[str, str]:
    """A graded student's failed checks of ``part``: their messages (hidden ones blank) by name."""
    return {c["name"]: c["message"] for c in summary["checks"] if c["part"] == part and not c["passed"]}


def used_part_mistakes():
    """Every module of the corpus in a part others build on (every known mistake among them)."""
    for lab, part, mistake, _ in wrong_modules():
        if any(part in user.uses for user in lab.parts):
            yield pytest.param(lab, part, mistake, id=f"{lab.name}-{part}-{mistake}")


@CORPUS
@pytest.mark.parametrize("lab, part, mistake", list(used_part_mistakes()))
def test_a_mistake_costs_the_parts_built_on_it_at_most_their_end_to_end_share(wrong_modules_graded, lab, part, mistake):
    """One mistake costs one mistake: a part built on the mistaken one is judged on its own wiring (a
    sub-part that raises or answers with the wrong shape stood in for), and loses at most the points of
    its declared end-to-end checks."""
    results = wrong_modules_graded[lab.name, part, mistake]
    points = tomllib.loads((lab.checks / "points.toml").read_text())
    for user in (p for p in lab.parts if part in p.uses):
        row = results["parts"][user.id]
        share = sum(points[user.id][check] for check in user.end_to_end)
        assert row["max_points"] - row["points"] <= share, (user.id, failed_in(results, user.id))


@CORPUS
def test_a_deviation_of_float32_size_fails_every_end_to_end_comparison_or_none(wrong_modules_graded):
    """eps added to the standard deviation (1e-5 relative) in layer norm: the encoder's and the decoder's
    comparisons with PyTorch's layers agree (at b89d031 the decoder's failed on 2 of 224 entries near 0,
    off by 1.88e-05, and the encoder's passed)."""
    results = wrong_modules_graded["transformer", "layernorm", "eps_outside_sqrt"]
    verdicts = {c["name"]: c["passed"] for c in results["checks"]
                if c["name"] in ("test_encoder_matches_torch_document_setup", "test_decoder_matches_torch_document_setup")}
    assert len(verdicts) == 2 and len(set(verdicts.values())) == 1, verdicts


@CORPUS
@pytest.mark.parametrize("lab, part, mistake, entry", [pytest.param(*case, id=f"{case[0].name}-{case[1]}-{case[2]}")
                                                       for case in wrong_modules()])
def test_wrong_module_fails_the_checks_that_catch_it(wrong_modules_graded, lab, part, mistake, entry):
    results = wrong_modules_graded[lab.name, part, mistake]
    assert set(entry["fails"]) <= set(failed_in(results, part)), failed_in(results, part)
    # No hidden surprises: hidden checks vary inputs, so what one of them catches a public check catches too.
    failing = [c for c in results["checks"] if c["part"] == part and not c["passed"]]
    if any(c["hidden"] for c in failing) and not entry.get("keyed_to_public_inputs"):
        assert any(not c["hidden"] for c in failing), "only hidden checks catch this mistake"
    row = results["parts"][part]
    if entry.get("reaches_internals"):
        # Reaching past the ban is no mistake to earn partial points for: the checks the ban governs
        # refuse it, and the scan names the place for the instructor.
        assert results["reaches"] and row["points"] < row["max_points"], results["reaches"]
    else:
        assert 0 < row["points"] < row["max_points"], "a single mistake earns partial points"
    # One wrong wire of a layer built on others costs its block's check and the declared end-to-end share.
    assert row["max_points"] - row["points"] <= entry.get("costs_at_most", row["max_points"]), failed_in(results, part)
    checks = [c for c in results["checks"] if c["part"] == part]  # the parts built on it: the test above
    named = {mistake_id for c in checks for mistake_id in c.get("diagnoses", [])}
    assert not named & set(entry.get("not_diagnosed", [])), named
    # A known mistake, or a module written by hand that answers as one (`diagnosed_as`): every check failed on
    # values is diagnosed as that mistake (one the student's code raised in names no mistake: an exception
    # alone says nothing).
    named_as = entry.get("diagnosed_as", mistake if known_mistake(part, mistake, lab) else None)
    if named_as:
        diagnosed = {c["name"]: set(c["diagnoses"]) for c in checks if not c["passed"] and c["failure"]["kind"] == "wrong"}
        assert {check for check, ids in diagnosed.items() if f"{part}.{named_as}" not in ids} == set(), diagnosed


ENCODER_WIRING = ("""        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))   # (B, T, d_model)
        return self.norm2(x + self.dropout(self.ff(x)))                   # (B, T, d_model)""")
DECODER_WIRING = ("""        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, causal)))       # (B, T, d_model)
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory)))    # queries from x
        return self.norm3(x + self.dropout(self.ff(x)))                         # (B, T, d_model)""")
# Right layers written otherwise than the reference (red team of the block checks), each beside an attention
# without the scaling, so their wires are judged: (part, the forward's new lines).
UNUSUAL_BUT_RIGHT = {
    "one_sequence_at_a_time": ("encoder", """        outs = []
        for b in range(x.shape[0]):
            xb = self.norm1(x[b:b + 1] + self.dropout(self.self_attn(x[b:b + 1], x[b:b + 1], x[b:b + 1], mask)))
            outs.append(self.norm2(xb + self.dropout(self.ff(xb))))
        return __import__("torch").cat(outs)"""),
    "norm1_inline": ("encoder", """        x = __import__("torch").nn.functional.layer_norm(
            x + self.dropout(self.self_attn(x, x, x, mask)), x.shape[-1:], self.norm1.weight, self.norm1.bias)
        return self.norm2(x + self.dropout(self.ff(x)))"""),
    "ff_on_flat_tokens": ("encoder", """        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))
        return self.norm2(x + self.dropout(self.ff(x.reshape(-1, x.shape[-1])).reshape(x.shape)))"""),
    "decoder_one_sequence_at_a_time": ("decoder", """        outs = []
        for b in range(x.shape[0]):
            xb, mb = x[b:b + 1], memory[b:b + 1]
            xb = self.norm1(xb + self.dropout(self.self_attn(xb, xb, xb, causal)))
            xb = self.norm2(xb + self.dropout(self.cross_attn(xb, mb, mb)))
            outs.append(self.norm3(xb + self.dropout(self.ff(xb))))
        return torch.cat(outs)"""),
    # Not right: it reports calls its sub-layers never made (the worker's record is in its process).
    "forges_its_calls": ("encoder", """        out = __import__("torch").nn.functional.layer_norm(x, x.shape[-1:])
        calls = self.norm1.forward._stand_ins.calls
        if calls is not None:
            a = 0 * x
            calls[:] = [dict(submodule="self_attn", args=[x, x, x, mask], kwargs={}, output=a),
                        dict(submodule="norm1", args=[x + a], kwargs={}, output=x),
                        dict(submodule="ff", args=[x], kwargs={}, output=out - x),
                        dict(submodule="norm2", args=[out], kwargs={}, output=out)]
        return out"""),
}


def test_a_right_layer_written_otherwise_loses_nothing_for_a_mistake_elsewhere(tmp_path):
    """A layer that calls its sub-layers once per sequence, on flattened tokens, or computes a norm inline is
    its own sub-layers wired as documented: beside an attention without the scaling it keeps all but the
    end-to-end share. A layer whose forward reports calls its sub-layers never made gains no wire."""
    lab = next(lab for lab in LABS if lab.name == "transformer")
    no_scaling = known_mistake("attention", "no_scaling", lab).apply((lab.reference / "attention.py").read_text())
    for student, (part, forward) in UNUSUAL_BUT_RIGHT.items():
        reference = (lab.reference / f"{part}.py").read_text()
        wiring = ENCODER_WIRING if part == "encoder" else DECODER_WIRING
        assert wiring in reference
        submission_with(tmp_path / "cohort", {part: reference.replace(wiring, forward), "attention": no_scaling}, lab,
                        name=f"{student}/transformer")
    grade_cohort(lab, tmp_path / "cohort", tmp_path / "out", jobs=1, stream=io.StringIO())  # one lane: one judge start
    points = tomllib.loads((lab.checks / "points.toml").read_text())
    for student, (part, _) in UNUSUAL_BUT_RIGHT.items():
        results = json.loads((tmp_path / "out" / "students" / student / "summary.json").read_text())
        row, share = results["parts"][part], sum(points[part][check] for check in lab.part(part).end_to_end)
        if student == "forges_its_calls":
            assert row["points"] <= 5, failed_in(results, part)  # its structure, and dropout judged on its own answers
        else:
            assert row["max_points"] - row["points"] <= share, (student, failed_in(results, part))


# A label that names a cause appears only where that cause is what differs: (lab, part, check, the label,
# a module failing the check for that cause, one failing it for another). A causality check names no part
# of the layer: a decoder whose cross-attention is wrong looks ahead too.
CAUSE_LABELS = [
    ("transformer", "feedforward", "test_feedforward_dropout_only_in_training", "zeroed at random",
     "dropout_in_eval_mode", "gelu"),
    ("attention", "heads", "test_mha_shorter_input_than_context", "(cut the mask", "cut_from_the_right", "scale_by_d_out"),
    ("attention", "scores", "test_loop_and_matrix_scores_agree", "attention_scores_loop(x)", "loop_misses_last_token",
     "transposed_product"),
    ("attention", "scores", "test_loop_and_matrix_scores_agree", "attention_scores(x)", "transposed_product",
     "loop_misses_last_token"),
    ("transformer", "decoder", "test_decoder_is_causal", "self-attention", None, "document_cross_attention"),
]


@CORPUS
@pytest.mark.parametrize("lab, part, check, label, caused, otherwise", CAUSE_LABELS)
def test_a_label_names_a_cause_only_where_it_differs(wrong_modules_graded, lab, part, check, label, caused, otherwise):
    for mistake, shown in ((caused, True), (otherwise, False)):
        if mistake:
            message = failed_in(wrong_modules_graded[lab, part, mistake], part)[check]
            assert (label in message) == shown, (mistake, message)


@CORPUS
def test_a_feed_forward_that_acts_per_token_passes_the_per_token_check(wrong_modules_graded):
    """A wrong activation (or none, or one after linear2) still treats every token alone: only the checks on
    values fail, and the activation is named."""
    for mistake in ("gelu", "no_activation", "relu_after_second_linear"):
        assert "test_feedforward_acts_on_each_token_alone" not in failed_in(
            wrong_modules_graded["transformer", "feedforward", mistake], "feedforward"), mistake
    gelu = wrong_modules_graded["transformer", "feedforward", "gelu"]["parts"]["feedforward"]
    assert [m["id"] for m in gelu["misconceptions"]] == ["feedforward.gelu"]


@CORPUS
def test_a_tril_mask_is_told_it_is_the_complement(wrong_modules_graded):
    """Its first failing call, causal_mask(1), answers as diagonal=0 does; the part's other failed checks
    contradict diagonal=0, so the top of the feedback and the class report name the complement alone."""
    masking = wrong_modules_graded["attention", "masking", "tril_hides_past"]["parts"]["masking"]
    assert [m["id"] for m in masking["misconceptions"]] == ["masking.complement"]


# Lab 1's docstrings allow PyTorch's fused attention in CausalAttention and MultiHeadAttention: the
# same numbers, dropout included, with the module's own dropout probability.
FUSED_CAUSAL_ATTENTION = {
    "masking": ("""        scores = queries @ keys.transpose(-2, -1)  # (B, T, T)
        # Cut the mask to the actual sequence length; inputs may be shorter.
        scores = scores.masked_fill(self.mask.bool()[:T, :T], float("-inf"))
        weights = torch.softmax(scores / math.sqrt(keys.shape[-1]), dim=-1)  # (B, T, T)
        weights = self.dropout(weights)
        return weights @ values  # (B, T, d_out)""", """        return scaled_dot_product_attention(
            queries, keys, values, dropout_p=self.dropout.p if self.training else 0.0, is_causal=True)"""),
    "heads": ("""        scores = queries @ keys.transpose(-2, -1)  # (B, H, T, T)
        # (T, T) mask broadcasts over batch and heads.
        scores = scores.masked_fill(self.mask.bool()[:T, :T], float("-inf"))
        weights = torch.softmax(scores / math.sqrt(self.head_dim), dim=-1)  # (B, H, T, T)
        weights = self.dropout(weights)

        context = merge_heads(weights @ values)  # (B, T, d_out)""", """        context = merge_heads(scaled_dot_product_attention(
            queries, keys, values, dropout_p=self.dropout.p if self.training else 0.0, is_causal=True))"""),
}


def test_lab_1_allows_fused_attention_as_its_docstrings_say(tmp_path):
    modules = {}
    for part, (ours, fused) in FUSED_CAUSAL_ATTENTION.items():
        reference = (LAB.reference / f"{part}.py").read_text()
        assert ours in reference, part
        modules[part] = reference.replace(ours, fused).replace(
            "import torch.nn as nn\n", "import torch.nn as nn\nfrom torch.nn.functional import scaled_dot_product_attention\n")
    results = grade(submission_with(tmp_path, modules), tmp_path / "results.json")
    assert {part: row["points"] == row["max_points"] for part, row in results["parts"].items()} == \
        {part: True for part in PARTS}, failed(results)


def test_every_part_has_wrong_modules_and_every_known_mistake_a_test(lab):
    tested = {(m.parent.name, name) for m in (WRONG_MODULES / lab.name).glob("*/mistakes.toml")
              for name in tomllib.loads(m.read_text())}
    assert {part for part, _ in tested} == set(lab.part_ids)
    assert {(m.part, m.name) for ms in KNOWN_MISTAKES[lab.name].values() for m in ms} <= tested


def test_known_mistakes_change_the_reference(lab):
    for part, mistakes in KNOWN_MISTAKES[lab.name].items():
        reference = (lab.reference / f"{part}.py").read_text()
        for mistake in mistakes:
            assert mistake.apply(reference) != reference, mistake.id
            assert mistake.title and mistake.hint, mistake.id


def test_answers_like_the_reference_are_never_diagnosed(tmp_path):
    """The calls of a failing check, answered as the reference answers them, name no mistake:
    a failure that is not about the answers (a dtype, the source's form) is not a misconception.
    Without that guard every mutant that leaves those calls alone would match."""
    diagnoser = Diagnoser(KNOWN_MISTAKES[LAB.name], SOLUTIONS, confined=False)
    reference = RemoteCode(SOLUTIONS)
    try:
        reference.begin_check()
        reference.dropout.dropout(torch.ones(3, 4), 0.5, keep_mask=torch.ones(3, 4, dtype=torch.bool))
        reference.masking.CausalAttention(3, 2, 6, 0.0)(torch.ones(2, 6, 3))
        calls = reference.end_check().calls
        assert len(calls) == 3
        for part in ("dropout", "masking"):
            assert diagnoser.diagnose(part, [calls]) == [[]]
        # The same calls answered as a known mistake would answer them are diagnosed.
        mutant = diagnoser.runner("dropout.no_rescaling", known_mistake("dropout", "no_rescaling"))
        mutant.begin_check()
        mutant.dropout.dropout(torch.ones(3, 4), 0.5, keep_mask=torch.ones(3, 4, dtype=torch.bool))
        assert ids(diagnoser.diagnose("dropout", [mutant.end_check().calls])) == [["dropout.no_rescaling"]]
    finally:
        reference.close()
        diagnoser.close()


def ids(diagnoses: list[list]) -> list[list[str]]:
    return [[m.id for m in mistakes] for mistakes in diagnoses]


def test_a_mistake_is_named_on_calls_that_tell_the_known_mistakes_apart():
    """causal_mask(1) answered [[True]] is both the complement's answer and diagonal=0's: alone, it names
    neither. With the part's other failed check, causal_mask(6) answered as the complement, diagonal=0 is
    contradicted and the complement is named on both."""
    diagnoser = Diagnoser(KNOWN_MISTAKES[LAB.name], SOLUTIONS, confined=False)
    try:
        complement = diagnoser.runner("masking.complement", known_mistake("masking", "complement"))
        checks = []
        for size in (1, 6):
            complement.begin_check()
            complement.masking.causal_mask(size)
            checks.append(complement.end_check().calls)
        one, six = checks
        assert ids(diagnoser.diagnose("masking", [one])) == [[]]
        assert ids(diagnoser.diagnose("masking", [one, six])) == [["masking.complement"]] * 2
    finally:
        diagnoser.close()


class CrashingWorker:
    """A worker of the diagnoser's that ends on every request."""

    def begin_check(self, record=True):
        pass

    def request(self, request, wrap=True):
        raise StudentError(FailureKind.CRASHED, "the process running the code ended")


def test_a_lane_works_each_diagnosis_out_once_and_keeps_none_a_failed_worker_spoiled(monkeypatch):
    """Many students hand in the same mistake: the same calls answered alike are diagnosed once per lane.
    A run on which a worker of the diagnoser's failed tells nothing, and is not kept."""
    diagnoser = Diagnoser(KNOWN_MISTAKES[LAB.name], SOLUTIONS, confined=False)
    try:
        keep_mask = torch.ones(3, 4, dtype=torch.bool)
        calls = {}
        for name in ("reference", "dropout.no_rescaling"):
            worker = diagnoser.runner(name, known_mistake("dropout", "no_rescaling") if name != "reference" else None)
            worker.begin_check()
            worker.dropout.dropout(torch.ones(3, 4), 0.5, keep_mask=keep_mask)
            calls[name] = worker.end_check().calls
        with monkeypatch.context() as failing:
            failing.setattr(diagnoser, "runner", lambda *_: CrashingWorker())
            assert diagnoser.diagnose("dropout", [calls["dropout.no_rescaling"]]) == [[]]
        assert ids(diagnoser.diagnose("dropout", [calls["dropout.no_rescaling"]])) == [["dropout.no_rescaling"]]
        # The same request answered as the reference answers it is another case than the one worked out above.
        assert calls["reference"][0].frame == calls["dropout.no_rescaling"][0].frame
        assert diagnoser.diagnose("dropout", [calls["reference"]]) == [[]]
        # Another student's same answers: the same diagnosis, without asking a worker again.
        monkeypatch.setattr(diagnoser, "runner", lambda *_: pytest.fail("the mutants were asked again"))
        assert ids(diagnoser.diagnose("dropout", [calls["dropout.no_rescaling"]])) == [["dropout.no_rescaling"]]
        assert diagnoser.diagnose("dropout", [calls["reference"]]) == [[]]
    finally:
        diagnoser.close()


def test_reference_solution_gets_no_diagnosis(solution_results):
    assert [c["diagnoses"] for c in solution_results["checks"] if c.get("diagnoses")] == []


def test_a_broken_or_missing_module_costs_only_its_own_part(tmp_path):
    submission = submission_with(tmp_path, {"softmax": "def softmax(scores, dim=-1:\n    pass\n", "dropout": None})
    results = grade(submission, tmp_path / "results.json")
    assert results["parts"]["softmax"]["points"] == 0
    assert results["parts"]["dropout"]["points"] == 0
    messages = failed(results)
    broken = [m for m in messages.values() if "softmax.py could not be imported: SyntaxError" in m]
    assert broken and all(m.count("line 1") == 1 for m in broken), messages  # the place said once
    assert any("dropout.py is missing" in m for m in messages.values()), messages
    for part in set(PARTS) - {"softmax", "dropout"}:
        assert results["parts"][part]["points"] == results["parts"][part]["max_points"], part
