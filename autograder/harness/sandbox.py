"""Confine a worker before it imports a submission.

:func:`spawn` (called in the zygote) forks each worker into a new PID namespace, as its PID 1.
Before it imports anything of the submission, the worker:

- closes every descriptor but its socket to the judge (its output goes to a pipe the judge
  drains, so printing never blocks or fails);
- moves itself into the memory cgroup the judge made for it (:mod:`autograder.harness.cgroup`);
- makes new mount and network namespaces and builds its own view of the file system: a tmpfs
  holding read-only bind mounts of Python, its packages, the system's libraries and the
  submission's private copy, one writable scratch folder, four device nodes and a ``/proc`` of
  its own namespace; then pivots into it;
- clears its environment, limits its resources, applies Landlock (the same paths again) and,
  when the grader runs as root, becomes a user id of its own (the judge never gives one to two
  workers), with no capability and ``no_new_privs``;
- proves its file confinement (:func:`prove_files_confined`): it tries to list and write what lies
  outside its view (the grader's home, the kit's folder, the folders holding its own copy and
  scratch, so another submission's copy too). Unless the judge allows it (``--no-confinement``),
  a worker whose files are not confined serves nothing: it says why and ends before student code.

Without root, a user namespace gives the worker the rest: it is made together with the PID
namespace, which only a child enters, so the worker forks once more; that child (PID 1 there) is
the worker, and the process the zygote forked stays as its keeper (:func:`keep`).

When the worker exits, or the judge kills it, the kernel kills every process of its namespace:
nothing a submission starts outlives it (a new session, a double fork, anything). The worker
dies with the zygote, and the zygote with its judge (``PR_SET_PDEATHSIG``).

Each other mechanism is tried on its own; what could not be enforced on this machine is reported
(the grader warns). System calls Python 3.11 lacks (unshare,
mount, pivot_root, capset) go through ctypes here, in one place.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import fcntl
import functools
import json
import os
import pwd
import resource
import select
import signal
import socket
import sys
import tempfile
import traceback
from dataclasses import dataclass, field

import pyseccomp as seccomp
from landlock import Ruleset  # imported here, once in the zygote, not in every worker (8 ms each)
from landlock.plumbing import FSAccess

from autograder.harness import cgroup
from autograder.limits import DEFAULTS, Limits
from autograder.results import FILE_CONFINEMENT

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = 155  # x86_64 and the generic table agree on none; x86_64 is what the kit runs on
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_LAST = 63

# Worker user ids: blocks of UIDS_PER_BLOCK, one block per judge process, claimed with a lock
# file so two judges on one machine (two lanes, or two grading runs) never share a user id.
UID_BASE = 0x20000000
UIDS_PER_BLOCK = 1 << 16
UID_BLOCKS = 4096

PID_NAMESPACE = "a PID namespace of its own"
FILE_VIEW = "a file system view of its own (Python, libraries, its submission, scratch, own /proc)"
MEMORY_CEILING = "a memory ceiling for all its processes together (cgroup)"
SYSTEM_CALL_FILTER = "a system call filter (Unix sockets only, no listening, no new namespaces, no keyrings, BPF or io_uring)"
# System calls a worker never needs and that reach kernel state a memory cgroup does not account
# for (a listening socket's queue holds uncharged buffers per pending connection) or that widen
# the kernel's attack surface: refused with EPERM (clone3 with ENOSYS, so that
# the C library falls back to clone, whose flags the filter can read).
REFUSED_SYSTEM_CALLS = ("listen", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "keyctl", "add_key",
                        "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "ptrace",
                        "process_vm_readv", "process_vm_writev", "kexec_load", "init_module", "finit_module")
# The device nodes a worker may open; everything else under /dev stays out of its view.
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
# The environment a worker starts from (HOME and TMPDIR are its scratch folder).
ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "1",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


# How to get file confinement where a worker has none: what every entry point refuses with.
WAYS_OUT = ("Ways out: run as root (sudo); or let unprivileged users make user namespaces (Ubuntu 24.04 "
            "restricts them: sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0; Debian 11 and older: "
            "sudo sysctl kernel.unprivileged_userns_clone=1); or grade in the kit's container (make "
            "grade-container). For code you trust only, --no-confinement (make ... NO_CONFINEMENT=1) grades "
            "anyway and marks every report.")


@dataclass
class Report:
    enforced: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    refused: str | None = None  # why this worker serves nothing (its files are not confined)

    def attempt(self, name: str, step) -> bool:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - a mechanism missing here is reported, not fatal
            self.missing.append(f"{name} ({type(exc).__name__}: {exc})")
            return False
        self.enforced.append(name)
        return True


@dataclass(frozen=True)
class Confinement:
    """What the judge asks of one worker's sandbox (the zygote's request)."""

    submission: str  # the private copy, readable
    scratch: str  # writable, also HOME and TMPDIR
    view: str  # an empty folder the worker's file system view is mounted on
    uid: int | None  # a user id of its own (root only); None keeps the grader's
    cgroup: str | None  # the cgroup.procs of its memory cgroup (made by the judge); None: there is none
    files_required: bool = True  # serve nothing unless the file confinement is proven (False: --no-confinement)


# -- system calls -------------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(encode(source), target.encode(), encode(kind), flags, encode(data)), f"mount {target}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


# -- the three processes ------------------------------------------------------------------------
def spawn(confinement: Confinement, worker_socket, output, serve) -> int:
    """Fork a sandboxed worker that runs ``serve(report)`` on ``worker_socket``, printing into
    ``output`` (a pipe the judge drains); return its pid (a child of the caller, the zygote)."""
    report = Report()
    # Without root the worker makes its PID namespace with its user namespace (new_namespaces).
    separate = os.getuid() == 0 and report.attempt(PID_NAMESPACE, pid_namespace_for_next_child)
    zygote = os.pidfd_open(os.getpid())
    try:
        worker = os.fork()
        if worker == 0:
            run_worker(confinement, worker_socket, output, serve, report, zygote)
    finally:
        os.close(zygote)
        if separate:  # later forks of the zygote (and so the next unshare) start from its own again
            _check(_libc.setns(_zygote_pid_namespace(), CLONE_NEWPID), "setns")
    return worker


def pid_namespace_for_next_child() -> None:
    """The next fork starts a new PID namespace, as its PID 1 (the zygote stays in its own)."""
    _zygote_pid_namespace()
    unshare(CLONE_NEWPID)


_pid_namespace: list[int] = []


def _zygote_pid_namespace() -> int:
    if not _pid_namespace:
        _pid_namespace.append(os.open("/proc/self/ns/pid", os.O_RDONLY))
    return _pid_namespace[0]


def new_namespaces(report: Report) -> None:
    """Mount, network and System V IPC namespaces for the calling process (IPC objects, such as
    shared memory segments, die with the namespace instead of outliving the worker); without root,
    a user namespace and a PID namespace too, of which the worker becomes PID 1 (:func:`keep`)."""
    if os.getuid() == 0:
        unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
        return
    # Without root, a user namespace grants the rest; inside it we are root over nothing of the host's.
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID)
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
    keeper = os.pidfd_open(os.getpid())
    if os.fork() == 0:  # PID 1 of the new namespace: the worker goes on here
        die_with(keeper)
        os.close(keeper)
        os.setsid()  # nor its keeper's
        report.enforced.append(PID_NAMESPACE)
        return
    keep()


def keep() -> None:
    """Stay as the keeper of the worker this process just forked, and end as it ended: the judge holds
    this process (its pid, pidfd and wait status) as it would hold a worker forked as root, and killing
    it kills the worker (``PR_SET_PDEATHSIG``), and with it every process of its namespace."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1, 2):  # the judge sees the worker's output end when the worker does
        os.dup2(devnull, stream)
    close_all_but()
    while True:
        try:
            _, status = os.wait()
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        died_of = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if died_of not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(died_of, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [died_of])
        os.kill(os.getpid(), died_of)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def run_worker(confinement: Confinement, worker_socket, output: int, serve, report: Report, zygote: int) -> None:
    try:
        die_with(zygote)
        os.setsid()  # a group of its own: kill(0) (which crosses PID namespaces) reaches no process of the judge's
        os.dup2(output, 1)
        os.dup2(output, 2)
        close_all_but(worker_socket.fileno(), zygote)  # then only the socket: one descriptor to the judge
        if confinement.cgroup is not None:  # while /sys is still in view
            report.attempt(MEMORY_CEILING, lambda: cgroup.join(confinement.cgroup))
        if confinement.uid is not None:
            os.chown(confinement.scratch, confinement.uid, confinement.uid)
        outside = outside_folders(confinement)  # before the view: the grader's home is read from /etc/passwd
        if report.attempt("mount, network and IPC namespaces", lambda: new_namespaces(report)):
            report.attempt(FILE_VIEW, lambda: enter_view(confinement))
        else:
            report.missing.append("a file system view of its own (needs a mount namespace)")
            if os.getuid() != 0:
                report.missing.append(f"{PID_NAMESPACE} (needs a user namespace)")
        os.chdir(confinement.scratch)
        os.environ.clear()
        os.environ.update(ENVIRONMENT, HOME=confinement.scratch, TMPDIR=confinement.scratch)
        tempfile.tempdir = None
        counted = confinement.uid is not None or PID_NAMESPACE in report.enforced
        report.attempt("resource limits", lambda: limit_resources(DEFAULTS, counted, MEMORY_CEILING in report.enforced,
                                                                  confinement.uid is not None))
        report.attempt("landlock file access",
                       lambda: restrict_files([*read_roots(), confinement.submission], [confinement.scratch]))
        if confinement.uid is not None:
            report.attempt("a user id of its own, no capabilities", lambda: drop_privileges(confinement.uid))
            die_with(zygote)  # a new user id clears the death signal: set again, or a killed judge's workers live on
        else:
            report.attempt("no capabilities", drop_capabilities)
            report.missing.append("a user id of its own (the grader must run as root)")
        os.close(zygote)
        report.attempt(SYSTEM_CALL_FILTER, filter_system_calls)
        try:
            prove_files_confined(confinement, outside, FILE_VIEW in report.enforced)
            report.enforced.append(FILE_CONFINEMENT)
        except OSError as exc:
            report.missing.append(f"{FILE_CONFINEMENT} ({exc})")
            if confinement.files_required:
                report.refused = unconfined_message(str(exc), report.missing)
        serve(report)
    except BaseException:  # noqa: BLE001 - before serving: its output holds it, the judge sees the worker gone
        traceback.print_exc()
    finally:
        os._exit(0)


def die_with(zygote: int) -> None:
    """Be killed when the zygote ends (``zygote``: its pidfd), and with it the judge; end now if it has."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if select.select([zygote], [], [], 0)[0]:  # it died before we were tied to it
        os._exit(1)


def close_all_but(*keep: int) -> None:
    """Close every descriptor above stderr except those in ``keep``."""
    start = 3
    for fd in sorted(keep):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, resource.getrlimit(resource.RLIMIT_NOFILE)[1])


# -- the file system view -----------------------------------------------------------------------
PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the kit's autograder/: the worker's own code


@functools.cache  # the same for every worker: computed once, in the zygote
def read_roots() -> list[str]:
    """What a worker may read besides its submission: Python, its packages, the system's libraries
    and the worker's own code (the kit's ``autograder/``, no checks)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             "/usr/lib", "/usr/lib64", "/lib", "/lib64", PACKAGE}
    roots |= {path for path in sys.path if path.endswith("site-packages")}
    return sorted(os.path.realpath(r) for r in roots if os.path.exists(r))


def outermost(paths: list[str]) -> list[str]:
    """``paths`` without those inside another one of them."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def enter_view(confinement: Confinement) -> None:
    """Make the root a tmpfs holding only what the worker needs, at the same paths as outside."""
    view = confinement.view
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the host
    mount("tmpfs", view, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")

    def bind(source: str, writable: bool = False, device: bool = False) -> None:
        target = view + source
        if os.path.isdir(source):
            os.makedirs(target, mode=0o755, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            open(target, "a").close()
        mount(source, target, None, MS_BIND | MS_REC)
        flags = MS_BIND | MS_REMOUNT | MS_NOSUID | (0 if device else MS_NODEV) | (0 if writable else MS_RDONLY)
        mount(None, target, None, flags)

    for root in outermost([*read_roots(), confinement.submission]):
        bind(root)
    for link in ("/lib", "/lib64", "/bin"):  # the loader's paths are links to /usr on merged-/usr systems
        if os.path.islink(link) and not os.path.lexists(view + link):
            os.symlink(os.readlink(link), view + link)
    # Scratch is a small tmpfs of its own: it vanishes with the namespace, and its size and file
    # count are capped (the file size limit caps one file, not how many).
    os.makedirs(view + confinement.scratch, mode=0o755, exist_ok=True)
    mount("tmpfs", view + confinement.scratch, "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={DEFAULTS.scratch_bytes},nr_inodes={DEFAULTS.scratch_files},mode=0700" +
          (f",uid={confinement.uid},gid={confinement.uid}" if confinement.uid is not None else ""))
    for device in DEVICES:
        if os.path.exists(device):
            bind(device, device=True)
    os.makedirs(view + "/proc", mode=0o555)
    mount("proc", view + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # this namespace's processes only
    old = view + "/.old-root"
    os.mkdir(old)
    _check(_libc.syscall(SYS_PIVOT_ROOT, view.encode(), old.encode()), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.old-root", MNT_DETACH), "umount old root")
    os.rmdir("/.old-root")
    mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def restrict_files(readable: list[str], writable: list[str]) -> None:
    # landlock 1.0.0.dev5 takes a call as failed whenever ctypes' errno is not 0, not when it returns
    # -1: a mount that failed just before (without root) would make every Landlock call "fail".
    ctypes.set_errno(0)
    ruleset = Ruleset()
    read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    for path in [*readable, "/proc"]:
        if os.path.exists(path):
            ruleset.allow(path, rules=read if os.path.isdir(path) else FSAccess.READ_FILE | FSAccess.EXECUTE)
    for device in DEVICES:
        if os.path.exists(device):
            ruleset.allow(device, rules=FSAccess.READ_FILE | FSAccess.WRITE_FILE)
    for path in writable:
        ruleset.allow(path, rules=FSAccess.all() if os.path.isdir(path) else FSAccess.all_file())
    ruleset.apply()


def outside_folders(confinement: Confinement) -> list[str]:
    """Folders a worker must not see into: the grader's home, the kit's folder (checks, reference
    solution), and those holding its own copy and scratch (another submission's copy, the judge's files)."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    return [home, os.path.dirname(PACKAGE), os.path.dirname(confinement.submission),
            os.path.dirname(confinement.scratch)]


def unconfined_message(finding: str, missing: list[str]) -> str:
    """Why a worker refuses to serve, in the grader's words: what the probe found, what failed, the ways out."""
    failed = [m.splitlines()[0] for m in missing[:-1] if any(word in m for word in ("view", "namespace", "landlock"))]
    return (f"this machine cannot confine student code's files: {finding}, and so could student code "
            f"({'; '.join(failed) or 'every mechanism started'}). {WAYS_OUT}")


def prove_files_confined(confinement: Confinement, outside: list[str], own_view: bool) -> None:
    """Raise unless, now, every folder of ``outside`` lists nothing but a way to what the worker may
    read (or cannot be listed), and no file can be made in them, in its copy or at the root, nor its
    copy's mode changed. Without root, only a view of its own counts: under the grader's own user id,
    Landlock alone leaves the grader's files' modes, its Unix sockets and its processes in reach."""
    if confinement.uid is None and not own_view:
        raise PermissionError("without root, only a file system view of its own (a user namespace) confines a "
                              "worker: Landlock alone leaves chmod, the grader's sockets and its processes in reach")
    allowed = [*read_roots(), confinement.submission, confinement.scratch]
    for folder in outside:
        try:
            seen = set(os.listdir(folder))
        except OSError:
            seen = set()
        ways_in = {os.path.relpath(path, folder).split(os.sep)[0] for path in allowed
                   if path.startswith(folder.rstrip("/") + "/")}
        if seen - ways_in:
            raise PermissionError(f"a worker could list {folder}")
    for folder in {*outside, confinement.submission, "/"}:
        try:
            made = os.open(os.path.join(folder, ".confinement-probe"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            continue
        os.close(made)
        os.unlink(os.path.join(folder, ".confinement-probe"))
        raise PermissionError(f"a worker could write in {folder}")
    try:
        os.chmod(confinement.submission, 0o755)
    except OSError:
        return
    raise PermissionError(f"a worker could change the mode of {confinement.submission}")


# -- resources and identity ---------------------------------------------------------------------
def limit_resources(limits: Limits, counted: bool, ceiling: bool, own_uid: bool) -> None:
    """``counted``: its processes alone count against RLIMIT_NPROC (a user id, or a user namespace, of its
    own; the count is per user id in a user namespace since Linux 5.14); ``ceiling``: a memory cgroup
    bounds all of them together."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writing past the limit fails instead of killing
    processes, memory = limits.processes, limits.worker_memory_bytes
    if counted and not ceiling:
        processes = limits.processes_without_ceiling
        memory = min(memory, limits.worker_total_memory_bytes // processes)
    settings = [(resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, limits.cpu_seconds),
                (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_NOFILE, limits.open_files),
                (resource.RLIMIT_CORE, 0)]
    if counted:  # without root, its keeper (sandbox.keep) counts in the same user namespace
        settings.append((resource.RLIMIT_NPROC, processes + (not own_uid)))
    for which, value in settings:
        resource.setrlimit(which, (value, value))


def drop_bounding_set() -> None:
    """No capability can come back, not even through an exec (the view is mounted nosuid too)."""
    for cap in range(CAP_LAST + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            raise OSError(ctypes.get_errno(), f"dropping capability {cap} from the bounding set")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def drop_capabilities() -> None:
    """Keep the user id (no root to leave), lose every capability."""
    if not _capabilities_left():  # none held (no user namespace): no_new_privs keeps an exec from gaining one
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        return
    drop_bounding_set()
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    if _capabilities_left():
        raise OSError("capabilities left after capset")


def drop_privileges(uid: int) -> None:
    """Become ``uid`` (and group ``uid``), with no capability and no supplementary group."""
    drop_bounding_set()
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)  # from root to another user id: every capability is cleared
    if os.getuid() != uid or _capabilities_left():
        raise OSError("the worker kept privileges after setuid")


def filter_system_calls() -> None:
    """Last step before student code: sockets other than Unix ones (a netlink or TCP socket's
    buffers are not charged to the worker's memory cgroup), new namespaces (a user namespace
    would bring its own network, and the kernel's namespace code is a large attack surface) and
    a few interfaces no lab needs are refused. Inherited by every process the worker starts."""
    refused = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for call in ("socket", "socketpair"):
        rules.add_rule(refused, call, seccomp.Arg(0, seccomp.NE, socket.AF_UNIX))
    for flag in (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET):
        rules.add_rule(refused, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for call in REFUSED_SYSTEM_CALLS:
        rules.add_rule(refused, call)
    rules.load()


def _capabilities_left() -> bool:
    with open("/proc/self/status") as status:
        fields = dict(line.split(":\t", 1) for line in status if ":\t" in line)
    return any(int(fields[name], 16) for name in ("CapEff", "CapPrm", "CapAmb"))


def uid_block_lock(block: int) -> str:
    """The file whose lock (``flock``) a judge holds while it hands out the user ids of ``block``."""
    return os.path.join(tempfile.gettempdir(), f"autograder-worker-uids-{block}.lock")


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
            lock = open(uid_block_lock(block), "a")
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


class Unconfined(BaseException):
    """A worker refused to serve: this machine cannot confine a submission's files. Not an Exception:
    no check's handler may take it for the student's failure; the judge stops (the plugin)."""


def probe() -> Report:
    """What a worker's sandbox enforces on this machine, found by confining one, as :func:`spawn` does
    for a submission, around an empty copy (no student code, no torch needed): the entry points ask
    before they grade, and refuse with :data:`WAYS_OUT` where its report says ``refused``."""
    with tempfile.TemporaryDirectory(prefix="autograder-probe-") as folder:
        os.chmod(folder, 0o711)  # a worker under its own user id reaches its scratch without a view
        submission, scratch, view = (os.path.join(folder, name) for name in ("submission", "scratch", "view"))
        for path in (submission, scratch, view):
            os.mkdir(path, 0o755)
        uids = UidPool() if os.getuid() == 0 else None
        ours, theirs = socket.socketpair()
        output, output_end = os.pipe()
        try:
            def answer(report: Report) -> None:
                theirs.sendall(json.dumps(dataclasses.asdict(report)).encode())

            pid = spawn(Confinement(submission, scratch, view, uids and uids.take(), None), theirs, output_end, answer)
            theirs.close()
            os.close(output_end)
            ours.settimeout(DEFAULTS.start_timeout)
            received = b"".join(iter(lambda: ours.recv(1 << 16), b""))
            os.waitpid(pid, 0)
        finally:
            ours.close()
            os.close(output)
            if uids is not None:
                uids.lock.close()
        return Report(**json.loads(received))


def refuse_unconfined() -> None:
    """Raise :class:`Unconfined` unless a worker confined here proves its files confined (:func:`probe`,
    10 ms, once a process: a cohort's labs are graded on one machine; every worker proves it again itself,
    and refuses to serve where it cannot)."""
    refused = _refusal()
    if refused:
        raise Unconfined(refused)


@functools.cache
def _refusal() -> str | None:
    return probe().refused
