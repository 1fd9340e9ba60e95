"""The attention lab's grading kit: release builder, check harness and (later) the batch grader.

The judge (pytest with :mod:`autograder.plugin`) never imports student code: student
modules run in a worker process (:mod:`autograder.worker`) reached through
:class:`autograder.student.Student`, and values cross the pipe in the safe format of
:mod:`autograder.codec`.
"""

PARTS = ("scores", "softmax", "projections", "masking", "dropout", "heads")
"""The six task ids, in the order the documents teach them. Each is a module name in the
assignment, a pytest marker, a section of ``points.toml`` and a ``make check PART=...`` value."""

USES = {"heads": ("masking",)}
"""Parts whose modules build on another part's module (heads builds masking.CausalAttention): when
both lose points, the feedback of the first names the second."""
