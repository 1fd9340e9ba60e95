"""Classroom 50's autograder for this lab (``make student-bundle`` writes the folder it lives in: copy
that folder's contents to ``CLASSROOM/autograders/ASSIGNMENT/``).

The runner calls it in the student's checkout with the folder at ``$CLASSROOM50_BUNDLE_DIR``. It lays
the folder's harness, public checks, Makefile and pins over the checkout (a student's edit of them
counts for nothing), then ``make classroom50`` sets up the pinned packages (cached between runs where
``.venv`` survives) and runs the public checks once, writing ``./result.json`` and ``./release-body.md``.
Exit 0: graded (the score is in result.json); anything else: the grading itself failed.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

here = Path(os.environ.get("CLASSROOM50_BUNDLE_DIR") or Path(__file__).resolve().parent)
for entry in here.iterdir():
    if entry.name == "autograder.py":
        continue
    target = Path(entry.name)
    if entry.is_dir():
        shutil.copytree(entry, target, dirs_exist_ok=True)
    else:
        shutil.copy(entry, target)
sys.exit(subprocess.call(["make", "classroom50"]))
