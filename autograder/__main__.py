"""Command line: ``python -m autograder {release,solutions,check} ...`` (the Makefile calls these)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from autograder import PARTS
from autograder.release import ASSIGNMENT, build, directory


def pytest_args(checks: Path, submission: Path, part: str | None, results_json: str | None,
                reference: str | None = None) -> list[str]:
    """The pytest command line that runs ``checks`` against ``submission``."""
    args = [str(checks), "-p", "autograder.plugin", "-p", "no:cacheprovider", "--rootdir", str(checks),
            "-c", os.devnull, "--submission", str(submission), "-q", "--no-header", "-rN",
            "--tb=short"]
    if part:
        args += ["-m", part]
    if results_json:
        args += ["--results-json", results_json]
    if reference:
        args += ["--reference", reference]
    return args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("release", help="write assignments/ (stubs, public checks) from source/")
    commands.add_parser("solutions", help="write solutions/ (reference code, all checks) from source/")
    check = commands.add_parser("check", help="run the checks on a submission folder and print the points")
    check.add_argument("--part", choices=PARTS, help="run one part's checks only")
    check.add_argument("--submission", type=Path, default=directory("release") / ASSIGNMENT,
                       help="folder with the six modules (default: assignments/attention)")
    check.add_argument("--checks", type=Path, help="folder of checks (default: the submission's tests/)")
    check.add_argument("--reference", help="reference solution for hidden checks (default: solutions/attention)")
    check.add_argument("--results-json", help="also write the results to this JSON file")
    options = parser.parse_args(argv)

    if options.command == "release":
        print(f"student release written to {build('release')}")
        return 0
    if options.command == "solutions":
        print(f"solutions written to {build('solution')}")
        return 0
    import pytest

    checks = (options.checks or options.submission / "tests").resolve()
    if not (checks / "points.toml").is_file():
        parser.error(f"no checks in {checks} (expected points.toml and test_*.py)")
    return int(pytest.main(pytest_args(checks, options.submission.resolve(), options.part, options.results_json,
                                       options.reference)))


if __name__ == "__main__":
    sys.exit(main())
