"""The speed check and the bench: the student's fused module against the kit's baselines.

`config` (sizes and seeded inputs) → `measure` (runs beside the student's code) → `score`
(in the grader) → `check` (the graded check); `baselines` are the kit's own modules, `bench`
times them side by side. `speed` uses `runner`, never the reverse.
"""
