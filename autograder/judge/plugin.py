"""The pytest plugin that turns a lab's checks into a grade.

Loaded with ``-p autograder.judge.plugin`` (:func:`checks_command_line`); the lab is the folder above
the checks (its ``lab.toml``, :mod:`autograder.lab`). It gives the checks their only way to reach student
code (the ``student`` fixture, and ``reference`` for hidden checks), marks each check with
its part (``pytest -m <part>``), attaches the points declared in ``points.toml``, prints a
per-part table, writes the results as JSON (``--results-json``) and replaces tracebacks by
the one-line messages of :class:`CheckFailure` and :class:`StudentError`.

A check is hidden when its ``def`` lies inside a ``### BEGIN HIDDEN TESTS`` fence of its
file; the release strips those fences, so students never see hidden checks.
"""

from __future__ import annotations

import atexit
import math
import os
import tomllib
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, Phase, settings
from hypothesis.internal.conjecture import providers
from hypothesis.internal.constants_ast import Constants

from autograder.course import hidden_line_ranges
from autograder.harness.processes import WorkerProcess
from autograder.harness.remote import RemoteCode, StandInCode, StudentError
from autograder.harness.sandbox import Unconfined
from autograder.harness.transport import WorkerDidNotStart
from autograder.judge.checks import CheckFailure
from autograder.judge.internals import scan_submission, submission_loads
from autograder.judge.reach_rules import rules_for
from autograder.judge.misconceptions import shared_diagnoser
from autograder.judge.replay import Replays
from autograder.judge.scoreboard import Scoreboard
from autograder.judge.session import (CALLS, CHECKS_DIR, DIAGNOSER, FAILED_CALLS, LAB, NOTES, REACHES, REFERENCE_ROOT,
                                      REPLAYED, SANDBOX, SEALED, STOOD_IN, UNCONFINED_EXIT, refusal)
from autograder.lab import Lab
from autograder.limits import Limits, add_options, from_options
from autograder.results import (Failure, FailureKind, StandIn)
from autograder.text import printable

POINTS_FILE = "points.toml"
STAND_INS_FILE = "stand_ins.py"
NO_LOCAL_CONSTANTS = Constants()

def use_grading_examples() -> None:
    """Hypothesis draws the same examples wherever a submission is graded (called when pytest starts
    with this plugin: importing the plugin changes nothing)."""
    # Same examples every run (a fixed seed: see pytest_configure): a submission gets the same
    # score every time it is graded. No shrinking: a verdict is all a check needs, and shrinking
    # costs minutes on wrong code.
    # Six generated examples on top of each check's explicit ones (the documents' shapes): every
    # wrong module in tests/wrong_modules is caught with six, and each example costs every
    # submission a few worker round trips (25 examples made grading 2.5x slower; see `make bench`).
    # derandomize is set too: Hypothesis's default profile turns it on where the CI variable is set (GitHub
    # Classroom's runners), which would draw other examples there than `make grade` draws.
    settings.register_profile("grading", deadline=None, max_examples=6, database=None, derandomize=False,
                              print_blob=False, suppress_health_check=list(HealthCheck),
                              phases=(Phase.explicit, Phase.generate))
    settings.load_profile("grading")
    # Hypothesis also draws "local constants": literals it collects from every module outside
    # site-packages that happens to be imported (here: the kit's own). `make check`, a grading
    # lane and Gradescope import different ones, so one seed would draw different examples in
    # each, and a grade would depend on where it was computed. Without them the examples depend
    # on the seed alone. (No setting turns this off in the pinned hypothesis 6.170.)
    providers._get_local_constants = lambda: NO_LOCAL_CONSTANTS


# The judge's pytest plugins, and only these: one installed beside the kit (xdist, anyio, ...) is
# neither imported nor hooked into every check. The judge's first, then hypothesis's (the order
# autoloading gave them).
PLUGINS = ("--disable-plugin-autoload", "-p", "autograder.judge.plugin", "-p", "hypothesispytest")


# What pytest takes from the environment on top of its command line: options and plugins. A grader's
# shell may set them for its own projects, and the checks' command line must be the whole of it: with
# PYTEST_ADDOPTS=-x each submission stopped at its first failing check (the demo cohort's mean 78.3 -> 40.8).
PYTEST_ENVIRONMENT = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")


def run_checks(args: list[str]) -> int:
    """``pytest.main(args)`` with nothing added from the environment (:data:`PYTEST_ENVIRONMENT`): what
    every command that runs the checks calls."""
    held = {name: os.environ.pop(name) for name in PYTEST_ENVIRONMENT if name in os.environ}
    try:
        return pytest.main(args)
    finally:
        os.environ.update(held)


def checks_command_line(checks, submission, part: str | None, results_json: str | None,
                reference: str | None = None) -> list[str]:
    """The pytest command line that runs ``checks`` against ``submission``."""
    # --tb=native: pytest's own styles parse the source of every frame of a failure's traceback
    # (about 30 ms a failure; most of a lane's time on a cohort with stubs), and a check's failure
    # message replaces that text anyway (pytest_runtest_makereport); native only reads lines.
    # No ini file (-c) and no conftest.py: one in any folder above the checks (a student's repository in CI, a
    # grader's projects folder) joined the judge, and a hook there gave stubs full marks.
    # --confcutdir: the checks' folder is where collection starts. Without it (the ini file's folder, /dev, is no
    # parent of the checks) pytest collected every folder above them, each time: a Dir node for each entry of /tmp or
    # a home folder (a 452-entry /tmp: 9 % of a lane's judge on the second lab's corpus).
    args = [str(checks), *PLUGINS, "-p", "no:cacheprovider", "--rootdir", str(checks), "--confcutdir", str(checks),
            "--noconftest", "-c", os.devnull, "--submission", str(submission), "-q", "--no-header", "-rN",
            "--tb=native", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    if part:
        args += ["-m", part]
    if results_json:
        args += ["--results-json", results_json]
    if reference:
        args += ["--reference", reference]
    return args


def pytest_addoption(parser):
    group = parser.getgroup("lab")
    group.addoption("--submission", help="folder holding the student's modules (default: the folder above the checks)")
    group.addoption("--reference", help="folder holding the reference modules, for hidden checks "
                                        "(default: the kit's solutions/<lab>)")
    group.addoption("--results-json", help="write every check's result and the points to this file")
    add_options(group.addoption)
    group.addoption("--no-sandbox", action="store_true", help="run student code in an unconfined worker")
    group.addoption("--no-confinement", action="store_true",
                    help="grade even where the sandbox cannot confine student code's files (for code you trust)")
    group.addoption("--no-replay", action="store_true",
                    help="run every check in full, even on answers an earlier passing run got (autograder.judge.replay)")
    group.addoption("--progress", action="store_true",
                    help="say on the terminal, every few seconds, which call into student code is still running")


@pytest.hookimpl(tryfirst=True)  # before hypothesis's own plugin reads the option
def pytest_configure(config):
    # One seed for every property check. Hypothesis's `derandomize` would do the same by hashing
    # each check's source, every session: 90 ms per submission in a grading lane.
    if config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = "0"
    use_grading_examples()
    torch.set_num_threads(1)  # the judge's tensors are tiny; parallel lanes already fill the cores
    WorkerProcess.files_required = not config.getoption("no_confinement")
    refusal.clear()
    checks = Path(config.args[0]).resolve()
    lab = config.stash[LAB] = Lab.load((checks.parent if checks.is_file() else checks).parent)
    try:
        rules_for(lab.allowed_imports)  # a lab that allows what no lab may is refused before anything runs
    except ValueError as refused:
        raise pytest.UsageError(f"{lab.name}/lab.toml: {refused}") from None
    WorkerProcess.lab_allows = lab.allowed_imports
    for part in lab.part_ids:
        config.addinivalue_line("markers", f"{part}: checks of the {part} part")
    config.addinivalue_line("markers", "hidden: a check students do not see (inside a HIDDEN TESTS fence)")
    config.pluginmanager.register(Scoreboard(config, diagnoser), "lab-scoreboard")




def load_points(checks_dir: Path) -> dict[str, dict[str, float]]:
    """``{part: {check name: points}}``: the one place points are declared."""
    path = checks_dir / POINTS_FILE
    return tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def part_of(item) -> str | None:
    stem = item.path.stem.removeprefix("test_")
    return stem if stem in item.config.stash[LAB].part_ids else None


# The checks' docstrings open with where a requirement comes from, for the author; a student reads
# the requirement itself ("checks: <what it checks>", not "checks: Contract: <what it checks>").
AUTHORS_PREFIXES = ("Contract: ", "Docstring: ")


def about(docstring: str | None) -> str:
    """What a check checks, in one line of the student's words."""
    text = " ".join((docstring or "").split())
    for prefix in AUTHORS_PREFIXES:
        text = text.removeprefix(prefix)
    return text


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path, parent):
    """A folder above the checks is a plain folder to the judge, never a package whose ``__init__.py`` it
    imports: the student's lab folder, which holds the checks in their repository, made the judge run theirs.
    The kit's command lines collect no such folder (:func:`checks_command_line`'s ``--confcutdir``); this holds
    for one without it."""
    checks = parent.config.rootpath  # --rootdir: the checks' folder
    if path != checks and checks.is_relative_to(path):
        return pytest.Dir.from_parent(parent, path=path)
    return None


def pytest_collection_modifyitems(session, config, items):
    if not items:
        return
    checks_dir = items[0].path.parent
    config.stash[CHECKS_DIR] = checks_dir
    points = load_points(checks_dir)
    hidden_ranges: dict[Path, list[range]] = {}
    for item in items:
        part = part_of(item)
        if part is None:
            continue
        item.add_marker(part)
        if item.path not in hidden_ranges:
            hidden_ranges[item.path] = hidden_line_ranges(item.path.read_text(encoding="utf-8"))
        line = item.function.__code__.co_firstlineno
        hidden = any(line in span for span in hidden_ranges[item.path])
        if hidden:
            item.add_marker("hidden")
        name = item.originalname
        siblings = sum(1 for other in items if other.originalname == name and other.path == item.path)
        item.user_properties += [("part", part), ("check", name), ("hidden", hidden),
                                 ("points", float(points.get(part, {}).get(name, 0)) / siblings),
                                 ("about", about(item.function.__doc__))]
    # Hidden checks last (each group in its own order): what they send can never reach a public
    # check's message, the only place a student reads what the code was given.
    items.sort(key=lambda item: item.get_closest_marker("hidden") is not None)


@pytest.fixture(scope="session")
def student(request):
    """The submission under test, reached only through a worker process."""
    config = request.config
    root = config.getoption("submission") or config.stash[CHECKS_DIR].parent
    lab = config.stash[LAB]
    limits = run_limits(config)
    # Read here, before any of it runs: code that reaches into internals could lift the rules the
    # worker enforces, so the calls those rules govern are refused (RemoteCode's `reaches`).
    reaches = config.stash[REACHES] = scan_submission(Path(root), lab.modules, lab.allowed_imports)
    # Every module its own budget, and the submission no more than all of them together, however
    # many names its code claims (the judge charges what it called: remote.Handle).
    proxy = RemoteCode(root, timeout=limits.call_timeout, confined=confined(config), budget=limits.module_budget,
                       total_budget=limits.module_budget * len(lab.modules), reaches=tuple(reaches), limits=limits,
                       loads=submission_loads(Path(root), lab.modules), stand_ins=stand_in_code(config),
                       progress=terminal_line(config) if config.getoption("progress") else None)
    yield proxy
    config.stash[SANDBOX] = proxy.sandbox
    proxy.close()
    if not config.stash.get(SEALED, False):
        config.stash[NOTES] = proxy.notes


def terminal_line(config):
    """Writes a line on the terminal while a check runs: past pytest's capture of the check's output,
    on a line of its own beside the progress letters; never in the results."""
    capture = config.pluginmanager.getplugin("capturemanager")
    terminal = config.pluginmanager.getplugin("terminalreporter")

    def write(line: str) -> None:
        with capture.global_and_fixture_disabled():
            terminal.write_line(line)
    return write


def run_limits(config) -> Limits:
    """The run's limits: the kit's, what the lab's lab.toml sets, what the command's options set (they win)."""
    return from_options(config.option).for_lab(config.stash[LAB].limits)


def stand_in_code(config) -> StandInCode | None:
    """The lab's stand-ins (``stand_in`` in lab.toml, functions of the checks' stand_ins.py), if any."""
    path, lab = config.stash[CHECKS_DIR] / STAND_INS_FILE, config.stash[LAB]
    functions = {part.id: part.stand_in for part in lab.parts if part.stand_in}
    return StandInCode(path.read_text(encoding="utf-8"), functions) if functions and path.is_file() else None


def confined(config) -> bool:
    """Does student code run in a sandbox (not with ``--no-sandbox``)?"""
    return not config.getoption("no_sandbox")


def reference_root(config) -> Path:
    """The reference solution's folder, resolved once a session (every check's replay key needs it)."""
    if REFERENCE_ROOT not in config.stash:
        config.stash[REFERENCE_ROOT] = Path(config.getoption("reference") or config.stash[LAB].reference).resolve()
    return config.stash[REFERENCE_ROOT]


_references: dict[Path, RemoteCode] = {}


@pytest.fixture(scope="session")
def reference(request):
    """The reference solution, run unconfined in a worker of its own, forked by the zygote too (hidden
    checks only).

    Trusted and deterministic, so one worker serves every session of this process: a grading
    lane pays its start-up once, not once per submission.
    """
    root = reference_root(request.config)
    if not (root / request.config.stash[LAB].modules[0]).is_file():
        pytest.fail(f"no reference solution in {root}: run `make solutions` or pass --reference")
    if root not in _references:
        # No budget: the reference serves a whole lane, and a spent budget would fail the student's checks.
        limits = run_limits(request.config)
        _references[root] = RemoteCode(root, timeout=limits.reference_timeout, budget=math.inf, memoize=True,
                                       limits=limits)
        atexit.register(_references[root].close)
    return _references[root]


_replays = Replays()


def replay_key(item) -> tuple:
    return reference_root(item.config), item.path, item.nodeid


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Record the requests a check sends to the student: for the diagnosis of a failure and,
    when it passes, for replay (:mod:`autograder.judge.replay`)."""
    torch.default_generator.manual_seed(0)  # the judge's own RNG never depends on which checks ran before
    reference = item.funcargs.get("reference")
    if isinstance(reference, RemoteCode):
        reference.begin_check(record=False)  # its worker serves a whole lane: let it drop earlier checks' modules
    student = item.funcargs.get("student")
    if not isinstance(student, RemoteCode):
        return (yield)
    if item.get_closest_marker("hidden") is not None and not item.config.stash.get(SEALED, False):
        # The first hidden check: a fresh worker, so nothing a public check's call left in the
        # student's process (a module that records its inputs) outlives into the hidden ones. The
        # notes are the public checks' (how much a hidden check's call printed could tell its inputs).
        student.close()
        item.config.stash[SEALED] = True
        item.config.stash[NOTES] = student.notes
    student.begin_check()
    try:
        result = yield
    except Unconfined as refused:  # this machine cannot confine student code: nothing is graded
        refusal.append(str(refused))
        pytest.exit(str(refused), returncode=UNCONFINED_EXIT)
    finally:
        recording = student.end_check()
        item.stash[CALLS] = recording.calls
        item.stash[STOOD_IN] = tuple(StandIn(**event) for event in student.stood_in)
    # A run where a stand-in answered is not replayed: a replay would not hear of it.
    if replay_enabled(item.config) and not item.stash.get(REPLAYED, False) and not item.stash[STOOD_IN]:
        _replays.remember(replay_key(item), recording)
    return result


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A check whose requests the student answers as on an earlier passing run passes without
    running the judge's side again (:mod:`autograder.judge.replay`)."""
    student = pyfuncitem.funcargs.get("student")
    # Not for code that reaches into internals: replay sends recorded frames straight to the
    # worker, past RemoteCode's refusal of the calls such code could lift the rules of.
    if isinstance(student, RemoteCode) and replay_enabled(pyfuncitem.config) and not student.reaches and \
            _replays.replay(replay_key(pyfuncitem), student):
        pyfuncitem.stash[REPLAYED] = True
        return True
    return None


def replay_enabled(config) -> bool:
    return not config.getoption("no_replay")


def verdict_of(excinfo) -> BaseException:
    """What ended a check: the student's failure or the check's verdict, also when hypothesis
    wrapped several in a group (a failing example that failed otherwise when run again, as a
    memory kill can: ``FlakyFailure``), a stopping failure first; else the exception itself (a bug
    of the kit's)."""
    error = excinfo.value
    while isinstance(error, BaseExceptionGroup):
        leaves = [e for e in error.exceptions if isinstance(e, (CheckFailure, StudentError, BaseExceptionGroup))]
        if not leaves:
            break
        error = min(leaves, key=lambda e: (not isinstance(e, BaseExceptionGroup),
                                           not (isinstance(e, StudentError) and e.kind.meaning.stops),
                                           not isinstance(e, StudentError)))
    return error


def grader_error_message(excinfo) -> str:
    """A check that broke on the grader's side, told without the grader's traceback or paths."""
    return (f"this check could not judge your code: it failed on the grader's side ({excinfo.typename}); "
            f"your instructor's grades name it (status: {FailureKind.CHECK_ERROR.meaning.status})")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    verdict = verdict_of(call.excinfo) if call.excinfo is not None else None
    if isinstance(verdict, (CheckFailure, StudentError)):
        message = str(verdict)
        if isinstance(verdict, StudentError) and verdict.trace:
            message += "\n" + verdict.trace.rstrip()
        report.longrepr = printable(message)  # pytest prints it on the terminal as it is
    elif verdict is not None and report.failed and item.config.getoption("tbstyle") != "long":
        # The traceback is the grader's (its paths, its code): kept for the kit's own debugging
        # (pytest --tb=long, which no student-facing entry point passes), never shown to a student.
        report.longrepr = grader_error_message(call.excinfo)
    if call.when == "call" and item.stash.get(REPLAYED, False):
        report.user_properties = [*report.user_properties, ("replayed", True)]
    if call.when == "call" and item.stash.get(STOOD_IN, ()):
        report.user_properties = [*report.user_properties, ("stood_in", item.stash[STOOD_IN])]
    if call.when == "call" and report.failed:
        report.user_properties = [*report.user_properties, ("message", str(report.longrepr)),
                                  ("failure", failure_of(verdict, call.excinfo.typename,
                                                         item.get_closest_marker("hidden") is not None))]
        if item.stash.get(CALLS, None) and part_of(item):
            # Kept for the diagnosis, which weighs the part's failed checks together (Scoreboard.diagnose):
            # a failed check's calls, not every check's.
            item.config.stash.setdefault(FAILED_CALLS, {})[item.nodeid] = item.stash[CALLS]
    if call.when == "call" and CALLS in item.stash:
        del item.stash[CALLS]  # a session keeps its items: their answers would add up over the whole submission
    return report


def failure_of(verdict: BaseException, type_name: str, hidden: bool) -> Failure:
    """What made a check fail (its :func:`verdict_of`): the student's code failed (the
    StudentError's), its answer was wrong (with the relation seen and, for a public check, the
    picture), or the check itself broke (``check_error``: a bug of the kit's, the exception's type
    ``type_name``; a worker that did not start, with why). A hidden check's values stay here."""
    if isinstance(verdict, StudentError):
        return verdict.failure
    if isinstance(verdict, CheckFailure):
        return Failure(FailureKind.WRONG, relation=verdict.relation or "",
                       picture=verdict.picture if verdict.picture and not hidden else None)
    if isinstance(verdict, AssertionError):
        return Failure(FailureKind.WRONG)
    return Failure(FailureKind.CHECK_ERROR, type=type_name,
                   cause=str(verdict) if isinstance(verdict, WorkerDidNotStart) else "")  # never a check's text


def diagnoser(config):
    """The judge of known mistakes; None when the checks come without a catalogue (a student's copy).
    Looked up once a session: every check asks."""
    if DIAGNOSER not in config.stash:
        config.stash[DIAGNOSER] = shared_diagnoser(config.stash[CHECKS_DIR], reference_root(config),
                                                   confined(config), run_limits(config))
    return config.stash[DIAGNOSER]
