"""``make bench [LAB=...]`` (``python -m autograder bench``): how fast the grader is on a lab, measured against importing torch once.

Grades ``--copies`` copies of the lab's reference solution (and, to separate the fixed start-up
cost, one copy per lane), then prints the wall time, the marginal time per submission and
its ratio to one ``python -c "import torch"`` measured in the same run. The goal is a ratio
of at most 0.25.

Copies of one solution answer every check alike, so after the first copy in each lane every
check passes by replay (:mod:`autograder.judge.replay`): the students' code still runs, the judge's
side does not. A submission unlike any earlier one gets no replay, so the bench also grades
``--full-copies`` copies with replay off and prints that marginal time too, and the lab's demo
cohort (``examples/submitted/*/<lab>/``) cycled to ``--copies`` submissions: wrong answers,
stubs and crashes, as a real class hands in.

Last, beside the tool instructors would otherwise use: ``--nbgrader-copies`` copies of the
reference, notebook included, autograded by the real ``nbgrader autograde`` (each notebook run
in a fresh kernel, serially, as nbgrader does) and graded by ``python -m autograder grade``, each a
whole run of its command on the same folders; the goal is at most 0.10 of nbgrader's time.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.batch.grade import grade
from autograder.files import copy_modules
from autograder.course import KIT_ROOT, run_command, run_nbgrader
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


def nbgrader_course(lab: Lab, folder: Path, copies: int) -> Path:
    """An nbgrader course in ``folder`` whose ``copies`` students each handed in the reference solution
    as a student hands in the lab: the modules, the notebook with its answers and the ``tests/`` helpers
    it imports; the assignment is recorded in its gradebook, as ``nbgrader autograde`` needs."""
    # Nothing ignored (the kit's own course ignores *.py and tests/, which it writes itself): autograde
    # copies only what is not, and the notebook imports the modules and helpers beside it.
    (folder / "source" / lab.name).mkdir(parents=True)
    (folder / "nbgrader_config.py").write_text('c = get_config()\nc.CourseDirectory.course_id = "bench"\n')
    notebook = f"{lab.notebook}.ipynb"
    shutil.copy(lab.source / notebook, folder / "source" / lab.name / notebook)
    run_nbgrader("generate_assignment", lab.name, "--force", course=folder, quiet=True)
    for i in range(copies):
        shutil.copytree(lab.reference, folder / "submitted" / f"student{i:04d}" / lab.name)
    return folder


def notebook_errors(notebook: Path) -> list[str]:
    """The names of the errors a run notebook's cells raised."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [out["ename"] for cell in cells for out in cell.get("outputs", []) if out.get("output_type") == "error"]


def against_nbgrader(lab: Lab, copies: int, jobs: int, work: Path) -> tuple[float, float]:
    """Seconds ``nbgrader autograde`` and ``python -m autograder grade`` take on the same ``copies``
    submissions, each one whole run of its command."""
    course = nbgrader_course(lab, work / "nbgrader", copies)
    started = time.perf_counter()
    run_nbgrader("autograde", lab.name, course=course, quiet=True)
    nbgrader_seconds = time.perf_counter() - started
    for notebook in sorted(course.glob(f"autograded/*/{lab.name}/{lab.notebook}.ipynb")):  # a fair race: each ran
        assert not notebook_errors(notebook), f"nbgrader's run of {notebook} raised {notebook_errors(notebook)}"
    assert len(list(course.glob(f"autograded/*/{lab.name}"))) == copies, "nbgrader autograded too few"
    out = work / "grades-vs-nbgrader"
    started = time.perf_counter()
    run_command([sys.executable, "-m", "autograder", "grade", "--lab", lab.name, "--submissions",
                 str(course / "submitted"), "--out", str(out), "--jobs", str(jobs)], KIT_ROOT, quiet=True)
    grade_seconds = time.perf_counter() - started
    with open(out / lab.name / "grades.csv", newline="", encoding="utf-8") as rows:
        totals = [float(row["total"]) for row in csv.DictReader(rows)]
    assert totals == [lab.max_points] * copies, f"the reference solution scored {totals}"
    return nbgrader_seconds, grade_seconds


def bar(seconds: float, longest: float, width: int = 40) -> str:
    return "#" * max(1, round(width * seconds / longest))


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
        versus = against_nbgrader(lab, options.nbgrader_copies, jobs, work) if options.nbgrader_copies and lab.notebook else None
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
    if versus is not None:
        nbgrader_seconds, grade_seconds = versus
        print(f"{options.nbgrader_copies} copies, notebook included, each tool's whole run on the same folders:")
        print(f"  nbgrader autograde    {nbgrader_seconds:6.1f} s  {bar(nbgrader_seconds, nbgrader_seconds)}")
        print(f"  autograder grade      {grade_seconds:6.1f} s  {bar(grade_seconds, nbgrader_seconds)}")
        print(f"  ratio grade / nbgrader: {grade_seconds / nbgrader_seconds:.2f} (goal: <= 0.10)")


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
