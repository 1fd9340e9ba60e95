"""Check replay (autograder/judge/replay.py) at the level of one check: what it passes, what it hands over."""

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from autograder.harness.recording import Recording
from autograder.harness.remote import RemoteCode, StudentError
from autograder.judge.plugin import PLUGINS
from autograder.judge.replay import RUNS_PER_CHECK, Replays
from conftest import KIT, SOLUTIONS, hang, submission_with

COUNTING = '''
_served = 0


def normalize_sum(scores, dim=-1):
    """Answers how many calls it has served: no two calls alike."""
    global _served
    _served += 1
    return scores * 0 + _served
'''


def checked(student: RemoteCode, replays: Replays, check) -> bool:
    """Run ``check`` as the plugin runs a check: replay first, in full only when that fails."""
    student.begin_check()
    if replays.replay(check, student):
        student.end_check()
        return True
    check(student)
    replays.remember(check, student.end_check())
    return False


@pytest.mark.slow
def test_every_check_starts_from_fresh_handles():
    student = RemoteCode(SOLUTIONS)
    try:
        student.begin_check()
        assert [student.masking.CausalAttention(3, 2, 6, 0.0)._ref.id for _ in range(2)] == [1, 2]
        student.begin_check()
        assert student.masking.CausalAttention(3, 2, 6, 0.0)._ref.id == 1
    finally:
        student.close()


@pytest.mark.slow
def test_a_check_is_replayed_only_for_the_same_answers_and_the_same_source(tmp_path):
    scores = torch.tensor([[1.0, 2.0], [3.0, 4.0]])

    def by_answer(student):
        student.softmax.normalize_sum(scores)

    def by_answer_and_source(student):
        student.softmax.normalize_sum(scores)
        student.source("softmax")

    replays = Replays()
    reference, copy = RemoteCode(SOLUTIONS), RemoteCode(submission_with(tmp_path / "copy", {}))
    counting = RemoteCode(submission_with(tmp_path / "counting", {"softmax": COUNTING}))
    try:
        for check in (by_answer, by_answer_and_source):
            assert not checked(reference, replays, check)  # nothing to replay yet: run in full, remembered
            assert checked(copy, replays, check)
        (copy.root / "softmax.py").write_text((copy.root / "softmax.py").read_text() + "\n# changed\n")
        assert checked(copy, replays, by_answer)
        assert not checked(copy, replays, by_answer_and_source)  # same answers, another source
        # Another answer: the check runs in full and gets the answer the replay received
        # (the worker served that call once: its counter says 1, then 2).
        counting.begin_check()
        assert not replays.replay(by_answer, counting)
        assert counting.softmax.normalize_sum(scores).unique().tolist() == [1.0]
        assert counting.softmax.normalize_sum(scores).unique().tolist() == [2.0]
    finally:
        for student in (reference, copy, counting):
            student.close()


def test_the_least_recently_matched_run_makes_room(tmp_path):
    """A check keeps RUNS_PER_CHECK passing runs; a popular way of answering stays."""
    def source_only(text: str) -> Recording:
        return Recording(sources={"softmax": text})

    def replays_for(text: str) -> bool:
        (tmp_path / "softmax.py").write_text(text)
        return replays.replay("check", RemoteCode(tmp_path))  # no requests: no worker starts

    replays = Replays()
    for i in range(RUNS_PER_CHECK + 1):
        replays.remember("check", source_only(f"# way {i}\n"))
    assert not replays_for("# way 0\n") and replays_for("# way 1\n")
    replays.remember("check", source_only("# a new way\n"))
    assert replays_for("# way 1\n") and not replays_for("# way 2\n")


DRAWING_CHECK = '''
import json
import os

from hypothesis import given, settings, strategies as st

DRAWN = []


@settings(max_examples=200)
@given(st.integers(0, 10**6))
def test_draws(n):
    DRAWN.append(n)


def teardown_module():
    with open(os.environ["DRAWN_TO"], "w") as out:
        json.dump(DRAWN, out)
'''


@pytest.mark.slow
def test_property_examples_do_not_depend_on_where_the_checks_run(tmp_path):
    """`make check`, a grading lane and Gradescope import different kit modules, and GitHub
    Classroom's runners set the CI variable; the examples a seed draws must not change with
    either (hypothesis draws literals of imported local modules unless the plugin stops it, and
    derandomizes where CI is set unless the profile says otherwise), or a grade would depend on
    where it was computed."""
    checks = tmp_path / "lab" / "tests"
    checks.mkdir(parents=True)
    (checks / "test_draws.py").write_text(DRAWING_CHECK)
    (checks.parent / "lab.toml").write_text('title = "draws"\n[[parts]]\nid = "draws"\nweight = 1\n')
    (tmp_path / "many_constants.py").write_text(f"CONSTANTS = {[123_457 + i for i in range(50)]}\n")
    drawn = []
    local = {name: value for name, value in os.environ.items() if name != "CI"}
    for extra, ci in (([], {}), (["-p", "many_constants"], {}), ([], {"CI": "true"})):
        out = tmp_path / f"drawn{len(drawn)}.json"
        env = {**local, **ci, "PYTHONPATH": f"{KIT}{os.pathsep}{tmp_path}", "DRAWN_TO": str(out)}
        subprocess.run([sys.executable, "-m", "pytest", str(checks / "test_draws.py"), *PLUGINS,
                        "-p", "no:cacheprovider", "-q", *extra], cwd=tmp_path, env=env, check=True,
                       capture_output=True, timeout=300)
        drawn.append(json.loads(out.read_text()))
    assert len(drawn[0]) > 100 and drawn[0] == drawn[1] == drawn[2]


SLOW = "\ndef normalize_sum(scores, dim=-1):\n" + hang()


@pytest.mark.slow
def test_a_time_out_during_a_replay_fails_the_check_once_and_is_not_remembered(tmp_path):
    scores = torch.tensor([1.0, 3.0])

    def check(student):
        student.softmax.normalize_sum(scores)

    replays = Replays()
    reference, slow = RemoteCode(SOLUTIONS), RemoteCode(submission_with(tmp_path, {"softmax": SLOW}), timeout=1.0)
    try:
        checked(reference, replays, check)
        slow.begin_check()
        assert not replays.replay(check, slow)
        started = time.monotonic()
        with pytest.raises(StudentError) as raised:
            check(slow)
        assert raised.value.kind == "timeout" and time.monotonic() - started < 0.5  # the replay's answer, not a rerun
        recording = slow.end_check()
        assert not recording.replayable
        replays.remember(check, recording)
        assert len(replays.runs[check]) == 1
    finally:
        reference.close()
        slow.close()


@pytest.mark.slow
def test_a_check_that_asks_otherwise_for_the_same_answers_is_never_replayed_again(tmp_path):
    """Replay rests on checks being deterministic; one that is not is caught and left alone."""
    scores = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    inputs = iter([scores, scores + 1, scores + 2])

    def unsteady(student):
        student.softmax.normalize_sum(next(inputs))
        student.softmax.normalize_sum(scores)

    replays = Replays()
    reference = RemoteCode(SOLUTIONS)
    counting = RemoteCode(submission_with(tmp_path, {"softmax": COUNTING}))
    try:
        checked(reference, replays, unsteady)
        with pytest.raises(AssertionError):  # the counting submission's answer differs: the check runs...
            assert checked(counting, replays, unsteady)
        assert unsteady in replays.distrusted and unsteady not in replays.runs  # ...and asks for other inputs
        reference.begin_check()
        assert not replays.replay(unsteady, reference)
    finally:
        reference.close()
        counting.close()
