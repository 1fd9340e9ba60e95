"""``make grade``: grade every submission of a cohort, lab by lab, and write the reports.

A run stages the cohort (:mod:`autograder.batch.staging`), proves the environment with the lab's
reference solution (:func:`prove_environment`), grades in lanes (:mod:`autograder.batch.pool`) and
writes every report (:mod:`autograder.batch.outputs`): per lab ``<out>/<lab>/grades.csv``,
``report.html``, ``checks.csv`` and ``students/<student>/`` (``results.json`` in Gradescope's format,
``feedback.md``, ``feedback.html``); for the course, ``<out>/grades.csv``. A student's reports carry
what produced the grade (:mod:`autograder.batch.provenance`); a later run skips every student whose
provenance is still this run's (unless ``force``), so an interrupted run resumes where it stopped, and
says in one line what changed when it grades students again.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from autograder.batch.jobs import Failed, Graded
from autograder.batch.lane import Lane
from autograder.batch.outputs import (DEBUG_FOLDER, REFERENCE_PROOF, claim_output, mark_output, remove_former_students, set_aside,
                                      student_folder, write_class_files, write_course_table)
from autograder.batch.pool import Progress, grade_in_lanes, regraded, unstable_checks
from autograder.batch.provenance import read_stamp, run_provenance, why_again
from autograder.batch.staging import Chosen, Shard, Submission, discover, labs_submitted, stage, stage_cohort
from autograder.course import unpinned
from autograder.files import folder_for_workers, write_atomically
from autograder.lab import Lab
from autograder.limits import DEFAULTS, JOBS, Limits
from autograder.reports.staged_code import module_sources
from autograder.results import CheckResult, CohortRun, read_record, read_run
from autograder.text import one_line


def prepare_reports_meanwhile(lab: Lab, staged_folders: dict[str, Path], class_files: bool) -> Future:
    """The pages' templates compiled and, for class files, the near-copies among the staged submissions
    found (copydetect and numpy imported, 0.3 s; one submission compared with the reference, 0.15 s),
    while the lanes grade, in a thread (a daemon: an interrupted run ends at once). The code compared is
    read here, before any student's code runs. The future's result: the similarity (None without class
    files). Safe because nothing else in this process imports copydetect or its libraries meanwhile. The
    pages' modules (jinja2, mistune: 55 ms) are first imported here too, not before the lanes start (a lane's
    thread that writes a student's pages meanwhile waits on the same module's import lock)."""
    sources = module_sources(lab, staged_folders) if class_files else None
    similar: Future = Future()

    def prepare():
        try:
            with contextlib.suppress(Exception):  # a template's error shows where the page is rendered
                from autograder.reports.feedback import compile_templates

                compile_templates()
            if sources is not None:
                from autograder.reports.similarity import near_copies
                similar.set_result(near_copies(lab, sources))
        except BaseException as exc:  # noqa: BLE001 - raised where the similarity is used
            similar.set_exception(exc)
        finally:
            if not similar.done():
                similar.set_result(None)

    threading.Thread(target=prepare, name="prepare-reports", daemon=True).start()
    return similar


class EnvironmentUnproven(Exception):
    """The lab's reference solution does not score full marks here: every student would lose the same points.
    ``graded``: the labs of the course graded before this one was refused (:func:`grade_course`)."""

    graded: tuple[str, ...] = ()


def stage_reference(lab: Lab, staging: Path, limits: Limits) -> Path:
    """The lab's reference solution staged as a submission, before the cohort: no student's files can take the
    staging disk it needs."""
    staged = folder_for_workers(staging) / lab.name
    stage(lab, Submission("the reference solution", lab.reference), staged, limits)
    return staged


def prove_environment(lab: Lab, out: Path, provenance: dict, lane: Lane, staged: Path) -> None:
    """Grade the lab's reference solution as a submission, in a lane as the cohort's (confined, the same
    limits and checks); below full marks raise :class:`EnvironmentUnproven` naming the checks it failed and
    the packages found against the pinned ones. Kept in ``out/.reference-proof``: a later run under the
    same provenance (kit, lab, limits, Python, packages) does not grade it again."""
    proof = out / REFERENCE_PROOF
    if read_stamp(proof) == provenance:
        return
    answer = lane.grade(staged, staged.parent / "raw.json")
    run = read_run(staged.parent / "raw.json") if isinstance(answer, Graded) else None
    failed = [] if run is None else [c for c in run.checks if not c.passed]
    if run is None or failed:
        versions = unpinned()
        # A traceback's last lines say what went wrong; its first only where it started.
        scored = ("could not be graded here (" + one_line(answer.error.strip() if isinstance(answer, Failed) else "no results")[-300:] + ")"
                  if run is None else
                  f"gets {sum(c.points for c in run.checks if c.passed):g}/{lab.max_points:g} here, failing "
                  + ", ".join(f"{c.name} ({c.part}: {why_failed(c)})" for c in failed[:4])
                  + (f" and {len(failed) - 4} more" if len(failed) > 4 else ""))
        # A worker that did not start: its cause, once (the same for every check), not the student's words.
        causes = sorted({c.failure.cause for c in failed if c.failure and c.failure.cause})
        raise EnvironmentUnproven(
            f"{lab.name}: the reference solution {scored}: every student graded here would lose the same points. "
            + "".join(f"Why: {one_line(cause)[-400:]}. " for cause in causes[:2])
            + (f"Found {', '.join(versions[:6])}: install the pinned requirements (make setup)." if versions else
               "Every package is the pinned version: " + ("this machine or the limits are at fault." if causes else
                                                          "the checks or the limits (--call-timeout, --budget) are at fault.")))
    # Full marks of the checks that ran are not full marks of the lab when some did not run here.
    ran = sum(c.points for c in run.checks)
    if not math.isclose(ran, lab.max_points):
        raise EnvironmentUnproven(
            f"{lab.name}: the reference solution's run held checks worth {ran:g} of the lab's {lab.max_points:g} points: "
            "some checks did not run here, and every student graded here would be graded without them.")
    write_atomically(proof, json.dumps(provenance, indent=1))


def why_failed(check: CheckResult) -> str:
    """A failed check of the reference's, in a few words."""
    if check.failure and check.failure.cause:
        return "a worker of the grader's did not start"
    return one_line(check.message)[:120]


def start_proven(lab: Lab, out: Path, provenance: dict, lanes: list[Lane], reference: Path, stream) -> None:
    """Start ``lanes``: the first proves the environment (:func:`prove_environment` on ``reference``, the reference
    solution staged), then grades (its replay warm), while the others start; all closed if the proof fails, killed
    first if it is interrupted (Ctrl-C, SIGTERM: the proof in flight is not waited for)."""
    starting = [threading.Thread(target=lane.start) for lane in lanes[1:]]
    for thread in starting:
        thread.start()
    if read_stamp(out / REFERENCE_PROOF) != provenance:  # a few seconds: say why nothing moves yet
        print(f"{lab.name}: grading the reference solution first (it proves this machine gives full marks)",
              file=stream, flush=True)
    try:
        prove_environment(lab, out, provenance, lanes[0], reference)
    except BaseException as failed:
        for thread in starting:
            thread.join()
        for lane in lanes:
            if not isinstance(failed, Exception):
                lane.kill()
            lane.close()
        raise
    for thread in starting:
        thread.join()


def grade(lab: Lab, submissions: Path, out: Path, jobs: int = JOBS, force: bool = False,
          limits: Limits = DEFAULTS, stream=None, replay: bool = True, class_files: bool = True,
          shard: Shard | Chosen | None = None, files_required: bool = True, repeat: int = 1, strip_prefix: str = "",
          debug: bool = False) -> CohortRun:
    """Grade the cohort's ``lab`` in ``submissions`` into ``out`` (that lab's reports); return the
    run (every student's record, and who could not be graded). ``replay=False`` runs every check in
    full (see :mod:`autograder.judge.replay`); ``class_files=False`` writes the students' folders only:
    no grades.csv, report.html or similarity (a Gradescope upload, a cohort of one whose class report
    nobody reads, a shard). ``shard`` grades its slice of the cohort only (:mod:`autograder.batch.shard`), or the students it names.
    ``strip_prefix``: see :func:`autograder.batch.staging.discover`. ``repeat`` > 1 grades the whole cohort that many
    times more, in other lanes (one lane, then two, ...), and names the checks whose verdict changed between runs
    (:func:`autograder.batch.pool.unstable_checks`) in the run and report.html.
    Raises :class:`autograder.harness.sandbox.Unconfined` before anything is graded where this machine cannot
    confine student code's files, unless ``files_required`` is False (``--no-confinement``), and
    :class:`EnvironmentUnproven` where the lab's reference solution does not score full marks here
    (:func:`prove_environment`). ``debug`` keeps each lane's log in ``out/.debug/lane-<n>.log``
    (:class:`autograder.batch.lane.Lane`). The progress goes to ``stream`` (None: ``sys.stderr`` as it is when
    called, so that a caller's redirection holds)."""
    started, limits = time.monotonic(), limits.for_lab(lab.limits)  # the lab's own, unless an option set them
    from autograder.harness.sandbox import refuse_unconfined, views_of_their_own  # 40 ms of imports: a cohort's

    stream = sys.stderr if stream is None else stream
    if files_required:
        refuse_unconfined(limits)
    out.mkdir(parents=True, exist_ok=True)
    cohort = [s for s in discover(lab, submissions, strip_prefix) if shard is None or shard.holds(s.student)]
    staging = folder_for_workers(prefix="autograder-staging-", passed_through=not views_of_their_own(limits))
    try:
        provenance = run_provenance(lab, limits, files_required, replay)
        reference = stage_reference(lab, staging, limits)
        todo, staged_folders, changed = stage_cohort(lab, cohort, staging, out, force, provenance, limits)
        if debug:
            shutil.rmtree(out / DEBUG_FOLDER, ignore_errors=True)  # this run's logs only
            print(f"{lab.name}: each lane's log goes to {out / DEBUG_FOLDER}/", file=stream, flush=True)
        lanes = [Lane(lab, limits, replay, files_required, out / DEBUG_FOLDER / f"lane-{n}.log" if debug else None,
                      folders=staging)
                 for n in range(1, max(1, min(jobs, len(todo))) + 1)]
        again = why_again(lab.name, changed)
        if again:
            print(again, file=stream, flush=True)  # before the progress, which it explains
        start_proven(lab, out, provenance, lanes, reference, stream)
        similar = prepare_reports_meanwhile(lab, staged_folders, class_files)
        seen = grade_in_lanes(lab, todo, out, lanes, Progress(lab.name, len(todo), stream))
        records = [read_record(student_folder(out, s.student)) for s in cohort]
        for submission, record in zip(cohort, records):
            if record is None:
                seen.ungraded.setdefault(submission.student, "no report")
        records = [r for r in records if r is not None]
        removed = remove_former_students(out, {s.student for s in cohort}) if shard is None else []
        unstable = unstable_checks(lab, records, [
            regraded(lab, cohort, staged_folders, 1 + run % max(jobs, 1), limits, replay, files_required, staging)
            for run in range(repeat - 1)])
        if class_files:
            write_class_files(lab, out, records, similar.result(), tuple(removed), unstable)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return CohortRun(lab.name, records, graded=len(todo), skipped=len(cohort) - len(todo),
                     replayed_checks=seen.replayed, ungraded=seen.ungraded, warnings=sorted(seen.warnings),
                     seconds=time.monotonic() - started, again=again or "", removed=removed, unstable=unstable)


def grade_course(labs: list[Lab], submissions: Path, out: Path, shard: Shard | None = None, **options
                 ) -> list[CohortRun]:
    """Grade every lab of ``labs`` the cohort handed in, each into ``out/<lab>/``, and write the
    course's ``out/grades.csv``: one row per student, one total per lab. A shard grades its slice of
    every lab the whole cohort handed in and writes no class files (``make merge`` does). Raises
    :class:`autograder.batch.outputs.ForeignOutput` where ``out`` holds something else than the kit's outputs."""
    claim_output(out, labs)
    if options.get("files_required", True):  # refused before anything is written (grade refuses too)
        from autograder.harness.sandbox import refuse_unconfined

        refuse_unconfined(options.get("limits", DEFAULTS))
    mark_output(out)
    submitted, runs = labs_submitted(labs, submissions), []
    for lab in submitted:
        try:
            runs.append(grade(lab, submissions, out / lab.name, shard=shard, class_files=shard is None, **options))
        except EnvironmentUnproven as refused:  # said with what was graded before: not "nothing graded"
            refused.graded = tuple(run.lab for run in runs)
            raise
    if runs and shard is None:
        write_course_table(out, runs)
        for lab in sorted(set(labs) - set(submitted), key=lambda lab: lab.name):
            if (out / lab.name).is_dir():  # another cohort's lab: none of its reports is this cohort's
                aside = set_aside(out / lab.name)
                shutil.rmtree(aside, ignore_errors=True)
                aside.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(out / lab.name, aside)
                print(f"{lab.name}: not handed in by this cohort: the reports of another cohort moved to {aside}",
                      file=options.get("stream") or sys.stderr)
    return runs
