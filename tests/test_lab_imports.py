"""What a lab allows its code to import has its first use paid once, in the zygote, not by each worker within a student's call."""

import os
import pwd
import socket

import pytest

from autograder.harness import lab_imports, sandbox, zygote
from autograder.harness.lab_imports import LAB_MAY_ALLOW
from autograder.harness.messages import ForkTrusted, NotForked, ZygoteMessage
from autograder.harness.processes import WorkerProcess
from autograder.harness.remote import RemoteCode, StudentError
from autograder.harness.zygote_client import Zygote
from autograder.results import FailureKind

TRAINS = """
import os
import sys

import torch


def first_steps_import():
    before = set(sys.modules)
    weight = torch.zeros(3, requires_grad=True)
    for optimiser in (torch.optim.SGD([weight], lr=0.1), torch.optim.Adam([weight], lr=0.1)):
        schedule = torch.optim.lr_scheduler.ExponentialLR(optimiser, gamma=0.9)
        optimiser.zero_grad()
        weight.square().sum().backward()
        optimiser.step()
        schedule.step()
    return sorted(set(sys.modules) - before)


def cache_folder():
    return os.environ.get("TORCHINDUCTOR_CACHE_DIR")


def softmax_in_a_step_hook():
    weight = torch.zeros(3, requires_grad=True)
    optimiser = torch.optim.SGD([weight], lr=0.1)
    optimiser.register_step_pre_hook(lambda *_: torch.softmax(weight, 0))
    weight.square().sum().backward()
    optimiser.step()
"""


def first_steps_import(folder, confined: bool) -> list[str]:
    """What the first steps load, under a ban as a lab's checks set one: torch's own ScriptObject, which a step
    gives an operator (the profiler's record_function), is no student's handler; the ban still holds in a hook."""
    code = RemoteCode(folder, confined=confined)
    try:
        with code.forbidding("aten._softmax"):
            loaded = code.trains.first_steps_import()
            with pytest.raises(StudentError) as refused:
                code.trains.softmax_in_a_step_hook()
            assert refused.value.kind == FailureKind.FORBIDDEN, refused.value
        return loaded
    finally:
        code.close()


@pytest.mark.slow  # starts zygotes
def test_what_a_lab_may_allow_has_its_first_use_paid_before_a_worker_starts(tmp_path, monkeypatch):
    """On the pinned torch, an optimiser's first steps in a worker import torch._dynamo (over 800 modules), unless the
    zygote paid them for a lab that allows the optimisers or their schedules: then they import nothing, in the
    reference's worker and a student's confined one. A torch that loads nothing there fails the first assertion:
    the first use is then worth nothing and goes.

    The paying zygotes' temporary folder holds a file where torch would make its cache folder (any local user can
    make one in /tmp first): the first use is paid all the same, in a folder of its own, which is gone after."""
    folder, squatted = tmp_path / "submission", tmp_path / "shared-tmp"
    folder.mkdir()
    (folder / "trains.py").write_text(TRAINS)
    squatted.mkdir()
    (squatted / f"torchinductor_{pwd.getpwuid(os.getuid()).pw_name}").write_text("taken")
    monkeypatch.setitem(sandbox.ENVIRONMENT, "TMPDIR", str(squatted))  # the zygotes' (a confined worker's is its own)
    Zygote.stop_shared()  # a zygote of this test's own, not one another test's lab warmed
    try:
        loaded = first_steps_import(folder, confined=True)
        assert "torch._dynamo" in loaded and len(loaded) > 100, loaded[:5]
        for name in LAB_MAY_ALLOW:
            monkeypatch.setattr(WorkerProcess, "lab_allows", frozenset({name}))
            for confined in (False, True):
                assert first_steps_import(folder, confined) == [], (name, confined)
            code = RemoteCode(folder, confined=False)
            try:
                assert code.trains.cache_folder() is None  # the environment as it was
            finally:
                code.close()
            Zygote.stop_shared()  # the next name's first use, paid by a zygote that has paid none
        assert [p.name for p in squatted.iterdir()] == [f"torchinductor_{pwd.getpwuid(os.getuid()).pw_name}"]
    finally:
        Zygote.stop_shared()


def test_a_first_use_that_fails_is_said_on_every_fork_and_the_zygote_serves_on(tmp_path, monkeypatch):
    """A first use that raises (torch half-imported: a retry would fail otherwise) answers every fork of the lab
    with NotForked and its cause, tried once; the zygote goes on serving."""
    tried = []

    def breaks():
        tried.append(1)
        raise FileExistsError(17, "File exists", "/tmp/torchinductor_root")

    monkeypatch.setitem(LAB_MAY_ALLOW, "torch.optim", breaks)
    monkeypatch.setattr(lab_imports, "_failed", {})
    judge, zygote_end = socket.socketpair()
    answers = judge.makefile("rb")
    for request in (1, 2):
        zygote.fork_worker(ForkTrusted(id=request, root=str(tmp_path), lab_allows=["torch.optim"], temporary=str(tmp_path)),
                           zygote_end, {})
        assert ZygoteMessage.from_line(answers.readline()) == NotForked(id=request, error=(
            "the first use of what the lab allows (torch.optim) failed in the grader "
            "(FileExistsError: [Errno 17] File exists: '/tmp/torchinductor_root')"))
    assert tried == [1]


def test_a_first_use_writes_in_the_judges_temporary_folder(tmp_path, monkeypatch):
    """What a first use writes for a moment (torch's cache folder) goes into the folder the judge names, a lane's run's
    (removed after the run): made in the zygote's own (the system's, as it is forked before the lane reads its
    options), a lane killed meanwhile left it there."""
    seen = []
    monkeypatch.setitem(LAB_MAY_ALLOW, "torch.optim", lambda: seen.append(os.environ["TORCHINDUCTOR_CACHE_DIR"]))
    monkeypatch.setattr(lab_imports, "_paid", set())
    monkeypatch.setattr(lab_imports.gc, "freeze", lambda: None)  # this test process's objects stay the collector's
    lab_imports.pay_for(["torch.optim"], str(tmp_path))
    assert len(seen) == 1 and os.path.dirname(seen[0]) == str(tmp_path), seen
    assert list(tmp_path.iterdir()) == []  # removed after
