"""The grading kit: any lab of the course (:mod:`autograder.lab`), released, checked and graded.

The packages follow the data flow, each using only those before it:
:mod:`~autograder.authoring` (a lab's source to release, solutions and bundles),
:mod:`~autograder.harness` (the boundary: student code runs in a sandboxed worker, reached
through :class:`~autograder.harness.remote.RemoteCode`; values cross in the safe format of
:mod:`~autograder.harness.codec`), :mod:`~autograder.judge` (pytest and the checks' side, which
never imports student code), :mod:`~autograder.reports` (what a grade tells its readers),
:mod:`~autograder.platforms` (Classroom's, Gradescope's and nbgrader's formats) and
:mod:`~autograder.batch` (a cohort, lane by lane, and one Gradescope upload). ``results`` (a grade
as data), ``limits``, ``course``, ``lab``, ``text`` and ``files`` serve them all;
``tests/test_layout.py`` checks that no import reaches up.
"""
