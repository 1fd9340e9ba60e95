"""A cohort: stage and grade every submission in lanes of judge processes, write the reports, and
time it all (``make bench``).
"""
