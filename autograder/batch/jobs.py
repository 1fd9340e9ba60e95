"""What a batch and its grading lanes (:mod:`autograder.batch.lane`) say to each other, one JSON line each way:
a :class:`Job` to the lane, :class:`Graded` or :class:`Failed` back. Both sides read and write them here only."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    """Grade the staged ``submission``; write the run's results to ``results``."""

    submission: str
    results: str

    def to_line(self) -> str:
        return json.dumps({"submission": self.submission, "results": self.results}) + "\n"

    @classmethod
    def from_line(cls, line: str) -> Job:
        said = json.loads(line)
        return cls(str(said["submission"]), str(said["results"]))


@dataclass(frozen=True)
class Graded:
    """The job was graded: its results are in ``results``."""

    results: str

    def to_line(self) -> str:
        return json.dumps({"results": self.results}) + "\n"


@dataclass(frozen=True)
class Failed:
    """The job could not be graded, and why."""

    error: str

    def to_line(self) -> str:
        return json.dumps({"error": self.error}) + "\n"


def answer_from_line(line: str) -> Graded | Failed:
    """A lane's answer to a job."""
    try:
        said = json.loads(line)
    except ValueError:
        said = None
    if isinstance(said, dict) and isinstance(said.get("results"), str):
        return Graded(said["results"])
    if isinstance(said, dict) and "error" in said:
        return Failed(str(said["error"]))
    return Failed(f"the grading process answered otherwise than a lane answers: {line[:200]!r}")
