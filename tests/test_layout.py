"""The package shows the data flow: each stage of ``autograder/`` imports only from itself, from the
stages before it and from the shared modules (no layer reaches up)."""

import ast
import subprocess
import sys

import pytest

from conftest import KIT

PACKAGE = KIT / "autograder"
STAGES = ("authoring", "harness", "judge", "reports", "platforms", "batch")  # in the order of the data flow
SHARED = {"course", "lab", "text", "files", "results", "kinds", "limits", "ending", "shortcuts"}  # every stage uses them; they use no stage
RANK = {name: rank for rank, name in enumerate(STAGES)}


def stage_of(dotted: str) -> str | None:
    """``autograder.judge.plugin`` -> ``judge``; None for a shared module or the command line."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else None


def kit_imports(path) -> list[str]:
    """The kit modules ``path`` imports (``from autograder.x import y`` counts ``autograder.x.y``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("autograder")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autograder"):
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def test_every_module_belongs_to_a_stage_or_is_shared():
    loose = {path.stem for path in PACKAGE.glob("*.py")} - SHARED - {"__init__", "__main__"}
    assert loose == set()
    assert {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()} == set(STAGES)


def test_no_stage_reaches_up():
    reaching_up = []
    for path in sorted(PACKAGE.rglob("*.py")):
        dotted = ".".join(path.relative_to(KIT).with_suffix("").parts)
        if path.name == "__main__.py":
            continue  # the command line sits above every stage
        own = stage_of(dotted)
        for imported in kit_imports(path):
            target = stage_of(imported)
            if target is None:
                continue
            if own is None or RANK[target] > RANK[own]:
                reaching_up.append(f"{dotted} imports {imported}")
    assert reaching_up == []


@pytest.mark.slow
def test_importing_the_plugin_changes_nothing():
    """Hypothesis's settings are the plugin's only when pytest runs it (a platform or tool importing
    a helper of it draws as before)."""
    probe = ("import hypothesis\nfrom hypothesis.internal.conjecture import providers\n"
             "before = (hypothesis.settings.default, providers._get_local_constants)\n"
             "import autograder.judge.plugin\n"
             "assert (hypothesis.settings.default, providers._get_local_constants) == before\n")
    run = subprocess.run([sys.executable, "-c", probe], cwd=KIT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


def test_modules_and_functions_stay_small_enough_to_read():
    """A module does one job (450 lines at most) and a function fits a screen or two (60 lines at most)."""
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > 450:
            too_long.append(f"{path.relative_to(KIT)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                too_long.append(f"{path.relative_to(KIT)}: {node.name}, {node.end_lineno - node.lineno + 1} lines")
    assert too_long == []
