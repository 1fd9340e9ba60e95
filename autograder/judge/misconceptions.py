"""Named misconceptions: which known mistake does a failing submission's code match?

The catalogue (``misconceptions.toml`` next to the checks, instructor-only) lists, per part,
known wrong versions ("mutants") of the reference solution, each as edits of the reference
module with a title and a hint about the concept. When a check fails, the judge replays the
exact requests the check sent to the student's worker on a worker running each mutant of the
check's part; a mutant that answers every request as the student's code did (same shapes,
values within a tolerance, same exception types) matches that check. A mistake is named only on
enough evidence: the part's failed checks taken together (a first failing call such as
``causal_mask(1)``, where a 1x1 ``tril`` and ``triu(diagonal=0)`` agree, cannot tell mistakes apart), so
a mutant that any failed check of the part contradicts is not named, nor are two that answer all of
them alike. Checks are not written with misconceptions in mind: any failing check that called
student code can be diagnosed. A lane works each comparison out once for the same calls and
answers (another student's same mistake is told without asking the mutants again).

Mutants are the reference with a few lines changed, so they are trusted code; they still run
in the same kind of worker as the student (forked, confined) because that is the cheap way
to run many module versions side by side.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import math
import shutil
import tomllib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import torch

from autograder.files import copy_modules, folder_for_workers
from autograder.harness.codec import HandleRef, decode_frame
from autograder.harness.messages import Request
from autograder.harness.recording import Call
from autograder.harness.remote import RemoteCode, StudentError
from autograder.harness.sandbox import views_of_their_own
from autograder.limits import DEFAULTS, Limits
from autograder.results import FailureKind

CATALOGUE = "misconceptions.toml"

COMPARISONS_KEPT = 16384  # one bool each: a class's distinct wrong answers, times a part's mutants, fit

# How close a student's tensor must be to a mutant's to count as the same answer: a mistake
# written differently from the mutant computes in a different order.
RTOL, ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class Misconception:
    part: str
    name: str
    title: str
    hint: str
    replace: tuple[tuple[str, str], ...]

    @property
    def id(self) -> str:
        return f"{self.part}.{self.name}"

    def apply(self, reference: str) -> str:
        """The reference module's text with this mistake's edits."""
        for old, new in self.replace:
            if old not in reference:
                raise ValueError(f"misconception {self.id}: the reference no longer contains {old!r}")
            reference = reference.replace(old, new)
        return reference


def load_catalogue(checks_dir: Path) -> dict[str, list[Misconception]]:
    """``{part: [Misconception, ...]}`` from the checks' catalogue; empty without one."""
    path = Path(checks_dir) / CATALOGUE
    if not path.is_file():
        return {}
    catalogue = tomllib.loads(path.read_text(encoding="utf-8"))
    return {part: [Misconception(part, name, entry["title"], entry["hint"],
                                 tuple((old, new) for old, new in entry["replace"]))
                   for name, entry in entries.items()]
            for part, entries in catalogue.items()}


def same_value(student, mutant, handles: dict[int, int]) -> bool:
    """Do two answers agree? Pairs up the handles of modules built on each side."""
    if isinstance(student, HandleRef) and isinstance(mutant, HandleRef):
        handles[student.id] = mutant.id
        return True
    if isinstance(student, torch.Tensor) and isinstance(mutant, torch.Tensor):
        if student.shape != mutant.shape or student.dtype != mutant.dtype:
            return False
        return bool(torch.allclose(student.double(), mutant.double(), rtol=RTOL, atol=ATOL, equal_nan=True))
    if isinstance(student, float) and isinstance(mutant, float):
        return math.isclose(student, mutant, rel_tol=RTOL, abs_tol=ATOL) or (math.isnan(student) and math.isnan(mutant))
    if isinstance(student, (list, tuple)) and type(student) is type(mutant):
        return len(student) == len(mutant) and all(same_value(s, m, handles) for s, m in zip(student, mutant))
    if isinstance(student, dict) and isinstance(mutant, dict):
        return student.keys() == mutant.keys() and all(same_value(student[k], mutant[k], handles) for k in student)
    return type(student) is type(mutant) and student == mutant


class Undetermined(Exception):
    """A mutant's (or the reference's) own worker failed on a call (a time-out, a crash): that run tells
    nothing of the student's mistake."""


def calls_key(part: str, calls: list[Call]) -> bytes:
    """What a diagnosis depends on: the part, and each call's request, answer and error (of a call that
    raised, only its kind and exception type, as compared: not its message or trace)."""
    key = hashlib.blake2b(digest_size=16, person=b"diagnosis")
    for call in calls:  # each piece with its length: no two different calls make the same bytes
        answer = b"" if call.outcome.error else call.outcome.answer
        for piece in (part.encode(), call.frame, answer, repr(call.outcome.error).encode()):
            key.update(len(piece).to_bytes(8, "little") + piece)
    return key.digest()


class Diagnoser:
    """Runs the mutants of a catalogue and matches a part's failed checks' calls against them."""

    def __init__(self, catalogue: dict[str, list[Misconception]], reference: Path, confined: bool,
                 limits: Limits = DEFAULTS):
        self.catalogue, self.reference, self.limits = catalogue, Path(reference), limits
        self.confined = confined  # like the student's workers: each in a sandbox (and user id) of its own
        self.folder: Path | None = None
        self.runners: dict[str, RemoteCode] = {}
        # Many students hand in the same mistake, and the same answers to the same requests compare
        # alike (the mutants, fixed edits of the reference, answer a check's requests alike: each run
        # starts as a check does, from seeded requests): each comparison is worked out once per lane, unless
        # a worker of the diagnoser's failed (Undetermined). By a digest of the calls and the runner's
        # name; the least recently asked goes.
        self.compared: OrderedDict[tuple[bytes, str], bool] = OrderedDict()

    def runner(self, name: str, mistake: Misconception | None = None) -> RemoteCode:
        """A worker on the reference modules, with ``mistake``'s edits when given."""
        if name not in self.runners:
            if self.folder is None:
                self.folder = folder_for_workers(prefix="autograder-mutants-",
                                                 passed_through=not views_of_their_own(self.limits))
            folder = copy_modules(self.reference, folder_for_workers(self.folder))
            if mistake is not None:
                module = folder / f"{mistake.part}.py"
                module.write_text(mistake.apply(module.read_text(encoding="utf-8")), encoding="utf-8")
            self.runners[name] = RemoteCode(folder, confined=self.confined, budget=math.inf, limits=self.limits)
        return self.runners[name]

    def diagnose(self, part: str, checks: list[list[Call]]) -> list[list[Misconception]]:
        """For each of ``part``'s failed checks (the calls each made), the known mistakes it names.

        A mutant is named on a check whose calls it answers as the student did and the reference
        does not (else the check failed on something other than the answers: a dtype the check
        demands, the source's form), unless the first call the reference answers otherwise is one
        the student's code raised in (an exception of the same type is no evidence of the same
        mistake: many mistakes crash alike). And only when it is the one mutant that answers every
        failed check of ``checks`` as the student did: any of them may contradict it, and two that
        all of them leave standing cannot be told apart. A check a time-out or a crash ended is no
        evidence either way.
        """
        evidence = [calls for calls in checks if calls and not any(
            c.outcome.error and not FailureKind(c.outcome.error[0]).meaning.diagnosable for c in calls)]
        try:
            telling = [any(calls is seen for seen in evidence) and self.tells(part, calls) for calls in checks]
            mutants = self.catalogue.get(part, [])
            candidates = [m for m in mutants
                          if any(self.alike(m, part, calls) for calls, tells in zip(checks, telling) if tells)]
            # A check no mutant answers as the student did tells none of them apart (answers drawn from
            # another random stream than the reference's, a mistake the catalogue lacks): it contradicts none.
            # Without a candidate, none stands whatever they tell (and finding them ran every mutant on every check).
            telling_apart = [calls for calls in evidence
                             if any(self.alike(m, part, calls) for m in mutants)] if candidates else []
            standing = [m for m in candidates if all(self.alike(m, part, calls) for calls in telling_apart)]
        except Undetermined:  # nothing kept of this run: the next student with these answers gets another try
            return [[] for _ in checks]
        if len(standing) != 1:
            return [[] for _ in checks]
        return [list(standing) if tells and self.alike(standing[0], part, calls) else [] for calls, tells in zip(checks, telling)]

    def tells(self, part: str, calls: list[Call]) -> bool:
        """Does the reference answer ``calls`` otherwise, first on a call the student's code answered?"""
        return self.remembered(calls_key(part, calls), "reference", lambda: (
            (differs := self.first_difference(self.runner("reference"), calls)) is not None
            and calls[differs].outcome.error is None))

    def alike(self, mistake: Misconception, part: str, calls: list[Call]) -> bool:
        """Does ``mistake``'s mutant answer every one of ``calls`` as it was answered?"""
        return self.remembered(calls_key(part, calls), mistake.id,
                               lambda: self.first_difference(self.runner(mistake.id, mistake), calls) is None)

    def remembered(self, key: bytes, name: str, compare) -> bool:
        if (key, name) in self.compared:
            self.compared.move_to_end((key, name))
            return self.compared[key, name]
        found = self.compared[key, name] = compare()
        if len(self.compared) > COMPARISONS_KEPT:
            self.compared.popitem(last=False)
        return found

    @staticmethod
    def first_difference(mutant: RemoteCode, calls: list[Call]) -> int | None:
        """The index of the first call ``mutant`` answers otherwise than it was answered; None when
        it answers every one alike."""
        mutant.begin_check(record=False)  # as a check does: the worker forgets earlier modules, its answers count anew
        handles: dict[int, int] = {}
        for index, call in enumerate(calls):
            outcome, request = call.outcome, Request.from_wire(decode_frame(call.frame))
            if getattr(request, "handle", None) is not None:
                if request.handle not in handles:
                    return index
                request = dataclasses.replace(request, handle=handles[request.handle])
            try:
                value = mutant.request(request, wrap=False)
            except StudentError as error:
                if not error.kind.meaning.diagnosable:  # the mutant's own worker failed: it tells nothing
                    raise Undetermined(str(error)) from None
                if outcome.error != (error.kind, error.type_name):
                    return index
                continue
            if outcome.error is not None or not same_value(outcome.value, value, handles):
                return index
        return None

    def close(self) -> None:
        for runner in self.runners.values():
            runner.close()
        self.runners.clear()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


_diagnosers: dict[tuple, Diagnoser | None] = {}


def shared_diagnoser(checks_dir: Path, reference: Path, confined: bool, limits: Limits) -> Diagnoser | None:
    """One diagnoser per catalogue, reference and confinement for the whole process (a grading lane
    keeps its mutants' workers from one submission to the next); None without a catalogue."""
    key = (Path(checks_dir).resolve(), Path(reference).resolve(), confined)
    if key not in _diagnosers:
        catalogue = load_catalogue(checks_dir)
        has_reference = any(Path(reference).glob("*.py"))
        _diagnosers[key] = Diagnoser(catalogue, reference, confined, limits) if catalogue and has_reference else None
        if _diagnosers[key] is not None:
            atexit.register(_diagnosers[key].close)
    return _diagnosers[key]
