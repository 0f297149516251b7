"""Messages that say what went wrong, in words a student can act on.

`diagnosis` names a known mistake when one reproduces the answer; these messages describe
the answer itself: a wrong shape with its likely cause, NaN and inf with their usual
sources, the first wrong value, and a mask drawn in characters.
"""

from __future__ import annotations

from itertools import permutations
from typing import Any

import torch

from ..messages import Message, joined, msg

Dims = tuple[str, ...]

MASK_DRAWN_UP_TO = 8  # a larger mask is drawn by its top-left corner


def _named(dims: tuple[Any, ...]) -> Message:
    return msg("shape.dims", dims=joined(list(dims)) if any(
        isinstance(d, Message) for d in dims) else ", ".join(dims))


def describe_shape(got: tuple[int, ...], expected: tuple[int, ...],
                   dims: Dims | None = None) -> Message:
    """A wrong shape, named dim by dim, with its cause when only one explains it."""
    if dims is None:
        cause = _shape_cause(got, expected, tuple(msg("shape.dim", i=i)
                                                  for i in range(len(expected))), named=False)
        return (msg("shape.wrong_bare", got=got, expected=expected) if cause is None
                else msg("shape.wrong", got=got, expected=expected, cause=cause))
    cause = _shape_cause(got, expected, dims)
    if cause is None:
        return msg("shape.wrong_named_bare", got=got, expected=expected, dims=_named(dims))
    return msg("shape.wrong_named", got=got, expected=expected, dims=_named(dims), cause=cause)


def _shape_cause(got: tuple[int, ...], expected: tuple[int, ...], dims: tuple[Any, ...],
                 named: bool = True) -> Message | list[Message] | None:
    """Why `got` is not `expected`, or None when several explanations fit (sizes that repeat,
    1s): a guess then would as likely mislead as help."""
    n = len(expected)
    if len(got) == n:
        # The right sizes in another order: named only when no other order fits.
        orders = [p for p in permutations(range(n)) if all(got[i] == expected[p[i]]
                                                             for i in range(n))]
        if len(orders) > 1:
            return None
        if orders:
            order = orders[0]
            moved = [dims[order[i]] for i in range(n) if order[i] != i]
            yours = _named(tuple(dims[j] for j in order))
            if len(moved) == 2:
                return msg("shape.transposed", yours=yours, a=moved[0], b=moved[1])
            return msg("shape.permuted", yours=yours)
        return [msg("shape.size", dim=dims[i], got=got[i], expected=expected[i])
                for i in range(n) if got[i] != expected[i]]
    causes = []  # two dims flattened into one, one still split in two, or one missing
    for i in range(n - 1):
        if got == expected[:i] + (expected[i] * expected[i + 1],) + expected[i + 2:]:
            causes.append(msg("shape.flattened", a=dims[i], b=dims[i + 1]))
    for i in range(len(got) - 1):
        if got[:i] + (got[i] * got[i + 1],) + got[i + 2:] == expected:
            causes.append(msg("shape.split", dim=dims[i], a=got[i], b=got[i + 1]))
    for i in range(n):
        if got == expected[:i] + expected[i + 1:]:
            causes.append(msg("shape.missing" if named else "shape.missing_index", dim=dims[i]))
    if len(causes) > 1:
        return None
    return causes[0] if causes else msg("shape.ndim", got=len(got), expected=n)


def explain_nonfinite(got: torch.Tensor, expected: torch.Tensor) -> Message | None:
    """Where NaN or inf comes from, when the student has some and the expected has none."""
    nan = torch.isnan(got) & ~torch.isnan(expected)
    if bool(nan.any()):
        first = tuple(nan.nonzero()[0].tolist())
        if got.dim() >= 1 and bool(torch.isnan(got).all(dim=-1).any()):
            return msg("nonfinite.nan_rows", first=first)
        return msg("nonfinite.nan", first=first)
    inf = torch.isinf(got) & ~torch.isinf(expected)
    if bool(inf.any()):
        return msg("nonfinite.inf", first=tuple(inf.nonzero()[0].tolist()))
    return None


def describe_mismatch(got: torch.Tensor, expected: torch.Tensor, close: torch.Tensor,
                      dims: Dims | None = None) -> Message:
    """First wrong index, both values, the largest error and the heads that differ."""
    nonfinite = explain_nonfinite(got, expected)
    if nonfinite:
        return nonfinite
    index = tuple((~close).nonzero()[0].tolist())
    err = (got - expected).abs().nan_to_num(nan=float("inf")).max().item()
    values = {"index": index, "expected": float(expected[index].item()),
              "got": float(got[index].item()), "error": float(err)}
    if dims and "H" in dims and got.shape[dims.index("H")] > 1:
        h = dims.index("H")
        wrong = (~close).movedim(h, 0).flatten(1).any(dim=1).nonzero().flatten().tolist()
        return msg("values.wrong_heads", **values, heads=str(wrong), count=got.shape[h])
    return msg("values.wrong", **values)


def draw_masks(got: torch.Tensor, expected: torch.Tensor) -> Message:
    """Yours beside the expected mask, x = blocked and . = allowed, one line per query."""
    n = min(expected.shape[-1], MASK_DRAWN_UP_TO)
    width = max(2 * n - 1, len("expected"))

    def row(mask: torch.Tensor, i: int) -> str:
        return " ".join("x" if bool(b) else "." for b in mask[i, :n])

    rows = "\n".join(f"    {row(got, i):<{width}}   {row(expected, i)}" for i in range(n))
    header = msg("mask.header", yours=msg("mask.yours"), expected=msg("mask.expected"),
                 width=width)
    if expected.shape[-1] > n:
        return msg("mask.drawing_corner", header=header, rows=rows,
                   corner=msg("mask.corner", n=n, shape=tuple(expected.shape)))
    return msg("mask.drawing", header=header, rows=rows)


def describe_mask(got: torch.Tensor, expected: torch.Tensor) -> tuple[Message, Message]:
    """How many entries are wrong, and both masks drawn as text (`CheckFailed`'s drawing)."""
    wrong = got != expected
    first = tuple(wrong.nonzero()[0].tolist())
    return (msg("mask.wrong_entries", wrong=int(wrong.sum()), total=wrong.numel(), first=first),
            draw_masks(got, expected))
