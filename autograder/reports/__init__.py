"""Reports: what a grade tells the student (feedback) and the instructor (class report, similarity),
from the records (:class:`autograder.results.SubmissionResult`)."""
