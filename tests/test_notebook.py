"""Each lab's companion notebook runs headless in a real Jupyter kernel, release and solution versions."""

import shutil
from dataclasses import dataclass

import nbformat
import pytest
from nbclient import NotebookClient


@dataclass(frozen=True)
class Expected:
    verdict: str        # what a comparison prints when the student's result is right
    comparisons: int    # at least this many, all right, on the solutions
    figures: int
    questions: frozenset


EXPECTED = {
    "attention": Expected("matches the document", 12, 5,  # simplified/projected, unmasked/causal, dropout, heads, §2
                          frozenset({"why_sqrt_dk", "why_minus_inf", "why_inverted_dropout", "why_transpose_heads",
                                     "why_out_proj"})),
    "transformer": Expected("matches PyTorch", 9, 4,  # LayerNorm before/after, heads, decoder self and cross
                            frozenset({"why_post_norm", "read_head_figure", "why_causal_decoder",
                                       "why_cross_attention_queries"})),
}


@pytest.fixture(scope="module")
def expected(lab):
    assert lab.notebook == f"{lab.name}_lab", "every lab has a companion notebook"
    return EXPECTED[lab.name]


def execute(folder, name):
    """The executed notebook's code cells' outputs: (printed text, number of figures, errors)."""
    notebook = nbformat.read(folder / f"{name}.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute()
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]
    text = "".join(out.get("text", "") for out in outputs)
    figures = sum("image/png" in out.get("data", {}) for out in outputs)
    errors = [out["ename"] for out in outputs if out["output_type"] == "error"]
    return text, figures, errors


def test_solution_notebook_matches_and_draws_its_figures(lab, expected):
    text, figures, errors = execute(lab.reference, lab.notebook)
    assert errors == []
    assert "does not match" not in text and "not implemented yet" not in text and "raised" not in text
    assert text.count(expected.verdict) >= expected.comparisons
    assert figures == expected.figures


def test_release_notebook_runs_to_the_end_on_stubs(lab, expected):
    text, figures, errors = execute(lab.release, lab.notebook)
    assert errors == []
    assert "not implemented yet" in text and expected.verdict not in text
    assert text.rstrip().endswith("not implemented yet (the notebook goes on without it)")


def test_written_questions_are_manually_graded_answer_cells(lab, expected):
    for folder, answered in ((lab.source, True), (lab.release, False)):
        notebook = nbformat.read(folder / f"{lab.notebook}.ipynb", as_version=4)
        answers = {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in notebook.cells
                   if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "markdown"}
        assert set(answers) == expected.questions
        assert all(notebook.cells[i].metadata["nbgrader"]["points"] > 0 for i, cell in enumerate(notebook.cells)
                   if cell.metadata.get("nbgrader", {}).get("grade_id") in expected.questions)
        assert all((len(text) > 200) == answered for text in answers.values()), folder


def test_a_module_that_does_not_load_stops_only_its_own_sections(lab, expected, tmp_path):
    """A syntax error in the first part's module: the notebook still runs to the end."""
    if lab.name == "attention":
        pytest.xfail("the attention notebook imports every module in its first cell (issue 13)")
    folder = tmp_path / lab.name
    shutil.copytree(lab.reference, folder)
    (folder / lab.parts[0].module).write_text("def broken(:\n", encoding="utf-8")
    text, figures, errors = execute(folder, lab.notebook)
    assert errors == []
    assert f"{lab.parts[0].id}.py did not load (SyntaxError" in text
    assert expected.verdict in text  # the parts that do not import the broken module still run
