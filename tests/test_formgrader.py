"""Written answers as the instructor reads them: docs/deploying.md's procedure (`nbgrader autograde` with the kit's
nbgrader_config.py), then nbgrader's formgrader, served by a real Jupyter server, its page for a submission
loaded by headless Chromium. Nothing a student wrote in a Markdown or raw cell renders live."""

import contextlib
import json
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import LAB, nbgrader_course, run_in_course

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# Each, rendered live, marks the page as it loads (not alert(): it would stop Chromium's --dump-dom).
MARK = "document.documentElement.dataset.pwned += ' {}'"
CRAFTED = f"""Scaling keeps the softmax soft: $\\sqrt{{d_k}}$ **grows** with the dimension.
<img src=x onerror="{MARK.format('img')}">
<script>{MARK.format('script')}</script>
[a link](javascript:alert(1))
<a href="javascript:alert(1)">another link</a>
<iframe src="javascript:parent.{MARK.format('iframe')}"></iframe>
<svg onload="{MARK.format('svg')}"><circle r="5"/></svg>
<style>body {{ display: none }} /* pwned */</style>
```mermaid
<img src=x onerror="{MARK.format('mermaid')}">
```"""
RAW_HTML = '<a class="navbar-fixed-top" id="submission_id" href="javascript:alert(1)">a raw cell: pwned</a>'


def crafted_submission(release: Path, target: Path) -> list[str]:
    """mallory's notebook: the released one with ``CRAFTED`` as an answer, as a cell of her own, after an
    unlocked heading of the instructor's and over a locked question (which nbgrader restores), and a raw
    HTML cell; the other answers left unanswered. Returns the texts the formgrader must show as text."""
    notebook = json.loads(release.read_text())
    cells = {cell["metadata"].get("nbgrader", {}).get("grade_id"): cell for cell in notebook["cells"]}
    heading = next(cell for cell in notebook["cells"] if "".join(cell["source"]).startswith("## 1. Scores"))
    heading["source"] = "".join(heading["source"]) + "\n\n" + CRAFTED
    cells["why_sqrt_dk"]["source"] = CRAFTED
    cells["why_minus_inf_question"]["source"] = CRAFTED
    notebook["cells"][1:1] = [{"cell_type": "markdown", "metadata": {}, "source": "My notes.\n" + CRAFTED},
                              {"cell_type": "raw", "metadata": {"raw_mimetype": "text/html"}, "source": RAW_HTML}]
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(notebook))
    return [heading["source"], CRAFTED, "My notes.\n" + CRAFTED, RAW_HTML]


# One xdist worker serves both tests that read the formgrader (make test's --dist loadgroup): each worker would
# otherwise autograde and serve its own (10 s).
FORMGRADER_GROUP = pytest.mark.xdist_group("formgrader")


@pytest.fixture(scope="module")
def formgrader(tmp_path_factory, empty_gradebook):
    """The formgrader's page URL for mallory's autograded notebook, the texts she wrote, and the gradebook."""
    from nbgrader.api import Gradebook  # 0.6 s to import: paid by these tests alone

    tmp = tmp_path_factory.mktemp("formgrader")
    course = nbgrader_course(tmp / "course", empty_gradebook)
    run_in_course(course, "nbgrader", "generate_assignment", LAB.name, f"--CourseDirectory.release_directory={tmp / 'release'}")
    written = crafted_submission(course / "assignments" / LAB.name / f"{LAB.notebook}.ipynb",
                                 course / "submitted" / "mallory" / LAB.name / f"{LAB.notebook}.ipynb")
    run_in_course(course, "nbgrader", "autograde", LAB.name)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission = gb.find_submission_notebook(LAB.notebook, LAB.name, "mallory").id
    token, runtime = secrets.token_hex(16), tmp / "runtime"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp),
           "JUPYTER_CONFIG_DIR": str(tmp / "config"), "JUPYTER_RUNTIME_DIR": str(runtime)}
    server = subprocess.Popen([str(Path(sys.executable).parent / "jupyter"), "server", "--ServerApp.ip=127.0.0.1",
                               "--ServerApp.port=0", "--ServerApp.open_browser=False", "--ServerApp.allow_root=True",
                               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={course}"],
                              cwd=course, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = runtime / f"jpserver-{server.pid}.json"
        for _ in range(600):
            if started.is_file() or server.poll() is not None:
                break
            time.sleep(0.1)
        port = json.loads(started.read_text())["port"]
        # The server writes its port before it listens on it (jupyter_server binds in its event loop's first turn).
        for _ in range(600):
            with contextlib.suppress(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=5):
                break
            assert server.poll() is None, "the Jupyter server stopped before it listened"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/formgrader/submissions/{submission}/?token={token}", written, course
    finally:
        server.terminate()
        server.wait(timeout=30)


def assert_inert(page: str, written: list[str]) -> None:
    """Every text mallory wrote is on ``page`` as text in a code block, nothing of it as HTML; the
    instructor's own text (a locked question she overwrote included) renders as before."""
    from bs4 import BeautifulSoup  # nbconvert's dependency

    soup = BeautifulSoup(page, "html.parser")
    assert soup.html.get("data-pwned") is None, soup.html["data-pwned"]  # what of hers ran, in a browser
    for tag in soup.find_all(True):
        assert not [value for value in tag.attrs.values() if "pwned" in str(value) or "javascript:" in str(value)], tag
    assert not soup.find_all(["iframe", "svg"]) and not [tag for tag in soup.find_all(["script", "style"]) if "pwned" in tag.text]
    hers = [div for div in soup.select(".text_cell_render") if "pwned" in div.get_text()]
    assert [[tag.name for tag in div.find_all(True)] for div in hers] == [["pre", "code"]] * len(written)
    assert sorted(div.code.get_text() for div in hers) == sorted(text + "\n" for text in written)
    assert soup.find("strong", string="Question 2")
    assert "2. From scores to weights¶" in [heading.get_text() for heading in soup.find_all("h2")]


@pytest.mark.slow
@FORMGRADER_GROUP
def test_the_formgrader_serves_student_text_as_text(formgrader):
    from nbgrader.api import Gradebook

    url, written, course = formgrader
    with urllib.request.urlopen(url, timeout=60) as response:
        assert_inert(response.read().decode(), written)
    # Autograde scored the answers before they became code blocks: an unanswered one is 0 unread.
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        crafted, unanswered = (gb.find_grade(answer, LAB.notebook, LAB.name, "mallory")
                               for answer in ("why_sqrt_dk", "why_minus_inf"))
        assert crafted.needs_manual_grade and (unanswered.score, unanswered.needs_manual_grade) == (0, False)


@pytest.mark.slow
@FORMGRADER_GROUP
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_nothing_a_student_wrote_runs_in_the_formgrader(formgrader):
    """The live page in Chromium, its scripts run (the formgrader's own, and any of mallory's that got through)."""
    url, written, _ = formgrader
    run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert 'tabindex="-1"' in run.stdout  # the formgrader's script ran: it takes the page's links out of the tab order
    assert_inert(run.stdout, written)


def test_autograde_runs_nbgrader_own_steps_then_the_kits():
    """nbgrader_config.py spells out nbgrader's autograde steps: they must stay nbgrader's own."""
    from nbgrader.converters import Autograde
    from traitlets.utils.importstring import import_item

    from autograder.course import course_config
    from autograder.platforms.inert_answers import InertStudentCells

    configured = [import_item(step) for step in course_config().Autograde.autograde_preprocessors]
    assert configured == [*Autograde.autograde_preprocessors.default(), InertStudentCells]
