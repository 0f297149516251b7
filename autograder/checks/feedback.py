"""Messages that say what went wrong, in words a student can act on.

`diagnosis` names a known mistake when one reproduces the answer; these messages describe
the answer itself: a wrong shape with its likely cause, NaN and inf with their usual
sources, the first wrong value, and a mask drawn in characters.
"""

from __future__ import annotations

from itertools import permutations

import torch

Dims = tuple[str, ...]

MASK_DRAWN_UP_TO = 8  # a larger mask is drawn by its top-left corner


def _named(dims: Dims) -> str:
    return f"({', '.join(dims)})"


def describe_shape(got: tuple[int, ...], expected: tuple[int, ...],
                   dims: Dims | None = None) -> str:
    """A wrong shape, named dim by dim, with its likely cause."""
    text = f"got shape {got}, expected {expected}"
    if dims is None:
        dims = tuple(f"dim {i}" for i in range(len(expected)))
    else:
        text += f" = {_named(dims)}"
    return f"{text}: {_shape_cause(got, expected, dims)}"


def _shape_cause(got: tuple[int, ...], expected: tuple[int, ...], dims: Dims) -> str:
    n = len(expected)
    if len(got) == n:
        # The right sizes in another order: the reordering that moves the fewest dims.
        orders = [p for p in permutations(range(n)) if all(got[i] == expected[p[i]]
                                                             for i in range(n))]
        if orders:
            order = min(orders, key=lambda p: sum(p[i] != i for i in range(n)))
            moved = [dims[order[i]] for i in range(n) if order[i] != i]
            yours = _named(tuple(dims[j] for j in order))
            if len(moved) == 2:
                return f"that looks like {yours}: did you forget to transpose {moved[0]} and " \
                       f"{moved[1]}?"
            return f"that looks like {yours}: check the order in your permute"
        wrong = [f"{dims[i]} is {got[i]} instead of {expected[i]}" for i in range(n)
                 if got[i] != expected[i]]
        return "; ".join(wrong)
    for i in range(n - 1):  # two dims flattened into one, or one still split in two
        if got == expected[:i] + (expected[i] * expected[i + 1],) + expected[i + 2:]:
            return f"{dims[i]} and {dims[i + 1]} are flattened into one dim"
    for i in range(len(got) - 1):
        if got[:i] + (got[i] * got[i + 1],) + got[i + 2:] == expected:
            return f"{dims[i]} is split into two dims ({got[i]}, {got[i + 1]})"
    for i in range(n):
        if got == expected[:i] + expected[i + 1:]:
            return f"the {dims[i]} dim is missing"
    return f"{len(got)} dims instead of {n}"


def explain_nonfinite(got: torch.Tensor, expected: torch.Tensor) -> str | None:
    """Where NaN or inf comes from, when the student has some and the expected has none."""
    nan = torch.isnan(got) & ~torch.isnan(expected)
    if bool(nan.any()):
        first = tuple(nan.nonzero()[0].tolist())
        if got.dim() >= 1 and bool(torch.isnan(got).all(dim=-1).any()):
            return (f"NaN in your result (first at {first}) on whole rows: a softmax row is all "
                    "NaN when it divides 0 by 0 (every key blocked: every query here keeps at "
                    "least one, so check that your mask is not inverted or shifted) or inf by "
                    "inf (exp overflowing on large logits: use torch.softmax)")
        return (f"NaN in your result (first at {first}) where the expected values are finite: "
                "either 0 * inf (multiplying -inf scores by a 0/1 mask; use masked_fill), or "
                "exp overflowing in a softmax written by hand (use torch.softmax)")
    inf = torch.isinf(got) & ~torch.isinf(expected)
    if bool(inf.any()):
        first = tuple(inf.nonzero()[0].tolist())
        return (f"inf in your result (first at {first}) where the expected values are finite: "
                "exp overflows above about 709 in float64 (88 in float32), and -inf must only "
                "fill scores before the softmax, never reach the weights or the output")
    return None


def describe_mismatch(got: torch.Tensor, expected: torch.Tensor, close: torch.Tensor,
                      dims: Dims | None = None) -> str:
    """First wrong index, both values, the largest error and the heads that differ."""
    nonfinite = explain_nonfinite(got, expected)
    if nonfinite:
        return nonfinite
    index = tuple((~close).nonzero()[0].tolist())
    err = (got - expected).abs().nan_to_num(nan=float("inf")).max().item()
    text = (f"wrong values: at index {index} expected {expected[index].item():.6g}, got "
            f"{got[index].item():.6g} (max abs error {err:.3g})")
    if dims and "H" in dims and got.shape[dims.index("H")] > 1:
        h = dims.index("H")
        wrong = (~close).movedim(h, 0).flatten(1).any(dim=1).nonzero().flatten().tolist()
        text += f"; heads {wrong} of {got.shape[h]} differ"
    return text


def draw_masks(got: torch.Tensor, expected: torch.Tensor) -> str:
    """Yours beside the expected mask, x = blocked and . = allowed, one line per query."""
    n = min(expected.shape[-1], MASK_DRAWN_UP_TO)
    width = max(2 * n - 1, len("expected"))

    def row(mask: torch.Tensor, i: int) -> str:
        return " ".join("x" if bool(b) else "." for b in mask[i, :n])

    lines = [f"{'yours':<{width}}   {'expected':<{width}}   (x = blocked, . = allowed; "
             "row i = query i)"]
    lines += [f"{row(got, i):<{width}}   {row(expected, i)}" for i in range(n)]
    if expected.shape[-1] > n:
        lines.append(f"(the top-left {n}x{n} corner of {tuple(expected.shape)})")
    return "\n".join("    " + line for line in lines)


def describe_mask(got: torch.Tensor, expected: torch.Tensor) -> str:
    """How many entries are wrong, then both masks drawn as text."""
    wrong = got != expected
    first = tuple(wrong.nonzero()[0].tolist())
    return (f"{int(wrong.sum())} of {wrong.numel()} entries wrong, the first at {first}\n"
            f"{draw_masks(got, expected)}")
