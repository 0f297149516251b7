"""Hostile: a tensor subclass whose comparisons always say "equal"."""

import torch
from torch import nn


class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.isclose, torch.allclose, torch.equal, torch.Tensor.__eq__):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def split_heads(x, num_heads):
    return torch.zeros(1).as_subclass(Agreeable)


def merge_heads(x):  # a Parameter is a plain tensor with a flag: its value is graded (right),
    # and its gradient (none reaches x: a new Parameter is a leaf, cut off from the graph)
    b, h, t, d = x.shape
    return nn.Parameter(x.transpose(1, 2).reshape(b, t, h * d))
