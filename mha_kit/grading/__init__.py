"""Grading: the registry of checks and their points (`registry`), one file graded in a worker
(`batch.grade_submission`) or a folder of them in parallel (`batch.grade_all`), finding the
files (`files`), and presenting the results (`report`, `pictures`).
"""
