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
import functools
import json
import os
import resource
import select
import signal
import socket
import tempfile
import traceback
from dataclasses import dataclass, field

import pyseccomp as seccomp

from autograder.harness import cgroup
from autograder.harness.worker_uids import UidPool
from autograder.harness.file_view import enter_view, outside_folders, prove_files_confined, read_roots, restrict_files
from autograder.harness.syscalls import (CAP_LAST, CLONE_NEWCGROUP, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER,
                                         CLONE_NEWUTS, LINUX_CAPABILITY_VERSION_3, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS,
                                         PR_SET_PDEATHSIG, CapData, CapHeader, check, libc, prctl, unshare)
from autograder.limits import Limits
from autograder.results import FILE_CONFINEMENT



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
    limits: Limits = field(kw_only=True)  # the run's (the judge sends them): its resources and scratch


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
            check(libc.setns(_zygote_pid_namespace(), CLONE_NEWPID), "setns")
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
        # The view's folders get the modes enter_view gives them: under a grader's umask of 027 or 077 they were
        # 0700, and a worker under its own user id could not reach its own copy ("<module>.py is missing").
        os.umask(0o022)
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
        report.attempt("resource limits", lambda: limit_resources(confinement.limits, counted,
                                                                  MEMORY_CEILING in report.enforced,
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


def unconfined_message(finding: str, missing: list[str]) -> str:
    """Why a worker refuses to serve, in the grader's words: what the probe found, what failed, the ways out."""
    failed = [m.splitlines()[0] for m in missing[:-1] if any(word in m for word in ("view", "namespace", "landlock"))]
    return (f"this machine cannot confine student code's files: {finding}, and so could student code "
            f"({'; '.join(failed) or 'every mechanism started'}). {WAYS_OUT}")


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
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            raise OSError(ctypes.get_errno(), f"dropping capability {cap} from the bounding set")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def drop_capabilities() -> None:
    """Keep the user id (no root to leave), lose every capability."""
    if not _capabilities_left():  # none held (no user namespace): no_new_privs keeps an exec from gaining one
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        return
    drop_bounding_set()
    header, data = CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (CapData * 2)()
    check(libc.capset(ctypes.byref(header), data), "capset")
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


class Unconfined(BaseException):
    """A worker refused to serve: this machine cannot confine a submission's files. Not an Exception:
    no check's handler may take it for the student's failure; the judge stops (the plugin)."""


def probe(limits: Limits) -> Report:
    """What a worker's sandbox enforces on this machine, found by confining one, as :func:`spawn` does
    for a submission, around an empty copy (no student code, no torch needed), under ``limits``: the
    entry points ask before they grade, and refuse with :data:`WAYS_OUT` where its report says ``refused``."""
    with tempfile.TemporaryDirectory(prefix="autograder-probe-") as named:
        folder = os.path.realpath(named)  # as a worker's (autograder.harness.processes): no link in its view's paths
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

            pid = spawn(Confinement(submission, scratch, view, uids and uids.take(), None, limits=limits), theirs, output_end,
                        answer)
            theirs.close()
            os.close(output_end)
            ours.settimeout(limits.start_timeout)
            received = b"".join(iter(lambda: ours.recv(1 << 16), b""))
            os.waitpid(pid, 0)
        finally:
            ours.close()
            os.close(output)
            if uids is not None:
                uids.lock.close()
        return Report(**json.loads(received))


def refuse_unconfined(limits: Limits) -> None:
    """Raise :class:`Unconfined` unless a worker confined here proves its files confined (:func:`probe`,
    10 ms, once a process: a cohort's labs are graded on one machine; every worker proves it again itself,
    and refuses to serve where it cannot)."""
    refused = _probed(limits).refused
    if refused:
        raise Unconfined(refused)


def views_of_their_own(limits: Limits) -> bool:
    """Does each worker see its copy through a file system view of its own here (the probe's report)? Then the
    folders above the copies need no way through for anyone (the view's mount is made before it drops root)."""
    return FILE_VIEW in _probed(limits).enforced


@functools.cache
def _probed(limits: Limits) -> Report:
    return probe(limits)
