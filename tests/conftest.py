"""Shared paths and the one way the kit's tests grade a folder: the real command line."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.lab import Lab

KIT = Path(__file__).resolve().parent.parent
SOURCE = KIT / "source" / "attention"
CHECKS = SOURCE / "tests"
RELEASE = KIT / "assignments" / "attention"
SOLUTIONS = KIT / "solutions" / "attention"
WRONG_MODULES = Path(__file__).resolve().parent / "wrong_modules"
LAB = Lab.load(SOURCE)
PARTS = LAB.part_ids


def grade(submission: Path, results: Path, part: str | None = None) -> dict:
    """Run every check (hidden ones included) on ``submission``; return the results JSON."""
    command = [sys.executable, "-m", "autograder", "check", "--submission", str(submission),
               "--checks", str(CHECKS), "--reference", str(SOLUTIONS), "--results-json", str(results)]
    if part:
        command += ["--part", part]
    run = subprocess.run(command, cwd=KIT, capture_output=True, text=True, timeout=900)
    assert results.is_file(), f"the checks wrote no results:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return json.loads(results.read_text())


def submission_with(tmp_path: Path, replacements: dict[str, str | None]) -> Path:
    """The reference modules, with some replaced by the given text (None: deleted)."""
    folder = tmp_path / "submission"
    folder.mkdir(parents=True)
    for module in SOLUTIONS.glob("*.py"):
        shutil.copy(module, folder / module.name)
    for name, text in replacements.items():
        target = folder / f"{name}.py"
        if text is None:
            target.unlink()
        else:
            target.write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def solution_results(tmp_path_factory):
    return grade(SOLUTIONS, tmp_path_factory.mktemp("solutions") / "results.json")


@pytest.fixture(scope="session")
def stub_results(tmp_path_factory):
    return grade(RELEASE, tmp_path_factory.mktemp("stubs") / "results.json")
