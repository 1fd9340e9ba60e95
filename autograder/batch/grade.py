"""``make grade``: grade every submission of a cohort, lab by lab, and write the reports.

Layout in (nbgrader's): ``<submissions>/<student>/<lab>/``. Layout out, per lab:
``<out>/<lab>/grades.csv``, ``<out>/<lab>/report.html``, ``<out>/<lab>/checks.csv`` (which checks to trust) and, in ``<out>/<lab>/students/<student>/``,
``results.json`` (Gradescope's format), ``feedback.md`` and ``feedback.html``; for the course,
``<out>/grades.csv`` (one row per student, one total per lab). Student folders live apart from
the class's files, so no student name (``grades.csv``) can take their place.

Each submission is first *staged*: its regular files are copied into a private folder named by
its position in the cohort, never by the student's name (links that loop or leave the submission,
entries that are not regular files, oversized, unreadable or unexpected files are left out and
said so, in at most ``Limits.submission_notes`` notes), then graded by one of ``jobs`` lanes
(:mod:`autograder.batch.lane`). Nothing a student's folder holds stops the batch: a folder that
cannot be staged fails that student alone (the ``status`` says why). A student's reports are
written, atomically, as soon as that student is graded, together with what produced the grade (its
provenance: the kit's code, the lab, the limits and options, Python and the packages, the submission;
:mod:`autograder.batch.provenance`); a later run skips every student whose provenance is still this run's
(unless ``force``), so an interrupted run resumes where it stopped, and says in one line what changed
when it grades students again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import io
import json
import os
import queue
import shutil
import stat
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from urllib.parse import quote

from autograder.course import unpinned
from autograder.files import what_went_wrong, write_atomically
from autograder.batch.lane import Lane
from autograder.batch.provenance import changes, read_stamp, run_provenance, submission_digest, why_again
from autograder.lab import Lab
from autograder.limits import DEFAULTS, JOBS, Limits, amount
from autograder.platforms.gradescope import results_json
from autograder.reports.check_statistics import check_statistics, checks_csv
from autograder.reports.records import EXTRA_FILE, bounded_notes, course_csv, grades_csv, student_record
from autograder.reports.staged_code import module_sources
from autograder.results import CohortRun, SubmissionResult, read_record, read_run, write_record
from autograder.text import one_line

if TYPE_CHECKING:
    from autograder.batch.shard import Shard

FINGERPRINT = ".fingerprint"
STUDENTS = "students"  # <out>/students/<student>/: one folder per student, apart from the class's files
REFERENCE_PROOF = ".reference-proof"  # <out>/<lab>/: the provenance under which the reference scored full marks


def student_folder(out: Path, student: str) -> Path:
    return out / STUDENTS / student


@dataclass
class Submission:
    student: str
    folder: Path
    # Why it cannot be graded at all: (what went wrong, where), as the status column groups them.
    problems: list[tuple[str, str]] = field(default_factory=list)
    handed_in: bool = True  # False: no <lab>/ folder, or nothing of the lab in it
    notes: list[str] = field(default_factory=list)  # what staging left out or noticed (notes column)


def student_folders(submissions: Path) -> list[Path]:
    return [entry for entry in sorted(submissions.iterdir()) if entry.is_dir() and not entry.name.startswith(".")]


def discover(lab: Lab, submissions: Path, strip_prefix: str = "") -> list[Submission]:
    """Every student folder, sorted; a student without ``<lab>/`` is still listed (and gets 0). With
    ``strip_prefix``, a folder named so is the student named by the rest (Classroom 50's ``gh teacher
    download`` clones each repository as ``<classroom>-<assignment>-<username>``)."""
    return [Submission(entry.name.removeprefix(strip_prefix) or entry.name, entry / lab.name)
            for entry in student_folders(submissions)]


def labs_submitted(labs: list[Lab], submissions: Path) -> list[Lab]:
    """The labs some student of ``submissions`` handed in a folder for."""
    folders = student_folders(submissions)
    return [lab for lab in labs if any((entry / lab.name).exists() for entry in folders)]


def stage(lab: Lab, submission: Submission, target: Path) -> None:
    """Copy what may be graded into ``target``, a new folder; say what was left out and why: in
    ``submission.notes``, one printable line per file, at most ``Limits.submission_notes`` of ``Limits.note_characters``
    (the lab's modules first), then how many more. Raises only when the folder itself cannot be
    listed; an entry that cannot be staged is left out with a note."""
    target.mkdir(parents=True)
    source = submission.folder
    if source.is_symlink() or source.parent.is_symlink():  # it could lead anywhere: the reference, another student
        submission.problems.append((f"{lab.name}/ is a link, not a folder of the submission", "not graded"))
        return
    if not source.is_dir():
        submission.handed_in = False
        return
    real_root = source.resolve()
    said = []  # (not one of the lab's modules, note)
    for path in sorted(source.iterdir()):
        why = stage_entry(lab, path, real_root, target)
        if why:
            said.append((path.name not in lab.modules, f"{path.name}: {why}"))
    submission.notes += bounded_notes([note for _, note in sorted(said, key=lambda item: item[0])])
    submission.handed_in = any(target.iterdir())  # an empty folder, or only files that are not the lab's


# Why a link cannot be followed, by errno (stat's), in words a student understands.
LINK_ERRORS = {errno.ELOOP: "a link that loops (following it never reaches a file)",
               errno.ENOENT: "a link to nothing (its target does not exist)"}


def stage_entry(lab: Lab, path: Path, real_root: Path, target: Path) -> str | None:
    """Copy ``path``, an entry of a submission folder, into ``target`` if it may be graded; return
    what to say about it (why it was left out, or what is odd about what was copied), or None."""
    try:
        status = path.lstat()
        if stat.S_ISLNK(status.st_mode):
            try:
                status = path.stat()
            except OSError as exc:
                return LINK_ERRORS.get(exc.errno, f"a link that cannot be followed ({what_went_wrong(exc)})") + ", left out"
            if not Path(os.path.realpath(path)).is_relative_to(real_root):
                return "a link to a file outside the submission, left out"
        if stat.S_ISDIR(status.st_mode):  # __pycache__/, tests/: skipped unless named as a module
            return "a folder, not a file, left out" if lab.holds(path) else None
        if not lab.holds(path):
            return EXTRA_FILE
        if not stat.S_ISREG(status.st_mode):
            return "not a regular file (a FIFO, a socket or a device), left out"
        if status.st_size > DEFAULTS.submission_file_bytes:
            return f"too large (over {amount(DEFAULTS.submission_file_bytes, 'bytes')}), left out"
        data = read_regular(path)
    except OSError as exc:
        return f"could not be read ({what_went_wrong(exc)}), left out"
    if data is None:
        return "changed while it was read, left out"
    (target / path.name).write_bytes(data)
    return unreadable(path.name, data)


def read_regular(path: Path) -> bytes | None:
    """The bytes of ``path``, or None if it is no longer a regular file of at most
    ``Limits.submission_file_bytes`` (it may have changed since it was listed). Never blocks: a FIFO put in its
    place opens at once and is refused unread."""
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None
        data = file.read(DEFAULTS.submission_file_bytes + 1)
    return data if len(data) <= DEFAULTS.submission_file_bytes else None


def unreadable(name: str, data: bytes) -> str | None:
    """Why a staged file cannot be what it claims to be (it is still staged and graded as it is)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if name.endswith(".ipynb"):
        try:
            json.loads(text)
        except ValueError as exc:
            return f"not a valid notebook (invalid JSON: {exc})"
    return None


def write_student(lab: Lab, folder: Path, record: SubmissionResult) -> None:
    """A student's folder: the record, Gradescope's results.json and the feedback (Markdown, HTML)."""
    from autograder.reports.feedback import feedback_html, feedback_markdown  # see prepare_reports_meanwhile

    write_record(folder, record)
    write_atomically(folder / "results.json", json.dumps(results_json(lab, record), indent=1))
    write_atomically(folder / "feedback.md", feedback_markdown(lab, record))
    write_atomically(folder / "feedback.html", feedback_html(lab, record))


class Progress:
    """A bar on a terminal, plain lines otherwise."""

    def __init__(self, lab: str, total: int, stream=sys.stderr):
        self.lab, self.total, self.done, self.stream = lab, total, 0, stream
        self.tty = stream.isatty()
        self.lock = threading.Lock()
        self.started = time.monotonic()

    def left(self) -> str:
        """The time the rest should take at the pace so far ("", once done)."""
        if self.done >= self.total:
            return ""
        seconds = (time.monotonic() - self.started) / self.done * (self.total - self.done)
        return f", about {seconds / 60:.0f} min left" if seconds >= 90 else f", about {seconds:.0f} s left"

    def step(self, student: str, outcome: str) -> None:
        with self.lock:
            self.done += 1
            if self.tty:
                filled = int(30 * self.done / max(self.total, 1))
                self.stream.write(f"\r{self.lab} [{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total}"
                                  f"{self.left():<20} {one_line(student)[:30]:<30}")
                if self.done == self.total:
                    self.stream.write("\n")
            else:
                self.stream.write(f"{self.lab}: graded {self.done}/{self.total}{self.left()}: {one_line(student)}: "
                                  f"{one_line(outcome)}\n")
            self.stream.flush()


@dataclass
class LaneRun:
    """What the lanes of one run learnt besides each student's files."""
    warnings: set[str] = field(default_factory=set)  # what no worker's sandbox could enforce
    replayed: int = 0  # checks that passed by replay
    ungraded: dict[str, str] = field(default_factory=dict)  # student: why the run could not grade or write them


def stage_cohort(lab: Lab, cohort: list[Submission], staging: Path, out: Path, force: bool, provenance: dict
                 ) -> tuple[list[tuple[Submission, Path, dict]], dict[str, Path], dict[str, list[str]]]:
    """Stage every submission into ``staging``; return those to grade, each with its staged folder and
    the provenance its grade will have (not those whose record in ``out`` has it, unless ``force``), every
    staged folder, and for each student graded before, what changed since (:func:`provenance.changes`)."""
    todo, staged_folders, changed = [], {}, {}
    for number, submission in enumerate(cohort):
        staged = staged_folders[submission.student] = staging / str(number) / lab.name
        try:
            stage(lab, submission, staged)
        except Exception as exc:  # noqa: BLE001 - a folder that cannot be staged fails its student alone
            staged.mkdir(parents=True, exist_ok=True)
            submission.problems.append(("error", f"{lab.name}/ could not be read ({what_went_wrong(exc)}): not graded"))
        notes = [*(": ".join(problem) for problem in submission.problems), *submission.notes]
        stamp = {**provenance, "submission": submission_digest(staged, notes)}
        folder = student_folder(out, submission.student)
        if not (folder / FINGERPRINT).is_file():
            todo.append((submission, staged, stamp))
            continue
        # A record this kit cannot read (another format, or damaged) is graded again.
        differs = changes(read_stamp(folder / FINGERPRINT), stamp) if read_record(folder) is not None else ["format"]
        if differs:
            changed[submission.student] = differs
        if force or differs or not (folder / "results.json").is_file():
            todo.append((submission, staged, stamp))
    return todo, staged_folders, changed


def grade_in_lanes(lab: Lab, todo: list[tuple[Submission, Path, dict]], out: Path, lanes: list[Lane],
                   progress: Progress) -> LaneRun:
    """Grade ``todo`` in ``lanes`` (closed when done); write each student's files (and fingerprint) as soon as
    graded."""
    work: queue.Queue = queue.Queue()
    for item in todo:
        work.put(item)
    seen = LaneRun()
    lock = threading.Lock()

    def grade_submission(lane: Lane, submission: Submission, staged: Path, stamp: dict) -> str:
        clock = time.monotonic()
        raw_file = staged.parent / "raw.json"
        # Nothing handed in, or a link instead of a folder: nothing to run, the status says why.
        answer = {} if submission.problems or not submission.handed_in else lane.grade(staged, raw_file)
        run = read_run(raw_file) if "results" in answer and raw_file.is_file() else None
        with lock:
            if run and run.sandbox:
                seen.warnings.update(run.sandbox["missing"])
            seen.replayed += run.replayed if run else 0
        record = dataclasses.replace(student_record(
            lab, submission.student, run, submission.problems, submission.notes, answer.get("error"),
            time.monotonic() - clock, submission.handed_in), provenance=stamp)
        folder = student_folder(out, submission.student)
        folder.mkdir(parents=True, exist_ok=True)
        write_student(lab, folder, record)
        write_atomically(folder / FINGERPRINT, json.dumps(stamp, indent=1))  # last: the student is done
        return record.status

    def lane_loop(lane: Lane) -> None:
        try:
            while True:
                try:
                    submission, staged, stamp = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    status = grade_submission(lane, submission, staged, stamp)
                except Exception as exc:  # noqa: BLE001 - one submission never stops the batch
                    seen.ungraded[submission.student] = f"{type(exc).__name__}: {exc}"
                    status = f"not graded ({type(exc).__name__}: {exc})"
                progress.step(submission.student, status)
        finally:
            lane.close()

    threads = [threading.Thread(target=lane_loop, args=(lane,)) for lane in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return seen


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


def write_class_files(lab: Lab, out: Path, records: list[SubmissionResult], similar: dict,
                      removed: tuple[str, ...] = (), unstable: dict | None = None) -> None:
    """The class's grades.csv and report.html, with the near-copies among the staged submissions
    (:func:`autograder.reports.similarity.near_copies`), the students whose reports were removed and the
    checks whose verdict changed between runs (:func:`unstable_checks`)."""
    from autograder.platforms.ci import classroom50_overrides_csv  # imports the feedback's pages: see above
    from autograder.reports.class_report import class_report  # see prepare_reports_meanwhile

    # A name that is not UTF-8 links to its folder's very bytes.
    links = {r.student: quote(str(student_folder(Path(), r.student) / "feedback.html"), errors="surrogateescape")
             for r in records}
    write_atomically(out / "grades.csv", grades_csv(lab, records))
    write_atomically(out / "classroom50-overrides.csv", classroom50_overrides_csv(lab, records))
    write_atomically(out / "checks.csv", checks_csv(check_statistics(lab, [r for r in records if r.handed_in])))
    write_atomically(out / "report.html", class_report(lab, records, links, similar, removed, unstable or {}))


def regraded(lab: Lab, cohort: list[Submission], staged_folders: dict[str, Path], jobs: int, limits: Limits,
             replay: bool, files_required: bool) -> dict[str, SubmissionResult]:
    """The cohort's staged submissions graded once more, in ``jobs`` fresh lanes, into a folder of its own:
    every student's record."""
    with tempfile.TemporaryDirectory(prefix="autograder-again-") as folder:
        out = Path(folder)
        handed_in = [(s, staged_folders[s.student], {}) for s in cohort if not s.problems and s.handed_in]
        grade_in_lanes(lab, handed_in, out, [Lane(lab, limits, replay, files_required) for _ in range(jobs)],
                       Progress(lab.name, 0, io.StringIO()))
        return {s.student: record for s, *_ in handed_in if (record := read_record(student_folder(out, s.student)))}


def unstable_checks(lab: Lab, records: list[SubmissionResult], again: list[dict[str, SubmissionResult]]
                    ) -> dict[str, list[str]]:
    """``{"part: check": [students]}``: the checks whose verdict for a student is not the same in every run
    (``records``, then each of ``again``): the check's fault, or the platform's, never the student's."""
    unstable: dict[str, list[str]] = {}
    for record in records:
        verdicts = {(c.part, c.name): {c.passed} for c in record.checks}
        for run in again:
            for check in run[record.student].checks if record.student in run else ():
                verdicts.setdefault((check.part, check.name), set()).add(check.passed)
        for (part, name), seen in verdicts.items():
            if len(seen) > 1:
                unstable.setdefault(f"{part}: {name}", []).append(record.student)
    return {check: unstable[check] for check in sorted(unstable, key=lambda c: (lab.part_ids.index(c.split(":")[0]), c))}


SET_ASIDE = ".removed"  # OUT/.removed/<lab>/: reports of students no longer in the submissions


def set_aside(out: Path) -> Path:
    """Where the reports of ``out`` (a lab's folder of the course folder OUT) go when their students are no
    longer in the submissions: a hidden folder of OUT (``.removed/<lab>/``), apart from what is handed out
    (``<lab>/students/``) and never outside OUT (a container mounts OUT alone: beside it would be lost)."""
    return out.parent / SET_ASIDE / out.name


def former_students(out: Path, cohort: list[Submission]) -> list[str]:
    """The students with reports in ``out`` who are no longer in the submissions."""
    folder, current = out / STUDENTS, {submission.student for submission in cohort}
    return sorted(path.name for path in folder.iterdir() if path.name not in current) if folder.is_dir() else []


def remove_former_students(out: Path, cohort: list[Submission]) -> list[str]:
    """Move the reports of students no longer in the submissions out of ``out`` (to :func:`set_aside`), so
    every file under it is the current cohort's (an instructor who hands out ``students/`` sends no stale
    page); their names."""
    folder, gone = out / STUDENTS, former_students(out, cohort)
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
    from autograder.batch.shard import SHARD_FILE  # shard builds on this module

    if out.is_dir() and not (out / OUTPUT_MARK).is_file():
        ours = {"grades.csv", SHARD_FILE, "shards", SET_ASIDE, *(lab.name for lab in labs)}
        lab_outputs = {STUDENTS, "grades.csv", "checks.csv", "report.html", REFERENCE_PROOF, "classroom50-overrides.csv"}
        foreign = sorted(path.name for path in out.iterdir() if path.name not in ours)
        # A lab's name is the kit's only where the folder holds only a lab's outputs (source/ holds labs too),
        # and a grades.csv only where it is the course's table (an instructor's own is not overwritten).
        foreign += sorted(f"{path.name}/{entry.name}" for path in out.iterdir() if path.name in {lab.name for lab in labs}
                          and path.is_dir() for entry in path.iterdir() if entry.name not in lab_outputs)
        course_table = out / "grades.csv"
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




class EnvironmentUnproven(Exception):
    """The lab's reference solution does not score full marks here: every student would lose the same points.
    ``graded``: the labs of the course graded before this one was refused (:func:`grade_course`)."""

    graded: tuple[str, ...] = ()


def prove_environment(lab: Lab, out: Path, provenance: dict, lane: Lane, staging: Path) -> None:
    """Grade the lab's reference solution as a submission, in a lane as the cohort's (confined, the same
    limits and checks); below full marks raise :class:`EnvironmentUnproven` naming the checks it failed and
    the packages found against the pinned ones. Kept in ``out/.reference-proof``: a later run under the
    same provenance (kit, lab, limits, Python, packages) does not grade it again."""
    proof = out / REFERENCE_PROOF
    if read_stamp(proof) == provenance:
        return
    reference = Submission("the reference solution", lab.reference)
    staged = staging / "reference" / lab.name
    stage(lab, reference, staged)
    answer = lane.grade(staged, staged.parent / "raw.json")
    run = read_run(staged.parent / "raw.json") if "results" in answer else None
    failed = [] if run is None else [c for c in run.checks if not c.passed]
    if run is None or failed:
        versions = unpinned()
        # A traceback's last lines say what went wrong; its first only where it started.
        scored = ("could not be graded here (" + one_line(str(answer.get("error", "no results")).strip())[-300:] + ")"
                  if run is None else
                  f"gets {sum(c.points for c in run.checks if c.passed):g}/{lab.max_points:g} here, failing "
                  + ", ".join(f"{c.name} ({c.part}: {one_line(c.message)[:120]})" for c in failed[:4])
                  + (f" and {len(failed) - 4} more" if len(failed) > 4 else ""))
        raise EnvironmentUnproven(
            f"{lab.name}: the reference solution {scored}: every student graded here would lose the same points. "
            + (f"Found {', '.join(versions[:6])}: install the pinned requirements (make setup)." if versions else
               "Every package is the pinned version: the checks or the limits (--call-timeout, --budget) are at fault."))
    write_atomically(proof, json.dumps(provenance, indent=1))


def grade(lab: Lab, submissions: Path, out: Path, jobs: int = JOBS, force: bool = False,
          limits: Limits = DEFAULTS, stream=sys.stderr, replay: bool = True, class_files: bool = True,
          shard: Shard | None = None, files_required: bool = True, repeat: int = 1, strip_prefix: str = ""
          ) -> CohortRun:
    """Grade the cohort's ``lab`` in ``submissions`` into ``out`` (that lab's reports); return the
    run (every student's record, and who could not be graded). ``replay=False`` runs every check in
    full (see :mod:`autograder.judge.replay`); ``class_files=False`` writes the students' folders only:
    no grades.csv, report.html or similarity (a Gradescope upload, a cohort of one whose class report
    nobody reads, a shard). ``shard`` grades its slice of the cohort only (:mod:`autograder.batch.shard`).
    ``strip_prefix``: see :func:`discover`. ``repeat`` > 1 grades the whole cohort that many times more, in other lanes (one lane, then two, ...), and
    names the checks whose verdict changed between runs (:func:`unstable_checks`) in the run and report.html.
    Raises :class:`autograder.harness.sandbox.Unconfined` before anything is graded where this machine cannot
    confine student code's files, unless ``files_required`` is False (``--no-confinement``), and
    :class:`EnvironmentUnproven` where the lab's reference solution does not score full marks here
    (:func:`prove_environment`)."""
    started = time.monotonic()
    if files_required:
        from autograder.harness.sandbox import refuse_unconfined  # 40 ms of imports, only where a cohort is graded

        refuse_unconfined()
    out.mkdir(parents=True, exist_ok=True)
    cohort = [s for s in discover(lab, submissions, strip_prefix) if shard is None or shard.holds(s.student)]
    staging = Path(tempfile.mkdtemp(prefix="autograder-staging-"))
    try:
        staging.chmod(0o711)  # confined workers without a view of their own run under their own user id
        provenance = run_provenance(lab, limits, files_required, replay)
        todo, staged_folders, changed = stage_cohort(lab, cohort, staging, out, force, provenance)
        lanes = [Lane(lab, limits, replay, files_required) for _ in range(max(1, min(jobs, len(todo))))]
        # The first lane proves the environment, then grades (its replay warm); the others start meanwhile.
        starting = [threading.Thread(target=lane.start) for lane in lanes[1:]]
        for thread in starting:
            thread.start()
        again = why_again(lab.name, changed)
        if again:
            print(again, file=stream, flush=True)  # before the progress, which it explains
        if read_stamp(out / REFERENCE_PROOF) != provenance:  # a few seconds: say why nothing moves yet
            print(f"{lab.name}: grading the reference solution first (it proves this machine gives full marks)",
                  file=stream, flush=True)
        try:
            prove_environment(lab, out, provenance, lanes[0], staging)
        except BaseException:
            for thread in starting:
                thread.join()
            for lane in lanes:
                lane.close()
            raise
        for thread in starting:
            thread.join()
        similar = prepare_reports_meanwhile(lab, staged_folders, class_files)
        seen = grade_in_lanes(lab, todo, out, lanes, Progress(lab.name, len(todo), stream))
        records = [read_record(student_folder(out, s.student)) for s in cohort]
        for submission, record in zip(cohort, records):
            if record is None:
                seen.ungraded.setdefault(submission.student, "no report")
        records = [r for r in records if r is not None]
        removed = remove_former_students(out, cohort) if shard is None else []
        unstable = unstable_checks(lab, records, [
            regraded(lab, cohort, staged_folders, 1 + run % max(jobs, 1), limits, replay, files_required)
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
    :class:`ForeignOutput` where ``out`` holds something else than the kit's outputs."""
    claim_output(out, labs)
    if options.get("files_required", True):  # refused before anything is written (grade refuses too)
        from autograder.harness.sandbox import refuse_unconfined

        refuse_unconfined()
    mark_output(out)
    submitted, runs = labs_submitted(labs, submissions), []
    for lab in submitted:
        try:
            runs.append(grade(lab, submissions, out / lab.name, shard=shard, class_files=shard is None, **options))
        except EnvironmentUnproven as refused:  # said with what was graded before: not "nothing graded"
            refused.graded = tuple(run.lab for run in runs)
            raise
    if runs and shard is None:
        write_atomically(out / "grades.csv", course_csv(runs))
        for lab in sorted(set(labs) - set(submitted), key=lambda lab: lab.name):
            if (out / lab.name).is_dir():  # another cohort's lab: none of its reports is this cohort's
                aside = set_aside(out / lab.name)
                shutil.rmtree(aside, ignore_errors=True)
                aside.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(out / lab.name, aside)
                print(f"{lab.name}: not handed in by this cohort: the reports of another cohort moved to {aside}",
                      file=options.get("stream", sys.stderr))
    return runs
