"""`make grade-container`: the kit's image (deploy/container/Containerfile) and the one command that
grades a cohort in it with Docker or Podman (deploy/container/grade.sh). No engine is needed here: the
image definition is read, and the script runs against a stand-in engine, printing its commands."""

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.__main__ import default_submissions
from conftest import DEMO, KIT

CONTAINER = KIT / "deploy" / "container"
MAKE = shutil.which("make")
# Dockerfile's instructions (docs.docker.com/reference/dockerfile); anything else is a typo no engine builds.
INSTRUCTIONS = {"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
                "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"}
PINNED_PYTHON = re.compile(r"docker\.io/library/python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}")


def instructions(text: str) -> list[tuple[str, str]]:
    """(instruction, arguments) of an image definition, as an engine reads it: comment lines left out
    (inside a continued line too), continued lines joined."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    logical = re.sub(r"\\\n", " ", "\n".join(lines))
    found = []
    for line in logical.splitlines():
        if line.strip():
            keyword, _, arguments = line.strip().partition(" ")
            found.append((keyword.upper(), " ".join(arguments.split())))
    return found


def image_definition() -> list[tuple[str, str]]:
    return instructions((CONTAINER / "Containerfile").read_text())


def arg_defaults(steps) -> dict[str, str]:
    return dict(arguments.split("=", 1) for keyword, arguments in steps if keyword == "ARG" and "=" in arguments)


def pip_installs(steps) -> list[dict]:
    """Each ``pip install`` the image runs: its requirement files, constraint files, packages, index, --no-deps."""
    installs = []
    for keyword, arguments in steps:
        for command in arguments.split("&&") if keyword == "RUN" else []:
            words = shlex.split(command)
            if "pip" not in " ".join(words[:1]) or words[1:2] != ["install"]:
                continue
            install = {"requirements": [], "constraints": [], "packages": [], "index": None, "no_deps": False}
            options = iter(words[2:])
            for word in options:
                if word in ("-r", "--requirement"):
                    install["requirements"].append(next(options))
                elif word in ("-c", "--constraint"):
                    install["constraints"].append(next(options))
                elif word in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links"):
                    install["index"] = (word, next(options))
                elif word == "--no-deps":
                    install["no_deps"] = True
                elif not word.startswith("-"):
                    install["packages"].append(word)
            installs.append(install)
    return installs


def test_the_image_definition_parses_and_its_base_is_pinned():
    """One stage, every line an instruction an engine knows, on Debian 12's Python 3.11 pinned by exact
    tag and digest (a tag alone moves as it is rebuilt)."""
    steps = image_definition()
    assert {keyword for keyword, _ in steps} <= INSTRUCTIONS
    stages = [arguments for keyword, arguments in steps if keyword == "FROM"]
    assert len(stages) == 1
    base = re.sub(r"\$\{(\w+)\}", lambda name: arg_defaults(steps)[name[1]], stages[0])
    assert PINNED_PYTHON.fullmatch(base), base


def test_the_image_installs_exactly_requirements_txt_with_torchs_cpu_build():
    """requirements.txt is all that is installed: torch alone from PyTorch's CPU index (no CUDA), at the
    version requirements.txt pins, then the whole file; nothing named besides."""
    steps = image_definition()
    torch, everything = pip_installs(steps)
    assert torch == {"requirements": [], "constraints": ["requirements.txt"], "packages": ["torch"],
                     "index": ("--index-url", "$TORCH_INDEX"), "no_deps": True}
    assert arg_defaults(steps)["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    assert everything == {"requirements": ["requirements.txt"], "constraints": [], "packages": [], "index": None,
                          "no_deps": False}
    assert re.search(r"^torch==\S+$", (KIT / "requirements.txt").read_text(), re.MULTILINE)
    copied_first = steps.index(("COPY", "requirements.txt ./"))
    assert copied_first < next(i for i, (keyword, arguments) in enumerate(steps) if "pip install" in arguments)


def test_the_image_carries_no_cohort_and_no_local_state():
    """The build context is the course's folder: its submissions, reports, gradebook and this machine's
    .venv stay out of the image (the container mounts a cohort when it grades)."""
    ignored = set((KIT / ".dockerignore").read_text().split())
    assert {".git", ".venv", "submitted", "grades", "gradebook.db", "dist"} <= ignored


# -- the command, against a stand-in engine ---------------------------------------------------------------

def tools_only(tmp_path: Path) -> Path:
    """A PATH holding only what grade.sh uses besides an engine (on this machine docker or podman may be
    installed: the stand-in must be the only one found)."""
    path = tmp_path / "bin"
    path.mkdir(parents=True)
    for tool in ("bash", "make", "mkdir", "dirname"):
        (path / tool).symlink_to(shutil.which(tool))
    return path


def stand_in_engine(path: Path, name: str, info: str = "", answers: bool = True) -> Path:
    """``name`` on ``path``: `info` answers (``info`` to a --format question), anything else is recorded
    in the returned file (nothing may be run by a dry run or a refusal)."""
    calls = path.parent / f"{name}-calls"
    engine = path / name
    engine.write_text(f'#!/bin/sh\n[ "$1" = info ] && {{ [ $# -gt 1 ] && echo "{info}"; exit {0 if answers else 1}; }}\n'
                      f'echo "$@" >> {calls}\n')
    engine.chmod(0o755)
    return calls


def grade_container(path: Path, *assignments: str, cwd: Path = KIT) -> subprocess.CompletedProcess:
    """make grade-container with these variables, as an instructor types it (nothing else in the environment)."""
    return subprocess.run([MAKE, "--no-print-directory", "-s", "grade-container", *assignments], cwd=cwd,
                          env={"PATH": str(path)}, capture_output=True, text=True, timeout=60)


def words(line: str) -> list[str]:
    """The arguments of one printed command, as the shell reads it (printf %q's quoting included)."""
    run = subprocess.run(["bash", "-c", f"printf '%s\\0' {line}"], capture_output=True, text=True, check=True)
    return run.stdout.split("\0")[:-1]


def mounts(command: list[str]) -> dict[str, tuple[str, str]]:
    """Mount point -> (host folder, "ro" or "rw") of an engine's run command."""
    found = {}
    for option, value in zip(command, command[1:]):
        if option in ("-v", "--volume"):
            source, target, *mode = value.split(":")
            found[target] = (source, "ro" if "ro" in ",".join(mode).split(",") else "rw")
    return found


def what_make_grade_runs(tmp_path: Path, variables: dict[str, str]) -> list[str]:
    """The arguments make grade hands its Python for these variables (a stand-in Python records them)."""
    record = tmp_path / "make-grade-ran.json"
    python = tmp_path / "python"
    python.write_text(f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n")
    python.chmod(0o755)
    subprocess.run([MAKE, "--no-print-directory", "grade", f"PY={python}", "RUN_READY=",
                    *(f"{name}={value}" for name, value in variables.items())],
                   cwd=KIT, env={"PATH": str(tools_only(tmp_path / "make-grade"))}, check=True, capture_output=True)
    return json.loads(record.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("engine, info", [("docker", "[name=seccomp,profile=builtin name=cgroupns]"),
                                          ("podman", "rootless=false")])
@pytest.mark.parametrize("variables", [{"LAB": "transformer", "JOBS": "2", "FORCE": "1", "SHARD": "2/3"}, {}],
                         ids=["every-option", "none"])
def test_the_container_runs_make_grades_command_on_the_cohort_read_only_and_writes_out(tmp_path, engine, info,
                                                                                      variables):
    path = tools_only(tmp_path)
    calls = stand_in_engine(path, engine, info)
    out = tmp_path / "my reports"
    given = {**variables, "SUBMISSIONS": str(DEMO), "OUT": str(out)}
    run = grade_container(path, "DRY_RUN=1", *(f"{name}={value}" for name, value in given.items()))
    assert run.returncode == 0, run.stderr
    build, container = (words(line) for line in run.stdout.splitlines())
    assert build == [engine, "build", "-t", "autograder-kit", "-f", "deploy/container/Containerfile", "."]
    assert container[:3] == [engine, "run", "--rm"] and "--privileged" not in container
    assert mounts(container) == {"/submissions": (str(DEMO), "ro"), "/grades": (str(out), "rw")}
    assert not out.exists() and not calls.exists()  # a dry run makes nothing
    assert container[-3:-1] == ["sh", "-ec"]
    in_container = shlex.split(container[-1].splitlines()[-1])
    assert in_container[0] == ".venv/bin/python"  # the image's, in /kit
    assert in_container[1:] == what_make_grade_runs(tmp_path, {**given, "SUBMISSIONS": "/submissions",
                                                               "OUT": "/grades"})


@pytest.mark.slow
def test_the_container_grades_make_grades_default_cohort(tmp_path):
    """Without SUBMISSIONS: the course's submitted/ when it exists, else the demo cohort, as make grade."""
    path = tools_only(tmp_path)
    stand_in_engine(path, "podman", "rootless=false")

    def mounted(kit: Path) -> str:
        run = grade_container(path, "DRY_RUN=1", f"OUT={tmp_path / 'out'}", cwd=kit)
        assert run.returncode == 0, run.stderr
        return mounts(words(run.stdout.splitlines()[-1]))["/submissions"][0]

    assert mounted(KIT) == str(default_submissions()) == str(DEMO)  # this kit has no submitted/
    course = tmp_path / "course"
    for name in ("Makefile", "deploy/container/grade.sh"):
        (course / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(KIT / name, course / name)
    (course / "submitted").mkdir()
    assert mounted(course) == str(course / "submitted")


@pytest.mark.slow
@pytest.mark.parametrize("engines, assignments, refusal", [
    ({}, [], "needs Docker or Podman, and neither is installed"),
    ({"docker": ("", False)}, [], "docker is installed but its engine does not answer"),
    ({"podman": ("rootless=true", True)}, [], "podman runs rootless here"),
    ({"docker": ("[name=seccomp,profile=builtin name=rootless]", True)}, [], "docker runs rootless here"),
    ({"podman": ("rootless=false", True)}, ["NBGRADER=1"], "NBGRADER=1 records into the course's gradebook.db"),
    ({"podman": ("rootless=false", True)}, ["SUBMISSIONS=no-such-folder"], "no submissions folder no-such-folder"),
], ids=["no-engine", "engine-not-running", "rootless-podman", "rootless-docker", "gradebook", "no-submissions"])
def test_the_command_refuses_clearly_and_runs_nothing(tmp_path, engines, assignments, refusal):
    path = tools_only(tmp_path)
    calls = [stand_in_engine(path, name, info, answers) for name, (info, answers) in engines.items()]
    run = grade_container(path, *assignments, f"OUT={tmp_path / 'out'}")
    assert run.returncode != 0 and run.stdout == ""
    assert run.stderr.startswith(f"grade-container: {refusal}"), run.stderr
    assert not any(call.exists() for call in calls)
