"""What one judge's pytest session keeps between its hooks (:mod:`autograder.judge.plugin`) and its
summary (:mod:`autograder.judge.scoreboard`): the session's stash keys, and why no worker would serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.lab import Lab

LAB = pytest.StashKey[Lab]()
CHECKS_DIR = pytest.StashKey[Path]()
CALLS = pytest.StashKey[list]()
FAILED_CALLS = pytest.StashKey[dict]()  # {node id: the calls of a check that failed}
STOOD_IN = pytest.StashKey[tuple]()
DIAGNOSER = pytest.StashKey[object]()
REPLAYED = pytest.StashKey[bool]()
REFERENCE_ROOT = pytest.StashKey[Path]()
SANDBOX = pytest.StashKey[dict]()
NOTES = pytest.StashKey[list]()
REACHES = pytest.StashKey[list]()  # where the submission's source reaches into internals (judge.internals)
SEALED = pytest.StashKey[bool]()  # the hidden checks have begun, in a worker of their own
UNCONFINED_EXIT = 12  # pytest's exit code when no worker would serve (its own codes end at 5)
# Why no worker would serve this session (sandbox.Unconfined), for the entry point that ran pytest in this process.
refusal: list[str] = []
