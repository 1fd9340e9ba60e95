"""The grading kit: any lab of the course (:mod:`autograder.lab`), released, checked and graded.

The packages follow the data flow, each using only those before it:
:mod:`~autograder.authoring` (a lab's source to release, solutions and bundles),
:mod:`~autograder.harness` (the boundary: student code runs in a sandboxed worker, reached
through :class:`~autograder.harness.remote.RemoteCode`; values cross in the safe format of
:mod:`~autograder.harness.codec`), :mod:`~autograder.judge` (pytest and the checks' side, which
never imports student code), :mod:`~autograder.batch` (a cohort, lane by lane, and its
reports), :mod:`~autograder.platforms` (Classroom, Gradescope, nbgrader's gradebook). ``lab``,
``text`` and ``files`` serve them all; ``tests/test_labs.py`` checks that no import reaches up.
"""
