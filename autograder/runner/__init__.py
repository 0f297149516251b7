"""Where student code runs: the `Submission` protocol (`protocol`), loading a file (`loading`),
this interpreter (`inprocess`), a separate process (`worker`), and what it may do (`policy`).
"""
