"""`make grade SHARD=i/N` and `make merge`: a cohort graded on several machines is one course."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from autograder.__main__ import main
from autograder.batch.outputs import FINGERPRINT, REFERENCE_PROOF
from autograder.batch.shard import MergeError, merge, write_shard_file
from autograder.batch.staging import Shard
from conftest import DEMO, KIT, LAB, LABS

SLURM = KIT / "deploy" / "slurm"


@given(st.lists(st.text(min_size=1), unique=True), st.integers(1, 12))
def test_every_student_is_in_exactly_one_shard_whatever_n(students, count):
    shards = [Shard(index, count) for index in range(1, count + 1)]
    for student in students:
        assert sum(shard.holds(student) for shard in shards) == 1


def test_a_students_shard_never_moves():
    """Shards graded by one version of the kit are merged by another: the slice of a name is pinned
    (a name that is not UTF-8 by its bytes)."""
    names = {"ada": 4, "student0001": 2, os.fsdecode(b"caf\xe9"): 4, "Zoë Ng": 4}
    assert {name: next(i for i in range(1, 6) if Shard(i, 5).holds(name)) for name in names} == names


def test_shards_are_balanced():
    names = [f"student{n:04d}" for n in range(4000)]
    sizes = [sum(Shard(i, 4).holds(name) for name in names) for i in range(1, 5)]
    assert min(sizes) > 900, sizes  # a hash spreads similar names: about 1000 each


@pytest.mark.parametrize("text", ["0/3", "4/3", "2/1", "2", "a/b", "1/0"])
def test_a_bad_shard_is_refused_in_the_commands_words(text, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["grade", "--shard", text])
    assert stop.value.code == 2 and "a shard is i/N with 1 <= i <= N" in capsys.readouterr().err


def test_a_shard_leaves_the_gradebook_to_the_merge(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["grade", "--shard", "1/2", "--nbgrader", "--submissions", str(DEMO)])
    assert stop.value.code == 2 and "make merge NBGRADER=1" in capsys.readouterr().err


# -- merged, the same files as one run --------------------------------------------------------------

TIMINGS = {"summary.json": "seconds", "results.json": "execution_time"}  # a student's file: its timing's key


def without_timings(path: Path) -> str:
    text = path.read_text(errors="surrogateescape")
    if path.name not in TIMINGS:
        return text
    return json.dumps({key: value for key, value in json.loads(text).items() if key != TIMINGS[path.name]})


def assert_same_course(merged: Path, single: Path) -> None:
    """Every file of the two courses, timings aside (the shards' folders left out)."""
    def files(folder):
        return {str(path.relative_to(folder)): without_timings(path) for path in sorted(folder.rglob("*"))
                if path.is_file() and "shards" not in path.relative_to(folder).parts}
    merged_files, single_files = files(merged), files(single)
    assert merged_files.keys() == single_files.keys()
    assert [name for name in merged_files if merged_files[name] != single_files[name]] == []


def run_script(script: Path, *args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(["bash", str(script), *args], cwd=KIT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, **env})


@pytest.mark.slow
def test_shards_on_slurm_merge_into_what_one_run_writes(course, tmp_path):
    """The Slurm scripts, two array tasks as separate processes here, then the merge: every student's
    files, grades.csv and report.html (the near-copy across shards) the same as one run over the whole
    demo cohort (timings aside). One lab (LAB=, as make reads it), graded for real; every lab and any
    N: the merges of the single run's folders below."""
    out = tmp_path / "grades"
    env = {"SUBMISSIONS": str(DEMO), "OUT": str(out), "LAB": LAB.name, "NBGRADER": "1"}  # the gradebook: the merge's
    tasks = [run_script(SLURM / "shard.sbatch", "2", env={**env, "SLURM_ARRAY_TASK_ID": str(i),
                                                            "SLURM_CPUS_PER_TASK": "1"}) for i in (1, 2)]
    for task in tasks:
        assert task.wait(timeout=900) == 0, task.stdout.read()[-3000:]
    graded = {i: {p.name for p in (out / "shards" / str(i) / LAB.name / "students").iterdir()} for i in (1, 2)}
    assert all(graded.values()) and not graded[1] & graded[2], graded
    assert not list((out / "shards").rglob("grades.csv")) and not list((out / "shards").rglob("report.html"))
    merged = run_script(SLURM / "merge.sbatch", "2", env={**env, "NBGRADER": ""})
    assert merged.wait(timeout=300) == 0, merged.stdout.read()[-3000:]
    assert_same_course(out / LAB.name, course[0] / LAB.name)
    # chen's heads.py, gus's renamed (the demo's one near-copy), was graded in another shard than gus's:
    # the merged report.html, equal to the single run's, lists the pair all the same.
    assert next(i for i in graded if "chen" in graded[i]) != next(i for i in graded if "gus" in graded[i])


def split(single: Path, count: int, into: Path) -> list[Path]:
    """The shard folders make grade SHARD=i/count leaves, without grading: the single run's student
    folders by slice (the merge reads only those and the submissions)."""
    folders = [into / str(i) for i in range(1, count + 1)]
    for i, folder in enumerate(folders, 1):
        write_shard_file(folder, Shard(i, count), [lab.name for lab in LABS])
        for lab in LABS:
            (folder / lab.name / "students").mkdir(parents=True)
            shutil.copy(single / lab.name / REFERENCE_PROOF, folder / lab.name)  # each shard proved the environment
            for student in (single / lab.name / "students").iterdir():
                if Shard(i, count).holds(student.name):
                    shutil.copytree(student, folder / lab.name / "students" / student.name)
    return folders


@pytest.mark.slow
def test_any_number_of_shards_merges_into_the_same_course_even_over_an_old_one(course, tmp_path):
    single, _ = course
    out = tmp_path / "grades"
    for count in (1, 3, 20):  # 20: most shards hold nobody
        merge(LABS, split(single, count, tmp_path / f"shards-{count}"), DEMO, out)
        assert_same_course(out, single)
    (out / "attention" / "students" / "gone").mkdir()  # an earlier course's leftovers are set aside, as a run does
    attention, _ = merge(LABS, split(single, 2, tmp_path / "again"), DEMO, out)
    assert attention.removed == ["gone"] and (out / ".removed" / "attention" / "gone").is_dir()
    assert "no longer in the submissions (gone)" in (out / "attention" / "report.html").read_text()


@pytest.mark.slow
def test_a_merge_that_cannot_be_whole_writes_nothing_and_says_why(course, tmp_path):
    """Less than every shard, shards of other labs, a student no shard reported (in the last lab), or
    reports of other files than the submissions hold: refused, the course folder left as it was."""
    single, _ = course
    out = tmp_path / "grades"
    out.mkdir()
    (out / "grades.csv").write_text("student,attention\nada,100\n")
    folders = split(single, 2, tmp_path / "shards")

    def refused(match: str, shards=folders, submissions=DEMO):
        with pytest.raises(MergeError, match=match):
            merge(LABS, shards, submissions, out)
        assert sorted(p.name for p in out.iterdir()) == ["grades.csv"]
        assert (out / "grades.csv").read_text() == "student,attention\nada,100\n"
        assert not [p for p in tmp_path.iterdir() if "merging" in p.name]

    refused(r"missing \[2\]", folders[:1])
    refused(r"given twice \[1\]", [folders[0], folders[0], folders[1]])
    odd = tmp_path / "odd"
    write_shard_file(odd, Shard(2, 3), ["attention", "transformer"])
    refused("different counts", [folders[0], odd])
    refused("not a shard's output", [*folders, tmp_path])
    with pytest.raises(MergeError, match="is a shard's folder"):
        merge(LABS, folders, DEMO, folders[1])
    one_lab = tmp_path / "one-lab"
    shutil.copytree(folders[1], one_lab)
    write_shard_file(one_lab, Shard(2, 2), ["attention"])
    refused("did not grade transformer", [folders[0], one_lab])
    cohort = tmp_path / "submitted"  # kai left out: his link to the reference leads nowhere from a copy
    shutil.copytree(DEMO, cohort, symlinks=True, ignore=lambda folder, _: ["kai"] if Path(folder) == DEMO else [])
    (cohort / "eli" / "attention" / "softmax.py").write_text("# changed after grading\n")
    refused("attention: the shards graded other files.*'eli'", submissions=cohort)
    other_limits = shutil.copytree(folders[1], tmp_path / "other-limits")  # one student graded under other limits
    stamp = sorted((other_limits / "attention" / "students").iterdir())[0] / FINGERPRINT
    stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "settings": "another"}))
    refused(r"attention: shards 1/2 and 2/2 differ in what graded them \(the limits or options\)",
            [folders[0], other_limits])
    holding_ben = folders[0 if Shard(1, 2).holds("ben") else 1]
    shutil.rmtree(holding_ben / "transformer" / "students" / "ben")
    refused("transformer: shard ./2 .* no readable report of 'ben'")


# -- the engines instructors run ---------------------------------------------------------------------

@pytest.mark.slow
def test_slurm_submits_an_array_of_n_shards_then_a_merge_after_them_all(tmp_path):
    """grade.sh with a stand-in sbatch (what it was asked, an id answered as a federated cluster does)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/asked\necho "$#;cluster"\n')
    (bin_dir / "sbatch").chmod(0o755)
    run = subprocess.run(["bash", str(SLURM / "grade.sh"), "7"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path / "out")})
    assert run.returncode == 0, run.stderr
    array, then = (tmp_path / "asked").read_text().splitlines()
    assert "--array=1-7" in array and array.endswith("deploy/slurm/shard.sbatch 7")
    assert f"--dependency=afterany:{len(array.split())}" in then and then.endswith("deploy/slurm/merge.sbatch 7")
    assert (tmp_path / "out" / "shards").is_dir()


@pytest.mark.slow
def test_the_actions_workflow_grades_one_commit_on_a_matrix_of_shards_then_merges_them_all():
    workflow = yaml.safe_load((KIT / ".github" / "workflows" / "grade-cohort.yml").read_text())
    jobs = workflow["jobs"]
    assert set(workflow["on"]["workflow_dispatch"]["inputs"]) == {"submissions", "shards"}
    assert jobs["grade"]["strategy"]["matrix"]["shard"] == "${{ fromJSON(needs.plan.outputs.shards) }}"
    for job in ("grade", "merge"):  # every job grades the commit the plan read
        checkout = next(s for s in jobs[job]["steps"] if s.get("with", {}).get("path") == "submitted")
        assert checkout["with"]["ref"] == "${{ needs.plan.outputs.commit }}"
    grading = next(step for step in jobs["grade"]["steps"] if "make grade" in step.get("run", ""))
    assert grading["env"]["SHARD"] == "${{ matrix.shard }}/${{ inputs.shards }}"
    assert grading["run"].strip().startswith("sudo") and 'SHARD="$SHARD"' in grading["run"]
    uploads = [s for job in jobs.values() for s in job["steps"] if "upload-artifact" in s.get("uses", "")]
    assert all(s["with"]["path"].endswith(".tar") and s["with"]["overwrite"] for s in uploads)  # any name; re-runs
    assert jobs["merge"]["needs"] == ["plan", "grade"] and "needs.plan.result == 'success'" in jobs["merge"]["if"]
    merging = next(step for step in jobs["merge"]["steps"] if "make merge" in step.get("run", ""))
    assert "shards/*/shard.tar" in merging["run"] and 'SHARDS="$(printf' in merging["run"]
    plan = next(step for step in jobs["plan"]["steps"] if step.get("id") == "plan")
    script = plan["run"].split("commit=")[0]  # the matrix's part, as the runner runs it
    for count, listed in (("3", "[1, 2, 3]"), ("1", "[1]")):
        run = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                             env={**os.environ, "SHARDS": count, "GITHUB_OUTPUT": "/dev/stdout"})
        assert run.stdout.strip() == f"shards={listed}", run.stderr
