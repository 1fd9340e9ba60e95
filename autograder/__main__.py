"""Command line: ``python -m autograder {release,solutions,check,grade,student-bundle,gradescope-zip,new-lab,...}``
(the Makefiles call these; ``--help`` lists them all). ``ci-run`` and ``gradescope-run``
are what the platforms call on their own machines, inside what ``student-bundle`` and
``gradescope-zip`` built."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
from pathlib import Path

from autograder.course import KIT_ROOT, directory, unpinned
from autograder.lab import Lab, LabError, all_labs, find_lab, kit_checks, release_checks
from autograder.limits import JOBS, add_options, from_options
from autograder.text import MAKE_ERROR_NOTE, one_line


def default_submissions() -> Path:
    submitted = directory("submitted")
    return submitted if submitted.is_dir() else KIT_ROOT / "examples" / "submitted"


class OneLineErrors(argparse.ArgumentParser):
    """An argument error is one line and a pointer to --help, not the whole usage first."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


def main(argv: list[str] | None = None) -> int:
    options = (parser := command_line()).parse_args(argv)
    return options.run(parser, options)


def command_line() -> OneLineErrors:
    """Every subcommand, each with the function that runs it (``run``: called with the parser and options)."""
    parser = OneLineErrors(
        prog="python -m autograder", description="Build, check and grade the course's labs. The Makefile calls these "
        "commands (make help); ci-run and gradescope-run are what the platforms call on their own machines, "
        "inside what student-bundle and gradescope-zip built. Each command's --help says more.")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrors)

    def command(name: str, about: str, run, **options) -> argparse.ArgumentParser:
        """A subcommand whose one line shows in the list and opens its own --help, run by ``run``."""
        sub = subparsers.add_parser(name, help=about, description=about[0].upper() + about[1:] + ".", **options)
        sub.set_defaults(run=run)
        return sub
    shared = shared_options()
    add_authoring_commands(command, shared)
    add_checking_commands(command, shared)
    add_cohort_commands(command, shared)
    return parser


def shared_options() -> dict[str, argparse.ArgumentParser]:
    """The option groups several subcommands take: limits, one lab or some, a cohort."""
    limits = argparse.ArgumentParser(add_help=False)
    add_options(limits.add_argument)
    limits.add_argument("--no-confinement", action="store_true",
                        help="grade even where this machine cannot confine student code's files (they could read and "
                             "write what you can): only for code you trust; every report says so, in red")
    one_lab = argparse.ArgumentParser(add_help=False)
    one_lab.add_argument("--lab", help="the lab (a folder of source/; default: the course's only lab)")
    some_labs = argparse.ArgumentParser(add_help=False)
    some_labs.add_argument("--lab", help="only this lab (default: every lab of source/)")
    cohort = argparse.ArgumentParser(add_help=False)
    cohort.add_argument("--submissions", type=Path, default=default_submissions(),
                        help="folder of <student>/<lab>/ (default: submitted/ if it exists, else examples/submitted/)")
    cohort.add_argument("--out", type=Path, default=KIT_ROOT / "grades", help="where the reports go (default: grades/)")
    cohort.add_argument("--nbgrader", action="store_true",
                        help="also record each student's points per part in nbgrader's gradebook")
    cohort.add_argument("--gradebook", help="the gradebook's database URL (default: nbgrader_config.py's)")
    return {"limits": limits, "one_lab": one_lab, "some_labs": some_labs, "cohort": cohort}


def add_authoring_commands(command, shared: dict) -> None:
    some_labs = shared["some_labs"]
    command("release", "write assignments/<lab>/ (stubs, public checks) from source/", build_command,
            parents=[some_labs])
    command("solutions", "write solutions/<lab>/ (reference code, all checks) from source/", build_command,
            parents=[some_labs])
    command("student-bundle", "write dist/<lab>-student/ and .zip (release, harness, README, Makefile, Classroom "
            "workflow)", bundle_command, parents=[some_labs])
    command("gradescope-zip", "write dist/<lab>-gradescope.zip (setup.sh, run_autograder)", bundle_command,
            parents=[some_labs])
    new_lab = command("new-lab", "write source/<name>/, a new lab with one placeholder exercise per part that "
                      "already grades", new_lab_command)
    new_lab.add_argument("name", help="the lab's folder name (a Python identifier)")
    new_lab.add_argument("--parts", required=True, help="its parts in teaching order, comma-separated")
    new_lab.add_argument("--title", help="the lab's title (default: a TODO)")


def add_checking_commands(command, shared: dict) -> None:
    check = command("check", "run the checks on a submission folder and print the points", check_command,
                    parents=[shared["limits"], shared["one_lab"]])
    check.add_argument("--part", help="run one part's checks only (a part of the lab)")
    check.add_argument("--submission", type=Path, help="folder with the lab's modules (default: assignments/<lab>)")
    check.add_argument("--checks", type=Path, help="folder of checks (default: the submission's tests/)")
    check.add_argument("--reference", help="reference solution for hidden checks (default: solutions/<lab>)")
    check.add_argument("--results-json", help="also write the results to this JSON file")
    check.add_argument("--no-sandbox", action="store_true", help="run student code unconfined")
    check.add_argument("-v", "--verbose", action="store_true", help="print every failing check's message")
    ci = command("ci-run", "in a student's CI job (GitHub Actions, GitLab CI, Classroom 50): the public checks once, "
                 "their results where the service shows them", ci_command)
    ci.add_argument("--submission", type=Path, required=True, help="a lab's folder: the modules, lab.toml and tests/")
    ci.add_argument("--classroom50", action="store_true", help="also write ./result.json and ./release-body.md "
                    "(Classroom 50) and exit 0 whatever the checks say")
    gradescope = command("gradescope-run", "on Gradescope (run_autograder): grade <root>/submission into "
                         "<root>/results/results.json", gradescope_command)
    gradescope.add_argument("--root", type=Path, default=Path("/autograder"), help="default: /autograder")


def add_cohort_commands(command, shared: dict) -> None:
    limits, some_labs, cohort = shared["limits"], shared["some_labs"], shared["cohort"]
    grade = command("grade", "grade every submission of a cohort, lab by lab, and write the reports", grade_command,
                    parents=[limits, some_labs, cohort])
    grade.add_argument("--jobs", type=at_least_one, default=JOBS,
                       help=f"submissions graded in parallel (default: the number of CPUs, {JOBS})")
    grade.add_argument("--force", action="store_true", help="grade again even what has not changed")
    grade.add_argument("--shard", type=shard_argument, help="i/N: grade only slice i of N of the cohort (each "
                       "student's slice follows from their folder's name), for `merge` to join")
    grade.add_argument("--strip-prefix", default="", help="a student folder named so is the student named by the "
                       "rest: <classroom>-<assignment>- for the clones `gh teacher download` writes (Classroom 50)")
    grade.add_argument("--repeat", type=at_least_one, default=1,
                       help="grade the cohort this many times (other job counts) and name in report.html the checks "
                            "whose verdict changes between runs (default: 1)")
    grade.add_argument("--debug", action="store_true", help="keep each lane's log (its pytest output, timings, "
                       "tracebacks) in <out>/<lab>/.debug/lane-<n>.log")
    grade.add_argument("--no-replay", action="store_true",
                       help="run every check in full, even where a submission answers exactly as an earlier one "
                            "that passed it (same points, slower; see autograder/judge/replay.py)")
    verify = command("verify", "grade the submissions behind an output folder again and say, per student, whether "
                     "today's grade is the recorded one (and what differs)", verify_command,
                     parents=[limits, some_labs, cohort])
    verify.add_argument("--strip-prefix", default="", help="as grade's: the prefix of the student folders' names")
    verify.add_argument("--students", nargs="+", help="only these students (default: every student of the folder)")
    verify.add_argument("--repeat", type=at_least_one, default=1,
                        help="grade them this many times (other job counts) and name the checks whose verdict "
                             "changes between runs (default: 1)")
    verify.add_argument("--jobs", type=at_least_one, default=JOBS,
                        help=f"submissions graded in parallel (default: {JOBS})")
    merge = command("merge", "join the outputs of `grade --shard i/N` into one course, as one run over the whole "
                    "cohort writes it (reports, grades.csv, report.html with similarity across all shards)",
                    merge_command, parents=[some_labs, cohort])
    merge.add_argument("shards", type=Path, nargs="+", help="the shards' --out folders, every slice once")
    bench = command("bench", "time the grader on each lab (copies of the reference, the demo cohort) against one "
                    "torch import, and print the figures", bench_command, parents=[some_labs])
    bench.add_argument("--copies", type=at_least_one, default=100,
                       help="submissions per run: copies of the reference, and the demo cohort cycled to as many "
                            "(default: 100)")
    bench.add_argument("--jobs", type=at_least_one, default=JOBS,
                       help=f"submissions graded in parallel (default: the number of CPUs, {JOBS})")
    bench.add_argument("--full-copies", type=int, default=20, help="copies graded again with replay off, to time "
                       "checks that do not replay (default: 20; 0 skips them)")
    bench.add_argument("--nbgrader-copies", type=int, default=20, help="copies, notebook included, autograded by "
                       "nbgrader and graded by the kit, side by side (default: 20; 0 skips them)")


def chosen_labs(parser, options) -> list[Lab]:
    """The lab ``--lab`` names, or every lab of source/."""
    try:
        return [find_lab(options.lab)] if getattr(options, "lab", None) else all_labs()
    except LabError as exc:
        parser.error(str(exc))


def new_lab_command(parser, options) -> int:
    from autograder.authoring.scaffold import new_lab as scaffold

    try:
        folder = scaffold(options.name, [p.strip() for p in options.parts.split(",") if p.strip()], options.title)
    except ValueError as exc:
        parser.error(str(exc))
    print(f"written: {folder} (next: make release solutions LAB={options.name}, then replace the TODOs)")
    return 0


def build_command(parser, options) -> int:
    from autograder.authoring.release import build

    for lab in chosen_labs(parser, options):
        try:
            built = build("release" if options.command == "release" else "solution", lab)
        except LabError as exc:
            parser.error(str(exc))
        print(f"{options.command} of {lab.name} written to {built}")
    return 0


def bundle_command(parser, options) -> int:
    from autograder.authoring.bundle import gradescope_zip, student_bundle

    for lab in chosen_labs(parser, options):
        print(f"written: {student_bundle(lab) if options.command == 'student-bundle' else gradescope_zip(lab)}")
    return 0


def ci_command(parser, options) -> int:
    start_zygote()
    from autograder.platforms.ci import run as run_ci

    return run_ci(options.submission.resolve(), options.classroom50)


def gradescope_command(parser, options) -> int:
    from autograder.batch.upload import run as run_gradescope

    results = run_gradescope(options.root.resolve())
    print(f"score {results['score']:g}; results in {options.root}/results/results.json")
    return 0


def bench_command(parser, options) -> int:
    from autograder.batch.bench import run as run_bench

    return run_bench(options, chosen_labs(parser, options), parser.error)


def check_command(parser, options) -> int:
    """``make check``: the checks of one lab on one folder, the points table and each part's first failures."""
    submission, checks, lab = checked_folders(parser, options)
    # A student's copy cannot prove its environment with the reference solution (it must not hold it): the
    # versions it runs on against the pinned ones are what it can say.
    for found in unpinned()[:3]:
        print(f"warning: {found}: the points here may differ from your instructor's (make setup installs the "
              "pinned versions)", file=sys.stderr)
    start_zygote()
    import pytest

    from autograder.harness.sandbox import Unconfined, refuse_unconfined
    from autograder.judge.plugin import checks_command_line, run_checks
    from autograder.judge.session import UNCONFINED_EXIT, refusal

    limits = from_options(options)
    if not options.no_confinement:
        try:
            refuse_unconfined(limits)
        except Unconfined as refused:
            print(f"error: nothing checked: {refused}", file=sys.stderr)
            return 2
    # As root, workers under user ids of their own get a copy they can read (a student's bundle has no batch/).
    if os.geteuid() == 0 and not options.no_sandbox and importlib.util.find_spec("autograder.batch"):
        from autograder.batch.staging import private_copy
        copy = private_copy(lab, submission, limits)
    else:
        copy = contextlib.nullcontext(submission.resolve())
    with copy as folder:
        args = checks_command_line(checks, folder, options.part, options.results_json, options.reference)
        # The plugin prints the points and each unfinished part's first failure (--verbose: every one); another -q
        # drops pytest's "N failed in X s", which reads as a crash: the plugin's summary is the last word.
        args += [*limits.argv(), "--tb=short" if options.verbose else "--tb=no", "-q", "--progress",
                 *["--no-sandbox"] * options.no_sandbox, *["--no-confinement"] * options.no_confinement]
        code = int(run_checks(args))
    if code == UNCONFINED_EXIT:  # a worker refused after all (the probe passed): say why, once
        print(f"error: nothing checked: {refusal[-1]}", file=sys.stderr)
    if code == pytest.ExitCode.TESTS_FAILED and "MAKELEVEL" in os.environ:  # make's recipe: its "Error 1" follows
        print(MAKE_ERROR_NOTE)
    return code




def checked_folders(parser, options) -> tuple[Path, Path, Lab]:
    """``check``'s submission folder, checks folder and lab, each said in one line where it is not there."""
    try:
        submission = options.submission or find_lab(options.lab).release
    except LabError as exc:  # several labs and none named: say which exist
        parser.error(str(exc))
    tests = submission / "tests"  # the kit's own copy of a lab holds its checks; an upload's are the student's
    own = None if tests.is_symlink() else tests.resolve()  # a link there, into the kit's or elsewhere: the student's
    if options.checks:
        checks = options.checks.resolve()
    elif own and (own / "points.toml").is_file() and kit_checks(own):
        checks = own
    else:  # an upload: no tests/, or a student's own (a Classroom 50 clone's), which the judge would run unconfined
        checks = release_checks(submission, options.lab) or tests
        if checks == tests and os.path.lexists(tests):
            parser.error(f"{tests} holds a student's checks, not the kit's: name the lab (--lab) or the checks (--checks)")
    if not (checks / "points.toml").is_file():
        parser.error(f"no checks in {checks} (expected points.toml and test_*.py)")
    try:
        lab = Lab.load(checks.parent)
    except LabError as exc:
        parser.error(str(exc))
    if options.part and options.part not in lab.part_ids:
        parser.error(f"no part {options.part!r} in the {lab.name} lab: its parts are {', '.join(lab.part_ids)}")
    return submission, checks, lab


def start_zygote() -> None:
    """For a judge in this process, once its arguments hold (:mod:`autograder.harness.clean_start`: the
    process starts again clean, with torch imported and the zygote forked, and comes back here)."""
    from autograder.harness.clean_start import restart_clean

    restart_clean("autograder.__main__")


def shard_argument(text: str):
    from autograder.batch.staging import Shard  # only when asked: `check` must start fast

    return Shard.parse(text)


def at_least_one(text: str) -> int:
    """A count of runs or lanes: a whole number, 1 or more (0 runs would grade nothing and say all is well)."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return count


def submissions_folder(parser, options) -> Path:
    if not options.submissions.is_dir():
        parser.error(f"no submissions folder {options.submissions}")
    return options.submissions.resolve()


def no_lab_handed_in(parser, options, labs: list[Lab]):
    parser.error(f"no student folder in {options.submissions} holds a lab's folder "
                 f"({', '.join(lab.name for lab in labs)})")


def record_in_gradebook(options, labs: list[Lab], runs) -> bool:
    """Record every run in the gradebook; return whether every student was."""
    from autograder.platforms.gradebook import course_gradebook, record

    gradebook = options.gradebook or course_gradebook()
    by_name = {lab.name: lab for lab in labs}
    complete = True
    for run in runs:
        print(f"recording the {run.lab} points in {gradebook} (nbgrader's gradebook: a few seconds a lab)...",
              flush=True)
        recorded, refused = record(by_name[run.lab], run.records, gradebook)
        print(f"recorded the {run.lab} points of {recorded} students in {gradebook}")
        for student, why in refused.items():
            print(f"error: not recorded in the gradebook: {run.lab}: {one_line(student)}: {why}", file=sys.stderr)
        complete = complete and not refused
    return complete


def grade_command(parser, options) -> int:
    labs = chosen_labs(parser, options)
    from autograder.batch.grade import EnvironmentUnproven, grade_course
    from autograder.batch.outputs import ForeignOutput, set_aside
    from autograder.batch.staging import labs_submitted
    from autograder.harness.sandbox import Unconfined

    submissions = submissions_folder(parser, options)
    if options.shard and options.nbgrader:
        parser.error("a shard records nothing in the gradebook: merge the shards with --nbgrader (make merge NBGRADER=1)")
    out = options.out.resolve()
    if options.shard:
        from autograder.batch.shard import write_shard_file

        write_shard_file(out, options.shard, [lab.name for lab in labs_submitted(labs, submissions)])
    try:
        runs = grade_course(labs, submissions, out, jobs=options.jobs, force=options.force,
                            limits=from_options(options), replay=not options.no_replay, shard=options.shard,
                            files_required=not options.no_confinement, repeat=options.repeat,
                            strip_prefix=options.strip_prefix, debug=options.debug)
    except (Unconfined, ForeignOutput, EnvironmentUnproven) as refused:
        graded = getattr(refused, "graded", ())
        done = f"graded {', '.join(graded)} (reports in {out}), not the rest" if graded else "nothing graded"
        print(f"error: {done}: {refused}", file=sys.stderr)
        return 2
    if not runs:
        no_lab_handed_in(parser, options, labs)
    recorded = record_in_gradebook(options, labs, runs) if options.nbgrader else True
    for run in runs:
        for warning in run.warnings:
            print(f"warning: not enforced on this machine: {warning}", file=sys.stderr)
        for student, why in run.ungraded.items():
            print(f"error: not graded: {run.lab}: {one_line(student)}: {one_line(why)}", file=sys.stderr)
        for check, students in run.unstable.items():
            print(f"warning: unstable: {run.lab}: {check}: its verdict changed between the {options.repeat} runs for "
                  f"{', '.join(one_line(s) for s in students[:5])}{', ...' if len(students) > 5 else ''}",
                  file=sys.stderr)
        if run.removed:
            names = ", ".join(one_line(name) for name in run.removed[:5]) + (", ..." if len(run.removed) > 5 else "")
            print(f"{run.lab}: moved the reports of {len(run.removed)} students no longer in the submissions "
                  f"({names}) to {set_aside(out / run.lab)}")
        files = "" if options.shard else "grades.csv, report.html, checks.csv, "
        print(f"{run.lab}: graded {run.graded} submissions ({run.skipped} unchanged, skipped) of "
              f"{run.students} in {run.seconds:.1f} s; mean {run.mean:.1f}; reports in {out / run.lab}/ "
              f"({files}students/<student>/feedback.html)")
    if options.shard:
        print(f"shard {options.shard} of the course: {out}/ (students' reports only; make merge SHARDS=... joins "
              f"every shard's folder into the class files)")
    else:
        print(f"the course: {out / 'grades.csv'} (one row per student, one total per lab)")
    return 1 if any(run.ungraded for run in runs) or not recorded else 0


def verify_command(parser, options) -> int:
    labs = chosen_labs(parser, options)
    from autograder.batch.staging import labs_submitted
    from autograder.batch.verify import verify

    submissions = submissions_folder(parser, options)
    out = options.out.resolve()
    same, verified = True, 0
    for lab in labs_submitted(labs, submissions):
        if not (out / lab.name).is_dir():
            continue
        verified += 1
        checked = verify(lab, submissions, out / lab.name, options.students, options.repeat, options.jobs,
                         from_options(options), not options.no_confinement, options.strip_prefix)
        for verdict in checked.verdicts:
            print(verdict.line(lab.name))
        for check, students in checked.unstable.items():
            print(f"{lab.name}: unstable: {check}: its verdict changed between the {options.repeat} runs for "
                  f"{', '.join(one_line(s) for s in students)}")
        same = same and checked.identical
    if not verified:  # nothing recorded is nothing proven, not "identical"
        parser.error(f"no grades of a lab handed in under {submissions} are recorded in {out}: nothing to verify")
    return 0 if same else 1


def merge_command(parser, options) -> int:
    labs = chosen_labs(parser, options)
    from autograder.batch.outputs import ForeignOutput
    from autograder.batch.shard import MergeError, merge

    submissions = submissions_folder(parser, options)
    out = options.out.resolve()
    try:
        runs = merge(labs, [folder.resolve() for folder in options.shards], submissions, out)
    except (MergeError, ForeignOutput) as exc:
        print(f"error: not merged: {exc}", file=sys.stderr)
        return 1
    if not runs:
        no_lab_handed_in(parser, options, labs)
    recorded = record_in_gradebook(options, labs, runs) if options.nbgrader else True
    for run in runs:
        print(f"{run.lab}: {run.students} students from {len(options.shards)} shards; mean {run.mean:.1f}; "
              f"reports in {out / run.lab}/")
    print(f"the course: {out / 'grades.csv'} (one row per student, one total per lab)")
    return 0 if recorded else 1


if __name__ == "__main__":
    from autograder.ending import run_to_end

    run_to_end(main)
