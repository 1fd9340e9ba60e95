"""Classroom 50's autograder for this lab (``make student-bundle`` writes the folder it lives in: copy
that folder's contents to ``CLASSROOM/autograders/ASSIGNMENT/``).

The runner calls it in the student's checkout, the folder beside it (``$CLASSROOM50_BUNDLE_DIR``). It lays
the folder's harness, public checks, Makefile and pins over the checkout (a student's edit of them
counts for nothing) and clears the rest of its root (:func:`clear_root`), then ``make classroom50`` runs the public checks once and writes ``./result.json``
and ``./release-body.md``. Exit 0: graded (the score is in result.json); anything else: the grading
itself failed (Classroom 50 then records an error, not a score).

Set-up: the pinned packages (``requirements-ci.txt``, torch's CPU build) go in a venv outside the checkout,
named by the pins' hash (``$CLASSROOM50_VENV``, else ``<cache>/pytorch-labs-classroom50/<lab>-<hash>``,
``<cache>`` being ``$CLASSROOM50_CACHE``, ``$XDG_CACHE_HOME`` or ``~/.cache``): where it survives the job
(a self-hosted runner, a container image holding it) it is reused, not installed again, and uv's own
cache (``~/.cache/uv``) spares the downloads. A GitHub-hosted runner keeps neither: the run installs the
pins (actions/cache is a workflow step's, which the runner's grade step does not offer an autograder).
Needs Python 3.11-3.13 on PATH: set the assignment's ``runtime`` to ``{"python": "3.12"}`` (the runner's
default, 3.14, is not one the kit is tested on; the Makefile then looks for python3.13/3.12/3.11).
"""

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

started = time.monotonic()
here = Path(__file__).resolve().parent
lab = next(line.split(":=")[1].strip() for line in (here / "Makefile").read_text().splitlines()
           if line.startswith("LAB :="))


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def lay(source: Path, target: Path) -> None:
    """``source``'s entries replace the checkout's, whole: a student's extra check, conftest.py or link in
    ``tests/`` goes with it. Into the lab's folder only the teacher's entries go (the student's modules stay)."""
    for entry in source.iterdir():
        if entry.name in ("autograder.py", "__pycache__"):
            continue
        there = target / entry.name
        if entry.is_dir() and source == here and entry.name == lab:
            if there.is_symlink() or not there.is_dir():
                remove(there)
                there.mkdir()
            lay(entry, there)
            continue
        remove(there)
        if entry.is_dir():
            shutil.copytree(entry, there)
        else:
            shutil.copy2(entry, there)  # the bundle's times: make sees pins no newer than a venv installed from them


def clear_root(checkout: Path) -> None:
    """Leave at the checkout's root the bundle's entries, the lab's folder and .git alone. The judge runs there,
    and Python puts that folder first on its path: a student's contextlib.py or pluggy.py beside the harness ran
    inside the judge as the library of that name, before any check, and a .<name>.dist-info folder there was read
    as an installed package whose entry points hypothesis and torch load."""
    keep = {entry.name for entry in here.iterdir()} - {"autograder.py", "__pycache__"} | {lab, ".git"}
    for entry in checkout.iterdir():
        if entry.name not in keep:
            remove(entry)


def allow_user_namespaces(switch: Path = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")) -> None:
    """The checks confine the code they run in user namespaces, which Ubuntu 24.04 (GitHub's hosted runners)
    lets AppArmor refuse to unprivileged processes; the runner's passwordless sudo turns that off, as the
    student workflow's step does. Elsewhere (no such switch, or no sudo) nothing changes."""
    if switch.is_file() and switch.read_text().strip() != "0" and shutil.which("sudo"):
        subprocess.call(["sudo", "-n", "sysctl", "-w", "kernel.apparmor_restrict_unprivileged_userns=0"])


lay(here, Path.cwd())
clear_root(Path.cwd())
allow_user_namespaces()
pins = (here / "requirements-ci.txt").read_bytes()
cache = Path(os.environ.get("CLASSROOM50_CACHE") or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
venv = Path(os.environ.get("CLASSROOM50_VENV")
            or cache / "pytorch-labs-classroom50" / f"{lab}-{hashlib.sha256(pins).hexdigest()[:16]}")
python = venv / "bin" / "python"
runs = python.is_file() and subprocess.call([str(python), "-c", ""], stderr=subprocess.DEVNULL) == 0
if venv.exists() and not runs:
    shutil.rmtree(venv, ignore_errors=True)  # left by an interpreter that is gone: build it again
reused = (venv / ".ci-requirements-installed").is_file()
print(f"classroom50: {'reusing' if reused else 'setting up'} {venv}", flush=True)
code = subprocess.call(["make", "--no-print-directory", "classroom50", f"VENV={venv}"])
print(f"classroom50: make classroom50 exited {code} after {time.monotonic() - started:.1f} s", flush=True)
sys.exit(code)
