"""User ids for confined workers (the grader runs as root): blocks of them, one block per judge process,
claimed with a lock file so two judges on one machine never share a user id, and swept clean of any
process an earlier run left."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import tempfile

from autograder.harness import cgroup

UID_BASE = 0x20000000
UIDS_PER_BLOCK = 1 << 16
UID_BLOCKS = 4096


# Where only root makes files, when there is one: in the temporary folder, everyone's, a local user made a file at
# every lock's name (4,096 of them), so no block was left and nothing was graded; and graders with other TMPDIRs
# never saw each other's locks.
ROOTS_FOLDER = "/run"


def uid_block_lock(block: int) -> str:
    """The file whose lock (``flock``) a judge holds while it hands out the user ids of ``block``."""
    return os.path.join(lock_folder(), f"autograder-worker-uids-{block}.lock")


def lock_folder() -> str:
    with contextlib.suppress(OSError):
        held = os.stat(ROOTS_FOLDER)
        if held.st_uid == 0 and not held.st_mode & 0o022 and os.access(ROOTS_FOLDER, os.W_OK):
            return ROOTS_FOLDER
    return tempfile.gettempdir()


class UidPool:
    """Fresh user ids for this judge process's workers, never handed out twice in its life."""

    def __init__(self):
        self.lock, self.next, self.end = None, 0, 0

    def take(self) -> int:
        if self.next >= self.end:
            self._claim_block()
        uid, self.next = self.next, self.next + 1
        return uid

    def _claim_block(self) -> None:
        for block in range(UID_BLOCKS):
            lock = open_lock(uid_block_lock(block))
            if lock is None:
                continue
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            if self.lock is not None:
                self.lock.close()
            self.lock = lock  # held (open) as long as this process lives
            self.next = UID_BASE + block * UIDS_PER_BLOCK
            self.end = self.next + UIDS_PER_BLOCK
            sweep(range(self.next, self.end))  # the block may have been another run's: nothing of it may still run
            cgroup.remove_left_over(range(self.next, self.end))
            return
        raise OSError("no free block of worker user ids")


def open_lock(path: str):
    """``path`` opened (made if new) for its lock, or None where it is a link or another user's file: the
    temporary folder is everyone's, and root following a link planted there made a file wherever its planter chose."""
    try:
        lock = os.fdopen(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "rb")
    except OSError:
        return None
    if os.fstat(lock.fileno()).st_uid != os.getuid():
        lock.close()
        return None
    return lock


def sweep(uids: range, rounds: int = 20) -> int:
    """Kill every process running as one of ``uids`` in this PID namespace; return how many were found.
    Back-stop for machines without PID namespaces: a worker's processes die with its namespace, and one
    in another PID namespace (a container's grader with the same block of user ids) is not ours."""
    found, ours = 0, os.stat("/proc/self/ns/pid").st_ino
    for _ in range(rounds):
        pids = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid in uids and os.stat(f"/proc/{entry.name}/ns/pid").st_ino == ours:
                        pids.append(int(entry.name))
                except OSError:
                    pass
        if not pids:
            return found
        found += len(pids)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return found
