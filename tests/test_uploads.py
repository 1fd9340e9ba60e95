"""A Gradescope upload's notes, without grading (issue 38): which folder is graded, every file left
out with why, and notes bounded, inert in Markdown and free of the grader's paths, whatever names
the upload's folders and zip entries carry. The grade itself is a stand-in here; the real one is
tests/test_platforms.py's."""

import io
import json
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

import mistune
import pytest

from autograder.batch import upload
from autograder.batch.staging import Submission, stage
from autograder.limits import DEFAULTS
from autograder.platforms.gradescope import collect
from conftest import LAB, RELEASE, SOLUTIONS

# Names that would be live Markdown or HTML: a fake heading and total, raw HTML, a script link.
HOSTILE = ["# public checks 84.5 ∕ 84.5", "| total | 100 |", "<img src=x onerror=alert(1)>", "<script>alert(1)",
           "[click](javascript:alert(1))", "\x1b]0;pwned\x07\u202e", "```", "**bold** _x_"]


def modules(into: Path, source: Path = SOLUTIONS) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    for module in LAB.modules:
        shutil.copy(source / module, into / module)
    return into


def notes_of(upload_folder: Path, tmp_path: Path) -> tuple[list[str], Path]:
    into = tmp_path / "collected"
    return collect(LAB, upload_folder, into), into


@pytest.fixture
def graded_as_gradescope(monkeypatch, tmp_path):
    """``upload.run`` on ``tmp_path/root``, its grade a stand-in whose output is a lab's heading."""
    def grade(lab, cohort, out, **options):
        folder = out / "students" / "submission"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps({"score": 1.0, "output": "# The lab: 1 / 100\n", "tests": []}))

    monkeypatch.setattr(upload, "grade", grade)
    monkeypatch.setattr(upload, "find_lab", lambda: LAB)
    root = tmp_path / "root"
    (root / "submission").mkdir(parents=True)
    return root


def rendered(markdown: str) -> str:
    return mistune.create_markdown(escape=False)(markdown)


def zipped(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, data in entries.items():
            bundle.writestr(name, data)
    return buffer.getvalue()


def test_upload_notes_are_inert_in_markdown_and_bounded(graded_as_gradescope):
    root = graded_as_gradescope
    modules(root / "submission" / "lab")
    for name in HOSTILE:
        (root / "submission" / name).mkdir()
        (root / "submission" / name / "scores.py").write_text("")  # a folder left aside, named in a note
        (root / "submission" / "lab" / f"{name}.txt").write_text("")
    (root / "submission" / "names.zip").write_bytes(zipped({f"../{name * 40}": b"" for name in HOSTILE}))
    for number in range(3000):
        (root / "submission" / f"{'x' * 200}{number}.txt").write_text("")
    output = upload.run(root)["output"]
    html = rendered(output)
    assert re.findall(r"<h\d", html) == ["<h1"] and "The lab: 1 / 100" in html  # the grade's heading, no other
    for live in ("<table", "<img", "<script", "<a ", "<strong>bold", "\x1b", "\u202e"):
        assert live not in html, live
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # shown, as text
    notes = re.search(r"(`{3,})text\n(.*?)\n\1\n", output, re.S).group(2).split("\n")  # the fence outgrows "```"
    assert len(notes) == DEFAULTS.submission_notes + 1 and notes[-1].startswith("and ") and notes[-1].endswith(" more files noted, not listed")
    assert all(len(note) <= DEFAULTS.note_characters for note in notes)
    assert len(output) < (DEFAULTS.submission_notes + 2) * DEFAULTS.note_characters * 2


def test_no_note_names_the_graders_folders(graded_as_gradescope, monkeypatch):
    root = graded_as_gradescope
    modules(root / "submission")
    (root / "submission" / "broken.zip").write_bytes(b"PK\x03\x04 not really a zip")
    (root / "submission" / "taken.zip").write_bytes(zipped({"a.py": b""}))
    (root / "submission" / "taken.zip.contents").mkdir()  # where unpacking would write
    (root / "submission" / "clash.zip").write_bytes(zipped({"notes.txt": b"", "notes.txt/x.py": b"", "y.txt": b""}))
    output = upload.run(root)["output"]
    assert "broken.zip: could not be unpacked (not a zip archive, or a damaged one)" in output
    assert "taken.zip: could not be unpacked (file exists)" in output
    assert "clash.zip: notes.txt/x.py could not be written (file exists), skipped" in output
    assert "clash.zip: unpacked" in output and "clash.zip/y.txt: not in the folder graded" in output  # the rest of it
    monkeypatch.setattr(upload, "grade", lambda *args, **options: open(Path(args[2]) / "missing" / "x"))
    failed = upload.run(root)
    assert failed["output"].endswith("(no such file or directory)") and failed["score"] == 0
    for said in (output, failed["output"]):
        assert tempfile.gettempdir() not in said and "autograder-" not in said and str(root) not in said


@pytest.mark.parametrize("listing", [sorted, lambda paths: sorted(paths, reverse=True)])
def test_the_folder_graded_is_a_stated_choice_whatever_the_listing_order(tmp_path, monkeypatch, listing):
    """Two copies of every module at the same depth (a stub and the honest one) and a shallower folder
    holding one: the one holding the most, then the shallowest, then the first by name is graded,
    in whatever order the file system lists them; the note names it and the others."""
    listed = Path.rglob
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: iter(listing(listed(self, pattern))))
    upload_folder = tmp_path / "upload"
    modules(upload_folder / "work" / "b_stub", RELEASE)
    modules(upload_folder / "work" / "a_final")
    modules(upload_folder / "work" / "c_partial")
    (upload_folder / "work" / "c_partial" / "heads.py").unlink()
    (upload_folder / "other").mkdir()
    shutil.copy(RELEASE / "scores.py", upload_folder / "other" / "scores.py")
    notes, into = notes_of(upload_folder, tmp_path)
    assert notes[:4] == [
        "the modules were found in work/a_final/ and graded from there: of the 4 folders holding some of them, the "
        "one holding the most (on a tie the shallowest, then the first by name); the others are left aside",
        "work/b_stub/: holds 6 of the lab's modules too, left aside",
        "work/c_partial/: holds 5 of the lab's modules too, left aside",
        "other/: holds 1 of the lab's modules too, left aside"], notes
    assert all((into / module).read_bytes() == (SOLUTIONS / module).read_bytes() for module in LAB.modules)


def test_every_file_left_out_is_named_with_why(tmp_path):
    upload_folder = modules(tmp_path / "upload")
    for name in ("conftest.py", "sitecustomize.py", "evil.pth", "points.toml", "results.json", "Softmax.py",
                 "softmax (1).py", "sоftmax.py", "notes.md"):  # the third softmax has a Cyrillic "о"
        (upload_folder / name).write_text("")
    inner = zipped({"scores.py": b""})
    for _ in range(DEFAULTS.upload_nested_zips):
        inner = zipped({"inner.zip": inner})
    (upload_folder / "nested.zip").write_bytes(inner)
    (upload_folder / "a" / "b" / "c" / "d" / "e").mkdir(parents=True)
    (upload_folder / "a" / "b" / "c" / "d" / "e" / "masking.py").write_text("")
    notes, into = notes_of(upload_folder, tmp_path)
    runs, graders = "a file Python or pytest would run before the checks, not graded", "a file of the grader's, not graded (the grader's own is used)"
    for note in ("Softmax.py: named like softmax.py but not softmax.py", "softmax (1).py: named like softmax.py",
                 "sоftmax.py: named like softmax.py", f"conftest.py: {runs}", f"sitecustomize.py: {runs}", f"evil.pth: {runs}",
                 f"points.toml: {graders}", f"results.json: {graders}", "notes.md: not part of the assignment, not graded",
                 "nested.zip/inner.zip/inner.zip/inner.zip: a zip inside 3 levels of zips, not opened",
                 "a/b/c/d/e/masking.py: deeper than 4 folders, not searched for the lab's modules"):
        assert any(line.startswith(note) for line in notes), (note, notes)
    assert sorted(path.name for path in into.iterdir()) == sorted(LAB.modules)


def test_a_module_over_the_size_limit_is_said_too_large(tmp_path):
    upload_folder = modules(tmp_path / "upload")
    (upload_folder / "heads.py").write_bytes(b"#" * (DEFAULTS.submission_file_bytes + 1))
    notes, into = notes_of(upload_folder, tmp_path)
    submission = Submission("submission", into)
    stage(LAB, submission, tmp_path / "staged")  # as grading the collected folder does
    assert submission.notes == ["heads.py: too large (over 1 MiB), left out"]


def test_a_name_that_is_not_utf8_is_noted_escaped(tmp_path):
    upload_folder = modules(tmp_path / "upload")
    (Path(os.fsdecode(upload_folder)) / os.fsdecode(b"\xff<b>.py")).write_text("")
    notes, _ = notes_of(upload_folder, tmp_path)
    assert notes == ["\\xff<b>.py: not part of the assignment, not graded"]
