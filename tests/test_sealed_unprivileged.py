"""Sealed without root (issue 38): an instructor grading on a laptop as an ordinary user.

The kit runs as an unprivileged user this test creates (as root: ``useradd``; run without root, the
test's own user is that instructor). An attacker, graded first in one lane before an honest twin,
tries at import time what one submission did before: read the instructor's ``~/.ssh`` key, the
reference solution and the hidden checks' source, list and rewrite the other student's staged copy,
write into the instructor's home and plant a ``.pth`` in the kit's ``.venv``. Three machines:

- user namespaces and Landlock (this kernel): the worker is PID 1 of its own namespaces, in its own view;
- no namespace can be made (seccomp refuses ``unshare``, as where unprivileged user namespaces are
  off): Landlock alone is not enough under the grader's user id, and nothing is graded;
- neither: nothing is graded, the message names the ways out; ``--no-confinement`` grades and says
  so in red in every report.
"""

import contextlib
import csv
import fcntl
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.results import UNCONFINED_WARNING
from autograder.limits import DEFAULTS
from conftest import KIT, LAB, SOLUTIONS

# Slow: grades, or starts processes (left out of make test-fast). One xdist worker runs them all (make test's
# --dist loadgroup): the folders on the way to the kit's Python are opened for the module's user and restored
# after, which a second worker's copy of the fixture would undo under the first one's feet.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("unprivileged-user")]

SECRET = "BEGIN-OPENSSH-PRIVATE-KEY-of-the-instructor"
HIDDEN_CHECKS = LAB.checks / "test_masking.py"  # holds the hidden checks' source
REFERENCE = LAB.source / "masking.py"  # the reference solution's source
# What the attacker's masking.py (the reference's, then this) does when a worker imports it: each attempt
# that works leaves a trace in causal_mask's error, which its feedback shows (a leak would be visible there).
# In masking.py: a part without a ban, so the scan's finding (open) does not stop the module loading.
ATTACKER = '''
import os, resource, time

found = []


def attempt(what, action):
    try:
        found.append(f"{what}: {action()!r}"[:200])
    except Exception as exc:
        found.append(f"{what}: refused ({type(exc).__name__})")


def rewrite_twin():
    staged = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    for student in os.listdir(staged):
        twin = os.path.join(staged, student, "attention", "masking.py")
        if os.path.exists(twin) and os.path.dirname(twin) != os.path.dirname(__file__):
            with open(twin, "w") as handle:
                handle.write("def causal_mask(num_tokens):\\n    return None\\n")
            return "rewrote " + twin
    return "no twin"


def write(path, text):
    with open(path, "w") as handle:
        handle.write(text)
    return "wrote " + path


attempt("ssh key", lambda: open(%(key)r).read())
attempt("home", lambda: os.listdir(%(home)r))
attempt("reference", lambda: open(%(reference)r).read()[:80])
attempt("hidden checks", lambda: open(%(hidden)r).read()[:80])
attempt("twin", rewrite_twin)
attempt("home write", lambda: write(%(planted)r, "owned"))
attempt("venv pth", lambda: write(%(pth)r, "import os"))
attempt("mode of its copy", lambda: os.chmod(os.path.dirname(__file__), 0o777))


def forks():
    made = 0
    while made < 10:
        try:
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
        except OSError:
            break
        made += 1
    return made


attempt("forks", forks)
attempt("address space", lambda: resource.getrlimit(resource.RLIMIT_AS)[0])


def causal_mask(num_tokens):
    raise RuntimeError("FOUND " + " | ".join(found))
'''


def blocked_for(user: pwd.struct_passwd, *targets: Path) -> list[Path]:
    """The folders on the way to ``targets`` that ``user`` cannot pass through (root's home, where pyenv
    puts Python on this machine and CI's)."""
    blocked = []
    for target in targets:
        for folder in reversed(target.parents):
            mode = folder.stat().st_mode
            if folder.stat().st_uid != user.pw_uid and not mode & stat.S_IXOTH:
                blocked.append(folder)
    return sorted(set(blocked))


OPENED_STATE = Path(tempfile.gettempdir()) / "ag-instructor-opened.json"  # the modes to restore, and its lock


@contextlib.contextmanager
def opened_for(user: pwd.struct_passwd, *targets: Path):
    """Give others search permission on the folders on the way to ``targets`` that ``user`` cannot pass, while
    any test session on this machine needs it: each holds a shared lock; the first records the modes, the
    last (the one that can take the lock alone) restores them (another session restoring them under this
    one's feet stopped its instructor from starting Python)."""
    with open(f"{OPENED_STATE}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        modes = json.loads(OPENED_STATE.read_text()) if OPENED_STATE.exists() else {}
        for folder in blocked_for(user, *targets):
            modes.setdefault(str(folder), stat.S_IMODE(folder.stat().st_mode))
            folder.chmod(modes[str(folder)] | stat.S_IXOTH)
        OPENED_STATE.write_text(json.dumps(modes))
        fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield [Path(folder) for folder in modes]
        finally:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another session still needs them: it restores them
            for folder, mode in json.loads(OPENED_STATE.read_text()).items():
                Path(folder).chmod(mode)
            OPENED_STATE.unlink()


# Once a session: xdist may run another module's tests between these, and a module-scoped copy would be made
# again after restoring the folders' modes (the make check test then could not start the kit's Python).
@pytest.fixture(scope="session")
def instructor():
    """An unprivileged user with a home holding an SSH key: the instructor. As root, a user made for
    this session, its home in the system's temporary folder (not pytest's, which any other pytest session
    starting makes private again); the folders on the way to the kit's Python get search permission for
    others while it runs, restored after. Without root, the user running the tests."""
    if os.getuid() != 0:
        user = pwd.getpwuid(os.getuid())
        yield user, Path(user.pw_dir), []
        return
    if shutil.which("useradd") is None:
        pytest.skip("no useradd on this machine: the unprivileged cases need a user of their own")
    name = f"ag-instructor-{os.getpid()}"
    home = Path(tempfile.mkdtemp(prefix="ag-instructor-home-")) / name
    home.parent.chmod(0o755)
    subprocess.run(["useradd", "--no-user-group", "--gid", "nogroup", "--home-dir", str(home), "--create-home",
                    "--shell", "/usr/sbin/nologin", name], check=True, capture_output=True)
    user = pwd.getpwnam(name)
    with opened_for(user, Path(sys.executable).resolve(), KIT, home) as opened:
        try:
            yield user, home, opened
        finally:
            # What the unconfined run's attacker left running (its own user: nothing else is killed).
            subprocess.run(["pkill", "-KILL", "-u", str(user.pw_uid)], check=False, capture_output=True)
            subprocess.run(["userdel", "--remove", name], check=False, capture_output=True)
            shutil.rmtree(home.parent, ignore_errors=True)


def as_instructor(user, home: Path, command: list[str], seccomp_refuses: tuple[str, ...] = ()):
    """Run ``command`` (the kit's, from its folder) as ``user``; ``seccomp_refuses``: system calls that fail
    for it and every process it starts (``unshare``: no namespace; ``landlock_create_ruleset``: no Landlock)."""
    if seccomp_refuses:
        command = [sys.executable, "-c", REFUSING, ",".join(seccomp_refuses), *command]
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    become = [] if os.getuid() != 0 else ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                                          "--clear-groups"]
    return subprocess.run([*become, *command], cwd=KIT, env=environment, capture_output=True, text=True,
                          timeout=900, start_new_session=True)


REFUSING = """
import errno, os, sys
import pyseccomp as seccomp
rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
for call in sys.argv[1].split(","):
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS if call.startswith("landlock") else errno.EPERM), call)
rules.load()
os.execv(sys.argv[2], sys.argv[2:])
"""


def cohort(user, home: Path) -> Path:
    """In the instructor's home: the attacker first, its honest twin (the reference) after."""
    ssh = home / ".ssh"
    ssh.mkdir(exist_ok=True)
    (ssh / "id_ed25519").write_text(SECRET)
    submissions = home / "submissions"
    shutil.rmtree(submissions, ignore_errors=True)
    for student in ("a_attacker", "a_killer", "b_honest"):
        folder = submissions / student / LAB.name
        folder.mkdir(parents=True)
        for module in SOLUTIONS.glob("*.py"):
            shutil.copy(module, folder / module.name)
    pth = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (submissions / "a_attacker" / LAB.name / "masking.py").write_text((SOLUTIONS / "masking.py").read_text() + ATTACKER % {
        "key": str(ssh / "id_ed25519"), "home": str(home), "reference": str(REFERENCE), "hidden": str(HIDDEN_CHECKS),
        "planted": str(home / "planted"), "pth": str(pth / "zz-planted.pth")})
    # kill(0) reaches the caller's process group whatever its PID namespace: the whole run, if it shared it.
    (submissions / "a_killer" / LAB.name / "masking.py").write_text(
        "import os, signal\nos.kill(0, signal.SIGKILL)\n" + (SOLUTIONS / "masking.py").read_text())
    for path in [home, *home.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid)
    return submissions


def grade_as(user, home: Path, name: str, *options: str, seccomp_refuses: tuple[str, ...] = ()):
    out = home / name
    command = [sys.executable, "-m", "autograder", "grade", "--lab", LAB.name, "--submissions",
               str(cohort(user, home)), "--out", str(out), "--jobs", "1", "--force", *options]
    return as_instructor(user, home, command, seccomp_refuses), out


def grades(out: Path) -> dict[str, str]:
    with open(out / LAB.name / "grades.csv", newline="") as table:
        return {row["student"]: row["total"] for row in csv.DictReader(table)}


def assert_sealed(home: Path, out: Path) -> None:
    feedback = (out / LAB.name / "students" / "a_attacker" / "feedback.md").read_text()
    assert "FOUND" in feedback  # the attacker ran, and its message reached its feedback
    found = feedback[feedback.index("FOUND"):].split("\n")[0]
    for attempt in ("ssh key", "home", "reference", "hidden checks", "twin", "home write", "venv pth",
                    "mode of its copy"):
        assert f"{attempt}: refused" in found, found
    # Without a memory cgroup: two processes of 2 GiB each at most (the worker's 4 GiB together).
    assert "forks: 1" in found and f"address space: {DEFAULTS.worker_total_memory_bytes // 2}" in found, found
    assert SECRET not in feedback
    assert grades(out)["b_honest"] == "100"  # the twin's staged copy kept its own code
    assert not (home / "planted").exists()
    assert not list(Path(sys.prefix).rglob("zz-planted.pth"))
    assert UNCONFINED_WARNING not in feedback


def test_an_ordinary_user_grades_in_the_same_sandbox(instructor):
    """User namespaces and Landlock, as on this kernel: PID 1 of its own namespaces, its own view."""
    user, home, _ = instructor
    run, out = grade_as(user, home, "grades")
    assert run.returncode == 0, run.stderr[-3000:]
    assert_sealed(home, out)
    assert "file system view" not in run.stderr  # every worker had its view (only what needs root is warned of)
    assert "landlock" not in run.stderr  # landlock's errno misread (a failed mount's EPERM) no longer stops it


def test_without_namespaces_landlock_alone_is_not_enough(instructor):
    """Where unprivileged user namespaces are off (seccomp refuses ``unshare``), Landlock confines reads and
    writes, but under the grader's user id not chmod, its Unix sockets or its processes: nothing is graded."""
    user, home, _ = instructor
    run, out = grade_as(user, home, "grades-landlock", seccomp_refuses=("unshare",))
    assert run.returncode == 2
    assert "only a file system view of its own (a user namespace) confines" in run.stderr
    assert not out.exists()


def test_without_any_confinement_nothing_is_graded(instructor):
    """Neither namespaces nor Landlock: the run refuses before any student code runs, naming the ways out."""
    user, home, _ = instructor
    run, out = grade_as(user, home, "grades-refused", seccomp_refuses=("unshare", "landlock_create_ruleset"))
    assert run.returncode == 2
    assert "nothing graded: this machine cannot confine student code's files" in run.stderr
    for way_out in ("root", "user namespaces", "apparmor_restrict_unprivileged_userns", "make grade-container",
                    "--no-confinement"):
        assert way_out in run.stderr
    assert not out.exists()
    assert not (home / "planted").exists()


def test_no_confinement_grades_and_marks_every_report_in_red(instructor):
    """The opt-in for trusted code: it grades, and every page says it was unconfined (rightly: here the
    attacker rewrites its twin's staged copy before the twin is graded)."""
    user, home, _ = instructor
    run, out = grade_as(user, home, "grades-trusted", "--no-confinement",
                        seccomp_refuses=("unshare", "landlock_create_ruleset"))
    assert run.returncode == 0, run.stderr[-3000:]
    assert set(grades(out)) == {"a_attacker", "a_killer", "b_honest"}
    pages = [out / LAB.name / "report.html", *(out / LAB.name / "students").glob("*/feedback.html")]
    assert len(pages) == 4
    for page in pages:
        assert 'class="unconfined"' in page.read_text()
    for student in ("a_attacker", "a_killer", "b_honest"):
        assert UNCONFINED_WARNING in (out / LAB.name / "students" / student / "feedback.md").read_text()
    (home / "planted").unlink(missing_ok=True)  # what the attacker could do unconfined (not the point here)
    shutil.rmtree(out)


def test_make_check_refuses_too(instructor):
    """A student's ``make check`` where nothing confines: the same refusal, before any of its code runs."""
    user, home, _ = instructor
    submission = cohort(user, home) / "b_honest" / LAB.name
    run = as_instructor(user, home, [sys.executable, "-m", "autograder", "check", "--submission", str(submission),
                                     "--checks", str(LAB.checks), "--part", "softmax"],
                        seccomp_refuses=("unshare", "landlock_create_ruleset"))
    assert run.returncode == 2
    assert "nothing checked: this machine cannot confine student code's files" in run.stderr
    assert "passed" not in run.stdout


def test_its_cases_share_one_worker(request):
    """make test (--dist loadgroup) runs this module's cases in one xdist worker, which xdist marks in their ids:
    on pytest 9.2 it marked none, and a second worker's copy of the fixture waited 30 s for the first's lock."""
    if getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith("@unprivileged-user")
