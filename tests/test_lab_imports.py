"""What a lab allows its code to import has its first use paid once, in the zygote, not by each worker within a student's call."""

import subprocess
import sys

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


def test_every_name_a_lab_may_allow_has_a_first_use_that_leaves_nothing_to_load():
    """On the pinned torch, in a process of its own (as the zygote is): without the first use an optimiser's first
    step imports torch._dynamo; after it, nothing. A torch that stops loading lazily makes the first line fail:
    then the first use is worth nothing and goes."""
    for name in LAB_MAY_ALLOW:
        run = subprocess.run([sys.executable, "-c", "import sys, torch\n"
                              "from autograder.harness.lab_imports import pay_for\n"
                              f"before = set(sys.modules); pay_for([{name!r}]); print(len(set(sys.modules) - before))"],
                             capture_output=True, text=True, check=True)
        assert int(run.stdout) > 100, name


@pytest.mark.parametrize("confined", [False, True], ids=["reference", "student"])
def test_a_lab_that_allows_the_optimisers_has_their_first_use_paid_before_a_worker_starts(tmp_path, monkeypatch,
                                                                                          confined):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "trains.py").write_text(TRAINS)
    Zygote.stop_shared()  # a zygote of this test's own, not one another test warmed
    try:
        for allowed, paid in ((frozenset(), False), (frozenset({"torch.optim"}), True)):
            monkeypatch.setattr(WorkerProcess, "lab_allows", allowed)
            code = RemoteCode(folder, confined=confined)
            try:
                loaded = code.trains.first_steps_import()
            finally:
                code.close()
            assert (loaded == []) == paid and (paid or "torch._dynamo" in loaded), (allowed, loaded[:5])
    finally:
        Zygote.stop_shared()
