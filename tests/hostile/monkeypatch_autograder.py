"""Hostile: rewrites the grader's points, checks and return filter as seen from its code."""

import pytest
import torch
import torch.nn

import mha_kit.checks.expect
import mha_kit.grading.registry
import mha_kit.runner.inprocess

for _spec in mha_kit.grading.registry.ASSIGNMENTS["mha"]:
    mha_kit.grading.registry.POINTS[_spec.id] = 1000
mha_kit.grading.registry.run_check = lambda *args, **kwargs: None
mha_kit.checks.expect.expect_close = lambda *args, **kwargs: None
mha_kit.runner.inprocess.vetted = lambda value, name, depth=0: value  # let anything through
pytest.main = lambda *args, **kwargs: 0


class Sneaky(torch.Tensor):
    """Filed under torch.nn, so that pickle can name it and the worker can send it."""


Sneaky.__module__ = "torch.nn"
torch.nn.Sneaky = Sneaky


def split_heads(x, num_heads):  # passes the patched filter in the worker, not the grader's
    return torch.zeros(1).as_subclass(Sneaky)


def merge_heads(x):
    b, h, t, d = x.shape
    return torch.zeros(b, t, h * d, dtype=x.dtype)
