"""The limits a grading run holds student code to, declared once: each with its default, its unit
and what it means. Every entry point (``make check``, ``make grade``, a grading lane, the judge's
pytest plugin, Gradescope, Classroom) starts from :class:`Limits`; the options an instructor may
set are generated from it (:func:`add_options`, :func:`from_options`), passed from process to
process as generated arguments (:meth:`Limits.argv`), and the README's table of limits is
:func:`markdown_table`'s (a test holds them equal).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

GIB, MIB = 1024**3, 1024**2


def limit(default: float, unit: str, meaning: str, option: str = "") -> float:
    """A limit's declaration; ``option``: the command-line option that sets it (none: fixed)."""
    return field(default=default, metadata={"unit": unit, "meaning": meaning, "option": option})


@dataclass(frozen=True)
class Limits:
    call_timeout: float = limit(10.0, "s", "one call into student code (then it is interrupted and fails its check)",
                                "--call-timeout")
    module_budget: float = limit(60.0, "s", "all the calls into one module of a submission together (the "
                                 "submission: the sum of its modules'), on the judge's clock", "--budget")
    repeat_timeout: float = limit(2.0, "s", "a call of a function that timed out before (its quick calls answer at "
                                  "once, so one that hangs on many inputs cannot spend its module's budget)")
    stop_grace: float = limit(2.0, "s", "a worker that does not answer this long after its call's time-out is killed")
    reference_timeout: float = limit(60.0, "s", "one call into the reference solution (hidden checks)")
    start_timeout: float = limit(60.0, "s", "a worker's start: the zygote's fork, the sandbox, the first words")
    check_bytes: int = limit(256 * MIB, "bytes", "the answers of one check, together, that the judge holds")
    worker_memory_bytes: int = limit(4 * GIB, "bytes", "each process of a worker: its address space (rlimit)")
    worker_total_memory_bytes: int = limit(4 * GIB, "bytes", "all of a worker's processes together (its memory "
                                           "cgroup; over it the kernel stops one)")
    cpu_seconds: int = limit(300, "s", "CPU time of each process of a worker (rlimit)")
    file_bytes: int = limit(16 * MIB, "bytes", "a file a worker writes (its scratch folder; rlimit)")
    open_files: int = limit(256, "", "files a worker's process may hold open (rlimit)")
    processes: int = limit(64, "", "processes of one worker's user id (rlimit)")
    submission_file_bytes: int = limit(1 * MIB, "bytes", "a file of a submission (a larger one is left out, "
                                       "and said so)")
    judge_memory_bytes: int = limit(4 * GIB, "bytes", "a grading lane's own address space (the back-stop: what a "
                                    "submission makes it hold is bounded by the limits above)")

    def argv(self) -> list[str]:
        """The options that carry these limits to another process of the kit."""
        return [arg for f in dataclasses.fields(self) if f.metadata["option"]
                for arg in (f.metadata["option"], repr(getattr(self, f.name)))]


def settable() -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(Limits) if f.metadata["option"]]


def add_options(add) -> None:
    """Declare the settable limits with ``add``: argparse's ``add_argument`` or pytest's ``addoption``."""
    for f in settable():
        add(f.metadata["option"], dest=f.name, type=float, default=f.default,
            help=f"seconds: {f.metadata['meaning']} (default: {f.default:g})")


def from_options(options) -> Limits:
    """The limits an argparse namespace (or pytest's ``config.option``) sets."""
    return Limits(**{f.name: getattr(options, f.name) for f in settable()})


def amount(value: float, unit: str) -> str:
    if unit == "bytes":
        return f"{value / GIB:g} GiB" if value >= GIB else f"{value / MIB:g} MiB"
    return f"{value:g} {unit}".strip()


def markdown_table() -> str:
    """The README's table of limits."""
    rows = [f"| {f.metadata['meaning']} | {amount(f.default, f.metadata['unit'])} | "
            f"{'`' + f.metadata['option'] + '`' if f.metadata['option'] else 'fixed'} |" for f in dataclasses.fields(Limits)]
    return "\n".join(["| what is limited | limit | set with |", "|---|---:|---|", *rows])


DEFAULTS = Limits()  # every limit at its declared default (the fixed ones hold everywhere)
