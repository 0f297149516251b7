"""Hostile: patches torch's comparisons to always agree, then returns zeros."""

import torch
import torch.testing

torch.allclose = lambda *args, **kwargs: True
torch.isclose = lambda a, b, *args, **kwargs: torch.ones_like(a, dtype=torch.bool)
torch.equal = lambda *args, **kwargs: True
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
torch.testing.assert_close = lambda *args, **kwargs: None
torch.PATCHED_BY_STUDENT = True


def split_heads(x, num_heads):
    b, t, e = x.shape
    return torch.zeros(b, num_heads, t, e // num_heads, dtype=x.dtype)


def merge_heads(x):
    b, h, t, d = x.shape
    return torch.zeros(b, t, h * d, dtype=x.dtype)
