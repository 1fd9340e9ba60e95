"""What a lab allows its code to import has its first use paid once, in the zygote, not by each worker within a student's call."""

import pytest

from autograder.harness.lab_imports import LAB_MAY_ALLOW
from autograder.harness.processes import WorkerProcess
from autograder.harness.remote import RemoteCode
from autograder.harness.zygote_client import Zygote

pytestmark = pytest.mark.slow  # starts zygotes

TRAINS = """
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
"""


def first_steps_import(folder, confined: bool) -> list[str]:
    code = RemoteCode(folder, confined=confined)
    try:
        return code.trains.first_steps_import()
    finally:
        code.close()


def test_what_a_lab_may_allow_has_its_first_use_paid_before_a_worker_starts(tmp_path, monkeypatch):
    """On the pinned torch, an optimiser's first steps in a worker import torch._dynamo (over 800 modules), unless the
    zygote paid them for a lab that allows the optimisers or their schedules: then they import nothing, in the
    reference's worker and a student's confined one. A torch that loads nothing there fails the first assertion:
    the first use is then worth nothing and goes."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "trains.py").write_text(TRAINS)
    Zygote.stop_shared()  # a zygote of this test's own, not one another test's lab warmed
    try:
        loaded = first_steps_import(folder, confined=False)
        assert "torch._dynamo" in loaded and len(loaded) > 100, loaded[:5]
        for name in LAB_MAY_ALLOW:
            monkeypatch.setattr(WorkerProcess, "lab_allows", frozenset({name}))
            for confined in (False, True):
                assert first_steps_import(folder, confined) == [], (name, confined)
            Zygote.stop_shared()  # the next name's first use, paid by a zygote that has paid none
    finally:
        Zygote.stop_shared()
