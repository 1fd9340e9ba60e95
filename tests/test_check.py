"""`make check`: the student's loop on their working copy, through the same boundary as `make grade`."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from autograder.authoring.bundle import student_bundle
from autograder.text import MAKE_ERROR_NOTE
from conftest import CHECKS, KIT, LAB, RELEASE, SOLUTIONS

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast


def check(submission, *options, env=None):
    return subprocess.run([sys.executable, "-m", "autograder", "check", "--submission", str(submission), *options],
                          cwd=KIT, capture_output=True, text=True, timeout=600, env=env)


# A student's terminal: not inside another make (whose variables would make this one a sub-make).
TERMINAL = {name: value for name, value in os.environ.items() if name not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
MAKE_ERROR = re.compile(r"make: \*\*\* \[Makefile:\d+: check\] Error 1")


def make_check(folder, *variables):
    return subprocess.run(["make", "check", *variables], cwd=folder, capture_output=True, text=True, timeout=600,
                          env=TERMINAL)


def students_copy(tmp_path, modules=SOLUTIONS, **replacements):
    """A student's folder: the release's public checks, ``modules``' code with some functions replaced."""
    folder = tmp_path / "attention"
    shutil.copytree(RELEASE, folder, ignore=shutil.ignore_patterns("__pycache__"))  # what other tests' imports cached
    for module in modules.glob("*.py"):
        shutil.copy(module, folder / module.name)
    for name, text in replacements.items():
        (folder / f"{name}.py").write_text(text)
    return folder


def test_make_check_in_the_release_prints_points_first_failure_and_hint():
    run = make_check(RELEASE, "PART=softmax")
    assert run.returncode != 0
    out = run.stdout
    # One make's error line, not one per make (the lab folder's make runs the checks itself).
    assert MAKE_ERROR.fullmatch(run.stderr.strip()) and out.rstrip().endswith(MAKE_ERROR_NOTE), run.stderr
    assert "part                points   checks passed" in out and "softmax           0 / " in out
    assert "softmax: failing check: test_" in out or "softmax: not implemented yet: " in out
    assert "not implemented yet: softmax." in out and "hint: softmax." in out
    assert "scores" not in out.split("checks passed")[1]  # one part only


def test_exit_status_is_zero_only_at_full_marks(tmp_path):
    """Whatever pytest settings the student's shell has (the checks' command line is the whole of it)."""
    shell = {**os.environ, "PYTEST_ADDOPTS": "--collect-only", "PYTEST_PLUGINS": "a_plugin_of_the_students_own"}
    assert check(students_copy(tmp_path), "--part", "scores", env=shell).returncode == 0
    broken = students_copy(tmp_path / "broken", scores=(SOLUTIONS / "scores.py").read_text().replace(
        "return inputs @ inputs.transpose(-2, -1)", "return inputs @ inputs.T"))
    run = check(broken, "--part", "scores", env=shell)
    assert run.returncode != 0 and "scores: failing check" in run.stdout


PASS_EVERYTHING = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


def test_no_conftest_or_package_above_the_checks_joins_them(tmp_path):
    """A conftest.py in the student's folder or any folder above (a repository's root in CI, a grader's projects
    folder) is not loaded: one that passed every check gave the stubs full marks."""
    stubs = shutil.copytree(RELEASE, tmp_path / "repository" / "attention", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in (stubs, stubs.parent, tmp_path):
        (folder / "conftest.py").write_text(PASS_EVERYTHING)
    # Nor the lab folder's __init__.py: the checks' folder lies in it, and pytest imported it as their package.
    (stubs / "__init__.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n{PASS_EVERYTHING}")
    run = check(stubs, "--part", "scores")
    assert run.returncode != 0 and "scores            0 / " in run.stdout, run.stdout[-2000:]
    assert not (tmp_path / "ran").exists()


# A pytest plugin that writes down each folder collection is asked to make a node of (a wrapper: it sees every one,
# whichever plugin makes the node).
FOLDER_RECORDER = """
import os

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_collect_directory(path, parent):
    with open(os.environ["COLLECTED_FOLDERS"], "a") as record:
        record.write(f"{path}\\n")
    return (yield)
"""


def test_the_judges_collection_starts_at_the_checks_folder(tmp_path):
    """The judge's pytest (every command that runs checks) asks for a node of the checks' folder alone: it made one of
    every folder beside each folder above them too (an instructor's home folder, /tmp), for each submission
    (at 1310577: 333 folders in this machine's /tmp; 9 % of a lane's judge on the transformer corpus)."""
    lab = shutil.copytree(LAB.source, tmp_path / "courses" / "attention", ignore=shutil.ignore_patterns("__pycache__"))
    for n in range(20):
        (tmp_path / "courses" / f"other-{n}").mkdir()
    (tmp_path / "folder_recorder.py").write_text(FOLDER_RECORDER)
    record = tmp_path / "collected.txt"
    collect = ("import sys\nfrom autograder.judge.plugin import checks_command_line, run_checks\n"
               "sys.exit(run_checks([*checks_command_line(sys.argv[1], sys.argv[2], None, None), '--collect-only',"
               " '-p', 'folder_recorder']))")
    run = subprocess.run([sys.executable, "-c", collect, str(lab / "tests"), str(SOLUTIONS)], cwd=KIT,
                         env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{KIT}", "COLLECTED_FOLDERS": str(record)},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert record.read_text().splitlines() == [str(lab / "tests")]


def test_an_endless_loop_times_out_instead_of_hanging(tmp_path):
    endless = (SOLUTIONS / "scores.py").read_text().replace(
        "    return inputs @ inputs.transpose(-2, -1)", "    while True:\n        pass")
    # A budget of 2 s: the part's later calls are refused instead of spinning 1 s each (7.4 -> 3.2 CPU-s).
    run = check(students_copy(tmp_path, scores=endless), "--part", "scores", "--call-timeout", "1", "--budget", "2")
    assert run.returncode != 0
    assert "scores.attention_scores did not finish in 1 s: it was still running scores.py line" in run.stdout
    assert "hint: look for a loop that never ends" in run.stdout


def test_with_the_instructors_checks_the_hint_names_the_known_mistake(tmp_path):
    no_rescaling = (SOLUTIONS / "dropout.py").read_text().replace("x / (1 - p)", "x")
    run = check(students_copy(tmp_path, dropout=no_rescaling), "--checks", str(CHECKS), "--part", "dropout")
    assert "hint: With a fraction p dropped, the expected value of each entry shrinks" in run.stdout


def test_make_help_lists_every_command_and_is_the_default():
    makefile = (KIT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY: (.+)$", makefile, re.MULTILINE).group(1).split()
    for command in ([], ["help"]):
        run = subprocess.run(["make", "-s", *command], cwd=KIT, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        listed = set(re.findall(r"^make ([a-z-]+)", run.stdout, re.MULTILINE))
        assert listed == set(phony) - {"clean"}, listed


def test_check_without_a_lab_names_the_labs_instead_of_a_traceback():
    run = subprocess.run([sys.executable, "-m", "autograder", "check"], cwd=KIT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "name a lab (LAB=...): the labs are attention, transformer" in run.stderr


def test_every_command_explains_itself_in_plain_text():
    """`--help` of the kit and of each command: a description, no reStructuredText markup, and every
    option that has a default says it."""
    def helped(*command):
        run = subprocess.run([sys.executable, "-m", "autograder", *command, "--help"], cwd=KIT, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0 and "``" not in run.stdout, run.stdout
        return run.stdout

    commands = re.search(r"\{([a-z,-]+)\}", helped()).group(1).split(",")
    assert {"grade", "check", "bench"} <= set(commands)
    for name in commands:
        text = helped(name)
        description = text.split("\n\n")[1]
        assert description.strip() and not description.startswith(("options:", "positional")), (name, text)
    for name, options in (("grade", ("--jobs", "--budget", "--call-timeout", "--out", "--submissions")),
                          ("bench", ("--lab", "--copies", "--jobs", "--full-copies", "--nbgrader-copies"))):
        text = " ".join(helped(name).split())
        for option in options:
            assert re.search(re.escape(option) + r" [A-Z_]+ [^-]*\(default: ", text), (name, option)


def test_a_judge_caches_its_bytecode_as_its_caller_would_and_its_workers_none(tmp_path):
    """A student's ``.venv`` is installed without bytecode where Python writes it on first import
    (deploy/student/Makefile). The judge imports torch in its clean process
    (autograder.harness.clean_start), under the zygote's environment, which forbids writing: had it
    obeyed that, no process of ``make check`` would ever cache torch's bytecode, and every run would
    compile it again (3.1 s instead of 1.7 s). Kit modules only the clean process imports show it. The
    workers run unconfined, so that only the zygote's own setting keeps them from writing."""
    kit = tmp_path / "kit"
    # What `check` runs, not what other tests write meanwhile (caches, the course's gradebook).
    shutil.copytree(KIT, kit, ignore=shutil.ignore_patterns(".*", "__pycache__", "gradebook.db", "examples", "dist"))
    caches = kit / "autograder" / "harness" / "__pycache__"
    only_clean = "{'autograder.harness.zygote', 'autograder.harness.worker'}"
    probe = f"import sys, autograder.__main__, autograder.harness.clean_start; sys.exit(bool({only_clean} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-B", "-c", probe], cwd=kit).returncode == 0, "the entry imports them itself"
    submission = students_copy(tmp_path)
    for writes, environment in ((False, {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}),
                                (True, {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})):
        run = subprocess.run([sys.executable, "-m", "autograder", "check", "--submission", str(submission),
                              "--part", "scores", "--no-sandbox"],
                             cwd=kit, env=environment, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        cached = {path.name.split(".")[0] for path in caches.glob("*.pyc")}
        assert ({"zygote", "worker"} <= cached) if writes else cached.isdisjoint({"zygote", "worker"}), cached
        assert not (submission / "__pycache__").exists(), "a worker wrote the student's modules' bytecode"


def test_an_instructor_checks_one_upload_with_the_labs_public_checks():
    """`make check SUBMISSION=submitted/<student>/<lab>`, as `make help` offers: an upload has no tests/,
    the lab its folder is named after lends its public checks."""
    run = check(KIT / "examples" / "submitted" / "ada" / "attention")
    assert run.returncode == 0 and "total          84.5 / 84.5" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]


def test_an_uploads_own_checks_are_never_run_by_an_instructors_kit(tmp_path):
    """A Classroom 50 clone holds tests/, the student's to edit: checked in the instructor's kit, the lab's public
    checks run instead (the judge runs checks unconfined, as the instructor)."""
    clone = shutil.copytree(RELEASE, tmp_path / "ml101-attention-ada" / "attention",
                            ignore=shutil.ignore_patterns("__pycache__"))
    (clone / "tests" / "test_scores.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    run = check(clone, "--part", "scores")
    assert "scores            0 / 8.5" in run.stdout and not (tmp_path / "ran").exists(), run.stdout[-2000:]
    renamed = shutil.copytree(clone, tmp_path / "not-a-lab")
    refused = check(renamed, "--part", "scores")
    assert refused.returncode == 2 and "holds a student's checks, not the kit's: name the lab (--lab)" in refused.stderr
    assert not (tmp_path / "ran").exists()
    # tests/ a link into the kit's hidden checks (or another lab's) is the student's too (they ran: public and hidden).
    shutil.rmtree(renamed / "tests")
    (renamed / "tests").symlink_to(SOLUTIONS / "tests")
    refused = check(renamed, "--part", "scores")
    assert refused.returncode == 2 and "holds a student's checks, not the kit's" in refused.stderr, refused.stdout[-2000:]


def test_an_argument_error_is_one_line_with_a_pointer_to_help():
    for argv, said in ((["grade", "--jobs", "many"], "argument --jobs: 'many' is not a whole number of 1 or more"),
                       (["grade", "--lab", "nosuch"], "no lab 'nosuch'")):
        run = subprocess.run([sys.executable, "-m", "autograder", *argv], cwd=KIT, capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert said in run.stderr and run.stderr.rstrip().endswith("--help lists the options)"), run.stderr


def test_make_lab_opens_jupyterlab_as_root_too():
    """Jupyter refuses root without --allow-root: containers and lab machines run as root."""
    for makefile in (KIT / "deploy" / "lab" / "Makefile", KIT / "deploy" / "student" / "Makefile"):
        dry = subprocess.run(["make", "-n", "-f", str(makefile), "lab", "ROOT=.", "LAB=attention", "VENV=.venv"],
                             cwd=KIT, capture_output=True, text=True, timeout=60)
        line = next(line for line in dry.stdout.splitlines() if "jupyter lab" in line)
        assert ("--allow-root" in line) == (os.getuid() == 0), line


def test_make_check_shows_the_bug_just_written_before_the_stubs(tmp_path):
    """A softmax without the max shift and a context_vector still a stub: the overflow message is shown,
    the stub said once with how many checks it costs, and the last line says what to do next."""
    softmax = (SOLUTIONS / "softmax.py").read_text().replace(
        "shift = scores.amax(dim=dim, keepdim=True).detach()", "shift = 0")
    start = softmax.index("def context_vector(")
    end = softmax.index("\ndef ", start + 10)
    docstring_end = softmax.index('"""', softmax.index('"""', start) + 3) + 3
    softmax = softmax[:docstring_end] + "\n    raise NotImplementedError\n" + softmax[end:]
    run = check(students_copy(tmp_path, softmax=softmax), "--part", "softmax")
    assert run.returncode != 0
    assert "softmax: failing check: test_softmax_is_numerically_stable" in run.stdout, run.stdout[-3000:]
    assert run.stdout.count("not implemented yet") == 1 and "softmax.context_vector (7 checks)" in run.stdout
    assert "so far. Next: the first failure in softmax above" in run.stdout


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The student bundle's root (its Makefile and harness), its venv the kit's: a bundle set up as a student
    does it is test_platforms'."""
    student_bundle(LAB, tmp_path_factory.mktemp("dist"))
    return next(tmp_path_factory.getbasetemp().glob(f"dist*/{LAB.name}-student"))


def bundle_check(bundle, submission, *variables):
    """The bundle's `make check` on ``submission``, run as a student's terminal runs it."""
    return make_check(bundle, f"SUBMISSION={submission}", f"PY={sys.executable}", "READY=", *variables)


def test_make_check_ends_with_its_summary_not_with_pytests_or_makes_noise(bundle, tmp_path):
    """The last lines are the points and what to do next; pytest's "N failed in X s" is gone; make's own
    "Error 1" line, which GNU make prints for any failing recipe, is said to be no crash just before it."""
    wrong = students_copy(tmp_path, dropout=(SOLUTIONS / "dropout.py").read_text().replace("x / (1 - p)", "x"))
    run = bundle_check(bundle, wrong)
    assert run.returncode != 0
    lines = run.stdout.rstrip().splitlines()
    assert lines[-3] == "" and lines[-1] == MAKE_ERROR_NOTE, lines[-5:]
    assert re.fullmatch(r"[\d.]+ / 84\.5 so far\. Next: the first failure in dropout above, then make check PART=dropout "
                        r"again \(VERBOSE=1 shows every failing check\)\.", lines[-2]), lines[-5:]
    assert "failed in" not in run.stdout + run.stderr
    assert MAKE_ERROR.fullmatch(run.stderr.strip()), run.stderr  # make's line, once, and nothing else
    done = bundle_check(bundle, students_copy(tmp_path / "done"))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.rstrip().splitlines()[-1] == "Every check passed: 84.5 / 84.5.", done.stdout[-1000:]
    assert " passed in " not in done.stdout


def test_a_hanging_call_says_it_is_still_running_while_make_check_waits(bundle, tmp_path):
    waiting = (SOLUTIONS / "scores.py").read_text().replace(  # as for input that never comes (a loop also burns 10 s of CPU)
        "    return torch.stack(scores)  # (T,)", "    import time\n    time.sleep(3600)")
    run = bundle_check(bundle, students_copy(tmp_path, scores=waiting), "PART=scores")
    assert run.returncode != 0
    said = re.findall(r"^scores\.py still running \(scores\.attention_scores_for_query\), (\d+) s of 10 s$", run.stdout,
                      re.MULTILINE)
    assert said == ["3", "6", "9"], run.stdout[-3000:]
    assert "scores.attention_scores_for_query did not finish in 10 s" in run.stdout


@pytest.mark.slow
def test_one_judge_runs_under_a_debugger_as_documented():
    """`python -m pdb -m autograder check ...` (docs/grading.md's way to debug a judge): started under a wrapper,
    the judge does not restart clean, so the debugger keeps it, and the checks run."""
    run = subprocess.run([sys.executable, "-m", "pdb", "-m", "autograder", "check", "--submission",
                          str(SOLUTIONS), "--part", "scores"], input="continue\nquit\n", cwd=KIT,
                         capture_output=True, text=True, timeout=300)
    assert "(Pdb)" in run.stdout and "Every check passed: 10 / 10." in run.stdout, run.stdout[-2000:]
