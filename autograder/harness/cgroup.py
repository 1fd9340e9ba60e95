"""A memory ceiling for all the processes of one worker together: a cgroup per worker.

``RLIMIT_AS`` bounds each process, and a worker may start several: without a ceiling on their
sum, one submission could hold many times the per-process limit. The judge makes a memory
cgroup for each confined worker (:class:`WorkerCgroup`), the worker moves itself into it before
any student code runs (it still sees ``/sys`` then, and is still root), and the judge removes
the cgroup once the worker's PID namespace is gone. When the processes together go over the
ceiling, the kernel's OOM killer stops one of them, inside that worker only; the judge learns
it from the cgroup's ``oom_kill`` count (on v1 read only when its eventfd signals) to say so.

Both kinds of hierarchy are supported: cgroup v1 (a ``memory`` hierarchy of its own) and
cgroup v2 (the memory controller enabled for the children of the grader's own cgroup, which
v2 allows only at the root or in a cgroup holding no process: run the grader in a delegated
cgroup, e.g. a container's). Where neither is available, the worker runs without the ceiling
and the grader's warning says why.
"""

from __future__ import annotations

import functools
import os
import secrets
import select
import time
from dataclasses import dataclass
from pathlib import Path

@dataclass(frozen=True)
class Hierarchy:
    """The grader's own cgroup in the hierarchy that has the memory controller."""

    own: Path
    version: int

    def limit(self, folder: Path, total_bytes: int) -> None:
        if self.version == 1:
            (folder / "memory.limit_in_bytes").write_text(str(total_bytes))
            swap = folder / "memory.memsw.limit_in_bytes"  # memory and swap together; absent without swap accounting
        else:
            (folder / "memory.max").write_text(str(total_bytes))
            swap, total_bytes = folder / "memory.swap.max", 0
        if swap.exists():
            swap.write_text(str(total_bytes))

    def oom_events(self, folder: Path) -> int | None:
        """An eventfd the kernel signals at each OOM of ``folder`` (v1); None where there is none
        (v2: its ``memory.events`` is then read at each call, 50 us instead of 1 us)."""
        if self.version != 1:
            return None
        events = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        control = os.open(folder / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
        try:
            (folder / "cgroup.event_control").write_text(f"{events} {control}")
        except OSError:
            os.close(events)
            raise
        finally:
            os.close(control)  # the registration holds what it needs
        return events

    def oom_kills(self, folder: Path) -> int:
        events = folder / ("memory.oom_control" if self.version == 1 else "memory.events")
        for line in events.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0


def mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """(mount root, mount point, file system type, super options) of each mount in ``mountinfo``."""
    found = []
    for line in mountinfo.splitlines():
        fields, _, tail = line.partition(" - ")
        fields, tail = fields.split(), tail.split()
        if len(fields) >= 5 and len(tail) >= 3:
            found.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return found


def find_hierarchy(mountinfo: str, own_cgroups: str) -> Hierarchy:
    """Where this process's memory cgroup is, from ``/proc/self/mountinfo`` and ``/proc/self/cgroup``;
    OSError saying why when there is none this grader can use."""
    own = {}  # controller (or "" for v2) -> this process's cgroup path
    for line in own_cgroups.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    found = mounts(mountinfo)
    for root, point, kind, options in found:
        if kind == "cgroup" and "memory" in options and "memory" in own:
            return Hierarchy(Path(point) / os.path.relpath(own["memory"], root), 1)
    for root, point, kind, _ in found:
        if kind == "cgroup2" and "" in own:
            folder = Path(point) / os.path.relpath(own[""], root)
            if "memory" not in (folder / "cgroup.controllers").read_text().split():
                continue  # e.g. the unified hierarchy beside v1 controllers
            subtree = folder / "cgroup.subtree_control"
            if "memory" not in subtree.read_text().split():
                try:
                    subtree.write_text("+memory")
                except OSError as exc:
                    raise OSError(f"cannot enable the memory controller in {folder} ({exc.strerror}); "
                                  "cgroup v2 needs the grader in a cgroup of its own") from None
            return Hierarchy(folder, 2)
    raise OSError("no memory cgroup controller is mounted")


@functools.cache
def hierarchy() -> Hierarchy:
    """This process's memory cgroup."""
    return find_hierarchy(Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text())


PREFIX = "autograder-worker-"
# Each judge process's mark on the cgroups it makes, drawn at its first (a judge its batch's server forked draws its
# own). Two judges that cannot see each other's locks (worker_uids: other temporary folders, a private /run; two
# batches of one process where /run is unusable) may hold the same user ids; by user id alone, one made its worker's
# cgroup again at the name the other's worker was joining, and the two workers shared one ceiling.
_marks: dict[int, str] = {}


def judge_mark() -> str:
    return _marks.setdefault(os.getpid(), secrets.token_hex(4))


def name_of(uid: int, mark: str | None = None) -> str:
    """A worker's cgroup is named by its user id (unique among the judges that see each other's locks: blocks of user
    ids are claimed with one) and by its judge's mark (``None``: this process's; unique among those that do not)."""
    return f"{PREFIX}{uid}-{mark or judge_mark()}"


def uid_of(name: str) -> int | None:
    """The user id of the worker whose cgroup is named ``name`` (the kit's earlier names had no mark); None for a name
    of another kind."""
    uid, dash, mark = name.removeprefix(PREFIX).partition("-")
    plain = uid.isascii() and uid.isdigit() and mark.isascii() and mark.isalnum() == bool(dash)
    return int(uid) if name.startswith(PREFIX) and plain else None


def remove_left_over(uids: range) -> None:
    """Remove the empty cgroups of ``uids``, a block of user ids just claimed, whichever judge made them: whoever did
    is gone (a grader that cannot see this one's locks may not be: a cgroup holding its worker is left alone)."""
    try:
        own = hierarchy().own
    except OSError:
        return
    for folder in own.glob(f"{PREFIX}*"):
        if uid_of(folder.name) in uids:
            remove(folder, attempts=1)


def remove(folder: Path, attempts: int = 100) -> None:
    """Remove an empty cgroup; the kernel may take a moment to let go of the processes that ended."""
    for _ in range(attempts):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


class WorkerCgroup:
    """The memory cgroup of the worker with user id ``uid``: all its processes together hold at
    most ``total_bytes``."""

    def __init__(self, uid: int, total_bytes: int):
        self.hierarchy = hierarchy()
        self.folder = self.hierarchy.own / name_of(uid)
        try:
            self.folder.mkdir()
        except FileExistsError:  # left by this judge (a worker of this id whose cgroup would not go): removed once
            # its processes have ended, never emptied by force.
            remove(self.folder, attempts=20)
            self.folder.mkdir()
        try:
            self.hierarchy.limit(self.folder, total_bytes)
            self.oom_events = self.hierarchy.oom_events(self.folder)
        except OSError:
            self.folder.rmdir()
            raise
        self.oom_kills_before = 0

    @property
    def procs(self) -> str:
        """The file the worker writes ``0`` into to move itself in."""
        return str(self.folder / "cgroup.procs")

    def call_starts(self) -> None:
        """Forget the OOM kills so far: :meth:`oom_killed` is about the call that follows."""
        if self.oom_events is None:
            self.oom_kills_before = self._oom_kills()
            return
        try:
            os.eventfd_read(self.oom_events)
        except BlockingIOError:
            return
        self.oom_kills_before = self._oom_kills()  # an event came: the count read only then (50 us against 1 us)

    def oom_killed(self) -> bool:
        """Did the kernel stop one of the worker's processes at the ceiling during the current call? On v1 an event
        says to look, the count says whether: the kernel signals the eventfd when the cgroup is removed too (an empty
        one another grader removed at its claim made a crash read as a memory kill)."""
        if self.oom_events is not None and not select.select([self.oom_events], [], [], 0)[0]:
            return False
        return self._oom_kills() > self.oom_kills_before

    def _oom_kills(self) -> int:
        try:
            return self.hierarchy.oom_kills(self.folder)
        except OSError:
            return 0

    def remove(self) -> None:
        if self.oom_events is not None:
            os.close(self.oom_events)
            self.oom_events = None
        remove(self.folder)


def join(procs: str) -> None:
    """Move the calling process (and so every process it starts) into the cgroup of ``procs``."""
    with open(procs, "w") as handle:
        handle.write("0")
