"""From a lab's source (``source/<lab>/``) to what people get: the release, the solutions, the
student bundle and the Gradescope zip.
"""
