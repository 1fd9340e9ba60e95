"""The grading kit: any lab of the course (:mod:`autograder.lab`), released, checked and graded.

The judge (pytest with :mod:`autograder.plugin`) never imports student code: student
modules run in a worker process (:mod:`autograder.worker`) reached through
:class:`autograder.student.Student`, and values cross the pipe in the safe format of
:mod:`autograder.codec`.
"""
