"""Checks of the shapes warm-up: split and merge heads four ways, and "is this a view?".

A view shares its input's memory. The grader sees that through the storage pointers of what a
call returns and of the (copied) input the student's function received: both come back from
the same call, in one message when the code runs in a worker process.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from . import oracle
from .checks import TIGHT, CheckFailed, Context, _randn, expect_close, expect_tensor
from .points import SHAPES_CHECKS

Tensor = torch.Tensor

# (B, T, H, D) for the split and merge checks: H = 1, D = 1 and T = 1 included.
SIZES = ((2, 5, 4, 3), (1, 1, 1, 1), (3, 7, 2, 8), (2, 6, 8, 1), (2, 4, 1, 6))

# "Is this a view of x?" for x = torch.arange(24.0).reshape(2, 3, 4). view_quiz() answers in
# this order; the grader asks torch for the truth.
VIEW_QUIZ: tuple[tuple[str, Callable[[Tensor], Tensor]], ...] = (
    ("x.view(2, 12)", lambda x: x.view(2, 12)),
    ("x.reshape(6, 4)", lambda x: x.reshape(6, 4)),
    ("x.transpose(1, 2)", lambda x: x.transpose(1, 2)),
    ("x.transpose(1, 2).contiguous()", lambda x: x.transpose(1, 2).contiguous()),
    ("x.transpose(1, 2).reshape(2, 12)", lambda x: x.transpose(1, 2).reshape(2, 12)),
    ("x.permute(2, 0, 1)", lambda x: x.permute(2, 0, 1)),
    ("x[:, 1:, :]", lambda x: x[:, 1:, :]),
    ("x[:, [0, 2], :]", lambda x: x[:, [0, 2], :]),
    ("x.contiguous()", lambda x: x.contiguous()),
    ("x.clone()", lambda x: x.clone()),
)


def quiz_input() -> Tensor:
    return torch.arange(24.0).reshape(2, 3, 4)  # (B=2, T=3, E=4)


def shares_memory(a: Tensor, b: Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def view_quiz_truth() -> tuple[bool, ...]:
    x = quiz_input()
    return tuple(shares_memory(x, make(x)) for _, make in VIEW_QUIZ)


def _case(B: int, T: int, H: int, D: int) -> str:
    return f"B={B}, T={T}, H={H}, D={D}"


def _expect_split(name: str, got: Any, x: Tensor, H: int, case: str) -> None:
    """Values of a split, with the classic bug named when it is the cause."""
    B, T, E = x.shape
    expected = oracle.split_heads(x, H)
    got = expect_tensor(f"{name}(x, num_heads)", got, expected, case)
    if not torch.equal(got, expected) and torch.equal(got, x.reshape(B, H, T, E // H)):
        raise CheckFailed(
            f"{name}: the classic bug. Viewing (B, T, H*D) straight as (B, H, T, D) deals the "
            f"features out in memory order, so one 'head' holds pieces of several tokens. View "
            f"as (B, T, H, D) first, then transpose(1, 2) ({case})")
    expect_close(f"{name}(x, num_heads)", got, expected, case, TIGHT)


def _expect_merge(name: str, got: Any, x: Tensor, case: str) -> None:
    B, H, T, D = x.shape
    expected = oracle.merge_heads(x)
    got = expect_tensor(f"{name}(x)", got, expected, case)
    if not torch.equal(got, expected) and torch.equal(got, x.reshape(B, T, H * D)):
        raise CheckFailed(
            f"{name}: reshaping (B, H, T, D) straight to (B, T, H*D) glues the tokens of one "
            f"head together. transpose(1, 2) back to (B, T, H, D) first ({case})")
    expect_close(f"{name}(x)", got, expected, case, TIGHT)


def check_split_view(sub, ctx: Context) -> float:
    gen = ctx.generator("shapes_split_view")
    for B, T, H, D in SIZES:
        case = _case(B, T, H, D)
        x = _randn(gen, B, T, H * D, device=ctx.device)
        call = sub.call("split_heads_view", x, H)
        _expect_split("split_heads_view", call.value, x, H, case)
        if not shares_memory(call.value, call.inputs_after[0]):
            raise CheckFailed(f"split_heads_view returned a copy: view and transpose never copy,"
                              f" so the result should share x's memory (avoid contiguous(),"
                              f" clone() and torch.stack here) ({case})")
    return 1.0


def check_merge(sub, ctx: Context) -> float:
    gen = ctx.generator("shapes_merge")
    for B, T, H, D in SIZES:
        # As `weights @ v` gives it, and as a transpose of (B, T, H, D) gives it.
        for heads, layout in ((_randn(gen, B, H, T, D, device=ctx.device), "contiguous x"),
                              (_randn(gen, B, T, H, D, device=ctx.device).transpose(1, 2),
                               "x a transpose of (B, T, H, D)")):
            call = sub.call("merge_heads_transpose", heads)
            _expect_merge("merge_heads_transpose", call.value, heads,
                          f"{_case(B, T, H, D)}, {layout}")
    return 1.0


def check_rearrange(sub, ctx: Context) -> float:
    gen = ctx.generator("shapes_rearrange")
    for B, T, H, D in SIZES:
        case = _case(B, T, H, D)
        x = _randn(gen, B, T, H * D, device=ctx.device)
        _expect_split("split_heads_rearrange", sub.call("split_heads_rearrange", x, H).value, x,
                      H, case)
        heads = _randn(gen, B, H, T, D, device=ctx.device)
        _expect_merge("merge_heads_rearrange", sub.call("merge_heads_rearrange", heads).value,
                      heads, case)
    return 1.0


def check_view_quiz(sub, ctx: Context) -> float:
    answers = sub.call("view_quiz").value
    truth = view_quiz_truth()
    if not isinstance(answers, tuple) or len(answers) != len(truth) or not all(
            isinstance(a, bool) for a in answers):
        raise CheckFailed(f"view_quiz() should return {len(truth)} answers, True or False, one "
                          f"per expression of VIEW_QUIZ in order; got {answers!r}")
    right = sum(a == t for a, t in zip(answers, truth))
    if right < len(truth):
        ctx.notes = (f"{right} of {len(truth)} right: test each one with "
                     "x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()")
    return right / len(truth)


def check_roundtrip(sub, ctx: Context) -> float:
    gen = ctx.generator("shapes_roundtrip")
    for B, T, H, D in SIZES:
        case = _case(B, T, H, D)
        x = _randn(gen, B, T, H * D, device=ctx.device)
        heads = sub.call("split_heads_view", x, H).value
        expect_tensor("split_heads_view(x, num_heads)", heads, oracle.split_heads(x, H), case)
        back = sub.call("merge_heads_transpose", heads).value
        back = expect_tensor("merge_heads_transpose(split_heads_view(x, H))", back, x, case)
        if not torch.equal(back, x):
            raise CheckFailed(f"merge_heads_transpose(split_heads_view(x, H)) should give x back "
                              f"exactly: splitting and merging only move numbers ({case})")
    return 1.0


CHECK_FUNCTIONS: dict[str, Callable[[Any, Context], float]] = {
    "shapes_split_view": check_split_view,
    "shapes_merge": check_merge,
    "shapes_rearrange": check_rearrange,
    "shapes_view_quiz": check_view_quiz,
    "shapes_roundtrip": check_roundtrip,
}
assert list(CHECK_FUNCTIONS) == [c.id for c in SHAPES_CHECKS]
