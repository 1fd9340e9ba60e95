"""Hostile submissions: student code cannot change its score, read what it must not, reach the
network, hang, exhaust the machine or crash the grader."""

import dataclasses
import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from autograder.harness import worker_uids
from autograder.harness.cgroup import Hierarchy, find_hierarchy
from autograder.harness.remote import RemoteCode, StudentError
from autograder.results import FILE_CONFINEMENT
from autograder.limits import DEFAULTS, Limits
from conftest import CHECKS, KIT, SOLUTIONS, grade, submission_with

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast


def hostile(tmp_path, body: str, name: str = "scores", limits: Limits = DEFAULTS) -> RemoteCode:
    """A submission whose ``<name>.py`` is ``body``; its functions run confined, 3 s per call."""
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / f"{name}.py").write_text(textwrap.dedent(body))
    return RemoteCode(folder, timeout=3.0, confined=True, budget=60.0, limits=limits)


@pytest.fixture
def student_factory(tmp_path):
    made = []

    def make(body, name="scores", limits=DEFAULTS):
        made.append(hostile(tmp_path, body, name, limits))
        return made[-1]

    yield make
    for student in made:
        student.close()


def expect_failure(call, kind: str, *fragments: str) -> StudentError:
    with pytest.raises(StudentError) as caught:
        call()
    assert caught.value.kind == kind, caught.value
    for fragment in fragments:
        assert fragment in str(caught.value), caught.value
    return caught.value


def expect_unreadable(call) -> None:
    """Out of the worker's view (not found), or refused by Landlock: never the contents."""
    error = expect_failure(call, "exception")
    assert error.type_name in ("FileNotFoundError", "PermissionError"), error


def test_every_mechanism_is_enforced_here(student_factory):
    student = student_factory("def attention_scores(x):\n    return x\n")
    student.scores.attention_scores(torch.ones(2))
    assert student.sandbox["missing"] == [], student.sandbox
    assert len(student.sandbox["enforced"]) == 9, student.sandbox  # the last: its files proven confined
    assert student.sandbox["enforced"][-1] == FILE_CONFINEMENT


PATCHING = """
import builtins, json, sys
import torch

# Everything a cheat might try from inside the worker: none of it reaches the judge.
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
torch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)
print(json.dumps({{"total": 100, "max_total": 100}}))
print("============ 116 passed in 0.01s ============")
for target in ("{results}", "{kit}/grades/results.json", "{kit}/source/attention/tests/points.toml"):
    try:
        with open(target, "w") as handle:
            handle.write('{{"total": 100}}')
    except OSError:
        pass
try:
    import pytest
    pytest.main = lambda *a, **k: 0
except ImportError:
    pass


# Answers of the right shape and the wrong value.
def attention_scores_for_query(inputs, query):
    return torch.zeros(inputs.shape[0])


def attention_scores_loop(inputs):
    return torch.zeros(inputs.shape[0], inputs.shape[0])


def attention_scores(inputs):
    return torch.zeros(*inputs.shape[:-1], inputs.shape[-2])
"""


def test_patching_torch_pytest_or_results_does_not_change_the_score(tmp_path):
    results = tmp_path / "results.json"
    cheat = PATCHING.format(results=results, kit=KIT)
    honest = "import torch\n" + cheat[cheat.index("# Answers of the right shape"):]
    scored = {}
    for name, module in (("cheat", cheat), ("honest", honest)):
        outcome = grade(submission_with(tmp_path / name, {"scores": module}), tmp_path / f"{name}.json", part="scores")
        scored[name] = {c["name"]: c["passed"] for c in outcome["checks"]}
    assert scored["cheat"] == scored["honest"]
    assert not all(scored["cheat"].values())
    assert not results.exists()
    assert (CHECKS / "points.toml").read_text().startswith("# Points per check")


@pytest.mark.parametrize("secret", [
    CHECKS / "test_scores.py",
    CHECKS / "points.toml",
    SOLUTIONS / "softmax.py",
    KIT / "source" / "attention" / "softmax.py",
])
def test_hidden_checks_solutions_and_sources_cannot_be_read(student_factory, secret):
    student = student_factory(f"""
        def attention_scores(x):
            return open({str(secret)!r}).read()
    """)
    expect_unreadable(lambda: student.scores.attention_scores(torch.ones(2)))


def test_another_students_files_cannot_be_read(tmp_path, student_factory):
    other = tmp_path / "other" / "attention"
    other.mkdir(parents=True)
    (other / "scores.py").write_text("SECRET = 1\n")
    student = student_factory(f"""
        def attention_scores(x):
            return open({str(other / 'scores.py')!r}).read()
    """)
    expect_unreadable(lambda: student.scores.attention_scores(torch.ones(2)))


def test_the_network_is_unreachable(student_factory):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    student = student_factory(f"""
        import socket
        def attention_scores(x):
            socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"answers please")
    """)
    expect_failure(lambda: student.scores.attention_scores(torch.ones(2)), "exception")
    server.close()
    assert accepted == []


@pytest.mark.parametrize("where", ["import", "call"])
def test_an_infinite_loop_times_out_and_the_next_call_goes_on(student_factory, where):
    loop = "while True:\n    pass\n"
    body = loop + "def attention_scores(x):\n    return x\n" if where == "import" else \
        "def attention_scores(x):\n" + textwrap.indent(loop, "    ") + "\ndef attention_scores_loop(x):\n    return x\n"
    student = student_factory(body)
    said = "a loop at import time in scores.py (line 1)" if where == "import" else "it was still running scores.py line 2"
    error = expect_failure(lambda: student.scores.attention_scores(torch.ones(2)), "timeout", said)
    assert error.failure.file == "scores.py" and error.failure.phase == ("import" if where == "import" else "")
    if where == "call":
        assert torch.equal(student.scores.attention_scores_loop(torch.ones(2)), torch.ones(2))
    # Asked again with the same arguments, it fails at once with the same message: one loop costs its time once.
    started = time.monotonic()
    assert str(expect_failure(lambda: student.scores.attention_scores(torch.ones(2)), "timeout")) == str(error)
    assert time.monotonic() - started < 1
    again = expect_failure(lambda: student.scores.attention_scores(torch.ones(3)), "timeout")
    if where == "import":  # a module whose import hung is not loaded again, whatever the call
        assert str(again) == str(error)
    else:  # other arguments are asked again, within the shorter limit of a function that timed out before
        assert "did not finish in 2 s (an earlier call of it timed out" in str(again), again


def test_a_submission_cannot_outspend_its_budget(tmp_path):
    folder = tmp_path / "slow"
    folder.mkdir()
    (folder / "scores.py").write_text("import time\ndef attention_scores(x):\n    time.sleep(1.5)\n    return x\n")
    student = RemoteCode(folder, timeout=3.0, confined=True, budget=2.0)
    try:
        student.scores.attention_scores(torch.ones(1))
        expect_failure(lambda: student.scores.attention_scores(torch.ones(1)), "timeout")
        expect_failure(lambda: student.scores.attention_scores(torch.ones(1)), "timeout", "budget")
    finally:
        student.close()


@pytest.mark.parametrize("body, kind, fields", [
    ("import os\ndef attention_scores(x):\n    os._exit(3)\n", "crashed", {"exit_code": 3}),
    ("import ctypes\ndef attention_scores(x):\n    ctypes.string_at(0)\n", "crashed", {"signal": "SIGSEGV"}),
    # PID 1 of its namespace ignores the SIGABRT it sends itself: glibc's abort() then faults.
    ("import os\ndef attention_scores(x):\n    os.abort()\n", "crashed", {"signal": "SIGSEGV"}),
    ("import sys\ndef attention_scores(x):\n    sys.exit(0)\n", "exception", {"type": "SystemExit"}),
    ("def attention_scores(x):\n    raise KeyboardInterrupt\n", "exception", {"type": "KeyboardInterrupt"}),
])
def test_a_dying_worker_fails_only_its_call(student_factory, body, kind, fields):
    student = student_factory(body + "def attention_scores_loop(x):\n    return x + 1\n")
    failure = expect_failure(lambda: student.scores.attention_scores(torch.ones(2)), kind).failure
    assert {key: getattr(failure, key) for key in fields} == fields, failure
    assert torch.equal(student.scores.attention_scores_loop(torch.ones(2)), torch.full((2,), 2.0))


def test_a_crash_is_blamed_on_memory_only_when_the_ceiling_was_hit_during_that_call(tmp_path):
    student = hostile(tmp_path, """
        import os, time
        def attention_scores_for_query(inputs, query):
            children = []
            for _ in range(2):  # 2 x 2.5 GiB: over the worker's 4 GiB ceiling, the kernel stops one
                child = os.fork()
                if child == 0:
                    block = bytearray(5 * 2**29)
                    block[::4096] = bytes(len(range(0, len(block), 4096)))
                    time.sleep(1)  # both hold their memory at once
                    os._exit(0)
                children.append(child)
            return [os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) for child in children]

        def attention_scores(inputs):
            os._exit(3)
    """)
    student.timeout = 30.0  # reclaiming gigabytes takes seconds on a busy machine
    try:
        assert -9 in student.scores.attention_scores_for_query(torch.ones(2), torch.ones(2))
        failure = expect_failure(lambda: student.scores.attention_scores(torch.ones(2)), "crashed").failure
        assert failure.exit_code == 3, failure
    finally:
        student.close()


def test_memory_is_capped(student_factory):
    student = student_factory("""
        def attention_scores(x):
            hog = bytearray(16 * 1024**3)
            return len(hog)
    """)
    expect_failure(lambda: student.scores.attention_scores(torch.ones(2)), "memory", "MemoryError")


def test_processes_are_capped_and_killed_with_the_worker(student_factory):
    student = student_factory("""
        import os, time
        def attention_scores(x):
            children = 0
            try:
                for _ in range(10_000):
                    if os.fork() == 0:
                        time.sleep(300)
                        os._exit(0)
                    children += 1
            except OSError as exc:
                return children
            return children
    """)
    children = student.scores.attention_scores(torch.ones(2))
    assert children < 100
    student.close()


def test_a_check_holds_at_most_its_share_of_answers(student_factory):
    student = student_factory("import torch\ndef attention_scores(x):\n    return torch.zeros(2**18)\n",  # 1 MiB
                              limits=dataclasses.replace(DEFAULTS, check_bytes=3 * 2**20))
    student.begin_check()
    for _ in range(2):
        student.scores.attention_scores(torch.ones(2))
    expect_failure(lambda: [student.scores.attention_scores(torch.ones(2)) for _ in range(2)], "too_large",
                   "more than 3 MiB")
    student.end_check()
    student.begin_check()  # the next check starts from nothing
    assert student.scores.attention_scores(torch.ones(2)).numel() == 2**18


def test_printing_costs_nothing(student_factory):
    student = student_factory("""
        import sys
        def attention_scores(x):
            for _ in range(64):
                print("y" * 2**20)
                sys.stderr.write("z" * 2**20)
            return x
    """)
    assert torch.equal(student.scores.attention_scores(torch.ones(2)), torch.ones(2))


def test_disk_is_capped(student_factory):
    student = student_factory("""
        def attention_scores(x):
            with open("big.bin", "wb") as handle:
                handle.write(b"0" * (64 * 1024**2))
    """)
    expect_failure(lambda: student.scores.attention_scores(torch.ones(2)), "exception", "File too large")


def test_scratch_is_a_small_tmpfs_that_leaves_nothing_behind(student_factory):
    student = student_factory("""
        import os
        def attention_scores(x):
            for _ in range(1200):  # deeper than the judge could recurse to remove it
                os.mkdir("d")
                os.chdir("d")
            made = 0
            try:
                while True:
                    with open(f"f{made}", "wb") as handle:
                        handle.write(b"0" * 2**20)
                    made += 1
            except OSError:
                return made
    """)
    assert student.scores.attention_scores(torch.ones(2)) < 40  # MiB: the scratch tmpfs is full
    folder = student._shared.channel.worker.folder
    student.close()
    assert not folder.exists()


def test_a_mechanism_this_machine_lacks_is_reported_not_fatal():
    from autograder.harness.sandbox import Report

    def no_landlock():
        raise OSError(38, "Function not implemented")

    report = Report()
    report.attempt("landlock file access", no_landlock)
    report.attempt("resource limits", lambda: None)
    assert report.enforced == ["resource limits"]
    assert report.missing == ["landlock file access (OSError: [Errno 38] Function not implemented)"]


@pytest.mark.skipif(os.getuid() != 0, reason="processes under another user id need root")
def test_the_sweep_kills_only_what_runs_in_its_own_pid_namespace():
    """A worker user id's leftover in this PID namespace is killed; one in another (a container's grader
    claiming the same block of ids on this kernel) is not ours to kill."""
    uid = worker_uids.UID_BASE + worker_uids.UIDS_PER_BLOCK * worker_uids.UID_BLOCKS + 7  # no judge hands this one out
    become = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    here = subprocess.Popen([*become, "sleep", "60"])
    elsewhere = subprocess.Popen(["unshare", "--pid", "--fork", *become, "sleep", "60"])
    try:
        deadline = time.monotonic() + 5
        while sum(1 for e in Path("/proc").iterdir() if e.name.isdigit() and owned_by(e, uid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert worker_uids.sweep(range(uid, uid + 1)) >= 1  # our child stays a zombie, seen again, until waited for
        assert here.wait(5) == -signal.SIGKILL
        assert elsewhere.poll() is None
    finally:
        for proc in (here, elsewhere):
            proc.kill()
            proc.wait()
        subprocess.run(["pkill", "-KILL", "-u", str(uid)], check=False)


def owned_by(entry: Path, uid: int) -> bool:
    try:
        return entry.stat().st_uid == uid
    except OSError:
        return False


V1_MOUNTS = """\
35 28 0:30 / /sys/fs/cgroup/memory rw,relatime shared:14 - cgroup cgroup rw,memory
36 28 0:31 / /sys/fs/cgroup/pids rw,relatime shared:15 - cgroup cgroup rw,pids
40 28 0:35 / /sys/fs/cgroup/unified rw,relatime shared:19 - cgroup2 cgroup2 rw
"""


def test_the_memory_cgroup_is_found_in_a_v1_hierarchy_even_inside_a_container():
    own = "8:pids:/\n4:memory:/grading/lane\n0::/\n"
    assert find_hierarchy(V1_MOUNTS, own) == Hierarchy(Path("/sys/fs/cgroup/memory/grading/lane"), 1)
    container = V1_MOUNTS.replace("0:30 / ", "0:30 /docker/abc ")  # the mount's root is the container's cgroup
    assert find_hierarchy(container, "4:memory:/docker/abc\n").own == Path("/sys/fs/cgroup/memory")


def test_the_memory_cgroup_of_a_v2_hierarchy_gets_the_controller_for_its_children(tmp_path):
    own = tmp_path / "grader"
    own.mkdir()
    (own / "cgroup.controllers").write_text("cpu io memory pids\n")
    (own / "cgroup.subtree_control").write_text("\n")
    mounts = f"40 28 0:35 / {tmp_path} rw,relatime shared:19 - cgroup2 cgroup2 rw\n"
    found = find_hierarchy(mounts, "0::/grader\n")
    assert found == Hierarchy(own, 2)
    assert (own / "cgroup.subtree_control").read_text() == "+memory"
    worker = own / "worker"
    worker.mkdir()
    (worker / "memory.swap.max").write_text("max")
    (worker / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    found.limit(worker, 2**30)
    assert (worker / "memory.max").read_text() == str(2**30) and (worker / "memory.swap.max").read_text() == "0"
    assert found.oom_kills(worker) == 1
    (own / "cgroup.controllers").write_text("cpu pids\n")  # memory bound to a v1 hierarchy instead
    with pytest.raises(OSError, match="no memory cgroup controller"):
        find_hierarchy(mounts, "0::/grader\n")


def test_python_reached_through_links_still_imports_in_a_worker(tmp_path):
    """A kit whose .venv is a link to another folder, through a chain of links, or a home in a linked folder
    with TMPDIR inside it: Python names its packages by the links, so a worker's view holds every hop, and a
    module not imported yet still loads there; its scratch is made where the links lead, not through them."""
    real = tmp_path / "real"
    (real / "tmp").mkdir(parents=True)
    (real / "venv").symlink_to(Path(sys.prefix).resolve())
    (tmp_path / "home").symlink_to("real")  # relative
    (tmp_path / "chain").symlink_to(tmp_path / "home" / "venv")  # a link through a link
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "scores.py").write_text("def lazy(x):\n    import markupsafe  # imported by no worker before\n"
                                      "    return markupsafe.escape(x)\n")
    for python, temporary in ((tmp_path / "home" / "venv", None), (tmp_path / "chain", None),
                              (tmp_path / "home" / "venv", tmp_path / "home" / "tmp")):
        run = subprocess.run([str(python / "bin" / "python"), "-c", textwrap.dedent("""
            import sys
            from autograder.harness.remote import RemoteCode
            code = RemoteCode(sys.argv[1], timeout=10.0, confined=True, budget=60.0)
            try:
                for line in (sys.prefix, code.scores.lazy("<b>"), code.sandbox["enforced"][-1]):
                    print(line)
            finally:
                code.close()
            """), str(folder)], cwd=KIT, capture_output=True, text=True, timeout=120,
            env={**os.environ, **({"TMPDIR": str(temporary)} if temporary else {})})
        assert run.stdout.splitlines() == [str(python), "&lt;b&gt;", FILE_CONFINEMENT], (python, run.stderr[-2000:])


def test_pythons_random_is_seeded_as_torchs_for_every_call(tmp_path):
    """A submission that draws with Python's random (the scan allows it) draws the same in every worker and on
    every call, as with torch's: its grade does not change from one run to the next (a fork reseeds Python's
    random from the system's entropy)."""
    draws = []
    for run in ("first", "second"):
        (tmp_path / run).mkdir()
        student = hostile(tmp_path / run, "import random\nimport torch\n\ndef attention_scores(x):\n"
                                          "    return [random.random(), torch.rand(()).item()]\n")
        try:
            draws.append([student.scores.attention_scores(torch.ones(2)) for _ in range(2)])
        finally:
            student.close()
    assert draws[0] == draws[1] and draws[0][0] == draws[0][1], draws


def test_a_worker_that_ends_before_its_first_words_is_the_graders_failure(tmp_path, monkeypatch):
    """Before a worker's first words no code of the student's has run: a worker that cannot start or ends then
    fails the check on the grader's side (a check error the instructor's grades name), never as the student's
    crash."""
    from autograder.harness import processes
    from autograder.harness.transport import WorkerDidNotStart

    def ends(self, timeout, imports=None):
        raise EOFError

    monkeypatch.setattr(processes.WorkerProcess, "greet", ends)
    student = hostile(tmp_path, "def attention_scores(x):\n    return x\n")
    try:
        with pytest.raises(WorkerDidNotStart, match="a worker did not start"):
            student.scores.attention_scores(torch.ones(2))
    finally:
        student.close()


def test_a_uid_blocks_lock_is_never_taken_through_a_link_or_from_another_user(tmp_path):
    """Where the locks live in the temporary folder, everyone's (no /run): a link planted at a lock's name (root would have made a
    file where it led) and a file another user made (whose lock that user could hold) are passed over."""
    planted = tmp_path / "planted.lock"
    planted.symlink_to(tmp_path / "made-by-the-grader")
    assert worker_uids.open_lock(str(planted)) is None and not (tmp_path / "made-by-the-grader").exists()
    theirs = tmp_path / "theirs.lock"
    theirs.touch()
    if os.getuid() == 0:
        os.chown(theirs, 65534, 65534)
        assert worker_uids.open_lock(str(theirs)) is None
    with worker_uids.open_lock(str(tmp_path / "new.lock")) as mine:
        fcntl.flock(mine, fcntl.LOCK_EX | fcntl.LOCK_NB)


@pytest.mark.skipif(os.getuid() != 0, reason="user ids of their own for workers: as root only")
def test_a_local_user_who_made_every_lock_file_in_tmp_takes_no_block(tmp_path, monkeypatch):
    """Root's locks live where only root makes files (/run): a file another user made at every lock's name in the
    temporary folder left no block of user ids free, and nothing could be graded."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for block in range(worker_uids.UID_BLOCKS):
        made = tmp_path / f"autograder-worker-uids-{block}.lock"
        made.touch()
        os.chown(made, 65534, 65534)
    pool = worker_uids.UidPool()
    assert pool.take() >= worker_uids.UID_BASE
    pool.lock.close()
