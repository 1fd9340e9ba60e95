"""The limits a grading run holds student code to, declared once: each with its default, its unit
and what it means. Every entry point (``make check``, ``make grade``, a grading lane, the judge's
pytest plugin, Gradescope, Classroom) starts from :class:`Limits`; the options an instructor may
set are generated from it (:func:`add_options`, :func:`from_options`), passed from process to
process as generated arguments (:meth:`Limits.argv`), and docs/security.md's table of limits is
:func:`markdown_table`'s (a test holds them equal).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

GIB, MIB = 1024**3, 1024**2


def limit(default: float, unit: str, meaning: str, option: str = "", lab_max: float | None = None) -> float:
    """A limit's declaration; ``option``: the command-line option that sets it (none: fixed); ``lab_max``:
    a lab may set it in its ``lab.toml`` (``[limits]``), up to this (none: a lab may not)."""
    return field(default=default, metadata={"unit": unit, "meaning": meaning, "option": option, "lab_max": lab_max})


@dataclass(frozen=True)
class Limits:
    # A lab may need longer calls (a training loop): up to these, set in its lab.toml.
    call_timeout: float = limit(10.0, "s", "one call into student code (then it is interrupted and fails its check)",
                                "--call-timeout", lab_max=120.0)
    module_budget: float = limit(60.0, "s", "all the calls into one module of a submission together (the "
                                 "submission: the sum of its modules'), on the judge's clock", "--budget",
                                 lab_max=600.0)
    repeat_timeout: float = limit(2.0, "s", "a call of a function that timed out before (its quick calls answer at "
                                  "once, so one that hangs on many inputs cannot spend its module's budget)")
    stop_grace: float = limit(2.0, "s", "a worker that does not answer this long after its call's time-out is killed")
    reference_timeout: float = limit(60.0, "s", "one call into the reference solution (hidden checks)")
    start_timeout: float = limit(60.0, "s", "a worker's start: the zygote's fork, the sandbox, the first words")
    frame_bytes: int = limit(64 * MIB, "bytes", "one message between the judge and a worker (an answer; a larger "
                             "one is refused before it is read)")
    header_bytes: int = limit(1 * MIB, "bytes", "the header of one message (its shapes and types)")
    check_bytes: int = limit(256 * MIB, "bytes", "the answers of one check, together, that the judge holds")
    printed_note_bytes: int = limit(16 * MIB, "bytes", "printed output before the notes say so (printing costs nothing)")
    output_tail_bytes: int = limit(1500, "bytes", "the last printed output a crash message shows")
    worker_memory_bytes: int = limit(4 * GIB, "bytes", "each process of a worker: its address space (rlimit)")
    worker_total_memory_bytes: int = limit(4 * GIB, "bytes", "all of a worker's processes together (its memory "
                                           "cgroup; over it the kernel stops one)")
    cpu_seconds: int = limit(300, "s", "CPU time of each process of a worker (rlimit)")
    file_bytes: int = limit(16 * MIB, "bytes", "a file a worker writes (rlimit)")
    scratch_bytes: int = limit(32 * MIB, "bytes", "a worker's scratch folder, all its files together (its own tmpfs)")
    scratch_files: int = limit(4096, "", "files in a worker's scratch folder")
    open_files: int = limit(256, "", "files a worker's process may hold open (rlimit)")
    processes: int = limit(64, "", "processes of one worker's user id (rlimit)")
    # Without a memory cgroup (no root) only the per-process rlimit bounds memory: so few processes,
    # each with its share, that together they stay within the worker's total.
    processes_without_ceiling: int = limit(2, "", "processes of one worker where it has no memory cgroup (each may "
                                           "then map its share of the worker's total)")
    submission_file_bytes: int = limit(1 * MIB, "bytes", "a file of a submission (a larger one is left out, "
                                       "and said so)")
    # Every staged file counts as the 4 KiB blocks it takes, so many empty notebooks count too; a cohort's staging
    # holds at most its size times this.
    submission_bytes: int = limit(8 * MIB, "bytes", "a submission's staged files together, each counted in the 4 KiB "
                                  "blocks it takes (the lab's modules first; files past it are left out, and said so)")
    # What staging and a Gradescope upload say is per file: 100,000 stray files must not make a 5 MB
    # notes cell (Python's csv module refuses cells over 128 KiB), feedback page or results.json.
    submission_notes: int = limit(20, "", "notes about one submission's files, or one Gradescope upload's (more are "
                                  "counted, not listed)")
    note_characters: int = limit(300, "", "characters of one such note")
    upload_unzipped_bytes: int = limit(20 * MIB, "bytes", "what a Gradescope upload's zips unpack to, together")
    lane_log_bytes: int = limit(16 * MIB, "bytes", "one lane's log (make grade DEBUG=1; then it says it was cut)")
    upload_archives: int = limit(20, "", "zips opened in one upload")
    upload_nested_zips: int = limit(3, "", "levels of zips inside zips opened")
    upload_depth: int = limit(4, "", "folders deep the lab's files are looked for in an upload")
    judge_memory_bytes: int = limit(4 * GIB, "bytes", "a grading lane's own address space (the back-stop: what a "
                                    "submission makes it hold is bounded by the limits above)")

    def for_lab(self, declared: Iterable[tuple[str, float]]) -> Limits:
        """These limits with a lab's own (``lab.toml``'s ``[limits]``, checked by :func:`lab_limits`) where
        they are still the kit's defaults: an option the instructor gave wins over the lab's value."""
        return dataclasses.replace(self, **{name: value for name, value in declared
                                            if getattr(self, name) == getattr(DEFAULTS, name)})

    def argv(self) -> list[str]:
        """The options that carry these limits to another process of the kit."""
        return [arg for f in dataclasses.fields(self) if f.metadata["option"]
                for arg in (f.metadata["option"], repr(getattr(self, f.name)))]


def lab_limits(declared: Mapping[str, object], where: str) -> dict[str, float]:
    """A lab's ``[limits]``, checked against the kit's bounds (each limit's ``lab_max``); ``ValueError``
    names what is wrong, in the lab author's words (``where``: the file)."""
    bounds = {f.name: f.metadata["lab_max"] for f in dataclasses.fields(Limits) if f.metadata["lab_max"] is not None}
    for name, value in declared.items():
        if name not in bounds:
            raise ValueError(f"{where}: [limits] {name}: a lab may set only {', '.join(sorted(bounds))}")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= bounds[name]:
            raise ValueError(f"{where}: [limits] {name} = {value!r}: a number above 0 and at most {bounds[name]:g}")
    return {name: float(value) for name, value in declared.items()}


def settable() -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(Limits) if f.metadata["option"]]


def add_options(add) -> None:
    """Declare the settable limits with ``add``: argparse's ``add_argument`` or pytest's ``addoption``."""
    for f in settable():
        add(f.metadata["option"], dest=f.name, type=float, default=f.default,
            help=f"{f.metadata['meaning']} (default: {amount(f.default, f.metadata['unit'])})")


def from_options(options) -> Limits:
    """The limits an argparse namespace (or pytest's ``config.option``) sets."""
    return Limits(**{f.name: getattr(options, f.name) for f in settable()})


def amount(value: float, unit: str) -> str:
    if unit == "bytes" and value >= MIB:
        return f"{value / GIB:g} GiB" if value >= GIB else f"{value / MIB:g} MiB"
    return f"{value:,g} {unit}".strip()


def markdown_table() -> str:
    """docs/security.md's table of limits."""
    rows = [f"| {f.metadata['meaning']} | {amount(f.default, f.metadata['unit'])} | "
            f"{'`' + f.metadata['option'] + '`' if f.metadata['option'] else 'fixed'} |" for f in dataclasses.fields(Limits)]
    return "\n".join(["| what is limited | limit | set with |", "|---|---:|---|", *rows])


DEFAULTS = Limits()  # every limit at its declared default (the fixed ones hold everywhere)
# Not a limit, but declared here with them for every entry point that grades a cohort (make grade,
# make bench, grade()): lanes in parallel, one per CPU (a lane is one busy process at a time). A
# Gradescope upload is a cohort of one: one lane.
JOBS = os.cpu_count() or 1
# Not a limit either: how often `make check` says a call into student code is still running (the first
# time once it has run this long), so a hang is not a silent terminal.
PROGRESS_SECONDS = 3.0
