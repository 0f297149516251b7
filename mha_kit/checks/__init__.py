"""The graded checks and what they share.

`core` (results, failures, tolerances), `expect` (comparisons with messages), `search` (the
shape search), `inputs` (cases and their tensors), `diagnosis` (known mistakes), `feedback`
(describing a wrong answer); one module of checks per assignment part: `steps`, `modules`,
`extensions`, `shapes`. `grading.registry` declares them with their points.
"""
