"""Command line: ``python -m autograder {release,solutions,check,grade,classroom,gradescope,...}``
(the Makefiles call these; ``--help`` lists them all)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from autograder import PARTS
from autograder.release import ASSIGNMENT, KIT_ROOT, build, directory
from autograder.text import one_line


def default_submissions() -> Path:
    submitted = directory("submitted")
    return submitted if submitted.is_dir() else KIT_ROOT / "examples" / "submitted"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    timeout = argparse.ArgumentParser(add_help=False)
    timeout.add_argument("--call-timeout", type=float, default=10.0, help="seconds one call into student code may take")
    commands.add_parser("release", help="write assignments/ (stubs, public checks) from source/")
    commands.add_parser("solutions", help="write solutions/ (reference code, all checks) from source/")
    check = commands.add_parser("check", parents=[timeout],
                                help="run the checks on a submission folder and print the points")
    check.add_argument("--part", choices=PARTS, help="run one part's checks only")
    check.add_argument("--submission", type=Path, default=directory("release") / ASSIGNMENT,
                       help="folder with the six modules (default: assignments/attention)")
    check.add_argument("--checks", type=Path, help="folder of checks (default: the submission's tests/)")
    check.add_argument("--reference", help="reference solution for hidden checks (default: solutions/attention)")
    check.add_argument("--results-json", help="also write the results to this JSON file")
    check.add_argument("--no-sandbox", action="store_true", help="run student code unconfined")
    check.add_argument("-v", "--verbose", action="store_true", help="print every failing check's message")
    commands.add_parser("student-bundle", help="write dist/attention-student/ and .zip (release, harness, "
                                               "README, Makefile, GitHub Classroom workflow)")
    commands.add_parser("gradescope-zip", help="write dist/attention-gradescope.zip (setup.sh, run_autograder)")
    classroom = commands.add_parser("classroom", help="GitHub Classroom: one reporter result per part, "
                                                      "appended to $GITHUB_OUTPUT")
    classroom.add_argument("--submission", type=Path, default=directory("release") / ASSIGNMENT,
                           help="folder with the modules and their tests/ (default: assignments/attention)")
    classroom.add_argument("--output", type=Path, help="step outputs file (default: $GITHUB_OUTPUT, else stdout)")
    gradescope = commands.add_parser("gradescope", help="Gradescope: grade <root>/submission into "
                                                        "<root>/results/results.json")
    gradescope.add_argument("--root", type=Path, default=Path("/autograder"), help="default: /autograder")
    grade = commands.add_parser("grade", parents=[timeout], help="grade every submission of a cohort and write the reports")
    grade.add_argument("--submissions", type=Path, default=default_submissions(),
                       help="folder of <student>/attention/ (default: submitted/ if it exists, else examples/submitted/)")
    grade.add_argument("--out", type=Path, default=KIT_ROOT / "grades", help="where the reports go (default: grades/)")
    grade.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="submissions graded in parallel")
    grade.add_argument("--force", action="store_true", help="grade again even what has not changed")
    grade.add_argument("--nbgrader", action="store_true",
                       help="also record each student's points per part in nbgrader's gradebook")
    grade.add_argument("--gradebook", help="the gradebook's database URL (default: nbgrader_config.py's)")
    grade.add_argument("--budget", type=float, default=60.0,
                       help="seconds the calls into one module of a submission may take in all")
    grade.add_argument("--no-replay", action="store_true",
                       help="run every check in full, even where a submission answers exactly as an earlier one "
                            "that passed it (same scores, slower; see autograder/replay.py)")
    options = parser.parse_args(argv)

    if options.command == "release":
        print(f"student release written to {build('release')}")
        return 0
    if options.command == "solutions":
        print(f"solutions written to {build('solution')}")
        return 0
    if options.command in ("student-bundle", "gradescope-zip"):
        from autograder.bundle import gradescope_zip, student_bundle

        built = student_bundle() if options.command == "student-bundle" else gradescope_zip()
        print(f"written: {built}")
        return 0
    if options.command == "classroom":
        from autograder.classroom import default_output, run

        return run(options.submission.resolve(), options.output or default_output())
    if options.command == "gradescope":
        from autograder.gradescope import run as run_gradescope

        results = run_gradescope(options.root.resolve())
        print(f"score {results['score']:g}; results in {options.root}/results/results.json")
        return 0
    if options.command == "grade":
        from autograder.grade import grade as grade_cohort

        if not options.submissions.is_dir():
            parser.error(f"no submissions folder {options.submissions}")
        run = grade_cohort(options.submissions.resolve(), options.out.resolve(), options.jobs, options.force,
                           options.call_timeout, options.budget, replay=not options.no_replay)
        if options.nbgrader:
            from autograder.gradebook import course_gradebook, record

            gradebook = options.gradebook or course_gradebook()
            print(f"recorded the points of {record(run['records'], gradebook)} students in {gradebook}")
        for warning in run["warnings"]:
            print(f"warning: not enforced on this machine: {warning}", file=sys.stderr)
        for problem in run["ungraded"]:
            print(f"error: not graded: {one_line(problem)}", file=sys.stderr)
        print(f"graded {run['graded']} submissions ({run['skipped']} unchanged, skipped) of {run['students']} "
              f"in {run['seconds']:.1f} s; mean {run['mean']:.1f}/100; reports in {options.out}/ "
              f"(grades.csv, report.html, students/<student>/feedback.md)")
        return 1 if run["ungraded"] else 0
    import pytest

    from autograder.plugin import checks_command_line

    checks = (options.checks or options.submission / "tests").resolve()
    if not (checks / "points.toml").is_file():
        parser.error(f"no checks in {checks} (expected points.toml and test_*.py)")
    args = checks_command_line(checks, options.submission.resolve(), options.part, options.results_json,
                               options.reference)
    # The points table and each unfinished part's first failure (the plugin prints them) are
    # what a student needs; --verbose adds every failing check's message.
    args += ["--call-timeout", str(options.call_timeout), "--tb=short" if options.verbose else "--tb=no"]
    if options.no_sandbox:
        args.append("--no-sandbox")
    return int(pytest.main(args))


if __name__ == "__main__":
    sys.exit(main())
