"""A cohort graded on several machines: ``make grade SHARD=i/N`` grades one slice, ``make merge``
joins the slices into one course.

A student's slice depends on their folder's name alone (a hash), so it is the same whatever else
the cohort holds and whichever machine asks. A shard's output is a run's output with the students
of its slice only: their folders (records, feedback, results.json, fingerprints) and ``shard.json``
(which slice, which labs); the class files need the whole cohort, so the merge writes them:
it takes each student's folder from the shard that graded it, then writes every lab's grades.csv and
report.html (similarity across all shards, from the submissions themselves) and the course's
grades.csv as one run over the whole cohort writes them. Nothing is graded again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autograder.batch.outputs import (FINGERPRINT, REFERENCE_PROOF, SHARD_FILE, claim_output, former_students,
                                      mark_output, remove_former_students, student_folder, write_class_files,
                                      write_course_table)
from autograder.batch.provenance import CHANGED, read_stamp
from autograder.batch.staging import Shard, Submission, discover, labs_submitted, stage_cohort
from autograder.files import write_atomically
from autograder.lab import Lab
from autograder.results import CohortRun, read_record

def write_shard_file(out: Path, shard: Shard, labs: list[str]) -> None:
    """Written as the shard starts: a shard stopped halfway is still named, its missing students too."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / SHARD_FILE, json.dumps({"shard": str(shard), "labs": labs}))


class MergeError(Exception):
    """The shards given are not one whole cohort: what is missing or repeated, in the instructor's words."""


@dataclass(frozen=True)
class ShardOutput:
    folder: Path
    shard: Shard
    labs: tuple[str, ...]  # the labs it graded


def read_shards(folders: list[Path]) -> list[ShardOutput]:
    """Each folder's shard; every slice of one count exactly once, or MergeError says which is not."""
    shards = []
    for folder in folders:
        try:
            said = json.loads((folder / SHARD_FILE).read_text())
            shards.append(ShardOutput(folder, Shard.parse(said["shard"]), tuple(said["labs"])))
        except (OSError, ValueError, KeyError, TypeError, argparse.ArgumentTypeError) as exc:
            raise MergeError(f"{folder} is not a shard's output (no readable {SHARD_FILE}: {exc})") from exc
    counts = {output.shard.count for output in shards}
    if len(counts) != 1:
        raise MergeError(f"the shards were cut from different counts: {sorted(str(o.shard) for o in shards)}")
    count = counts.pop()
    given = sorted(output.shard.index for output in shards)
    if given != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(given))
        repeated = sorted({i for i in given if given.count(i) > 1})
        raise MergeError(f"not every shard of {count} exactly once: missing {missing or 'none'}, "
                         f"given twice {repeated or 'none'}")
    return shards


def merge(labs: list[Lab], shard_folders: list[Path], submissions: Path, out: Path) -> list[CohortRun]:
    """Join the shards' outputs into ``out``, as one run over ``submissions`` would have written it.
    All of it is built and checked in a folder beside ``out`` first: ``out`` gets it (each lab's
    folder and the course's grades.csv replaced, nothing else touched) only when every lab merged. Raises
    :class:`autograder.batch.outputs.ForeignOutput` where ``out`` holds something else than the kit's outputs."""
    out = out.resolve()
    shards = read_shards(shard_folders)
    if any(output.folder.resolve() == out for output in shards):
        raise MergeError(f"{out} is a shard's folder: merge into another one (OUT=...)")
    lab_runs = labs_submitted(labs, submissions)
    if not lab_runs:
        return []
    claim_output(out, labs)
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-merging-"))
    try:
        cohorts = {lab.name: discover(lab, submissions) for lab in lab_runs}
        current = {lab.name: {s.student for s in cohorts[lab.name]} for lab in lab_runs}
        runs = [merge_lab(lab, shards, cohorts[lab.name], building / lab.name,
                          former_students(out / lab.name, current[lab.name])) for lab in lab_runs]
        write_course_table(building, runs)
        out.mkdir(exist_ok=True)
        for lab in lab_runs:
            remove_former_students(out / lab.name, current[lab.name])  # set aside, as a run does, not deleted
            shutil.rmtree(out / lab.name, ignore_errors=True)
            (building / lab.name).rename(out / lab.name)
        (building / "grades.csv").replace(out / "grades.csv")
        mark_output(out)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return runs


def merge_lab(lab: Lab, shards: list[ShardOutput], cohort: list[Submission], lab_out: Path, removed: list[str]
              ) -> CohortRun:
    """One lab's folder in ``lab_out``: every student's files from the shard holding them, then the
    class files (``removed``: the students whose former reports the merge sets aside); MergeError when a
    shard did not grade the lab, lacks a student, graded other files, or graded under another kit,
    lab, limits or environment than the others."""
    from autograder.reports.similarity import similarity  # copydetect and numpy: a merge's alone, not a shard's

    for output in shards:
        if lab.name not in output.labs:
            raise MergeError(f"shard {output.shard} ({output.folder}) did not grade {lab.name} (it graded "
                             f"{', '.join(output.labs) or 'nothing'}): merge with the LAB= the shards had")
    lab_out.mkdir(parents=True)
    proof = shards[0].folder / lab.name / REFERENCE_PROOF  # each shard proved it under the same provenance
    if proof.is_file():
        shutil.copy(proof, lab_out / REFERENCE_PROOF)
    records, graded_under = [], {}  # graded_under: what produced each shard's grades, but the submission
    for submission in cohort:
        output = next(o for o in shards if o.shard.holds(submission.student))
        graded = student_folder(output.folder / lab.name, submission.student)
        record = read_record(graded)
        if record is None:
            raise MergeError(f"{lab.name}: shard {output.shard} ({output.folder}) has no readable report of "
                             f"{submission.student!r}: grade that shard again (it resumes where it stopped)")
        stamp = {field: value for field, value in (read_stamp(graded / FINGERPRINT) or {}).items()
                 if field != "submission"}
        graded_under.setdefault(str(output.shard), stamp)
        first_shard, first = next(iter(graded_under.items()))
        if stamp != first:  # one run grades under one provenance: shards must too
            fields = [CHANGED.get(f, f) for f in sorted(set(stamp) | set(first)) if stamp.get(f) != first.get(f)]
            raise MergeError(f"{lab.name}: shards {first_shard} and {output.shard} differ in what graded them "
                             f"({', '.join(fields)}): grade them again with one kit, the same limits and environment")
        shutil.copytree(graded, student_folder(lab_out, submission.student))
        records.append(record)
    staging = Path(tempfile.mkdtemp(prefix="autograder-staging-"))
    try:  # similarity reads the staged copies, as a run does; their fingerprints are the reports'
        # The submissions alone: each shard's own run judged the rest of what produced its grades.
        stale, staged_folders, _ = stage_cohort(lab, cohort, staging, lab_out, force=False, provenance={})
        if stale:
            raise MergeError(f"{lab.name}: the shards graded other files than the submissions hold now "
                             f"({', '.join(repr(s.student) for s, _, _ in stale[:5])}"
                             f"{', ...' if len(stale) > 5 else ''}): grade their shards again")
        write_class_files(lab, lab_out, records, similarity(lab, staged_folders), tuple(removed))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return CohortRun(lab.name, records, graded=0, skipped=len(cohort), removed=removed)
