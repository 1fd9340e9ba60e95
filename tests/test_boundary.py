"""The boundary against a determined student, attack by attack (issue: the seven classes).

Each attack is a submission graded by the real command line (``python -m autograder grade
--jobs 1``) in the same lane as, and *before*, an honest twin (the reference solution):
student folders are graded in name order, so ``a_...`` goes first. The attacks that need no
limit or process of their own share one such cohort, graded once (``attacked``). Each test would fail on
the kit before these defences: the attacker reached the next fork, the batch was killed, a
survivor killed later workers, the judge held gigabytes, secrets and /etc/shadow reached the
feedback, escapes reached the terminal and CSV, and names collided.
"""

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import mistune
import pytest

from autograder.batch.jobs import Graded
from autograder.batch.lane import Lane
from autograder.harness import cgroup, sandbox, worker_uids
from autograder.harness.remote import RemoteCode, StudentError
from autograder.harness.zygote_client import parent_of
from autograder.limits import DEFAULTS
from conftest import KIT, LAB, SOLUTIONS, grades_table, once_per_run

# Slow: grades, or starts processes (left out of make test-fast). One xdist worker runs them all (make test's
# --dist loadgroup): the attacks' cohort is graded in one lane, and a second worker would sit idle on its lock.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("boundary-attacked")]

HONEST = "b_honest"


def cohort_with(tmp_path: Path, attackers: dict[str, dict[str, str]]) -> Path:
    """The ``attackers`` (each the reference with some modules replaced) and an honest twin."""
    cohort = tmp_path / "cohort"
    for student, replaced in {**attackers, HONEST: {}}.items():
        folder = cohort / student / "attention"
        folder.mkdir(parents=True)
        for module in SOLUTIONS.glob("*.py"):
            shutil.copy(module, folder / module.name)
        for name, text in replaced.items():
            (folder / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")
    return cohort


def grade_command(cohort: Path, out: Path, own_pid_namespace: bool = False, *options: str) -> list[str]:
    """`make grade`'s command for ``cohort`` in one lane; with ``own_pid_namespace``, in a PID namespace of
    its own (a kill(-1) as root cannot reach this test run)."""
    command = [sys.executable, "-m", "autograder", "grade", "--submissions", str(cohort), "--out", str(out),
               "--jobs", "1", "--force", *options]
    return ["unshare", "--pid", "--fork", "--mount-proc", *command] if own_pid_namespace else command


def run_grade(cohort: Path, out: Path, env: dict | None = None, own_pid_namespace: bool = False, *options: str):
    """Run :func:`grade_command` in a session of its own (a process-group kill cannot reach this test run)."""
    return subprocess.run(grade_command(cohort, out, own_pid_namespace, *options), cwd=KIT, capture_output=True,
                          text=True, timeout=900, start_new_session=True, env={**os.environ, **(env or {})})


@pytest.fixture(scope="session")
def attacked(tmp_path_factory) -> tuple[Path, dict]:
    """The attacks graded with the default limits, in one cohort, once per run (a lane's start costs
    more than two students): each attacker (the tests below say which) before the honest twin in one
    lane, with a secret in the grader's environment. Returns the reports' folder and the run: its
    exit code and output, and what was measured right after it (the grader's peak memory, surviving
    processes, shared memory segments left)."""
    def build(shared):
        masking = (SOLUTIONS / "masking.py").read_text()
        snoop = SNOOP % {"kit": str(KIT / "source" / "attention" / "tests" / "points.toml")}
        cohort = cohort_with(shared, {
            NAME: {"softmax": INJECTOR},
            "a_hog": {"softmax": HOG, "masking": masking + HEADER},
            "a_lister": {}, "a_reader": {},
            "a_outside": {"scores": OUTSIDE},
            # In masking.py, a part without a ban: code reading os.environ gets no call of a part with one.
            "a_snoop": {"masking": masking + snoop},
            "a_survivor": {"scores": SURVIVOR},
        })
        for student, target in (("a_reader", SOLUTIONS),  # the reference, graded as one's own
                                ("a_lister", KIT / "source" / "attention" / "tests")):  # names of hidden files
            shutil.rmtree(cohort / student / "attention")
            (cohort / student / "attention").symlink_to(target)
        # run_grade, waited for with wait4: the peak memory of this run's processes alone (this worker's
        # RUSAGE_CHILDREN holds every grading it ran before, a memory hog's workers too).
        with open(shared / "stdout", "w+") as stdout, open(shared / "stderr", "w+") as stderr:
            grading = subprocess.Popen(grade_command(cohort, shared / "out"), cwd=KIT, stdout=stdout, stderr=stderr,
                                       start_new_session=True, env={**os.environ, "GRADER_SECRET": "hunter2-7f3a"})
            _, status, usage = os.wait4(grading.pid, 0)
            grading.returncode = os.waitstatus_to_exitcode(status)
        segments = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
        (shared / "run.json").write_text(json.dumps({
            "returncode": grading.returncode, "stdout": (shared / "stdout").read_text(),
            "stderr": (shared / "stderr").read_text(), "peak_mib": usage.ru_maxrss / 1024, "survivors": survivors(),
            "segments": [line for line in segments if line.split()[3] == "7340033"]}))

    shared = once_per_run(tmp_path_factory, "boundary-cohort", build)
    run = json.loads((shared / "run.json").read_text())
    assert run["returncode"] == 0, run["stderr"][-3000:]
    table = grades_table(shared / "out" / LAB.name)
    for student in table.keys() - {HONEST, "a_lister", "a_reader"}:  # whatever one attacker did, the next was unharmed
        assert all(float(table[student][part]) == LAB.part(part).weight for part in ("projections", "dropout")), \
            table[student]
    return shared / "out", run


def feedback(out: Path, student: str) -> str:
    return (out / LAB.name / "students" / student / "feedback.md").read_text()


def assert_honest_twin_unharmed(out: Path) -> None:
    assert grades_table(out / LAB.name)[HONEST]["total"] == "100", grades_table(out / LAB.name)[HONEST]


# 1. The zygote's control socket: a worker holds one descriptor to the judge and nothing else.
FORGER = """
import json, os, socket, time

def forge():
    # Every socket this process holds gets forged fork answers: "the new worker is my socket",
    # "its pid is 0" (killpg(0) kills the lane), "its pid is 1" (kill(-1) as root).
    mine, _ = socket.socketpair()
    for fd in range(3, 1024):
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        for pid in (0, 1):
            try:
                socket.send_fds(sock, [json.dumps({"id": 1, "pid": pid}).encode() + b"\\n"], [mine.fileno()])
            except OSError:
                pass
    if os.fork() == 0:  # and a process that keeps every descriptor, reading
        time.sleep(120)
        os._exit(0)

def kinds():
    found = {}
    for fd in sorted(int(fd) for fd in os.listdir("/proc/self/fd")):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}").split(":")[0]
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return found

KINDS = kinds()

def attention_scores_for_query(inputs, query):
    raise RuntimeError(f"open descriptors: {KINDS}")

def attention_scores_loop(inputs):
    forge()
    return inputs @ inputs.T
"""


def test_a_worker_holds_one_descriptor_and_a_forged_fork_answer_hurts_only_its_forger(tmp_path):
    out = tmp_path / "out"
    run = run_grade(cohort_with(tmp_path, {"a_forger": {"scores": FORGER}}), out, own_pid_namespace=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert_honest_twin_unharmed(out)
    # 0, 1 and 2 (output: a pipe), and one socket: the worker's own, to the judge.
    said = feedback(out, "a_forger")
    descriptors = said[said.index("open descriptors: ") + len("open descriptors: "):].split("}")[0] + "}"
    assert list(eval(descriptors).values()).count("socket") == 1, descriptors  # noqa: S307 - our own dict repr
    assert float(grades_table(out / LAB.name)["a_forger"]["scores"]) < 10


# 2. Processes started by a submission die with its worker: a new session and a double fork too.
SURVIVOR = """
import ctypes, os, signal, time

def attention_scores(inputs):
    libc = ctypes.CDLL(None)
    libc.shmget(0, 7340033, 0o1000 | 0o600)  # a System V shared memory segment, never removed
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(15, b"survivor-7f3a", 0, 0, 0)  # PR_SET_NAME: findable afterwards
            for _ in range(6000):  # kill every process of my user id (later students of a shared one)
                try:
                    os.kill(-1, signal.SIGKILL)
                except OSError:
                    pass
                time.sleep(0.02)
        os._exit(0)
    time.sleep(0.2)
    return inputs @ inputs.transpose(-2, -1)
"""


def survivors(name: str = "survivor-7f3a") -> list[int]:
    """The live processes named ``name`` (``PR_SET_NAME``)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name and \
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_nothing_a_submission_starts_outlives_its_grading(attacked):
    out, run = attacked  # a_survivor
    assert_honest_twin_unharmed(out)
    assert run["survivors"] == [] and run["segments"] == []


# A killed judge takes its workers along: the zygote dies with it, and a worker with it, also under a
# user id of its own (the kernel clears a death signal on a change of credentials: it is set again).
SLEEPER = """
import ctypes, os, signal, time

def attention_scores(inputs):
    signal.setitimer(signal.ITIMER_REAL, 0)  # no time-out of the call's own: only the judge's death can end it
    ctypes.CDLL(None).prctl(15, b"sleeper-4d2e", 0, 0, 0)  # PR_SET_NAME: the worker, findable
    if os.fork() == 0:
        os.setsid()  # and a process in a session of its own
        time.sleep(120)
        os._exit(0)
    time.sleep(120)
    return inputs @ inputs.transpose(-2, -1)
"""


def test_a_killed_judge_takes_its_workers_along(tmp_path):
    submission = cohort_with(tmp_path, {"a_sleeper": {"scores": SLEEPER}}) / "a_sleeper" / "attention"
    judge = subprocess.Popen([sys.executable, "-m", "autograder", "check", "--checks", str(LAB.checks), "--part",
                              "scores", "--submission", str(submission)], cwd=KIT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while len(survivors("sleeper-4d2e")) < 2 and time.monotonic() < deadline:  # the worker and its child run
        time.sleep(0.1)
    assert len(survivors("sleeper-4d2e")) == 2
    os.kill(judge.pid, signal.SIGKILL)  # the judge alone, not its process group
    judge.wait()
    deadline = time.monotonic() + 10
    while survivors("sleeper-4d2e") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert survivors("sleeper-4d2e") == []


# 3. The judge's cost is bounded: frame size, a check's answers, decoding on the budget. (The raw
# header goes through masking.py: code importing os and socket gets no call of a part with a ban.)
HOG = """
import torch

def softmax(x, dim=-1):
    return torch.zeros(15 * 2**20)  # 60 MiB: under a frame's cap, five make a check's

def normalize_sum(x, dim=-1):
    return torch.zeros(20 * 2**20)  # 80 MiB: over a frame's cap
"""
HEADER = """

import os, socket, struct

def causal_mask(num_tokens):
    for fd in range(3, 64):  # a raw frame header announcing 4 GiB, straight onto the judge's socket
        try:
            socket.socket(fileno=os.dup(fd)).sendall(struct.pack("<II", 2**32 - 1, 0))
        except OSError:
            pass
    return torch.ones(num_tokens, num_tokens).triu(1).bool()
"""


def test_the_judge_holds_a_bounded_amount_of_what_a_submission_sends(attacked):
    out, run = attacked  # a_hog
    assert_honest_twin_unharmed(out)
    assert run["peak_mib"] < 3 * 1024, f"a process of the grader reached {run['peak_mib']:.0f} MiB"
    said = feedback(out, "a_hog")
    assert "more than the 64 MiB one call may return" in said
    assert "is over the limit" in said  # the raw header: refused before anything else is read
    assert float(grades_table(out / LAB.name)["a_hog"]["softmax"]) < 1



# ... and so is the machine's: a worker's processes together stay under one memory ceiling.
CROWD = """
import os, time

def attention_scores(inputs):
    if tuple(inputs.shape) != (6, 3):  # crowds on the document's inputs only: gigabytes once, not on every call
        return inputs @ inputs.transpose(-2, -1)
    children = []
    for _ in range(12):  # 12 x 512 MiB: each under the per-process limit, together 6 GiB
        readable, writable = os.pipe()
        pid = os.fork()
        if pid == 0:
            block = bytearray(512 * 2**20)
            for page in range(0, len(block), 4096):  # every page resident
                block[page] = 1
            os.write(writable, b"+")
            time.sleep(600)
        os.close(writable)
        children.append((pid, readable))
    for _, readable in children:
        os.read(readable, 1)  # held, or stopped by the kernel before
    alive = [pid for pid, _ in children if os.waitpid(pid, os.WNOHANG) == (0, 0)]
    raise RuntimeError(f"held {len(alive) * 512} MiB at once")
"""


def test_a_workers_processes_together_stay_under_one_memory_ceiling(tmp_path):
    out = tmp_path / "out"
    # Gigabytes of pages and OOM kills take longer than the usual 10 s on a busy machine.
    run = run_grade(cohort_with(tmp_path, {"a_crowd": {"scores": CROWD}}), out, None, False, "--call-timeout", "60")
    assert run.returncode == 0, run.stderr[-3000:]
    assert_honest_twin_unharmed(out)
    said = feedback(out, "a_crowd")
    assert "held " in said, said
    assert int(said[said.index("held ") + len("held "):].split()[0]) <= 4096, said  # 6144 without the ceiling
    assert [folder.name for folder in cgroup.hierarchy().own.glob(f"{cgroup.PREFIX}*") if unclaimed(folder)] == []


def test_judges_in_pid_namespaces_of_their_own_never_share_a_worker_cgroup(tmp_path):
    """Two graders at once, each in its own PID namespace (so both may have pid 3): every worker
    of each still gets a memory cgroup of its own."""
    command = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "autograder", "grade",
               "--jobs", "1", "--force"]
    runs = [subprocess.Popen([*command, "--submissions", str(cohort_with(tmp_path / str(n), {"a_same": {}})),
                              "--out", str(tmp_path / str(n) / "out")], cwd=KIT, stderr=subprocess.PIPE, text=True,
                             start_new_session=True) for n in range(2)]
    for run in runs:
        _, said = run.communicate(timeout=600)
        assert run.returncode == 0 and "memory ceiling" not in said, said[-3000:]


def unclaimed(worker_cgroup: Path) -> bool:
    """Is the user id block of this worker's cgroup held by no judge (so nobody will remove it)?"""
    uid = cgroup.uid_of(worker_cgroup.name)
    if uid is None:  # not a worker's: nobody's to remove
        return False
    block = (uid - worker_uids.UID_BASE) // worker_uids.UIDS_PER_BLOCK
    with open(worker_uids.uid_block_lock(block), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


# Kernel memory no cgroup accounts for: socket buffers of netlink or TCP sockets (in a user and
# network namespace of the submission's own), a listening Unix socket's queue of connections never
# accepted. A red team held 1-1.4 GiB beyond the ceiling with each.
OUTSIDE = """
import ctypes, os, socket

def attention_scores(inputs):
    tried = {}
    for name, family, kind, protocol in (("netlink", socket.AF_NETLINK, socket.SOCK_RAW, 2),
                                         ("tcp", socket.AF_INET, socket.SOCK_STREAM, 0),
                                         ("udp", socket.AF_INET6, socket.SOCK_DGRAM, 0)):
        try:
            socket.socket(family, kind, protocol).close()
            tried[name] = "opened"
        except OSError as error:
            tried[name] = error.errno
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # its queue of unaccepted connections
    listener.bind(b"\\0queue")
    try:
        listener.listen(4096)
        tried["listen"] = "listening"
    except OSError as error:
        tried["listen"] = error.errno
    libc = ctypes.CDLL(None, use_errno=True)
    unshared = libc.unshare(0x10000000 | 0x40000000)  # a user and a network namespace
    tried["unshare"] = "unshared" if unshared == 0 else ctypes.get_errno()
    pid = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)  # clone(CLONE_NEWUSER | SIGCHLD)
    if pid == 0:
        os._exit(0)
    tried["clone"] = ctypes.get_errno() if pid < 0 else "cloned"
    raise RuntimeError(f"tried {tried}")
"""


def test_no_socket_buffer_or_namespace_outside_the_memory_ceiling(attacked):
    out, _ = attacked  # a_outside
    assert_honest_twin_unharmed(out)
    said = feedback(out, "a_outside")
    tried = eval(said[said.index("tried ") + len("tried "):].split("}")[0] + "}")  # noqa: S307 - our own dict repr
    assert tried == {"netlink": 1, "tcp": 1, "udp": 1, "listen": 1, "unshare": 1, "clone": 1}, tried  # EPERM, each

# 4. and 5. Workers see a clean environment, their own processes, no capability, no host files.
SNOOP = """
import os

def read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(300)
    except OSError as exc:
        return type(exc).__name__

def causal_mask(num_tokens):
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    raise RuntimeError(repr({
        "environ": dict(os.environ), "proc_environ": read("/proc/self/environ"),
        "init_environ": read("/proc/1/environ"), "parent_environ": read(f"/proc/{os.getppid()}/environ"),
        "pids": sorted(p for p in os.listdir("/proc") if p.isdigit()),
        "caps": [status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd")],
        "shadow": read("/etc/shadow"), "passwd": read("/etc/passwd"), "root": read("/root/.bashrc"),
        "kit": read(%(kit)r), "sys": read("/sys/class/net/lo/address"),
    }))
"""


def test_workers_see_no_secret_no_other_process_no_capability_and_no_host_file(attacked):
    out, _ = attacked  # a_snoop, graded with GRADER_SECRET in the grader's environment
    assert_honest_twin_unharmed(out)
    said = feedback(out, "a_snoop")
    seen = eval(said[said.index("RuntimeError: ") + len("RuntimeError: "):].split("\n")[0])  # noqa: S307 - its repr
    assert "hunter2" not in said and "PYTEST_CURRENT_TEST" not in said and "GRADER_SECRET" not in said
    assert set(seen["environ"]) <= {"PATH", "LANG", "LC_ALL", "OMP_NUM_THREADS", "PYTHONDONTWRITEBYTECODE",
                                    "PYTHONHASHSEED", "HOME", "TMPDIR"}
    assert seen["pids"] == ["1"]
    assert seen["caps"] == ["0000000000000000"] * 3
    for secret in ("shadow", "passwd", "root", "kit", "sys"):
        assert seen[secret] in ("FileNotFoundError", "PermissionError"), (secret, seen[secret])


# The zygote, whose memory every worker starts from, is forked from its judge before the judge reads
# anything of its own (autograder.harness.clean_start): a lane's environment is in the lane's memory,
# and nowhere in the zygote's. (A worker cannot read its own memory to look: /proc/self/mem is closed
# to it, as it is not dumpable under a user id of its own.)
def holds(pid: int, needle: bytes) -> bool:
    """Does process ``pid`` hold ``needle`` anywhere it writes (heap, stacks, data)?"""
    chunk = 1 << 24
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            for at in range(start, end, chunk) if perms.startswith("rw") else ():
                try:
                    mem.seek(at)
                    data = mem.read(min(chunk + len(needle), end - at))
                except (OSError, ValueError, OverflowError):
                    break
                if needle in data:
                    return True
    return False


def children_of(pid: int) -> list[int]:
    """``pid``'s children now (a process that ends while /proc is read, another test's, is none of them)."""
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()
            and parent_of(int(entry.name)) == pid]


def test_the_zygote_holds_nothing_of_its_judges_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_SECRET", "hunter2-7f3a")
    submission = tmp_path / "attention"
    shutil.copytree(SOLUTIONS, submission, ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    lane = Lane(LAB, DEFAULTS)
    try:
        assert lane.grade(submission, tmp_path / "results.json") == Graded(str(tmp_path / "results.json"))
        zygotes = children_of(lane.proc.pid)  # the lane now waits for its next job
        assert len(zygotes) == 1
        assert holds(lane.proc.pid, b"hunter2-7f3a")  # the judge has its environment back, and the scan finds it
        assert not holds(zygotes[0], b"hunter2-7f3a")
    finally:
        lane.close()


def test_the_lanes_of_a_process_are_forked_by_one_judge_server(tmp_path):
    """Every lane a process starts is forked from one clean judge server (torch imported once a process, not
    once a lane): two lanes, one parent, not this process. A killed lane is seen to end, its status the server's;
    a lane started after its server ended is forked by a new one, and grades."""
    submission = tmp_path / "attention"
    shutil.copytree(SOLUTIONS, submission, ignore=shutil.ignore_patterns("tests", "*.ipynb"))
    lanes = [Lane(LAB, DEFAULTS) for _ in range(2)]
    try:
        for lane in lanes:
            lane.start()
        [server] = {parent_of(lane.proc.pid) for lane in lanes}
        assert server not in (None, os.getpid()) and parent_of(server) == os.getpid()
        lanes[0].proc.kill()
        assert lanes[0].proc.wait(10) == -signal.SIGKILL and lanes[1].proc.poll() is None
        os.kill(server, signal.SIGKILL)
        os.waitpid(server, 0)  # ended before the next request: a new server has it
        assert lanes[0].grade(submission, tmp_path / "results.json") == Graded(str(tmp_path / "results.json"))
        assert parent_of(lanes[0].proc.pid) not in (server, os.getpid())
    finally:
        for lane in lanes:
            lane.close()


PROBE = """
import json, os, sys
from autograder.harness.zygote_client import Zygote

def address_space(pid):
    with open(f"/proc/{pid}/limits") as limits:
        return next(line.split()[3:5] for line in limits if line.startswith("Max address space"))

print(json.dumps({"argv": sys.argv[1:], "path": sys.path, "environ": dict(os.environ), "cwd": os.getcwd(),
                  "limits": [address_space(pid) for pid in (os.getpid(), *([Zygote.shared().proc.pid] if Zygote.held() else []))]}))
"""


def test_a_lane_started_clean_by_its_batch_is_the_judge_it_would_have_been(tmp_path, monkeypatch):
    """A batch has each lane forked clean by its judge server (clean_start.start_clean), not as a judge that
    restarts itself: the entry must see the arguments, environment, folder and import path (PYTHONPATH
    included) of a plain start, and its address-space limit must hold for it and for its zygote, which is
    forked before the entry runs."""
    from autograder.harness.clean_start import start_clean

    (tmp_path / "probe_start.py").write_text(PROBE)
    # An empty entry (the working folder) and one the standard path holds too (it stays where it came first).
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), "", os.path.dirname(os.__file__)]))
    plain = json.loads(subprocess.run([sys.executable, "-m", "probe_start", "--an", "argument"], cwd=KIT,
                                      env=dict(os.environ), capture_output=True, text=True, check=True).stdout)
    with monkeypatch.context() as machine:
        machine.delattr(os, "memfd_create")  # a machine without memory files: the entry starts as it is
        fallback = start_clean("probe_start", ["--an", "argument"], 5 << 30, stdout=subprocess.PIPE, text=True)
        try:
            started_plainly = json.loads(fallback.communicate(timeout=120)[0])
            # Its environment is the process's own, as any child's (a library's setenv included, unlike os.environ)
            assert {**started_plainly, "environ": None} == {**plain, "environ": None}
        finally:
            fallback.kill()
    started = start_clean("probe_start", ["--an", "argument"], 5 << 30, stdout=subprocess.PIPE, text=True)
    try:
        clean = json.loads(started.communicate(timeout=120)[0])
    finally:
        started.kill()
    assert started.wait() == 0
    assert {key: clean[key] for key in ("argv", "path", "environ", "cwd")} == \
        {key: plain[key] for key in ("argv", "path", "environ", "cwd")}
    assert str(tmp_path) in clean["path"] and clean["cwd"] == str(KIT)
    assert clean["limits"] == [[str(5 << 30)] * 2] * 2  # the lane's, and its zygote's


# 6. Student text is neutralised where it lands: terminal, CSV, Markdown, HTML, Gradescope.
ESCAPES = "\x1b[2K\r\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\u202e"
INJECTOR = """
def softmax(x, dim=-1):
    raise RuntimeError(%r)
""" % (ESCAPES + "<script>alert(1)</script> [click](javascript:alert(1)) <img src=x onerror=alert(1)> ```")
NAME = "=HYPERLINK(\"x\")\x1b[31m"  # sorts before b_honest


def test_student_text_is_neutralised_in_every_output(attacked):
    out, run = attacked  # NAME
    assert_honest_twin_unharmed(out)
    texts = {"stderr": run["stderr"], "stdout": run["stdout"], "grades.csv": (out / LAB.name / "grades.csv").read_text(),
             "report.html": (out / LAB.name / "report.html").read_text()}
    for name in ("feedback.md", "feedback.html", "results.json"):
        texts[name] = (out / LAB.name / "students" / NAME / name).read_text()
    for where, text in texts.items():
        assert not any(c in text for c in "\x1b\x07\u202e"), where
    assert [name for name in grades_table(out / LAB.name) if "HYPERLINK" in name] == ["'=HYPERLINK(\"x\")\\x1b[31m"]
    results = json.loads(texts["results.json"])
    rendered = [mistune.create_markdown(escape=False)(md) for md in (texts["feedback.md"], results["output"])]
    for html in [*rendered, texts["feedback.html"], texts["report.html"]]:
        assert "<script>alert" not in html and "<img src=x" not in html and 'href="javascript:' not in html
    assert all("<script" not in html for html in [*rendered, texts["feedback.html"]])
    assert texts["report.html"].count("<script") == 1  # the report's own: it sorts the table
    assert "&lt;script&gt;" in rendered[0]  # shown, as text
    assert all(test.get("output_format") == "text" for test in results["tests"] if "output" in test)


def test_a_linked_submission_folder_is_not_followed(attacked):
    out, _ = attacked  # a_reader, a_lister
    assert_honest_twin_unharmed(out)
    for student in ("a_reader", "a_lister"):
        assert grades_table(out / LAB.name)[student]["total"] == "0" and "is a link" in grades_table(out / LAB.name)[student]["status"]
    assert "points.toml" not in (out / LAB.name / "grades.csv").read_text()


# 7. Staging and output paths cannot collide, whatever the student names.
def test_student_names_never_collide(tmp_path):
    cohort = tmp_path / "cohort"
    names = ["bob", "bob.raw.json", "x" * 250, "grades.csv", "report.html", "students", "raw.json"]
    for name in names:
        shutil.copytree(SOLUTIONS, cohort / name / "attention", ignore=shutil.ignore_patterns("tests", "*.ipynb", "Makefile"))
    out = tmp_path / "out"
    run = run_grade(cohort, out)
    assert run.returncode == 0, run.stderr[-3000:]
    table = grades_table(out / LAB.name)
    assert sorted(table) == sorted(names)
    assert all(row["total"] == "100" and row["status"] == "graded" for row in table.values()), table


ENDS = """
import os


def end():
    os._exit(3)


def answer():
    return 42
"""


def test_an_event_without_a_kill_is_no_memory_kill():
    """cgroup v1 signals a cgroup's OOM eventfd when the cgroup is removed too (an empty one another grader removed at
    its claim): a worker that crashed then read as killed at the memory ceiling. The kills are counted, not the events."""
    uid = worker_uids.UidPool().take()
    made = cgroup.WorkerCgroup(uid, 1 << 30)
    try:
        made.call_starts()
        if made.oom_events is not None:  # v1; v2 counts already
            os.eventfd_write(made.oom_events, 1)  # as the kernel's removal notice
        assert not made.oom_killed()
    finally:
        made.remove()


def test_what_any_worker_could_not_enforce_is_said_though_a_restarted_one_could(tmp_path, monkeypatch):
    """A worker whose memory cgroup could not be made (an empty one removed at another grader's claim before it
    joined), then, after a crash, one that has its ceiling: the run says the ceiling was missing (only the last
    worker's report was kept, which had it: the first student's code ran without it, unsaid)."""
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "ends.py").write_text(ENDS)

    def removed(uid, total_bytes):
        raise FileNotFoundError(2, "No such file or directory", "cgroup.procs")

    code = RemoteCode(submission, confined=True)
    try:
        with monkeypatch.context() as patched:
            patched.setattr(cgroup, "WorkerCgroup", removed)
            assert code.ends.answer() == 42  # the first worker, without a ceiling
        with pytest.raises(StudentError):
            code.ends.end()
        assert code.ends.answer() == 42  # a second worker, with one (as root)
        assert sandbox.MEMORY_CEILING not in code.sandbox["enforced"], code.sandbox
        assert any(m.startswith(sandbox.MEMORY_CEILING) for m in code.sandbox["missing"]), code.sandbox
    finally:
        code.close()


def test_a_cgroup_left_at_a_workers_name_is_made_again_and_one_in_use_is_never_emptied_nor_shared():
    """A judge killed while its worker ran leaves that worker's cgroup (a CI job's SIGKILL, the interrupt of a run): the
    next worker with that user id (its block claimed again) ran without a memory ceiling (FileExistsError). Removed once
    its processes have ended, when its block is claimed again (or by the next worker of its name). A judge that cannot
    see this one's locks may hold the same user ids: its worker's cgroup is never this one's (by user id alone, both
    workers went into one cgroup: one ceiling for two students), and one holding a process is never emptied. Each
    judge process has a mark of its own, a judge forked by a batch's server too."""
    uids = worker_uids.UidPool()
    uid = uids.take()
    own = cgroup.hierarchy().own
    left = own / cgroup.name_of(uid)
    left.mkdir()
    cgroup.WorkerCgroup(uid, 1 << 30).remove()
    assert not left.exists()
    others = own / cgroup.name_of(uid, mark="0therg0d"), own / cgroup.name_of(uid + 1, mark="0therg0d")
    for folder in others:
        folder.mkdir()
    other = subprocess.Popen(["sleep", "600"])
    try:
        (others[0] / "cgroup.procs").write_text(str(other.pid))
        made = cgroup.WorkerCgroup(uid, 1 << 30)
        assert made.folder != others[0] and made.folder.is_dir()
        made.remove()
        cgroup.remove_left_over(range(uid, uid + 2))  # the block claimed again: the empty one goes, the other stays
        assert other.poll() is None and (others[0] / "cgroup.procs").read_text().split() == [str(other.pid)]
        assert not others[1].exists()
        read, write = os.pipe()
        if (child := os.fork()) == 0:  # a judge forked by a judge server, which has made cgroups
            os.write(write, cgroup.name_of(uid).encode())
            os._exit(0)
        os.waitpid(child, 0)
        assert os.read(read, 200).decode() not in (cgroup.name_of(uid), ""), cgroup.name_of(uid)
    finally:
        other.kill()
        other.wait()
        for folder in others:
            cgroup.remove(folder)
