"""A lab is a folder: ``source/<lab>/`` with its modules, ``tests/`` (checks, ``points.toml``,
check helpers, ``misconceptions.toml``), its notebook and ``lab.toml``, the one declaration the
kit reads (title, parts in teaching order with weight and the parts each builds on).

The same folder layout holds in ``assignments/<lab>/`` and ``solutions/<lab>/`` (the release and
the reference, written by :mod:`autograder.authoring.release`), so a lab is found from any of them: a
checks folder's parent is its lab.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path

from autograder.course import KIT_ROOT, directory
from autograder.limits import lab_limits

DECLARATION = "lab.toml"


class LabError(ValueError):
    """A lab folder without a usable declaration."""


@dataclass(frozen=True)
class Part:
    """One exercise: its id is the module's name, the pytest marker, the section of
    ``points.toml`` and the value of ``make check PART=``."""

    id: str
    weight: float
    title: str = ""
    uses: tuple[str, ...] = ()  # parts whose modules this part's module builds on
    # Its checks that judge it end to end, through the parts it uses: all a mistake in one of those
    # may cost it (every other check judges this part's own wiring).
    end_to_end: tuple[str, ...] = ()
    # The function of the lab's public tests/stand_ins.py that answers for this part's module inside a
    # part built on it, wherever the student's raises or answers with the wrong shape or dtype.
    stand_in: str = ""

    @property
    def module(self) -> str:
        return f"{self.id}.py"


@dataclass(frozen=True)
class Lab:
    name: str  # the folder's name: source/<name>/, submitted/<student>/<name>/
    title: str
    parts: tuple[Part, ...]
    # ``[limits]``: the lab's own limits, within the kit's bounds, as (name, value) pairs (autograder.limits:
    # Limits.for_lab); pairs, not a dict, so a lab stays hashable.
    limits: tuple[tuple[str, float], ...] = ()
    # ``allowed_imports``: modules its code may import beyond the kit's libraries, among those the kit lets a
    # lab allow (autograder.harness.lab_imports.LAB_MAY_ALLOW).
    allowed_imports: frozenset[str] = frozenset()

    @classmethod
    def load(cls, folder: Path) -> Lab:
        """The lab declared in ``folder/lab.toml`` (a lab's source, release or reference folder)."""
        path = Path(folder) / DECLARATION
        try:
            declared = tomllib.loads(path.read_text(encoding="utf-8"))
            parts = tuple(Part(p["id"], float(p["weight"]), p.get("title", ""), tuple(p.get("uses", ())),
                               tuple(p.get("end_to_end", ())), p.get("stand_in", "")) for p in declared["parts"])
            lab = cls(Path(folder).resolve().name, declared["title"], parts,
                      allowed_imports=frozenset(declared.get("allowed_imports", ())))
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise LabError(f"{path}: not a lab declaration ({type(exc).__name__}: {exc})") from exc
        try:
            lab = dataclasses.replace(lab, limits=tuple(sorted(lab_limits(declared.get("limits", {}), str(path)).items())))
        except ValueError as exc:  # said in the author's words, naming the file once
            raise LabError(str(exc)) from None
        unknown = {u for p in parts for u in p.uses} - set(lab.part_ids)
        if unknown or len(set(lab.part_ids)) != len(parts) or not parts:
            raise LabError(f"{path}: parts must be unique, at least one, and `uses` must name parts "
                           f"(unknown: {sorted(unknown)})")
        return lab

    @property
    def part_ids(self) -> tuple[str, ...]:
        return tuple(p.id for p in self.parts)

    @property
    def modules(self) -> tuple[str, ...]:
        return tuple(p.module for p in self.parts)

    def part(self, part_id: str) -> Part:
        return next(p for p in self.parts if p.id == part_id)

    def holds(self, path: Path) -> bool:
        """Is ``path`` one of the lab's modules, or a notebook: all a submission is graded on?"""
        return path.name in self.modules or path.suffix == ".ipynb"

    @property
    def max_points(self) -> float:
        return sum(p.weight for p in self.parts)

    # -- where its versions live in the kit ---------------------------------------------------------
    @property
    def source(self) -> Path:
        return directory("source") / self.name

    @property
    def checks(self) -> Path:
        return self.source / "tests"

    @property
    def reference(self) -> Path:
        return directory("solution") / self.name

    @property
    def release(self) -> Path:
        return directory("release") / self.name

    @property
    def notebook(self) -> str | None:
        """The name (without ``.ipynb``) of the lab's companion notebook, if it has one."""
        found = sorted(self.source.glob("*.ipynb"))
        return found[0].stem if found else None


def all_labs() -> list[Lab]:
    """Every lab of the course: each ``source/<lab>/`` with a ``lab.toml``, by name."""
    return [Lab.load(path.parent) for path in sorted(directory("source").glob(f"*/{DECLARATION}"))]


def find_lab(name: str | None = None) -> Lab:
    """The lab called ``name``; without a name, the course's only lab (an error when there are more)."""
    labs = all_labs()
    if name is None and len(labs) == 1:
        return labs[0]
    for lab in labs:
        if lab.name == name:
            return lab
    raise LabError(f"no lab {name!r}: the labs are {', '.join(lab.name for lab in labs) or 'none'}"
                   if name else f"name a lab (LAB=...): the labs are {', '.join(lab.name for lab in labs)}")


def release_checks(submission: Path, lab_name: str | None) -> Path | None:
    """For an upload without its checks (``submitted/<student>/<lab>/``), the lab's public checks: the
    lab named, or the one the folder is named after."""
    try:
        return find_lab(lab_name or submission.resolve().name).release / "tests"
    except LabError:
        return None


def kit_checks(checks: Path) -> bool:
    """May the judge run ``checks`` (unconfined, as checks run)? In a student's copy of a lab (no source/) its own;
    in an instructor's kit only the kit's folders: an upload's tests/ are the student's code."""
    if not (KIT_ROOT / "source").is_dir():
        return True
    return any(checks.is_relative_to((KIT_ROOT / folder).resolve()) for folder in ("assignments", "solutions", "source"))
