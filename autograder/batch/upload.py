"""One upload graded as Gradescope grades it: ``/autograder/submission`` in,
``/autograder/results/results.json`` out.

``run_autograder`` (in the zip ``make gradescope-zip`` writes) calls ``python -m autograder
gradescope-run --root /autograder``. The lab's files are found in the upload
(:func:`autograder.platforms.gradescope.collect`), then graded by :func:`autograder.batch.grade.grade`
on a cohort of one, with the hidden checks, so Gradescope and ``make grade`` give the same score;
the ``results.json`` is the one that run wrote, with what was found in the upload on top.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import traceback
from pathlib import Path

from autograder.batch.grade import EnvironmentUnproven, grade
from autograder.batch.outputs import student_folder
from autograder.files import what_went_wrong, write_atomically
from autograder.harness.sandbox import Unconfined
from autograder.lab import find_lab
from autograder.platforms.gradescope import collect
from autograder.text import markdown_block


def run(root: Path, jobs: int = 1) -> dict:
    """Grade ``root/submission`` into ``root/results/results.json``; return what was written.
    The autograder zip holds one lab (``make gradescope-zip LAB=...``)."""
    try:
        lab = find_lab()
        with tempfile.TemporaryDirectory(prefix="autograder-gradescope-") as tmp:
            cohort = Path(tmp) / "cohort"
            notes = collect(lab, root / "submission", cohort / "submission" / lab.name)
            grade(lab, cohort, Path(tmp) / "out", jobs=jobs, force=True, stream=io.StringIO(), class_files=False)
            results = json.loads((student_folder(Path(tmp) / "out", "submission") / "results.json").read_text())
        if notes:  # the student's own names, shown as text: no heading, table, link or HTML of theirs renders
            results["output"] = "**About your upload:**\n\n" + markdown_block("\n".join(notes)) + "\n\n" + results["output"]
    except Unconfined as refused:  # nothing ran: the staff must fix the image (the student reads no grader detail)
        print(f"error: nothing graded: {refused}", file=sys.stderr)
        results = {"score": 0.0, "output": "The autograder could not grade this upload: its machine cannot confine "
                   "the code it runs; please tell the course staff.", "tests": []}
    except EnvironmentUnproven as unproven:  # every upload would lose the same points: the staff must fix the image
        print(f"error: nothing graded: {unproven}", file=sys.stderr)
        results = {"score": 0.0, "output": "The autograder could not grade this upload: on its machine the lab's own "
                   "solution does not score full marks; please tell the course staff.", "tests": []}
    except Exception as exc:  # noqa: BLE001 - Gradescope must always get a results.json that says what happened
        traceback.print_exc()  # for the staff, in the autograder's log; the output names no folder of the grader's
        results = {"score": 0.0, "output": "The autograder could not grade this upload; please tell the course "
                   f"staff. ({what_went_wrong(exc)})", "tests": []}
    out = root / "results"
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / "results.json", json.dumps(results, indent=1))
    return results
