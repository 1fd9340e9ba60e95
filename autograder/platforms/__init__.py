"""Where grades go, each in its platform's format: a student's CI job (JUnit, the job summary and
annotations, Classroom 50's result.json: ``ci.py``), Gradescope's results.json (and finding a lab's files
in an upload), nbgrader's gradebook, a lab notebook's sections (``notebook.py``: a part's public checks as data).
"""
