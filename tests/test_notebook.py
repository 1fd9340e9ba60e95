"""Each lab's companion notebook runs headless in a real Jupyter kernel, release and solution versions."""

import importlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.judge.misconceptions import load_catalogue
from conftest import KIT, executed_notebook, grade, read_notebook

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast


@dataclass(frozen=True)
class Expected:
    verdict: str        # what a comparison prints when the student's result is right
    comparisons: int    # at least this many, all right, on the solutions
    figures: int
    questions: frozenset
    reads_figure: str   # the question that asks the student to read a picture
    mistake: str        # a known mistake the notebook shows as a red verdict with a picture
    checked: str        # a known mistake only the public checks catch (edge cases: large inputs, other shapes)
    edits: tuple = ()   # more to get wrong in its module, that no comparison runs: (old, new) pairs


EXPECTED = {
    "attention": Expected("matches the document", 12, 5,  # simplified/projected, unmasked/causal, dropout, heads, §2
                          frozenset({"why_sqrt_dk", "why_minus_inf",
                                     "read_dropout_figure", "why_transpose_heads", "why_out_proj"}),
                          "read_dropout_figure", "masking.tril_mask", "softmax.no_max_shift",
                          (("return weights @ inputs", "return weights.T @ inputs"),)),
    "transformer": Expected("matches PyTorch", 9, 5,  # x, LayerNorm yours/PyTorch, heads, decoder self and cross
                            frozenset({"why_post_norm", "read_head_figure", "why_causal_decoder",
                                       "why_cross_attention_queries"}),
                            "read_head_figure", "attention.mask_polarity_flipped", "layernorm.eps_outside_sqrt"),
}


@pytest.fixture(scope="module")
def expected(lab):
    assert lab.notebook == f"{lab.name}_lab", "every lab has a companion notebook"
    return EXPECTED[lab.name]


@dataclass(frozen=True)
class Run:
    text: str           # what the cells printed, and the plain-text form of what they displayed
    figures: int
    errors: list
    verdicts: list      # (plain text, HTML) of each displayed comparison's verdict, in order
    pictured: list      # the verdicts followed by a figure in the same cell's outputs
    checks: dict        # {part: (plain text, HTML)}: what each section's public checks displayed


CHECKS_HEAD = re.compile(r"([✓✗] )?public checks of (\w+): ")


def execute(folder, name) -> Run:
    notebook = executed_notebook(folder / f"{name}.ipynb")
    text, figures, errors, verdicts, pictured, checks = "", 0, [], [], [], {}
    for cell in (c for c in notebook.cells if c.cell_type == "code"):
        last_verdict = None
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text += out.get("text", "") + ("" if "image/png" in data else data.get("text/plain", "") + "\n")
            figures += "image/png" in data
            if out["output_type"] == "error":
                errors.append(out["ename"])
            if "text/html" in data and (head := CHECKS_HEAD.match(data.get("text/plain", ""))):
                checks[head[2]] = (data["text/plain"], data["text/html"])
            elif "text/html" in data and re.match("[✓✗] ", data.get("text/plain", "")):
                last_verdict = (data["text/plain"], data["text/html"])
                verdicts.append(last_verdict)
            elif "image/png" in data and last_verdict is not None:
                pictured.append(last_verdict)
                last_verdict = None
    return Run(text, figures, errors, verdicts, pictured, checks)


def failing(shown: str) -> set[str]:
    """The checks a section's public checks list as failing."""
    return set(re.findall(r"^  ✗ (\w+)$", shown, re.MULTILINE))


def test_solution_notebook_matches_and_draws_its_figures(lab, expected):
    run = execute(lab.reference, lab.notebook)
    assert run.errors == []
    assert "does not match" not in run.text and "not implemented yet" not in run.text and "raised" not in run.text
    assert len(run.verdicts) >= expected.comparisons
    assert all(plain.startswith("✓ ") and expected.verdict in plain and "#1a7f37" in markup and "✓" in markup
               for plain, markup in run.verdicts), "a right result shows a green ✓ at a glance"
    assert run.figures == expected.figures
    assert set(run.checks) == set(lab.part_ids), "every section ends with its part's public checks"
    assert all(plain.startswith("✓ ") and failing(plain) == set() and "#1a7f37" in markup
               for plain, markup in run.checks.values())


def test_release_notebook_runs_to_the_end_on_stubs(lab, expected):
    run = execute(lab.release, lab.notebook)
    assert run.errors == []
    assert "not implemented yet" in run.text and expected.verdict not in run.text and run.verdicts == []
    assert run.checks == {}  # a stub is neither ✓ nor ✗: it says so in one line, as make check does
    assert all(f"{part}: not implemented yet: {part}." in run.text for part in lab.part_ids)
    assert run.text.rstrip().endswith("(the public checks wait for them)")


def test_opening_cell_holds_no_helper_code(lab):
    """The helpers live in tests/notebook_helpers.py (copied by the release); the first code cell only sets up."""
    for folder in (lab.source, lab.release):
        notebook = read_notebook(folder / f"{lab.notebook}.ipynb")
        setup = next(cell for cell in notebook.cells if cell.cell_type == "code")
        assert "def " not in setup.source and "from notebook_helpers import" in setup.source
    assert (lab.release / "tests" / "notebook_helpers.py").is_file()
    assert (lab.reference / "tests" / "notebook_helpers.py").is_file()


def test_written_questions_are_manually_graded_answer_cells(lab, expected):
    for folder, answered in ((lab.source, True), (lab.release, False)):
        notebook = read_notebook(folder / f"{lab.notebook}.ipynb")
        answers = {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in notebook.cells
                   if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "markdown"}
        assert set(answers) == expected.questions
        assert all(notebook.cells[i].metadata["nbgrader"]["points"] > 0 for i, cell in enumerate(notebook.cells)
                   if cell.metadata.get("nbgrader", {}).get("grade_id") in expected.questions)
        assert all((len(text) > 200) == answered for text in answers.values()), folder
        graded = {cell.metadata["nbgrader"]["grade_id"]: cell for cell in notebook.cells if "nbgrader" in cell.metadata}
        for question in expected.questions:  # the prompt shows the points the gradebook gives
            points = graded[question].metadata["nbgrader"]["points"]
            assert f"({points:g} points)" in graded[f"{question}_question"].source, question
        assert "picture" in graded[f"{expected.reads_figure}_question"].source


def test_a_broken_module_stops_only_its_section_and_a_mistake_shows_red_with_a_picture(lab, expected, tmp_path):
    """A syntax error in the first part's module and a known mistake in another: the notebook runs to
    the end, the other sections still compare, and the mistake shows as a red ✗ followed by a picture
    of the student's values beside the expected ones."""
    folder = kit_copy(lab, tmp_path)
    (folder / lab.parts[0].module).write_text("def broken(:\n", encoding="utf-8")
    part, _, name = expected.mistake.partition(".")
    mistake = next(m for m in load_catalogue(lab.checks)[part] if m.name == name)
    module = folder / f"{part}.py"
    module.write_text(mistake.apply(module.read_text(encoding="utf-8")), encoding="utf-8")
    run = execute(folder, lab.notebook)
    assert run.errors == []
    assert f"{lab.parts[0].id}.py did not load (SyntaxError" in run.text
    assert any(plain.startswith("✓ ") for plain, _ in run.verdicts)  # the parts that do not import it still run
    wrong = [(plain, markup) for plain, markup in run.verdicts if plain.startswith("✗ ")]
    assert wrong and all("does not match" in plain and "#cf222e" in markup for plain, markup in wrong)
    assert set(run.pictured) & set(wrong), "a wrong matrix is drawn beside the expected one"
    for broken in (lab.parts[0].id, part):  # and their sections' public checks say ✗
        assert run.checks[broken][0].startswith("✗ ") and failing(run.checks[broken][0])


def kit_copy(lab, tmp_path):
    """A copy of the reference lab folder with the kit's autograder/ beside it, as a student bundle lays them out."""
    folder = tmp_path / lab.name
    shutil.copytree(lab.reference, folder)
    (tmp_path / "autograder").symlink_to(KIT / "autograder")
    return folder


def test_a_section_is_green_only_when_its_public_checks_pass(lab, expected, tmp_path):
    """Issue 42: a softmax without the max shift and a context_vectors returning weights.T @ inputs got a ✓
    from every comparison. A mistake only the public checks catch makes its section's checks ✗, listing
    exactly the public checks make check fails on it; the other sections stay ✓."""
    folder = kit_copy(lab, tmp_path)
    part, _, name = expected.checked.partition(".")
    module = folder / f"{part}.py"
    text = next(m for m in load_catalogue(lab.checks)[part] if m.name == name).apply(module.read_text(encoding="utf-8"))
    for old, new in expected.edits:
        assert old in text
        text = text.replace(old, new)
    module.write_text(text, encoding="utf-8")
    run = execute(folder, lab.notebook)
    assert run.errors == []
    assert all(plain.startswith("✓ ") for plain, _ in run.verdicts), "the gap: no comparison sees the mistake"
    results = grade(folder, tmp_path / "results.json", part, lab)
    failed = {check["name"] for check in results["checks"] if not check["hidden"] and not check["passed"]}
    shown, markup = run.checks[part]
    assert failed and failing(shown) == failed
    assert shown.startswith("✗ ") and "#cf222e" in markup and "hint: " in shown
    assert all(plain.startswith("✓ ") for other, (plain, _) in run.checks.items() if other != part)


def test_picture_titles_never_overlap(monkeypatch):
    """Issue 42: three panels' titles ran into each other ("...sqrt(2))expected (document 000..."). The
    notebooks' longest titles, drawn: no panel's title, labels or ticks reach into another panel's."""
    import itertools

    import matplotlib
    import torch
    matplotlib.use("Agg")
    monkeypatch.syspath_prepend(str(KIT / "deploy" / "lab"))
    helpers = importlib.import_module("notebook_helpers")
    figures = []
    monkeypatch.setattr(helpers.plt, "show", lambda: figures.append(helpers.plt.gcf()))
    tokens = ["Your", "journey", "starts", "with", "one", "step"]
    helpers.heatmaps(("no mask: softmax(X Xᵀ / sqrt(2))", torch.rand(6, 6)),
                     ("yours: causal_attention_weights", torch.rand(6, 6)),
                     ('expected (document 000 ("The problem with modeling long sequences"), In [15])', torch.rand(6, 6)),
                     rows=tokens, columns=tokens)
    helpers.heatmaps(("yours: scaled_attention_weights(Q, K)", torch.rand(6, 6)),
                     ("expected: softmax(Q Kᵀ / sqrt(d_k))", torch.rand(6, 6)), ("PyTorch's: each token mean 0, "
                      "spread 1", torch.rand(7, 32)), ("x: each token its own offset and spread", torch.rand(7, 32)))
    for figure in figures:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        boxes = [axis.get_tightbbox(renderer) for axis in figure.axes if axis.get_visible()]  # the colour bar too
        assert not [pair for pair in itertools.combinations(boxes, 2) if pair[0].overlaps(pair[1])]
        helpers.plt.close(figure)


def test_the_helpers_judge_odd_results_and_never_stop_the_notebook(monkeypatch, capsys):
    """What a half-written function returns (a list, a float mask, a 3-D tensor) is judged wrong, said in
    one line, and never raises: Run All reaches the end."""
    import matplotlib
    import torch
    matplotlib.use("Agg")
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "deploy" / "lab"))
    helpers = importlib.import_module("notebook_helpers")
    shown = []
    monkeypatch.setattr(helpers, "display", shown.append)
    mask = torch.ones(3, 3, dtype=torch.bool).triu(1)
    assert helpers.compare("a list", lambda: [[0, 1]], mask) is None
    helpers.compare("a float mask", lambda: mask.float() * 0.5, mask)
    helpers.compare("the same mask as floats", lambda: mask.float().expand(2, 3, 3), mask.expand(2, 3, 3))
    helpers.compare("scores as integers", lambda: torch.ones(3, 3, dtype=torch.int64), torch.ones(3, 3))
    helpers.compare("right", lambda: mask.clone(), mask)
    assert [verdict.matches for verdict in shown] == [False, False, False, False, True]
    helpers.heatmaps(("a list", [1, 2]), ("three dims", torch.ones(2, 3, 3)), ("a matrix", torch.ones(3, 3)))
    printed = capsys.readouterr().out
    assert "yours is a list, not a tensor" in printed and "the same values, but torch.float32 instead of torch.bool" in printed
    assert "a list: not drawn" in printed and "three dims: not drawn (shape (2, 3, 3)" in printed


def test_run_all_starts_one_judge_and_a_changed_module_another(monkeypatch, tmp_path):
    """Every section's public checks come from one run of the judge over every part, made again only once a
    file it judges changes (Python's caches and JupyterLab's checkpoints are not such files)."""
    from autograder.platforms import notebook
    from autograder.results import CheckResult

    runs = []

    def judged(submission, timeout):
        runs.append((submission / "softmax.py").read_text())
        return [CheckResult(part, f"test_{part}", 1.0, "x\n" not in runs[-1]) for part in ("softmax", "masking")]

    monkeypatch.setattr(notebook, "run_public_checks", judged)
    (tmp_path / "softmax.py").write_text("def softmax(x): ...\n")
    assert notebook.run_part(tmp_path, "softmax").passed and notebook.run_part(tmp_path, "masking").passed
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "softmax.pyc").write_bytes(b"\0")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    assert notebook.run_part(tmp_path, "softmax").passed and len(runs) == 1
    (tmp_path / "softmax.py").write_text("def softmax(x): x\n")
    assert not notebook.run_part(tmp_path, "softmax").passed and len(runs) == 2
    assert notebook.run_part(tmp_path, "heads").refused == "this lab has no part heads; make check names its parts"
    monkeypatch.setattr(notebook, "run_public_checks", lambda submission, timeout: "nothing checked: no sandbox")
    (tmp_path / "softmax.py").write_text("def softmax(x): return x\n")
    assert notebook.run_part(tmp_path, "masking").refused == "nothing checked: no sandbox"
