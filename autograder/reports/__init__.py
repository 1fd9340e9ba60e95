"""Reports: what a grade tells the student (feedback), the instructor (class report, similarity)
and the platforms (Gradescope's results.json), from the records the batch writes."""
