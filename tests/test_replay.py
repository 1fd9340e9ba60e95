"""Check replay (autograder/replay.py) at the level of one check: what it passes, what it hands over."""

import torch

from autograder.replay import RUNS_PER_CHECK, Replays
from autograder.student import Recording, Student
from conftest import SOLUTIONS, submission_with

COUNTING = '''
_served = 0


def normalize_sum(scores, dim=-1):
    """Answers how many calls it has served: no two calls alike."""
    global _served
    _served += 1
    return scores * 0 + _served
'''


def checked(student: Student, replays: Replays, check) -> bool:
    """Run ``check`` as the plugin runs a check: replay first, in full only when that fails."""
    student.begin_check()
    if replays.replay(check, student):
        student.end_check()
        return True
    check(student)
    replays.remember(check, student.end_check())
    return False


def test_every_check_starts_from_fresh_handles():
    student = Student(SOLUTIONS)
    try:
        student.begin_check()
        assert [student.masking.CausalAttention(3, 2, 6, 0.0)._ref.id for _ in range(2)] == [1, 2]
        student.begin_check()
        assert student.masking.CausalAttention(3, 2, 6, 0.0)._ref.id == 1
    finally:
        student.close()


def test_a_check_is_replayed_only_for_the_same_answers_and_the_same_source(tmp_path):
    scores = torch.tensor([[1.0, 2.0], [3.0, 4.0]])

    def by_answer(student):
        student.softmax.normalize_sum(scores)

    def by_answer_and_source(student):
        student.softmax.normalize_sum(scores)
        student.source("softmax")

    replays = Replays()
    reference, copy = Student(SOLUTIONS), Student(submission_with(tmp_path / "copy", {}))
    counting = Student(submission_with(tmp_path / "counting", {"softmax": COUNTING}))
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
        return replays.replay("check", Student(tmp_path))  # no requests: no worker starts

    replays = Replays()
    for i in range(RUNS_PER_CHECK + 1):
        replays.remember("check", source_only(f"# way {i}\n"))
    assert not replays_for("# way 0\n") and replays_for("# way 1\n")
    replays.remember("check", source_only("# a new way\n"))
    assert replays_for("# way 1\n") and not replays_for("# way 2\n")
