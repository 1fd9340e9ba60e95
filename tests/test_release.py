"""The student release holds no solution and no hidden check; generated folders are current."""

import json
import re
import shutil
import subprocess

import pytest

from autograder.authoring.release import build, kit_files
from autograder.course import course_config, hidden_line_ranges, solution_line_ranges
from conftest import KIT, LABS

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast


def lines_in(text: str, spans: list[range]) -> set[str]:
    numbered = text.split("\n")
    return {numbered[n - 1].strip() for span in spans for n in span}


def released_text(lab) -> dict[str, str]:
    return {str(p.relative_to(lab.release)): p.read_text(encoding="utf-8", errors="replace")
            for p in lab.release.rglob("*") if p.is_file()}


def released_lines(lab) -> dict[str, set[str]]:
    """Each released file's stripped lines; notebooks by their cells' source lines."""
    lines = {}
    for name, text in released_text(lab).items():
        if name.endswith(".ipynb"):
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        lines[name] = {line.strip() for line in text.split("\n")}
    return lines


def public_lines(lab) -> set[str]:
    """Lines that legitimately appear outside the fences somewhere in the lab's source."""
    visible = set()
    for path in kit_files(lab.source):
        text = path.read_text(encoding="utf-8")
        secret = set(solution_line_ranges(text)) | set(hidden_line_ranges(text))
        numbered = text.split("\n")
        hidden = {n for span in secret for n in span}
        visible |= {line.strip() for n, line in enumerate(numbered, start=1) if n not in hidden}
    return visible


def secret_lines(lab, ranges) -> dict[str, set[str]]:
    """Per source file, the fenced lines that appear nowhere else in the source."""
    shared = public_lines(lab)
    secrets = {}
    for path in kit_files(lab.source):
        text = path.read_text(encoding="utf-8")
        lines = {line for line in lines_in(text, ranges(text)) if len(line) > 3 and line not in shared}
        if lines:
            secrets[path.name] = lines
    return secrets


def test_no_solution_line_reaches_the_release(lab):
    secrets = secret_lines(lab, solution_line_ranges)
    assert set(secrets) == set(lab.modules)
    for name, lines in released_lines(lab).items():
        present = {line for secret in secrets.values() for line in secret if line in lines}
        assert not present, f"{name} contains solution lines: {sorted(present)[:5]}"


def test_no_hidden_check_reaches_the_release(lab):
    secrets = secret_lines(lab, hidden_line_ranges)
    assert secrets, "the source has no hidden checks"
    for name, lines in released_lines(lab).items():
        present = {line for secret in secrets.values() for line in secret if line in lines}
        assert not present, f"{name} contains hidden-check lines: {sorted(present)[:5]}"


def test_known_mistakes_stay_with_the_instructor(lab):
    assert (lab.checks / "misconceptions.toml").is_file()
    assert not (lab.release / "tests" / "misconceptions.toml").exists()


def test_no_model_answer_reaches_the_release(lab):
    source = json.loads((lab.source / f"{lab.notebook}.ipynb").read_text())
    answers = ["".join(c["source"]) for c in source["cells"]
               if c.get("metadata", {}).get("nbgrader", {}).get("solution") and c["cell_type"] == "markdown"]
    assert answers
    released = json.dumps(released_text(lab))
    for answer in answers:
        for sentence in filter(None, re.split(r"(?<=[.;])\s+", answer)):
            assert sentence.strip() not in released


def test_stubs_use_the_course_stub_text(lab):
    from nbgrader.preprocessors import ClearSolutions  # 0.6 s to import: paid here, not by every worker's collection

    stub = ClearSolutions(config=course_config()).code_stub["python"]
    stub_lines = [line.strip() for line in stub.split("\n")]
    for module in lab.release.glob("*.py"):
        text = module.read_text()
        assert all(line in text for line in stub_lines), module.name


def test_solutions_have_no_fences(lab):
    for module in lab.reference.glob("*.py"):
        assert "BEGIN SOLUTION" not in module.read_text(), module.name


def comparable(path):
    """A file's content, with notebooks reduced to what source/ decides (no outputs)."""
    if path.suffix != ".ipynb":
        return path.read_bytes()
    notebook = json.loads(path.read_text())
    notebook["metadata"].pop("language_info", None)  # what the kernel that ran it reports
    for cell in notebook["cells"]:
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
        cell.get("metadata", {}).pop("execution", None)
    return notebook


def tree(root):
    return {str(p.relative_to(root)): comparable(p) for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("kind", ["release", "solution"])
@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.name)
def test_generated_folder_is_what_the_build_writes(tmp_path, lab, kind, empty_gradebook):
    committed = lab.release if kind == "release" else lab.reference
    shutil.copy(empty_gradebook, tmp_path / "gradebook.db")  # where a build elsewhere keeps its own
    fresh = build(kind, lab, tmp_path, run_notebook=False)  # outputs are not compared: no kernel run
    assert tree(fresh) == tree(committed), (
        f"{committed.relative_to(KIT)} is stale: run `make release solutions` and commit the result")


def test_the_solution_notebook_shows_its_run_beside_the_modules(lab):
    """`make solutions` runs the reference's notebook where its modules and helpers are: the committed one shows
    the figures and no error (nbgrader's own run came before them: every import failed, and it kept the errors)."""
    cells = json.loads((lab.reference / f"{lab.notebook}.ipynb").read_text())["cells"]
    outputs = [out for cell in cells for out in cell.get("outputs", [])]
    assert [out["ename"] for out in outputs if out["output_type"] == "error"] == []
    shown = "".join("".join(out.get("data", {}).get("text/html", "")) for out in outputs)
    assert "✓ " in shown and "does not match" not in shown and any("image/png" in out.get("data", {}) for out in outputs)


def test_a_solution_notebook_whose_cell_raises_stops_the_build(tmp_path):
    from autograder.authoring.release import run_beside_its_modules
    from autograder.lab import LabError

    notebook = tmp_path / "lab.ipynb"
    notebook.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "execution_count": None, "outputs": [],
         "source": "from helpers import load"}]}))
    with pytest.raises(LabError, match=r"lab.ipynb: a cell raised when run on the reference solution:(.|\n)*No module named 'helpers'"):
        run_beside_its_modules(notebook)


def test_make_check_inside_a_released_lab_checks_that_lab(lab):
    """`make check` in assignments/<lab>/ (as in a student's bundle) grades the folder's own modules."""
    first = lab.parts[0]
    run = subprocess.run(["make", "--no-print-directory", "check", f"PART={first.id}"], cwd=lab.release,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode != 0  # the stubs fail
    assert re.search(rf"^{first.id}\s+0 / ", run.stdout, re.MULTILINE), run.stdout[-2000:]
    assert f"not implemented yet: {first.id}." in run.stdout
