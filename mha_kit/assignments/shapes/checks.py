"""Checks of the shapes warm-up: split and merge heads four ways, and "is this a view?".

A view shares its input's memory. The grader sees that through the storage pointers of what a
call returns and of the (copied) input the student's function received: both come back from
the same call, in one message when the code runs in a worker process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ... import oracle
from ...checks import diagnosis
from ...checks.core import TIGHT, CheckFailed, Context
from ...checks.expect import expect_close, expect_tensor
from ...checks.inputs import Heads, randn
from ...messages import Message, joined, msg

Tensor = torch.Tensor

# The split and merge checks' sizes: H = 1, D = 1 and T = 1 included.
SIZES = (Heads(2, 5, 4, 3), Heads(1, 1, 1, 1), Heads(3, 7, 2, 8), Heads(2, 6, 8, 1),
         Heads(2, 4, 1, 6))

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


def _expect_split(name: str, got: Any, x: Tensor, H: int, case: Message | str) -> None:
    """The values of a split; a known mistake that reproduces them is named."""
    expect_close(f"{name}(x, num_heads)", got, oracle.split_heads(x, H), case, TIGHT,
                 dims=("B", "H", "T", "D"), mistakes=diagnosis.split_heads(x, H))


def _expect_merge(name: str, got: Any, x: Tensor, case: Message | str) -> None:
    """The values of a merge; a known mistake that reproduces them is named."""
    expect_close(f"{name}(x)", got, oracle.merge_heads(x), case, TIGHT,
                 dims=("B", "T", "H*D"), mistakes=diagnosis.merge_heads(x))


def check_split_view(sub, ctx: Context) -> float:
    gen = ctx.generator("shapes_split_view")
    for c in SIZES:
        case = c.label()
        x = randn(gen, c.B, c.T, c.H * c.D, device=ctx.device)
        call = sub.call("split_heads_view", x, c.H)
        _expect_split("split_heads_view", call.value, x, c.H, case)
        if not shares_memory(call.value, call.inputs_after[0]):
            raise CheckFailed(msg("shapes.copy"), case=case)
    return 1.0


def check_merge(sub, ctx: Context) -> float:
    gen = ctx.generator("shapes_merge")
    for c in SIZES:
        # As `weights @ v` gives it, and as a transpose of (B, T, H, D) gives it.
        for heads, layout in ((randn(gen, c.B, c.H, c.T, c.D, device=ctx.device),
                               "case.contiguous_x"),
                              (randn(gen, c.B, c.T, c.H, c.D, device=ctx.device).transpose(1, 2),
                               "case.transposed_x")):
            call = sub.call("merge_heads_transpose", heads)
            _expect_merge("merge_heads_transpose", call.value, heads,
                          joined([c.label(), msg(layout)]))
    return 1.0


def check_rearrange(sub, ctx: Context) -> float:
    gen = ctx.generator("shapes_rearrange")
    for c in SIZES:
        case = c.label()
        x = randn(gen, c.B, c.T, c.H * c.D, device=ctx.device)
        _expect_split("split_heads_rearrange", sub.call("split_heads_rearrange", x, c.H).value,
                      x, c.H, case)
        heads = randn(gen, c.B, c.H, c.T, c.D, device=ctx.device)
        _expect_merge("merge_heads_rearrange", sub.call("merge_heads_rearrange", heads).value,
                      heads, case)
    return 1.0


def check_view_quiz(sub, ctx: Context) -> float:
    answers = sub.call("view_quiz").value
    truth = view_quiz_truth()
    if not isinstance(answers, tuple) or len(answers) != len(truth) or not all(
            isinstance(a, bool) for a in answers):
        raise CheckFailed(msg("shapes.quiz_form", count=len(truth), answers=repr(answers)))
    right = sum(a == t for a, t in zip(answers, truth))
    if right < len(truth):
        ctx.notes = msg("shapes.quiz_score", right=right, count=len(truth))
    return right / len(truth)


def check_roundtrip(sub, ctx: Context) -> float:
    gen = ctx.generator("shapes_roundtrip")
    for c in SIZES:
        case = c.label()
        x = randn(gen, c.B, c.T, c.H * c.D, device=ctx.device)
        heads = sub.call("split_heads_view", x, c.H).value
        expect_tensor("split_heads_view(x, num_heads)", heads, oracle.split_heads(x, c.H), case)
        back = sub.call("merge_heads_transpose", heads).value
        back = expect_tensor("merge_heads_transpose(split_heads_view(x, H))", back, x, case)
        if not torch.equal(back, x):
            raise CheckFailed(msg("shapes.roundtrip"), case=case)
    return 1.0
