"""The checks' side of grading: the pytest plugin, the helpers checks judge with, check replay,
named misconceptions, and dependencies between parts.
"""
