"""``make bench [LAB=...]`` (``python -m autograder bench``): how fast the grader is on a lab, measured against importing torch once.

Grades ``--copies`` copies of the lab's reference solution (and, to separate the fixed start-up
cost, one copy per lane), then prints the wall time, the marginal time per submission and
its ratio to one ``python -c "import torch"`` measured in the same run. The goal is a ratio
of at most 0.25; nbgrader's autograde takes about 2.2 s a submission here, serially.

Copies of one solution answer every check alike, so after the first copy in each lane every
check passes by replay (:mod:`autograder.judge.replay`): the students' code still runs, the judge's
side does not. A submission unlike any earlier one gets no replay, so the bench also grades
``--full-copies`` copies with replay off and prints that marginal time too, and the lab's demo
cohort (``examples/submitted/*/<lab>/``) cycled to ``--copies`` submissions: wrong answers,
stubs and crashes, as a real class hands in.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.batch.grade import grade
from autograder.files import copy_modules
from autograder.course import KIT_ROOT
from autograder.lab import Lab


def cohort(lab: Lab, folder: Path, copies: int) -> Path:
    for i in range(copies):
        copy_modules(lab.reference, folder / f"student{i:04d}" / lab.name)
    return folder


def mixed_cohort(lab: Lab, folder: Path, copies: int) -> Path:
    """The lab's demo cohort, cycled to ``copies`` submissions."""
    demo = sorted(p for p in (KIT_ROOT / "examples" / "submitted").glob(f"*/{lab.name}") if p.is_dir())
    for i in range(copies):
        shutil.copytree(demo[i % len(demo)], folder / f"student{i:04d}" / lab.name, symlinks=True)
    return folder


def timed_grade(lab: Lab, copies: int, jobs: int, work: Path, replay: bool = True, mixed: bool = False) -> tuple[float, int]:
    """Seconds to grade ``copies`` copies of the reference (or of the demo cohort, ``mixed``), and
    how many checks passed by replay."""
    name = f"{copies}{'' if replay else '-full'}{'-mixed' if mixed else ''}"
    submissions = (mixed_cohort if mixed else cohort)(lab, work / f"cohort{name}", copies)
    started = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        run = grade(lab, submissions, work / f"grades{name}", jobs=jobs, force=True, stream=quiet, replay=replay)
    elapsed = time.perf_counter() - started
    assert mixed or run.mean == lab.max_points, f"the reference solution scored {run.mean} on average"
    return elapsed, run.replayed_checks


def torch_import_seconds(repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        times.append(time.perf_counter() - started)
    return min(times)


def bench(lab: Lab, options: argparse.Namespace, import_torch: float) -> None:
    """Time one lab and print its figures."""
    jobs = options.jobs
    with tempfile.TemporaryDirectory(prefix="autograder-bench-") as tmp:
        work = Path(tmp)
        baseline, _ = timed_grade(lab, jobs, jobs, work)  # the first submission of a lane has nothing to replay
        total, replayed = timed_grade(lab, options.copies, jobs, work)
        full = timed_grade(lab, options.full_copies, jobs, work, replay=False)[0] if options.full_copies else None
        mixed, mixed_replayed = timed_grade(lab, options.copies, jobs, work, mixed=True)
    marginal = (total - baseline) / max(options.copies - jobs, 1)
    print(f"submissions graded:          {options.copies} ({lab.name}: reference solution, {jobs} jobs)")
    print(f"total wall time:             {total:.1f} s")
    print(f"fixed start-up (1 per lane): {baseline:.1f} s")
    print(f"marginal time / submission:  {marginal:.3f} s")
    print(f"checks passed by replay:     {replayed} ({replayed / max(options.copies - jobs, 1):.0f} per copy "
          f"after each lane's first)")
    print(f"python -c 'import torch':    {import_torch:.3f} s")
    print(f"ratio marginal / import:     {marginal / import_torch:.2f} (goal: <= 0.25)")
    if full is not None:
        full_marginal = (full - baseline) / (options.full_copies - jobs)
        print(f"without replay ({options.full_copies} copies): marginal {full_marginal:.3f} s, ratio "
              f"{full_marginal / import_torch:.2f} (a submission unlike every earlier one)")
    mixed_marginal = (mixed - baseline) / max(options.copies - jobs, 1)
    print(f"the demo cohort cycled to {options.copies}: total {mixed:.1f} s, marginal {mixed_marginal:.3f} s, ratio "
          f"{mixed_marginal / import_torch:.2f}, {mixed_replayed} checks passed by replay")


def run(options: argparse.Namespace, labs: list[Lab], error) -> int:
    """Time each of ``labs`` (options: ``python -m autograder bench --help``); ``error`` reports a bad
    option (argparse's ``parser.error``)."""
    if 0 < options.full_copies <= options.jobs:
        error(f"--full-copies must be 0 or more than --jobs ({options.jobs}): the first copy in each lane is start-up")
    # The fastest of five: page cache and machine load move a single run by 20%.
    import_torch = torch_import_seconds()
    for number, lab in enumerate(labs):
        if number:
            print()
        bench(lab, options, import_torch)
    return 0
