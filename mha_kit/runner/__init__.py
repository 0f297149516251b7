"""Where student code runs: the `Submission` protocol (`protocol`), loading a file (`loading`),
this interpreter (`inprocess`), a separate process (`worker`: the grader's side; `serve`: the
worker's; `framing`: the pipe between them; `zygote`: how workers start), and what it may do
(`policy`).
"""
