"""One submission never stops the batch, and student text is inert in every output (issue 21).

Staging a folder that holds links that loop, FIFOs, sockets, folders named like modules, names
that are not UTF-8 or that carry terminal escapes, or thousands of stray files: each attacker is
graded by the real command line in one lane, before an honest twin (the reference, 100) and a
stub student (the release, 0). Every report is written, the attacker's notes say what was left
out in plain words (capped), and no output holds a raw control, bidi or unencodable character.
"""

import csv
import ctypes
import errno
import io
import json
import os
import shutil
import stat
import threading
import unicodedata
from pathlib import Path

import pytest

from autograder.batch import grade as batch, staging
from autograder.batch.grade import grade
from autograder.batch.outputs import REFERENCE_PROOF
from autograder.batch.staging import Submission, labs_submitted, private_copy, stage
from autograder.limits import DEFAULTS
from autograder.reports.class_report import class_report
from autograder.platforms.gradescope import results_json
from autograder.reports.feedback import feedback_html, feedback_markdown
from autograder.reports.records import EXTRA_FILE, grades_csv, student_record
from autograder.results import CohortRun
from conftest import LAB, LABS, RELEASE, SOLUTIONS
from test_boundary import run_grade

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast

HONEST, STUB = "b_honest", "c_stub"
RAW = ("Cc", "Cf", "Cs", "Co", "Zl", "Zp")  # what printable() spells out; no output may hold one raw


def hand_in(cohort: Path, student: str | bytes, modules: Path = SOLUTIONS) -> Path:
    """``cohort/<student>/attention/`` holding the modules of ``modules``; ``student`` may be bytes
    (a folder name that is not UTF-8)."""
    folder = Path(os.fsdecode(cohort)) / os.fsdecode(student) / LAB.name
    folder.mkdir(parents=True)
    for module in modules.glob("*.py"):
        shutil.copy(module, folder / module.name)
    return folder


def with_twins(cohort: Path) -> Path:
    hand_in(cohort, HONEST)
    hand_in(cohort, STUB, RELEASE)
    return cohort


def raw_characters(text: str) -> list[str]:
    return sorted({c for c in text if c not in "\n\t" and unicodedata.category(c) in RAW})


def assert_inert(where: str, data: bytes) -> None:
    """``data`` is UTF-8 (no byte of a name that is not) and shows nothing raw; in JSON, the
    strings it holds neither (a reader decodes \\u001b back to ESC)."""
    text = data.decode("utf-8")
    strings = [text]
    if where.endswith(".json"):
        def walk(value):
            if isinstance(value, str):
                strings.append(value)
            for item in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
                walk(item)
        walk(json.loads(text))
    assert not [raw_characters(s) for s in strings if raw_characters(s)], where


def reports(out: Path) -> dict[str, bytes]:
    """Every report of the run, by path, after checking it exists: the course's grades.csv, the
    lab's grades.csv and report.html, each student's results.json, feedback.md and feedback.html."""
    lab = out / LAB.name
    files = [out / "grades.csv", lab / "grades.csv", lab / "report.html"]
    students = sorted((lab / "students").iterdir())
    files += [folder / name for folder in students for name in ("results.json", "feedback.md", "feedback.html")]
    missing = [str(path) for path in files if not path.is_file()]
    assert not missing, missing
    return {os.fsencode(path.relative_to(out)).decode("utf-8", "backslashreplace"): path.read_bytes() for path in files}


def table(data: bytes) -> dict[str, dict]:
    """A grades.csv as Python's csv module reads it (cells over its 128 KiB default are refused)."""
    return {row["student"]: row for row in csv.DictReader(io.StringIO(data.decode("utf-8")))}


def graded_run(cohort: Path, out: Path) -> tuple[dict[str, bytes], dict[str, dict]]:
    """Grade ``cohort`` (one lane, the command line); check the run and every output; return the
    reports and the lab's table."""
    run = run_grade(cohort, out)
    assert run.returncode == 0, run.stderr[-3000:]
    files = reports(out)
    for where, data in [*files.items(), ("stderr", run.stderr.encode()), ("stdout", run.stdout.encode())]:
        assert_inert(where, data)
    rows = table(files[f"{LAB.name}/grades.csv"])
    assert rows[HONEST]["total"] == "100" and rows[HONEST]["status"] == "graded", rows[HONEST]
    assert rows[STUB]["total"] == "0", rows[STUB]
    assert set(table(files["grades.csv"])) == set(rows)
    return files, rows


def test_links_that_loop_odd_files_and_names_that_are_not_utf8_fail_their_student_alone(tmp_path):
    cohort = with_twins(tmp_path / "cohort")
    links = hand_in(cohort, "a_links")
    (links / "loop.py").symlink_to("loop.py")
    (links / "ping.py").symlink_to("pong.py")  # a link to links that loop
    (links / "pong.py").symlink_to("pang.py")
    (links / "pang.py").symlink_to("pong.py")
    (links / "gone.py").symlink_to("nowhere.py")
    odd = hand_in(cohort, "a_odd")
    (odd / "softmax.py").unlink()
    os.mkfifo(odd / "softmax.py")  # reading it would block the batch forever
    (odd / "masking.py").unlink()
    (odd / "masking.py").mkdir()
    os.mknod(odd / "socket.py", stat.S_IFSOCK | 0o600)
    (Path(os.fsdecode(odd)) / os.fsdecode(b"lab\xff.ipynb")).write_text("{}")  # staged, and its name fingerprinted
    hand_in(cohort, b"a_name_\xff")

    files, rows = graded_run(cohort, tmp_path / "out")
    assert rows["a_links"]["total"] == "100" and rows["a_links"]["status"] == "graded", rows["a_links"]
    for name in ("loop.py", "ping.py", "pong.py", "pang.py"):
        assert f"{name}: a link that loops" in rows["a_links"]["notes"], rows["a_links"]["notes"]
    assert "gone.py: a link to nothing" in rows["a_links"]["notes"]
    said = rows["a_odd"]
    assert said["softmax"] == said["masking"] == "0" and (said["scores"], said["projections"], said["dropout"]) == (
        "10", "20", "10"), said  # graded on the rest
    assert said["status"] == "missing: masking.py, softmax.py", said
    for note in ("masking.py: a folder, not a file", "softmax.py: not a regular file",
                 "socket.py: not part of the assignment"):
        assert note in said["notes"], said["notes"]
    assert rows["a_name_\\xff"]["total"] == "100", rows  # the name shown escaped, graded as anyone
    assert "a_name_\\xff" in files[f"{LAB.name}/report.html"].decode()


ESCAPING_NAMES = ["\x1b]0;pwned\x07.py", "\x1b[2J.txt", "evil\u202etxt.py", "<img src=x onerror=alert(1)>.py"]


def test_file_names_are_shown_inert_and_notes_are_capped(tmp_path):
    cohort = with_twins(tmp_path / "cohort")
    escapes = hand_in(cohort, "a_escapes")
    for name in ESCAPING_NAMES:
        (escapes / name).write_text("")
    (Path(os.fsdecode(escapes)) / os.fsdecode(b"\xfe\x1b[31m.py")).write_text("")
    many = hand_in(cohort, "a_many")
    for number in range(3000):  # uncapped: a 0.6 MB notes cell, which Python's csv module refuses
        (many / f"{'x' * 180}{number}.txt").write_text("")

    files, rows = graded_run(cohort, tmp_path / "out")
    notes = rows["a_escapes"]["notes"]
    for shown in ("\\x1b]0;pwned\\x07.py", "\\x1b[2J.txt", "evil\\u202etxt.py", "\\xfe\\x1b[31m.py"):
        assert f"{shown}: not part of the assignment" in notes, notes
    page = files[f"{LAB.name}/students/a_escapes/feedback.html"].decode()
    assert "\\xfe\\x1b[31m.py" in page and "<img src=x" not in page
    assert rows["a_escapes"]["total"] == rows["a_many"]["total"] == "100"
    notes = rows["a_many"]["notes"].split("; ")
    assert len(notes) == DEFAULTS.submission_notes + 1 and notes[-1] == f"and {3000 - DEFAULTS.submission_notes} more files noted, not listed", notes[-1]
    assert all(len(note) <= DEFAULTS.note_characters for note in notes)
    assert len(files[f"{LAB.name}/students/a_many/feedback.html"]) < 100_000


def listing_of(folder: Path, changed):
    """``os.listdir`` as staging calls it (on the folder it opened), with ``changed(names)`` for ``folder``'s."""
    listed = os.listdir

    def listdir(path="."):
        names = listed(path)
        opened = os.fstat(path) if isinstance(path, int) else os.stat(path)
        return changed(names) if os.path.samestat(opened, os.stat(folder)) else names

    return listdir


def test_staging_notes_each_entry_it_leaves_out_and_caps_the_notes(tmp_path, monkeypatch):
    """Without grading: every kind of odd entry, an entry gone between listing and reading, and
    more notes than the cap, the lab's modules first."""
    folder = hand_in(tmp_path / "cohort", "a_odd")
    (folder / "softmax.py").unlink()
    (folder / "softmax.py").symlink_to("softmax.py")
    for number in range(2 * DEFAULTS.submission_notes):
        (folder / f"{chr(number + 1) * 200}.txt").write_text("")  # names of control characters, escaped 4 times longer
    monkeypatch.setattr(os, "listdir", listing_of(folder, lambda names: [*names, "heads.py"]))
    (folder / "heads.py").unlink()  # listed, but no longer there when read

    submission = Submission("a_odd", folder)
    stage(LAB, submission, tmp_path / "staged")
    assert submission.problems == []
    notes = submission.notes
    assert notes[:2] == ["heads.py: could not be read (no such file or directory), left out",
                         "softmax.py: a link that loops (following it never reaches a file), left out"], notes[:3]
    assert len(notes) == DEFAULTS.submission_notes + 1 and notes[-1] == f"and {2 + 2 * DEFAULTS.submission_notes - DEFAULTS.submission_notes} more files noted, not listed"
    assert all(len(note) <= DEFAULTS.note_characters and not raw_characters(note) for note in notes), notes
    assert sorted(path.name for path in (tmp_path / "staged").iterdir()) == sorted(
        f"{module}.py" for module in ("dropout", "masking", "projections", "scores"))


def test_every_page_shows_a_students_text_escaped(tmp_path):
    """The renderers alone, on a record whose name and notes hold escapes, a bidi override and a
    name that is not UTF-8: HTML too shows them as escapes, and every output encodes."""
    name = os.fsdecode(b"a_\xff\x1b[2J") + "\u202e"
    record = student_record(LAB, name, None, [], [f"{name}\x1b]0;pwned\x07.py: not graded"], None, 0.0)
    outputs = {"feedback.html": feedback_html(LAB, record), "feedback.md": feedback_markdown(LAB, record),
               "results.json": json.dumps(results_json(LAB, record)), "grades.csv": grades_csv(LAB, [record]),
               "report.html": class_report(LAB, [record], {name: "students/a/feedback.html"})}
    for where, text in outputs.items():
        assert_inert(where, text.encode("utf-8"))
    assert "a_\\xff\\x1b[2J\\u202e" in outputs["feedback.html"] and "a_\\xff" in outputs["report.html"]
    assert "\\x1b]0;pwned\\x07.py" in outputs["feedback.html"]


def test_a_folder_that_cannot_be_listed_fails_its_student_alone(tmp_path, monkeypatch):
    """Nothing is graded (no lane starts): the student's status says why, every report is written."""
    locked = hand_in(tmp_path / "cohort", "a_locked")

    def refused(names):  # as root, chmod 000 does not stop a listing
        raise PermissionError(13, "Permission denied", str(locked))

    monkeypatch.setattr(os, "listdir", listing_of(locked, refused))
    run = grade(LAB, tmp_path / "cohort", tmp_path / "out" / LAB.name, jobs=1, stream=io.StringIO())
    assert run.ungraded == {}
    row = table((tmp_path / "out" / LAB.name / "grades.csv").read_bytes())["a_locked"]
    assert row["status"] == "error: attention/ could not be read (permission denied): not graded", row
    assert row["total"] == "0" and str(tmp_path) not in json.dumps([r.to_json() for r in run.records])
    assert (tmp_path / "out" / LAB.name / "report.html").is_file()
    assert (tmp_path / "out" / LAB.name / "students" / "a_locked" / "feedback.html").is_file()


def test_make_grade_names_an_ungraded_student_inert_on_the_terminal(tmp_path, monkeypatch, capsys):
    import autograder.__main__ as entry
    import autograder.batch.grade as batch

    hostile = "a\x1b]0;owned\x07\u202egpj.exe\nerror: not graded: nobody"
    monkeypatch.setattr(batch, "grade_course", lambda *args, **options: [CohortRun(
        LAB.name, [], graded=1, skipped=0, ungraded={hostile: "OSError: [Errno 28] No space left\non device"})])
    (tmp_path / "cohort").mkdir()
    assert entry.main(["grade", "--lab", LAB.name, "--submissions", str(tmp_path / "cohort"),
                       "--out", str(tmp_path / "out")]) == 1
    said = capsys.readouterr().err
    assert_inert("make grade's error line", said.encode())
    assert said.count("\n") == 1 and said.startswith(f"error: not graded: {LAB.name}: a\\x1b]0;owned")


def test_a_module_swapped_for_a_link_while_it_is_staged_is_never_followed(tmp_path):
    """A local user who owns a submission folder swaps a module and a link to a file only root reads, over and over,
    while root stages it (make grade, or make check as root): the link is never followed, whatever the moment (it was:
    the file's contents were copied, readable by the student's code, in ~40 % of the stagings)."""
    secret = tmp_path / "secret"
    secret.write_text("TOPSECRET\n")
    secret.chmod(0o600)
    folder = tmp_path / "eve" / LAB.name
    folder.mkdir(parents=True)
    (folder / "softmax.py").write_text("def softmax(x, dim=-1):\n    return x\n")
    (folder / "swapped").symlink_to(secret)
    copies, _ = staged_while_swapping(tmp_path, folder, folder / "softmax.py", folder / "swapped")
    assert copies and not any("TOPSECRET" in text for text in copies)


def staged_while_swapping(tmp_path, folder, one, other) -> tuple[list[str], list[str]]:
    """What 300 stagings of ``folder`` copied and noted while a thread swaps ``one`` and ``other`` again and again
    (renameat2's RENAME_EXCHANGE: the two names trade places at once). A staging that raises fails its student alone."""
    libc, stop = ctypes.CDLL(None, use_errno=True), threading.Event()

    def swap():
        while not stop.is_set():
            libc.renameat2(-100, os.fsencode(one), -100, os.fsencode(other), 2)

    swapper = threading.Thread(target=swap)
    swapper.start()
    copies, notes = [], []
    try:
        for i in range(300):
            submission = Submission("eve", folder)
            try:
                stage(LAB, submission, tmp_path / f"staged-{i}")
            except OSError:
                continue
            copies += [copy.read_text(errors="replace") for copy in (tmp_path / f"staged-{i}").iterdir()]
            notes += submission.notes
    finally:
        stop.set()
        swapper.join()
    return copies, notes


def test_a_submission_folder_swapped_for_a_link_while_it_is_staged_is_never_followed(tmp_path):
    """The same with the folder itself: a student who owns ``<student>/`` swaps ``attention/`` and a link to a folder
    only root reads (the reference's copy, say) while root stages it: nothing of that folder is copied or named (it
    was, in ~20 % of the stagings: modules and notebooks copied, other files named in the notes)."""
    secret = tmp_path / "secret"
    secret.mkdir(mode=0o700)
    (secret / "softmax.py").write_text("TOPSECRET = 1\n")
    (secret / "TOPSECRET-NAME.txt").write_text("")
    folder = tmp_path / "eve" / LAB.name
    folder.mkdir(parents=True)
    (folder / "softmax.py").write_text("def softmax(x, dim=-1):\n    return x\n")
    (tmp_path / "eve" / "alt").symlink_to(secret)
    copies, notes = staged_while_swapping(tmp_path, folder, folder, tmp_path / "eve" / "alt")
    assert copies and not any("TOPSECRET" in text for text in copies + notes), [n for n in notes if "TOPSECRET" in n]


def test_a_submission_cannot_fill_the_staging_disk(tmp_path):
    """One notebook of nearly 1 MiB, 40 links to it and 1,000 notebooks of 4,097 bytes, two blocks of the disk each (it
    was: all copied, 49 MiB; 2,000 links filled a 300 MB staging disk and stopped the batch; counted by their sizes,
    the small ones took twice the bound): staging keeps the disk it takes within the submission's total, the lab's
    modules first, and says what it left out."""
    folder = hand_in(tmp_path / "cohort", "a_big")
    (folder / "big.ipynb").write_text('{"cells": [], "pad": "' + "x" * (DEFAULTS.submission_file_bytes - 100) + '"}')
    for number in range(40):
        (folder / f"a{number:02}.ipynb").symlink_to("big.ipynb")  # named to come before the modules by name
    for number in range(1000):
        (folder / f"small{number:04}.ipynb").write_text("{}" + " " * 4095)
    submission = Submission("a_big", folder)
    stage(LAB, submission, tmp_path / "staged")
    staged = list((tmp_path / "staged").iterdir())
    assert sum(path.stat().st_blocks * 512 for path in staged) <= DEFAULTS.submission_bytes
    assert set(LAB.modules) <= {path.name for path in staged}
    over = [note for note in submission.notes if note.endswith(": with it the submission's files would be over 8 MiB, left out")]
    assert over and over[0] < "a39", submission.notes[:3]


def test_a_student_who_fills_the_staging_disk_fails_alone(tmp_path, monkeypatch):
    """The staging disk is full from a student's last module on: that student's partial copy is removed and they
    are not graded, saying why; the reference solution was staged before the cohort, so the batch goes on (it
    stopped: the reference was staged last and met the full disk)."""
    full = []
    written = Path.write_bytes

    def write_bytes(path, data):
        full.extend([True] if b"FILLS THE DISK" in data else [])
        if full and "autograder-staging-" in str(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return written(path, data)

    partial = {}

    def stage_cohort(*arguments):
        staged = staging.stage_cohort(*arguments)
        partial.update({student: sorted(folder.iterdir()) for student, folder in staged[1].items()})
        return staged

    folder = hand_in(tmp_path / "cohort", "eve")
    (folder / "softmax.py").write_text((folder / "softmax.py").read_text() + "# FILLS THE DISK\n")
    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    monkeypatch.setattr(batch, "stage_cohort", stage_cohort)
    run = grade(LAB, tmp_path / "cohort", tmp_path / "out", jobs=1, stream=io.StringIO())
    assert partial == {"eve": []}
    [record] = run.records
    assert record.total == 0 and "could not be read (no space left on device)" in record.status, record.status
    assert (tmp_path / "out" / REFERENCE_PROOF).is_file()


def test_where_a_link_leads_out_of_its_folder_is_never_looked_at(tmp_path):
    """A link is followed only by names of files beside it, read from the link itself: root never follows one to learn
    where it leads (the notes told a student whether a file exists in a folder only root reads: "a link to a file
    outside the submission" or "a link to nothing")."""
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    (hidden / "EXISTS.txt").write_text("")
    folder = hand_in(tmp_path / "cohort", "eve")
    for probe, target in (("exists", hidden / "EXISTS.txt"), ("missing", hidden / "NOPE.txt"), ("folder", hidden),
                          ("inside", folder / "scores.py")):
        (folder / f"probe_{probe}.py").symlink_to(target)
    (folder / "mine.py").write_bytes((folder / "softmax.py").read_bytes())
    (folder / "softmax.py").unlink()
    (folder / "softmax.py").symlink_to("./mine.py")
    for hop in range(10):  # a chain of 10: each entry's is followed anew, so a long one is not followed at all
        (folder / f"chain{hop}.py").symlink_to(f"chain{hop + 1}.py" if hop < 9 else "mine.py")
    submission = Submission("eve", folder)
    stage(LAB, submission, tmp_path / "staged")
    said = {note.split(": ")[0]: note.split(": ", 1)[1] for note in submission.notes}
    assert {said[f"probe_{probe}.py"] for probe in ("exists", "missing", "folder", "inside")} == {
        "a link to another folder's file (only a link to a file beside it is followed), left out"}, said
    assert (tmp_path / "staged" / "softmax.py").read_bytes() == (folder / "mine.py").read_bytes()
    assert said["chain0.py"] == "a chain of more than 8 links, left out" and said["chain5.py"] == EXTRA_FILE, said

    # Which labs were handed in is told from the links' names alone: a 300-character one stopped the run before anyone
    # was graded, and where one led told whether a file exists in a folder only root reads (the lab was graded or not).
    for probe, target in (("exists", hidden / "EXISTS.txt"), ("missing", hidden / "NOPE.txt"), ("long", "a" * 300)):
        (tmp_path / probe / "abe").mkdir(parents=True)
        (tmp_path / probe / "abe" / LABS[-1].name).symlink_to(target)
        assert labs_submitted(LABS, tmp_path / probe) == [LABS[-1]], probe


@pytest.mark.skipif(os.geteuid() != 0, reason="check stages a private copy as root only")
def test_check_as_root_follows_no_link_another_user_could_have_made(tmp_path, capsys):
    """An upload's path passes through a folder a local user owns, holding a link to a folder only root reads: check
    as root follows it no more (it graded root's folder, the red-team's 13/13 on stubs), before or while it opens it;
    a link root made in root's own folder is followed, as the instructor named it."""
    theirs, hidden = tmp_path / "theirs", tmp_path / "hidden"
    hand_in(hidden, "lab")
    hidden.chmod(0o700)
    theirs.mkdir()
    (theirs / "lab").symlink_to(hidden / "lab")
    os.chown(theirs, 12345, 12345)
    with private_copy(LAB, theirs / "lab" / LAB.name, DEFAULTS) as staged:
        assert list(staged.iterdir()) == []
    assert f"note: {theirs / 'lab' / LAB.name}: lab is a link another user could have made or changed" in \
        capsys.readouterr().err
    (tmp_path / "mine").symlink_to(hidden / "lab")
    with private_copy(LAB, tmp_path / "mine" / LAB.name, DEFAULTS) as staged:
        assert set(LAB.modules) <= {path.name for path in staged.iterdir()}
