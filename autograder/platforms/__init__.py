"""Where grades go, each in its platform's format: GitHub Classroom's reporter (and the Classroom
step), Gradescope's results.json (and finding a lab's files in an upload), nbgrader's gradebook.
"""
