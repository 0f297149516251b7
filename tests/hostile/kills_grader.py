"""Hostile: tries to kill the grading process that started its worker.

As `nobody` (the grader is root), or under Landlock (ABI 6: no signal leaves the worker), it
is not allowed to. Else it succeeds; `mha-kit grade` then grades everyone else again and gives
this student a row of 0.
"""

import os
import signal

import torch


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)


os.kill(os.getppid(), signal.SIGKILL)
