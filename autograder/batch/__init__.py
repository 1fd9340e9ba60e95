"""A cohort: stage and grade every submission in lanes of judge processes, write each student's
files and the class's reports, and time it all (``make bench``); one Gradescope upload is a cohort
of one (:mod:`.upload`).
"""
