"""The messages between the judge and a worker, and between a batch and its lanes: each one's wire form is
read back as the same message, and what a worker answers is read as strictly as it is declared."""

import pytest

from autograder.batch.jobs import Failed, Graded, Job, answer_from_line
from autograder.harness.messages import (REQUESTS, ZYGOTE_MESSAGES, Answered, Build, Call, Configure, ForkConfined, ForkJudge,
                                         Forked, ForkTrusted, Grad, MessageError, Method, NotForked, Request, Status,
                                         StatusOf, WorkerError, ZygoteMessage, answer_from_wire)

EXAMPLES = [Configure(timeout=2.5, imports={"heads": ["heads", "softmax"]}),
            Call(target="softmax.softmax", args=[1, (2, 3)], kwargs={"dim": -1}, seed=7, count=["torch.exp"]),
            Build(specs=[["heads.Heads", [4, 2], {}], ["heads.Heads", [4, 1], {}]], seed=3),
            Method(handle=1, name="forward", target="heads.Heads.forward", args=[0], sublayer_calls=True,
                   fresh=True),
            Grad(handle=2, target="heads.Heads.forward", computed=[0], forbid=["aten._softmax"], seed="continue")]


def test_every_request_is_declared_and_read_back_as_sent():
    assert {type(message) for message in EXAMPLES} == set(REQUESTS.values())
    for message in EXAMPLES:
        assert Request.from_wire(message.to_wire()) == message
    assert Call(target="m.f").to_wire() == {"op": "call", "target": "m.f"}  # defaults stay off the wire


@pytest.mark.parametrize("wire", [{"op": "shutdown"}, {"target": "m.f"}, ["call"], {"op": "call", "args": []},
                                  {"op": "call", "target": "m.f", "unknown": 1}])
def test_a_request_in_no_declared_form_is_refused(wire):
    with pytest.raises(MessageError):
        Request.from_wire(wire)


def test_the_judge_reads_an_answer_only_in_its_declared_form():
    assert answer_from_wire(Answered(3, counts={"torch.exp": 1}).to_wire(), "m.f").value == \
        {"result": 3, "counts": {"torch.exp": 1}}
    assert answer_from_wire(Answered([], sublayer_calls=[]).to_wire(), "m.f").value == \
        {"result": [], "sublayer_calls": []}
    for forged in ({"result": 1}, "ok", {"ok": 1, "counts": [1]}, {"ok": 1, "sublayer_calls": {}}):
        with pytest.raises(MessageError):
            answer_from_wire(forged, "m.f")
    said = answer_from_wire({"error": {"kind": "crashed", "message": "\x1b[2J" + "x" * 9000, "line": True,
                                       "loading": ["a.py"] * 50}}, "m.f")
    assert isinstance(said, WorkerError) and said.where == "m.f" and said.line == 0 and len(said.loading) == 10
    assert len(said.message) == 4000 and "\x1b" not in said.message
    assert answer_from_wire(WorkerError("timeout", message="slow", loading=("a.py",)).to_wire(), "m.f") == \
        WorkerError("timeout", message="slow", where="", loading=("a.py",))


ZYGOTE_EXAMPLES = [ForkConfined(id=1, root="/s", scratch="/w/scratch", view="/w/view", uid=None, cgroup=None,
                                 limits={"call_timeout": 10.0}, temporary="/run/folders"),
                    ForkTrusted(id=2, root="/ref", lab_allows=["torch.optim"], temporary="/tmp"), StatusOf(id=3, pid=0), Forked(id=1, pid=42),
                    NotForked(id=1, error="no memory"), Status(id=3, status=None), ForkJudge(id=4, memory_bytes=4 << 30)]


def test_the_judge_and_its_zygote_read_each_others_lines_as_types():
    assert {type(message) for message in ZYGOTE_EXAMPLES} == set(ZYGOTE_MESSAGES.values())
    for message in ZYGOTE_EXAMPLES:
        line = message.to_line()
        assert line.endswith(b"\n") and line.count(b"\n") == 1 and ZygoteMessage.from_line(line) == message
    for other in (b'{"op": "shutdown", "id": 1}\n', b'{"id": 1, "pid": 3}\n', b'{"op": "forked", "id": 1}\n',
                  b'["forked"]\n', b"not json\n"):
        with pytest.raises(MessageError):
            ZygoteMessage.from_line(other)


def test_a_lane_and_its_batch_read_each_others_lines_as_types():
    assert Job.from_line(Job("staged/amy", "raw.json").to_line()) == Job("staged/amy", "raw.json")
    assert answer_from_line(Graded("raw.json").to_line()) == Graded("raw.json")
    assert answer_from_line(Failed("pytest exit code 3").to_line()) == Failed("pytest exit code 3")
    assert isinstance(answer_from_line("Traceback (most recent call last):\n"), Failed)
