"""Where grades go: GitHub Classroom and Gradescope (what runs on their machines) and nbgrader's
gradebook.
"""
