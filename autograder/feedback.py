"""Messages that say what went wrong, in words a student can act on."""

from __future__ import annotations

from itertools import permutations

import torch


def describe_shape(got: tuple[int, ...], expected: tuple[int, ...]) -> str:
    """A wrong shape, with the likely cause when the sizes are right but in another order."""
    text = f"got shape {got}, expected {expected}"
    if len(got) == len(expected) and sorted(got) == sorted(expected):
        orders = [p for p in permutations(range(len(got))) if tuple(got[i] for i in p) ==
                  expected]
        if orders and any(sum(a != b for a, b in zip(p, range(len(p)))) == 2 for p in orders):
            return text + ": the right sizes in the wrong order; did you forget a transpose?"
        return text + ": the right sizes in the wrong order; check your transpose/permute"
    if len(got) != len(expected):
        return text + f": {len(got)} dims instead of {len(expected)}"
    return text


def describe_mismatch(got: torch.Tensor, expected: torch.Tensor, close: torch.Tensor) -> str:
    """First wrong index, both values and the largest error; NaN and inf explained."""
    if bool(torch.isnan(got).any()) and not bool(torch.isnan(expected).any()):
        return ("NaN in your result: softmax of a row of huge logits overflows unless you use "
                "torch.softmax, and a row with every key blocked divides 0 by 0")
    if bool(torch.isinf(got).any()) and not bool(torch.isinf(expected).any()):
        return "inf in your result where the expected values are finite"
    bad = (~close).nonzero()[0].tolist()
    index = tuple(bad)
    err = (got - expected).abs().nan_to_num(nan=float("inf")).max().item()
    return (f"wrong values: at index {index} expected {expected[index].item():.6g}, got "
            f"{got[index].item():.6g} (max abs error {err:.3g})")
