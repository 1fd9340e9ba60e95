"""What a lab may allow its code to import beyond the internals scan's libraries (lab.toml's
``allowed_imports``), each with its first use, which the zygote of a lab that allows it pays once
(:func:`pay_for`) instead of every worker it forks, within a student's call.

Imports nothing of the kit's: the scan's rules (:mod:`autograder.judge.reach_rules`) read
:data:`LAB_MAY_ALLOW`, and are checked under other Pythons with a stand-in torch.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator

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
_failed: dict[Callable[[], None], str] = {}  # a first use that raised: what it said (a retry fails otherwise)


class FirstUseFailed(RuntimeError):
    """A first use of what the lab allows raised here: no worker of the lab can start (said on every fork)."""


def pay_for(allowed: Iterable[str], temporary: str) -> None:
    """Pay, once in this process, the first uses of what a lab allows (names of :data:`LAB_MAY_ALLOW`; the
    judge refused any other before it asked), then freeze what they loaded, as the zygote's preparation does.
    What they write for a moment goes into ``temporary`` (the judge's temporary folder: a lane's is its run's,
    removed after the run, so a lane killed meanwhile leaves nothing; the zygote's own is the system's).
    :class:`FirstUseFailed` if one raised, now or before (torch keeps half an import: it cannot be tried again)."""
    due: dict[Callable[[], None], list[str]] = {}  # a first use, and the names it is paid for
    for name in allowed:
        if name in LAB_MAY_ALLOW and LAB_MAY_ALLOW[name] not in _paid:
            due.setdefault(LAB_MAY_ALLOW[name], []).append(name)
    if failed := [_failed[first_use] for first_use in due if first_use in _failed]:
        raise FirstUseFailed(failed[0])
    if not due:
        return
    # A worker's random state is the same in a zygote that paid them.
    with torch.random.fork_rng(devices=[]), torch_cache_of_its_own(temporary):
        for first_use, names in due.items():
            try:
                first_use()
            except Exception as exc:
                _failed[first_use] = (f"the first use of what the lab allows ({', '.join(names)}) failed in the grader "
                                      f"({type(exc).__name__}: {exc})")
                raise FirstUseFailed(_failed[first_use]) from exc
            _paid.add(first_use)
    gc.freeze()


@contextlib.contextmanager
def torch_cache_of_its_own(temporary: str) -> Iterator[None]:
    """Importing torch._dynamo makes inductor's cache folder, by default a fixed name in the temporary folder
    (``/tmp/torchinductor_root``) that any local user can make first: a file there fails the import, a link
    hands the grader another's folder. A fresh private folder in ``temporary`` instead, removed after, the environment (which
    the import sets) as it was: the first uses write nothing there."""
    folder = tempfile.mkdtemp(prefix="autograder-torch-cache-", dir=temporary)
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before
        shutil.rmtree(folder, ignore_errors=True)
