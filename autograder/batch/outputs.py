"""What a run writes, and where: a lab's folder (``<out>/<lab>/``: grades.csv, report.html, checks.csv,
classroom50-overrides.csv, ``students/<student>/``), the course's table (``<out>/grades.csv``), and the
rules that keep an output folder one cohort's: a folder holding anything else is refused, reports of
students no longer in the submissions are set aside (``<out>/.removed/<lab>/``).

Student folders live apart from the class's files, so no student name (``grades.csv``) can take their
place. Every file is written atomically; a student's ``.fingerprint`` last (the student is done).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import quote

from autograder.files import write_atomically
from autograder.lab import Lab
from autograder.platforms.gradescope import results_json
from autograder.reports.check_statistics import check_statistics, checks_csv
from autograder.reports.records import course_csv, grades_csv
from autograder.results import CohortRun, SubmissionResult, write_record

FINGERPRINT = ".fingerprint"
STUDENTS = "students"  # <out>/students/<student>/: one folder per student, apart from the class's files
REFERENCE_PROOF = ".reference-proof"  # <out>/<lab>/: the provenance under which the reference scored full marks
SHARD_FILE = "shard.json"  # <out>/shard.json: a shard's output, not a course's
COURSE_TABLE = "grades.csv"  # <out>/grades.csv: one row per student, one total per lab
DEBUG_FOLDER = ".debug"  # <out>/<lab>/.debug/lane-<n>.log: each lane's log (make grade DEBUG=1)


def student_folder(out: Path, student: str) -> Path:
    return out / STUDENTS / student


def write_student(lab: Lab, folder: Path, record: SubmissionResult, stamp: dict | None = None) -> None:
    """A student's folder: the record, Gradescope's results.json, the feedback (Markdown, HTML) and, last
    (the student is done), ``stamp``: the provenance of the grade."""
    from autograder.reports.feedback import feedback_html, feedback_markdown  # see grade.prepare_reports_meanwhile

    folder.mkdir(parents=True, exist_ok=True)
    write_record(folder, record)
    write_atomically(folder / "results.json", json.dumps(results_json(lab, record), indent=1))
    write_atomically(folder / "feedback.md", feedback_markdown(lab, record))
    write_atomically(folder / "feedback.html", feedback_html(lab, record))
    if stamp is not None:
        write_atomically(folder / FINGERPRINT, json.dumps(stamp, indent=1))


def write_class_files(lab: Lab, out: Path, records: list[SubmissionResult], similar: dict,
                      removed: tuple[str, ...] = (), unstable: dict | None = None) -> None:
    """The class's grades.csv and report.html, with the near-copies among the staged submissions
    (:func:`autograder.reports.similarity.near_copies`), the students whose reports were removed and the
    checks whose verdict changed between runs (:func:`autograder.batch.pool.unstable_checks`)."""
    from autograder.platforms.ci import classroom50_overrides_csv  # imports the feedback's pages
    from autograder.reports.class_report import class_report  # see grade.prepare_reports_meanwhile

    # A name that is not UTF-8 links to its folder's very bytes.
    links = {r.student: quote(str(student_folder(Path(), r.student) / "feedback.html"), errors="surrogateescape")
             for r in records}
    write_atomically(out / "grades.csv", grades_csv(lab, records))
    write_atomically(out / "classroom50-overrides.csv", classroom50_overrides_csv(lab, records))
    checks = check_statistics(lab, [r for r in records if r.handed_in])  # once, for the CSV and the page
    write_atomically(out / "checks.csv", checks_csv(checks))
    write_atomically(out / "report.html", class_report(lab, records, links, similar, removed, unstable or {}, checks))


def write_course_table(out: Path, runs: list[CohortRun]) -> None:
    """The course's table, ``out/grades.csv`` (:func:`autograder.reports.records.course_csv`): the one
    writer of it, for a run and a merge alike."""
    write_atomically(out / COURSE_TABLE, course_csv(runs))


SET_ASIDE = ".removed"  # OUT/.removed/<lab>/: reports of students no longer in the submissions


def set_aside(out: Path) -> Path:
    """Where the reports of ``out`` (a lab's folder of the course folder OUT) go when their students are no
    longer in the submissions: a hidden folder of OUT (``.removed/<lab>/``), apart from what is handed out
    (``<lab>/students/``) and never outside OUT (a container mounts OUT alone: beside it would be lost)."""
    return out.parent / SET_ASIDE / out.name


def former_students(out: Path, current: set[str]) -> list[str]:
    """The students with reports in ``out`` who are not in ``current``, the submissions' students."""
    folder = out / STUDENTS
    return sorted(path.name for path in folder.iterdir() if path.name not in current) if folder.is_dir() else []


def remove_former_students(out: Path, current: set[str]) -> list[str]:
    """Move the reports of students no longer in the submissions (not in ``current``) out of ``out`` (to
    :func:`set_aside`), so every file under it is the current cohort's (an instructor who hands out
    ``students/`` sends no stale page); their names."""
    folder, gone = out / STUDENTS, former_students(out, current)
    for name in gone:
        target = set_aside(out) / name
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(folder / name, target)
    return gone


OUTPUT_MARK = ".autograder-output"  # in every folder make grade writes: it may replace what the folder holds


class ForeignOutput(Exception):
    """An output folder that holds something else than the kit's outputs: nothing is written there."""


def claim_output(out: Path, labs: list[Lab]) -> None:
    """Refuse ``out`` if it holds anything but the kit's outputs (the course's grades.csv, a shard's file,
    a folder per lab, deploy/slurm's ``shards/``), unless the kit marked it as its own (:func:`mark_output`)."""
    if out.is_dir() and not (out / OUTPUT_MARK).is_file():
        ours = {COURSE_TABLE, SHARD_FILE, "shards", SET_ASIDE, *(lab.name for lab in labs)}
        lab_outputs = {STUDENTS, "grades.csv", "checks.csv", "report.html", REFERENCE_PROOF, "classroom50-overrides.csv",
                       DEBUG_FOLDER}
        foreign = sorted(path.name for path in out.iterdir() if path.name not in ours)
        # A lab's name is the kit's only where the folder holds only a lab's outputs (source/ holds labs too),
        # and a grades.csv only where it is the course's table (an instructor's own is not overwritten).
        foreign += sorted(f"{path.name}/{entry.name}" for path in out.iterdir() if path.name in {lab.name for lab in labs}
                          and path.is_dir() for entry in path.iterdir() if entry.name not in lab_outputs)
        course_table = out / COURSE_TABLE
        if course_table.is_file() and not course_table.read_text(errors="replace").startswith("student,"):
            foreign.append("grades.csv (not the course's table)")
        if foreign:
            raise ForeignOutput(f"{out} holds files the kit did not write ({', '.join(foreign[:5])}"
                                f"{', ...' if len(foreign) > 5 else ''}), which a run would mix with its reports: "
                                "grade into an empty folder, or one make grade wrote (OUT=...)")


def mark_output(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / OUTPUT_MARK, "written by the autograding kit's make grade, which replaces what this "
                                        "folder holds\n")
