"""Confine a worker process before it imports a submission.

Called in the worker (a fresh child) once torch is imported and before any student code
runs. Each mechanism is tried on its own; what could not be enforced on this machine is
returned so the grader can warn about it instead of refusing to grade.

- network: a new, empty network namespace (``unshare(CLONE_NEWNET)``; unprivileged users get
  it inside a new user namespace);
- files: Landlock; reading is allowed only in the Python installation, system libraries,
  ``/proc``, ``/sys``, ``/dev`` and the submission's private copy; writing only in the
  worker's scratch folder. The kit's ``source/``, ``solutions/``, checks and other students'
  folders are out of reach;
- resources: rlimits on address space, CPU time, file size (output included), open files
  and, under a user id of its own (root only), processes;
- identity: when the grader runs as root, the worker drops to an unprivileged user id of
  its own (one per lane), so the process limit applies and counts its processes only; it keeps
  only the capability to read files regardless of their mode (Landlock decides what it reads).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
from dataclasses import dataclass, field

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_KEEPCAPS = 8
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_DAC_READ_SEARCH = 2
WORKER_UID_BASE = 61000


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 * 1024**3
    cpu_seconds: int = 300
    file_bytes: int = 16 * 1024**2
    open_files: int = 256
    processes: int = 64


@dataclass
class Report:
    enforced: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def attempt(self, name: str, step) -> None:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - a mechanism missing here is reported, not fatal
            self.missing.append(f"{name} ({type(exc).__name__}: {exc})")
        else:
            self.enforced.append(name)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> None:
    if _libc().unshare(flags) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def isolate_network() -> None:
    try:
        _unshare(CLONE_NEWNET)
    except PermissionError:
        _unshare(CLONE_NEWUSER | CLONE_NEWNET)


def read_roots() -> list[str]:
    """What a worker may read besides its submission: Python, its packages and the system's libraries."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
             "/usr", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev"}
    roots |= {os.path.dirname(path) for path in sys.path if path.endswith("site-packages")}
    package = os.path.dirname(os.path.realpath(__file__))
    return sorted(r for r in roots | {package} if os.path.exists(r))


def restrict_files(readable: list[str], writable: list[str]) -> None:
    from landlock import Ruleset
    from landlock.plumbing import FSAccess

    ruleset = Ruleset()
    read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    for path in readable:
        ruleset.allow(path, rules=read if os.path.isdir(path) else FSAccess.READ_FILE | FSAccess.EXECUTE)
    for path in writable:
        ruleset.allow(path, rules=FSAccess.all() if os.path.isdir(path) else FSAccess.all_file())
    ruleset.apply()


def limit_resources(limits: Limits, drop_to_uid: int | None) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writing past the limit fails instead of killing
    settings = [(resource.RLIMIT_AS, limits.memory_bytes), (resource.RLIMIT_CPU, limits.cpu_seconds),
                (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_NOFILE, limits.open_files),
                (resource.RLIMIT_CORE, 0)]
    if drop_to_uid is not None:  # the count is per user id: meaningful only for a user id of its own
        settings.append((resource.RLIMIT_NPROC, limits.processes))
    for which, value in settings:
        resource.setrlimit(which, (value, value))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges(uid: int) -> None:
    """Become ``uid``, keeping one capability: reading files whatever their mode.

    The Python installation may sit in a folder only root can enter (``/root/.pyenv``), and a
    worker imports modules lazily; Landlock, not file modes, decides what the worker reads.
    """
    libc = _libc()
    libc.prctl(PR_SET_KEEPCAPS, 1)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    data[0].effective = data[0].permitted = 1 << CAP_DAC_READ_SEARCH
    if libc.capset(ctypes.byref(header), data) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"capset: {os.strerror(errno)}")


def confine(submission: str, scratch: str, log: str, slot: int, limits: Limits = Limits()) -> Report:
    """Apply every mechanism this machine offers to the current (worker) process."""
    report = Report()
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # never outlive the process that started us
    os.setpgid(0, 0)  # one process group: the grader kills it whole
    uid = WORKER_UID_BASE + slot if os.getuid() == 0 else None
    if uid is not None:
        for path in (scratch, log):
            os.chown(path, uid, uid)
    report.attempt("network namespace", isolate_network)
    report.attempt("landlock file access", lambda: restrict_files([*read_roots(), submission], [scratch, log]))
    report.attempt("resource limits", lambda: limit_resources(limits, uid))
    if uid is not None:
        report.attempt("separate user id and process limit", lambda: drop_privileges(uid))
    else:
        report.missing.append("separate user id and process limit (the grader must run as root to give workers "
                              "a user id of their own)")
    return report
