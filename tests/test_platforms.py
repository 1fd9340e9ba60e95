"""The platforms: the student bundle with its CI (GitHub Actions, GitLab CI, Classroom 50), the Gradescope
autograder."""

import ast
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import mistune
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from autograder.authoring.bundle import gradescope_zip, student_bundle
from autograder.course import hidden_line_ranges, solution_line_ranges
from conftest import DEMO, KIT, LAB, RELEASE, SOLUTIONS
from test_release import secret_lines

pytestmark = pytest.mark.slow  # grades, or starts processes: left out of make test-fast

ACTIONLINT = Path(sys.executable).parent / "actionlint"
SCHEMA = json.loads((Path(__file__).parent / "gradescope_results.schema.json").read_text())
# A student's machine writes bytecode as Python does by default. Where this run's environment turns
# that off, every process in the student's venv would compile torch again (import torch: 2.9 s, not 1.3).
STUDENT_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def build(lab, out: Path) -> dict[str, Path]:
    return {"student": student_bundle(lab, out), "gradescope": gradescope_zip(lab, out)}


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The first lab's bundle and zip, for the tests that grade a whole cohort through them."""
    return build(LAB, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def lab_dist(lab, tmp_path_factory):
    """Each lab's bundle and zip: every lab gets everything the first one has."""
    return build(lab, tmp_path_factory.mktemp(f"dist-{lab.name}"))


def unzip(archive: Path, into: Path) -> Path:
    with zipfile.ZipFile(archive) as bundle:
        for entry in bundle.infolist():
            bundle.extract(entry, into)
            os.chmod(into / entry.filename, entry.external_attr >> 16 & 0o777)
    return into


# -- the student bundle ------------------------------------------------------------------------------

def test_the_bundle_holds_what_a_student_needs_and_no_secret(lab, lab_dist):
    with zipfile.ZipFile(lab_dist["student"]) as bundle:
        names = set(bundle.namelist())
        # The lab's files: the harness (autograder/) is the kit's own code, not built from source/.
        text = "\n".join(bundle.read(n).decode("utf-8", "replace") for n in names if "/autograder/" not in n)
    root, name = f"{lab.name}-student/", lab.name
    for required in ("README.md", "Makefile", "requirements.txt", "requirements-ci.txt", ".github/workflows/checks.yml",
                     ".gitlab-ci.yml",
                     f"{name}/Makefile", f"{name}/{lab.notebook}.ipynb", f"{name}/tests/points.toml",
                     *(f"{name}/{module}" for module in lab.modules), "autograder/__main__.py"):
        assert root + required in names, required
    assert not any("misconceptions.toml" in n or "/solutions/" in n or "/source/" in n for n in names)
    lines = {line.strip() for line in text.split("\n")}
    for secrets in (secret_lines(lab, solution_line_ranges), secret_lines(lab, hidden_line_ranges)):
        leaked = {line for module in secrets.values() for line in module if line in lines}
        assert not leaked, sorted(leaked)[:5]
    assert "torch==2.13.0" in text


def test_the_bundle_carries_the_release_date_and_the_same_kit_gives_the_same_bytes(tmp_path, monkeypatch):
    """Every file of the bundle, in the zip and in its folder, is dated as the release (the last commit
    of what it is made of; SOURCE_DATE_EPOCH when set), not 1980; building it again changes no byte."""
    committed = int(subprocess.run(["git", "log", "-1", "--format=%ct", "--", str(LAB.release), "autograder", "deploy"],
                                   cwd=KIT, capture_output=True, text=True, check=True).stdout)
    first = student_bundle(LAB, tmp_path / "a")
    with zipfile.ZipFile(first) as bundle:
        assert {entry.date_time for entry in bundle.infolist()} == {time.gmtime(committed - committed % 2)[:6]}  # zip: 2 s
    assert {int(p.stat().st_mtime) for p in (tmp_path / "a" / f"{LAB.name}-student").rglob("*") if p.is_file()} \
        == {committed}
    assert student_bundle(LAB, tmp_path / "b").read_bytes() == first.read_bytes()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1790000000")  # 2026-09-21
    with zipfile.ZipFile(student_bundle(LAB, tmp_path / "c")) as bundle:
        assert bundle.infolist()[0].date_time == (2026, 9, 21, 14, 13, 20)


def test_the_bundle_ships_only_what_a_student_runs_and_its_requirements_cover_it(lab, lab_dist):
    """No batch grading, reports, gradebook or release builder (their libraries are not a student's);
    every library the shipped harness imports is in the student's requirements."""
    with zipfile.ZipFile(lab_dist["student"]) as bundle:
        harness = {n.split("/", 1)[1]: bundle.read(n).decode() for n in bundle.namelist() if "/autograder/" in n}
    python = {name: text for name, text in harness.items() if name.endswith(".py")}
    assert {"autograder/__main__.py", "autograder/judge/plugin.py", "autograder/platforms/ci.py",
            "autograder/reports/feedback.py", "autograder/reports/templates/feedback.html",
            "autograder/harness/worker.py"} <= set(harness)
    assert not [n for n in harness if n.startswith(("autograder/batch/", "autograder/authoring/"))
                or n in ("autograder/platforms/gradebook.py", "autograder/platforms/gradescope.py",
                         "autograder/reports/class_report.py", "autograder/reports/similarity.py")]
    imported = {alias.name.split(".")[0] if isinstance(node, ast.Import) else node.module.split(".")[0]
                for text in python.values() for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.Import | ast.ImportFrom) and getattr(node, "level", 0) == 0
                for alias in node.names}
    libraries = {canonicalize_name(d) for name in imported - sys.stdlib_module_names - {"autograder"}
                 for d in importlib.metadata.packages_distributions().get(name, [name])}
    missing = libraries - set(pins(KIT / "deploy" / "student" / "requirements.txt"))
    assert not missing, f"the student bundle imports {sorted(missing)}, which students do not install"


def pins(path: Path) -> dict[str, str]:
    return {canonicalize_name(line.split("==")[0]): line.strip() for line in path.read_text().splitlines()
            if "==" in line and not line.startswith("#")}


def closure(names) -> set[str]:
    """The distributions ``names`` need, as installed here from the kit's pins (extras followed);
    without pip, which every venv brings. setuptools is pinned: torch needs >= 77.0.3, newer than the one
    Python 3.11's venv brings, and 3.12's brings none (unpinned, each install would take the newest)."""
    seen, todo = set(), [(canonicalize_name(name), "") for name in names]
    while todo:
        name, extra = todo.pop()
        if (name, extra) not in seen:
            seen.add((name, extra))
            for requirement in map(Requirement, importlib.metadata.requires(name) or []):
                if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                    todo += [(canonicalize_name(requirement.name), e) for e in ("", *requirement.extras)]
    return {name for name, _ in seen} - {"pip"}


def test_student_requirements_are_the_closure_of_what_students_use_pinned_as_the_kit():
    student = KIT / "deploy" / "student" / "requirements.txt"
    text = student.read_text()
    direct = {canonicalize_name(line.split("==")[0]) for line in text[:text.index("# What those need")].splitlines()
              if "==" in line and not line.startswith("#")}
    listed, needed = set(pins(student)), closure(direct)
    assert listed == needed, f"{student}: add {sorted(needed - listed)}, remove {sorted(listed - needed)}"
    kit = pins(KIT / "requirements.txt")
    assert all(kit[name] == pin for name, pin in pins(student).items())
    assert not {"nbgrader", "copydetect", "sqlalchemy", "pytest-xdist"} & set(pins(student))
    # CI installs what the checks run (the harness's libraries, not JupyterLab), at the student's pins.
    ci = pins(KIT / "deploy" / "student" / "requirements-ci.txt")
    assert all(pins(student)[name] == pin for name, pin in ci.items())
    needed = closure(["torch", "pytest", "hypothesis", "jinja2", "mistune", "numpy", "landlock", "pyseccomp", "traitlets"])
    assert set(ci) == needed and "jupyterlab" not in ci, sorted(needed ^ set(ci))


def test_no_pin_brings_a_grammar_compiled_at_every_jsonschema_import():
    """jsonschema 4.25+'s format-nongpl extra (jupyter-events') needs rfc3987-syntax, which compiles a Lark
    grammar whenever jsonschema is imported: 0.8 CPU-s of every nbgrader, nbformat or Jupyter process."""
    assert "rfc3987-syntax" not in closure(pins(KIT / "requirements.txt"))


# Its users run in one xdist worker (--dist loadgroup): each worker would set up a venv of its own (6 CPU-s).
STUDENT_REPO = pytest.mark.xdist_group("student-repo")


@pytest.fixture(scope="module")
def student_repo(dist, tmp_path_factory):
    """The bundle unpacked and set up as a student would: `make setup` (a real venv)."""
    root = unzip(dist["student"], tmp_path_factory.mktemp("student")) / "attention-student"
    run = subprocess.run(["make", "setup"], cwd=root, capture_output=True, text=True, timeout=1800, env=STUDENT_ENV)
    assert run.returncode == 0, run.stderr[-3000:]
    torch_installer = next((root / ".venv" / "lib").glob("python3*/site-packages/torch-*.dist-info/INSTALLER"))
    assert torch_installer.read_text().strip() == "uv"  # as the kit's own venv; pip is the fallback
    return root


def make(root, *args, env=None):
    return subprocess.run(["make", "--no-print-directory", *args], cwd=root, capture_output=True, text=True,
                          timeout=900, env={**STUDENT_ENV, **(env or {})})


@STUDENT_REPO
def test_students_jupyterlab_has_no_nbgrader_and_runs_the_notebook(student_repo, tmp_path):
    bin_dir = student_repo / ".venv" / "bin"
    assert subprocess.run([bin_dir / "python", "-c", "import nbgrader"], capture_output=True, env=STUDENT_ENV).returncode != 0
    extensions = subprocess.run([bin_dir / "jupyter", "labextension", "list"], capture_output=True, text=True,
                                env=STUDENT_ENV)
    assert extensions.returncode == 0 and "nbgrader" not in extensions.stdout + extensions.stderr
    folder = tmp_path / "attention"
    shutil.copytree(student_repo / "attention", folder)
    run = subprocess.run([bin_dir / "jupyter", "nbconvert", "--to", "notebook", "--execute", "--output", "ran",
                          f"{LAB.notebook}.ipynb"], cwd=folder, capture_output=True, text=True, timeout=600,
                         env=STUDENT_ENV)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "not implemented yet" in (folder / "ran.ipynb").read_text()


@STUDENT_REPO
def test_students_make_check_on_stubs_and_on_solutions(student_repo, tmp_path):
    stubs = make(student_repo, "check", "PART=scores")
    assert stubs.returncode != 0 and "scores            0 / 8.5" in stubs.stdout
    done = tmp_path / "done"
    shutil.copytree(student_repo / "attention", done / "attention")
    for module in SOLUTIONS.glob("*.py"):
        shutil.copy(module, done / "attention" / module.name)
    full = make(student_repo, "check", f"SUBMISSION={done / 'attention'}")
    assert full.returncode == 0, full.stdout[-3000:]
    assert "total          84.5 / 84.5" in full.stdout


def repo_with(student_repo, tmp_path, edit=None) -> Path:
    """A copy of the student's repository sharing its venv: the solutions, with ``edit(folder)`` made."""
    repo = tmp_path / "repo"
    shutil.copytree(student_repo, repo, symlinks=True, ignore=shutil.ignore_patterns(".venv"))
    (repo / ".venv").symlink_to(student_repo / ".venv")
    for module in SOLUTIONS.glob("*.py"):
        shutil.copy(module, repo / "attention" / module.name)
    if edit:
        edit(repo / "attention")
    return repo


def one_right_one_wrong(folder: Path) -> None:
    """dropout's survivors not rescaled (a wrong value); scores raising on its own line (an exception)."""
    dropout = folder / "dropout.py"
    dropout.write_text(dropout.read_text().replace("x / (1 - p)", "x"))
    scores = folder / "scores.py"
    scores.write_text(scores.read_text().replace('def attention_scores(inputs):\n',
                                                 'def attention_scores(inputs):\n    raise ValueError("not yet")\n', 1))


@STUDENT_REPO
def test_ci_run_shows_the_feedback_where_github_and_gitlab_show_it(student_repo, tmp_path):
    import xml.etree.ElementTree as ET

    repo = repo_with(student_repo, tmp_path, one_right_one_wrong)
    summary = tmp_path / "summary.md"
    summary.write_text("earlier steps\n")
    run = make(repo, "ci", env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
                                "PYTEST_ADDOPTS": "--collect-only"})  # the workflow's own pytest settings: not the checks'
    assert run.returncode != 0  # a check failed: the push shows red
    feedback = (repo / "ci-results" / "feedback.md").read_text()
    assert summary.read_text() == "earlier steps\n" + feedback + "\n" and "| dropout |" in feedback
    annotations = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    assert annotations and all(line.startswith("::error file=attention/scores.py,line=") for line in annotations), \
        run.stdout[-2000:]
    suite = ET.parse(repo / "ci-results" / "junit.xml").getroot().find("testsuite")
    failed = {(case.get("classname"), case[0].tag) for case in suite if len(case)}
    assert ("attention.dropout", "failure") in failed and ("attention.scores", "error") in failed
    assert {name.split(".")[1] for name, _ in failed} == {"dropout", "scores"}, failed
    # All right: exit 0, no annotation.
    good = repo_with(student_repo, tmp_path / "good")
    done = make(good, "ci", env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "s2.md")})
    assert done.returncode == 0 and "::error" not in done.stdout, done.stdout[-2000:]


CLASSROOM50_ENV = {"CLASSROOM": "ml101", "ASSIGNMENT": "attention", "SUBMISSION_TAG": "submit/20261128T080000Z-abc1234",
                   "OWNER": "ada", "USERNAME": "ada", "ASSIGNMENT_TYPE": "individual",
                   "COMMIT_URL": "https://github.com/ml101/ml101-attention-ada/commit/abc1234",
                   "RELEASE_URL": "https://github.com/ml101/ml101-attention-ada/releases/tag/submit/x",
                   "REVIEW_URL": "https://github.com/ml101/ml101-attention-ada/compare/a...b"}
CLASSROOM50_SCHEMA = json.loads((Path(__file__).parent / "classroom50_result.schema.json").read_text())


@STUDENT_REPO
def test_classroom50_result_is_whole_points_in_its_schema_and_the_release_says_the_scale(student_repo, tmp_path):
    import jsonschema

    repo = repo_with(student_repo, tmp_path, one_right_one_wrong)
    summary = tmp_path / "summary.md"  # the runner mirrors release-body.md there: make classroom50 leaves it alone
    run = make(repo, "classroom50", env={**CLASSROOM50_ENV, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert run.returncode == 0, run.stdout[-3000:]  # graded, whatever the checks say
    assert not summary.exists()
    result = json.loads((repo / "result.json").read_text())
    jsonschema.validate(result, CLASSROOM50_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):  # the schema does judge: a score in halves is refused
        jsonschema.validate({**result, "score": 1.5}, CLASSROOM50_SCHEMA)
    assert (result["classroom"], result["submission"], result["owner"]) == ("ml101", CLASSROOM50_ENV["SUBMISSION_TAG"],
                                                                            "ada")
    assert result["max-score"] == 169 and 0 < result["score"] < 169  # 84.5 points, every check times 2
    names = [t["test-name"] for t in result["tests"]]
    assert sum(t["max-score"] for t in result["tests"]) == 169 and all(len(n.encode()) <= 100 for n in names)
    assert len(set(names)) == len(names)
    body = (repo / "release-body.md").read_text()
    assert body.startswith(f"**Attention from first principles: {result['score']}/169** (every check's points times 2")
    assert "| dropout |" in body and "hidden" not in body.lower()
    feedback = (repo / "ci-results" / "feedback.md").read_text()  # the feedback page, as make ci writes it
    assert feedback.split("\n## ")[0] in body and "data:image" in feedback  # its table; its pictures, as text:
    assert "data:image" not in body and "* marks an entry that differs" in body  # GitHub shows no data URI
    # Outside the runner (a student trying it): every field still there, from what the environment has.
    local = make(repo, "classroom50")
    assert local.returncode == 0, local.stdout[-3000:]
    jsonschema.validate(json.loads((repo / "result.json").read_text()), CLASSROOM50_SCHEMA)


def test_the_classroom50_autograder_lets_the_sandbox_have_user_namespaces_where_ubuntu_refuses_them(tmp_path):
    """GitHub's ubuntu-24.04 runners refuse unprivileged user namespaces (AppArmor): autograder.py turns
    that off with the runner's sudo, as the student workflow's step does; where it is off, it asks nothing."""
    source = (KIT / "deploy" / "classroom50" / "autograder.py").read_text()
    function = next(node for node in ast.parse(source).body
                    if isinstance(node, ast.FunctionDef) and node.name == "allow_user_namespaces")
    namespace = {"Path": Path, "shutil": shutil, "subprocess": subprocess}
    exec(compile(ast.Module([function], []), "autograder.py", "exec"), namespace)
    (tmp_path / "bin").mkdir()
    sudo = tmp_path / "bin" / "sudo"
    sudo.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {tmp_path / 'asked'}\n")
    sudo.chmod(0o755)
    switch = tmp_path / "apparmor_restrict_unprivileged_userns"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
        for value in ("0\n", "1\n"):
            switch.write_text(value)
            namespace["allow_user_namespaces"](switch)
    assert (tmp_path / "asked").read_text() == "-n sysctl -w kernel.apparmor_restrict_unprivileged_userns=0\n"


def test_the_classroom50_folder_holds_no_hidden_check_and_no_solution(lab, lab_dist):
    """The folder is published on Pages, readable by anyone with its URL, and read by the student's own job."""
    teacher = lab_dist["student"].parent / f"{lab.name}-classroom50"
    files = [path for path in teacher.rglob("*") if path.is_file() and "autograder" not in path.relative_to(teacher).parts[:1]]
    assert (teacher / "autograder.py").is_file() and (teacher / lab.name / "tests" / "points.toml").is_file()
    assert not any(path.name in lab.modules or path.name == "misconceptions.toml" for path in files)
    lines = {line.strip() for path in files for line in path.read_text(encoding="utf-8").split("\n")}
    for secrets in (secret_lines(lab, solution_line_ranges), secret_lines(lab, hidden_line_ranges)):
        leaked = {line for module in secrets.values() for line in module if line in lines}
        assert not leaked, sorted(leaked)[:5]


@STUDENT_REPO
def test_the_classroom50_autograder_lays_the_teachers_checks_over_the_checkout_and_reuses_its_venv(
        student_repo, dist, tmp_path):
    """A student who edits a public check, or adds one, gains nothing: the teacher's folder replaces the checks.
    The venv is set up outside the checkout, named by the pins, and used as it is where it survives."""
    teacher = dist["student"].parent / f"{LAB.name}-classroom50"
    assert (teacher / "autograder.py").is_file() and not list(teacher.rglob("solutions"))
    repo = repo_with(student_repo, tmp_path, one_right_one_wrong)
    (repo / ".venv").unlink()  # a fresh checkout
    points = repo / "attention" / "tests" / "points.toml"
    points.write_text(points.read_text().replace("= ", "= 0 * ").replace("= 0 * ", "= ", 1))
    (repo / "attention" / "tests" / "conftest.py").write_text("def pytest_collection_modifyitems(items):\n    items.clear()\n")
    # Beside the harness, where the judge runs: modules named as the libraries it imports before any check.
    for library in ("contextlib", "pluggy"):
        (repo / f"{library}.py").write_text(f"raise SystemExit('the student\\'s {library}.py ran in the judge')\n")
    installed = repo / ".plugin-1.0.dist-info"  # an installed package to importlib.metadata, hypothesis's plugin
    installed.mkdir()
    (installed / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin\nVersion: 1.0\n")
    (installed / "entry_points.txt").write_text("[hypothesis]\nplugin = attention.plugin:run\n")
    (repo / "attention" / "plugin.py").write_text("def run():\n    raise SystemExit('the student\\'s plugin ran in the judge')\n")
    env = {**STUDENT_ENV, **CLASSROOM50_ENV, "CLASSROOM50_BUNDLE_DIR": str(teacher), "CLASSROOM50_CACHE": str(tmp_path / "cache")}
    seconds = []
    for _ in range(2):
        (repo / "result.json").unlink(missing_ok=True)
        started = time.monotonic()
        run = subprocess.run([sys.executable, str(teacher / "autograder.py")], cwd=repo, capture_output=True, text=True,
                             timeout=1800, env=env)
        seconds.append(time.monotonic() - started)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        result = json.loads((repo / "result.json").read_text())
        assert result["max-score"] == 169 and 0 < result["score"] < 169  # one part right, one wrong, as the code is
    assert not (repo / "attention" / "tests" / "conftest.py").exists() and not (repo / ".venv").exists()
    assert not (repo / "contextlib.py").exists() and not installed.exists()
    assert (repo / ".git").exists() == (student_repo / ".git").exists()
    [venv] = (tmp_path / "cache" / "pytorch-labs-classroom50").iterdir()
    assert venv.name.startswith("attention-") and "classroom50: reusing" in run.stdout
    assert "uv pip install" not in run.stdout, run.stdout[-2000:]  # the second run installs nothing
    print(f"autograder.py: {seconds[0]:.1f} s with a new venv, {seconds[1]:.1f} s reusing it")


def test_the_bundles_ci_files_run_the_checks(lab, lab_dist, tmp_path):
    root = unzip(lab_dist["student"], tmp_path) / f"{lab.name}-student"
    github = yaml.safe_load((root / ".github/workflows/checks.yml").read_text())
    steps = github["jobs"]["checks"]["steps"]
    runs = [step.get("run", "") for step in steps]
    # As the runner's user the checks confine student code in a user namespace, which Ubuntu 24.04 restricts.
    assert "apparmor_restrict_unprivileged_userns=0" in next(r for r in runs if "sysctl" in r)
    assert [i for i, r in enumerate(runs) if "sysctl" in r][0] < [i for i, r in enumerate(runs) if r.startswith("make ci")][0]
    # .venv cached on the pins; uv's cache restored only where .venv was not (one copy of the wheels a hit).
    caches = [step for step in steps if step.get("uses", "").startswith("actions/cache")]
    assert caches[0]["with"]["path"] == ".venv" and "requirements-ci.txt" in caches[0]["with"]["key"]
    assert caches[1]["if"] == f"steps.{caches[0]['id']}.outputs.cache-hit != 'true'"
    assert next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))["with"]["path"] == "ci-results/"
    gitlab = yaml.safe_load((root / ".gitlab-ci.yml").read_text())["checks"]
    assert gitlab["script"] == ["make ci"] and gitlab["artifacts"]["reports"]["junit"] == "ci-results/junit.xml"


GITLAB_CI_LOCAL = "gitlab-ci-local@4.64.0"  # the last that runs on Debian 12's Node.js 20 (later ones need 22)


def test_the_gitlab_pipeline_runs_for_real(dist, tmp_path):
    """The bundle's .gitlab-ci.yml run by gitlab-ci-local (its job in the shell executor) on a repository with
    one part wrong: the job fails, and its artifacts hold the feedback and the JUnit report."""
    import xml.etree.ElementTree as ET

    if not (shutil.which("npm") and shutil.which("rsync") and shutil.which("git")):
        pytest.skip("gitlab-ci-local needs npm, rsync and git (.ci/run installs rsync)")
    tool = tmp_path / "tool"
    installed = subprocess.run(["npm", "install", "--silent", "--prefix", str(tool), GITLAB_CI_LOCAL],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    repo = unzip(dist["student"], tmp_path) / f"{LAB.name}-student"
    for module in SOLUTIONS.glob("*.py"):
        shutil.copy(module, repo / LAB.name / module.name)
    dropout = repo / LAB.name / "dropout.py"
    dropout.write_text(dropout.read_text().replace("x / (1 - p)", "x"))
    for command in (["init", "-q"], ["add", "-A"], ["-c", "user.email=s@example.org", "-c", "user.name=s", "commit", "-qm", "lab"],
                    ["remote", "add", "origin", "https://gitlab.example.org/course/attention-ada.git"]):
        subprocess.run(["git", *command], cwd=repo, check=True)
    variables = [f"--variable=PIP_FIND_LINKS={os.environ['PIP_FIND_LINKS']}"] if os.environ.get("PIP_FIND_LINKS") else []
    run = subprocess.run([str(tool / "node_modules" / ".bin" / "gitlab-ci-local"), "--force-shell-executor", *variables,
                          "checks"], cwd=repo, capture_output=True, text=True, timeout=1200, env=STUDENT_ENV)
    assert run.returncode != 0 and "FAIL" in run.stdout, run.stdout[-3000:]
    artifacts = repo / ".gitlab-ci-local" / "artifacts" / "checks" / "ci-results"
    assert "| dropout |" in (artifacts / "feedback.md").read_text()
    suite = ET.parse(artifacts / "junit.xml").getroot().find("testsuite")
    assert {case.get("classname") for case in suite if len(case)} == {f"{LAB.name}.dropout"}


# -- workflows are valid GitHub Actions ----------------------------------------------------------------

def actionlint(workflow: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(ACTIONLINT), "-no-color", str(workflow)], cwd=workflow.parent.parent.parent,
                          capture_output=True, text=True, timeout=120)


def test_workflows_pass_actionlint(lab, lab_dist, tmp_path):
    root = unzip(lab_dist["student"], tmp_path) / f"{lab.name}-student"
    for workflow in (root / ".github/workflows/checks.yml", *(KIT / ".github/workflows").glob("*.yml")):
        run = actionlint(workflow)
        assert run.returncode == 0, run.stdout
    # The linter does catch a broken reference (a check that cannot fail proves nothing).
    broken = root / ".github/workflows/checks.yml"
    broken.write_text(broken.read_text().replace("steps.python.outputs.python-version", "steps.pyton.outputs.python-version"))
    assert actionlint(broken).returncode != 0


# -- Gradescope ----------------------------------------------------------------------------------------

def gradescope_root(dist, tmp_path) -> Path:
    """A simulated /autograder: the zip in source/, an empty submission/ and results/."""
    root = tmp_path / "autograder"
    unzip(dist["gradescope"], root / "source")
    (root / "submission").mkdir()
    return root


def run_autograder(root: Path) -> dict:
    run = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True, text=True,
                         timeout=900, env={**os.environ, "AUTOGRADER_ROOT": str(root), "PYTHON": sys.executable})
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    import jsonschema  # a second to import (its format checkers build a grammar): paid here, not at collection

    jsonschema.validate(results, SCHEMA)
    return results


def test_the_zip_has_setup_and_run_autograder_at_its_root(lab, lab_dist):
    with zipfile.ZipFile(lab_dist["gradescope"]) as bundle:
        names = set(bundle.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in bundle.infolist()}
    assert {"setup.sh", "run_autograder", "requirements.txt"} <= names
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert f"source/{lab.name}/tests/misconceptions.toml" in names
    assert {f"solutions/{lab.name}/{module}" for module in lab.modules} <= names


def assert_gradescope_form(results: dict) -> None:
    """What every upload's results.json holds, whatever it scored."""
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))
    hidden = [t for t in results["tests"] if t["visibility"] == "after_published"]
    assert hidden and all(t["output"].startswith(("checks: ", "a hidden check")) and "\n" not in t["output"]
                          for t in hidden)  # one line: what it checks, never inputs or expected values
    for test in hidden:  # the top-level output is visible at once: nothing of a hidden check in it
        assert test["name"].split(": ", 1)[1] not in results["output"], test["name"]
    assert results["output_format"] == "md"


def test_gradescope_grades_each_lab_from_its_zip(lab, lab_dist, tmp_path):
    """The reference scores full marks and the stubs nothing, through the lab's own zip."""
    for version, score in ((lab.reference, lab.max_points), (lab.release, 0)):
        root = gradescope_root(lab_dist, tmp_path / version.parent.name)
        for module in lab.modules:
            shutil.copy(version / module, root / "submission" / module)
        results = run_autograder(root)  # valid against Gradescope's schema
        assert results["score"] == score and results["output"].startswith(f"# {lab.title}:")
        assert_gradescope_form(results)


# Partial credit with hidden checks failed, and the broken upload (full marks and stubs: the test above);
# the format itself is tested on hand-built results (tests/test_results.py); each upload costs a Gradescope run.
@pytest.mark.parametrize("student", ["dara", "kai"])
def test_gradescope_grades_demo_students(dist, tmp_path, student):
    root = gradescope_root(dist, tmp_path)
    shutil.rmtree(root / "submission")
    shutil.copytree(DEMO / student / "attention", root / "submission", symlinks=True)
    results = run_autograder(root)
    assert 0 < results["score"] < 100
    assert_gradescope_form(results)
    if student == "kai":  # the broken upload: its link is left out and said so, its problems listed
        assert results["output"].startswith("**About your upload:**\n\n```text\ndropout.py: a link, left out\n")
        assert "What cost points beyond wrong answers" in results["output"] and "(these cost nothing)" in results["output"]
    else:
        assert results["output"].startswith(f"# {LAB.title}:")
        assert any(t["visibility"] == "after_published" and t["score"] < t["max_score"] for t in results["tests"])


def test_gradescope_finds_modules_in_a_sub_folder_and_in_a_zip(dist, tmp_path):
    nested = gradescope_root(dist, tmp_path / "nested")
    shutil.copytree(SOLUTIONS, nested / "submission" / "lab" / "attention", ignore=shutil.ignore_patterns("tests"))
    results = run_autograder(nested)
    assert results["score"] == 100 and "found in lab/attention/" in results["output"]

    zipped = gradescope_root(dist, tmp_path / "zipped")
    inner = tmp_path / "inner.zip"
    with zipfile.ZipFile(inner, "w") as bundle:
        for module in SOLUTIONS.glob("*.py"):
            bundle.write(module, f"attention/{module.name}")
        bundle.writestr("../escape.py", "print('outside')")
    with zipfile.ZipFile(zipped / "submission" / "upload.zip", "w") as bundle:
        bundle.write(inner, "inner.zip")
    results = run_autograder(zipped)
    assert results["score"] == 100 and "found in upload.zip/inner.zip/attention/" in results["output"]
    assert "../escape.py points outside the archive, skipped" in results["output"]
    assert not any(tmp_path.rglob("escape.py"))


def test_gradescope_grades_the_honest_folder_over_a_stub_and_shows_names_as_text(dist, tmp_path):
    """The issue's upload: a stub copy and the honest one side by side, a folder named as a fake
    heading and a module over the size limit. The folder graded is the stated choice, the others
    are named, no name renders as Markdown, and the module too large is said so."""
    root = gradescope_root(dist, tmp_path)
    for folder, source in (("b_stub", RELEASE), ("a_honest", SOLUTIONS)):
        shutil.copytree(source, root / "submission" / folder, ignore=shutil.ignore_patterns("tests", "*.ipynb", "Makefile"))
    (root / "submission" / "# public checks 84.5 ∕ 84.5").mkdir()
    shutil.copy(RELEASE / "scores.py", root / "submission" / "# public checks 84.5 ∕ 84.5" / "scores.py")
    (root / "submission" / "a_honest" / "<img src=x onerror=alert(1)>.md").write_text("")
    (root / "submission" / "a_honest" / "dropout.py").write_bytes(b"#" * (2 << 20))
    results = run_autograder(root)
    assert results["score"] == 100 - LAB.part("dropout").weight
    output = results["output"]
    assert "the modules were found in a_honest/ and graded from there" in output
    assert "b_stub/: holds 6 of the lab's modules too, left aside" in output
    assert "dropout.py: too large (over 1 MiB), left out" in output
    html = mistune.create_markdown(escape=False)(output)
    assert "<img" not in html and "<h1>public checks" not in html and html.count("<h1") == 1


def test_gradescope_uploads_cannot_reach_outside_through_links(dist, tmp_path):
    """A link to the reference solution scores nothing, and a link named like a zip's target
    folder does not make the unpacking write into the grader."""
    root = gradescope_root(dist, tmp_path)
    solutions = root / "source" / "solutions" / "attention"
    (root / "submission" / "lab").symlink_to(solutions, target_is_directory=True)
    (root / "submission" / "x.zip.contents").symlink_to(root / "source" / "autograder", target_is_directory=True)
    with zipfile.ZipFile(root / "submission" / "x.zip", "w") as bundle:
        bundle.writestr("lane.py", "raise SystemExit('replaced the grader')")
    before = (root / "source" / "autograder" / "batch" / "lane.py").read_text()
    results = run_autograder(root)
    assert results["score"] == 0 and "lab: a link, left out" in results["output"]
    assert (root / "source" / "autograder" / "batch" / "lane.py").read_text() == before


def test_gradescope_always_writes_results(dist, tmp_path):
    root = gradescope_root(dist, tmp_path)
    (root / "submission" / "broken.zip").write_bytes(b"PK\x03\x04 not really a zip")
    results = run_autograder(root)
    assert results["score"] == 0 and "broken.zip: could not be unpacked" in results["output"]


def test_gradescope_explains_an_upload_with_only_the_notebook(dist, tmp_path):
    root = gradescope_root(dist, tmp_path)
    shutil.copy(RELEASE / "attention_lab.ipynb", root / "submission" / "attention_lab.ipynb")
    results = run_autograder(root)
    assert results["score"] == 0
    assert "only a notebook" in results["output"]
