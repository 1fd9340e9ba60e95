"""What a lab may allow its code to import beyond the internals scan's libraries (lab.toml's
``allowed_imports``), each with its first use, which the zygote of a lab that allows it pays once
(:func:`pay_for`) instead of every worker it forks, within a student's call.

Imports nothing of the kit's: the scan's rules (:mod:`autograder.judge.reach_rules`) read
:data:`LAB_MAY_ALLOW`, and are checked under other Pythons with a stand-in torch.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable

import torch


def training_step() -> None:
    """An optimiser's and a scheduler's first steps: the first ``zero_grad``/``step`` imports torch._dynamo
    (about 820 modules: 0.85 s on one core, seconds a worker on a busy machine)."""
    weight = torch.zeros(2, requires_grad=True)
    optimiser = torch.optim.SGD([weight], lr=0.1)
    schedule = torch.optim.lr_scheduler.StepLR(optimiser, step_size=1)
    optimiser.zero_grad()
    (weight - 1.0).square().sum().backward()
    optimiser.step()
    schedule.step()


# What a lab may allow, and nothing else: a lab with a training loop needs the optimisers.
LAB_MAY_ALLOW: dict[str, Callable[[], None]] = {"torch.optim": training_step, "torch.optim.lr_scheduler": training_step}

_paid: set[Callable[[], None]] = set()


def pay_for(allowed: Iterable[str]) -> None:
    """Pay, once in this process, the first uses of what a lab allows (names of :data:`LAB_MAY_ALLOW`; the
    judge refused any other before it asked), then freeze what they loaded, as the zygote's preparation does."""
    due = {LAB_MAY_ALLOW[name] for name in allowed if name in LAB_MAY_ALLOW} - _paid
    if not due:
        return
    with torch.random.fork_rng(devices=[]):  # a worker's random state is the same in a zygote that paid them
        for first_use in due:
            first_use()
    _paid.update(due)
    gc.freeze()
