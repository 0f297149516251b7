"""The checks of the six step functions, each against torch formulas in `oracle`."""

from __future__ import annotations

import torch

from .. import oracle
from ..messages import msg
from ..runner.protocol import StudentCodeError
from . import diagnosis
from .core import TIGHT, CheckFailed, Context, Picture, tolerance
from .diagnosis import Diagnosis
from .expect import (
    Label,
    attempt,
    expect_close,
    expect_output_pair,
    expect_tensor,
    expect_unchanged,
)
from .feedback import describe_mask
from .inputs import (
    Heads,
    Projection,
    Scores,
    heads_shapes,
    randn,
    strided,
)
from .search import run_cases

Tensor = torch.Tensor


HEAD_CASES = (
    Heads(2, 5, 4, 3),
    Heads(1, 1, 1, 1),
    Heads(3, 7, 2, 8),
    Heads(2, 6, 8, 1),
    Heads(2, 4, 3, 5, strided=True),
    Heads(2, 5, 4, 3, dtype=torch.float32),
)
STEP_EXAMPLES = 12  # shapes the search draws per step function
MODULE_EXAMPLES = 8  # ... and per module


def check_split_heads(sub, ctx: Context) -> float:
    def one_case(c: Heads) -> None:
        x = randn(ctx.generator(f"split_heads {c}"), c.B, c.T, c.H * c.D, device=ctx.device,
                   dtype=c.dtype)
        x = strided(x) if c.strided else x
        mistakes = diagnosis.split_heads(x, c.H)
        call = attempt(lambda: sub.call("split_heads", x, c.H), c.label(), mistakes)
        expect_close("split_heads(x, num_heads)", call.value, oracle.split_heads(x, c.H),
                     c.label(), c.tol, dims=("B", "H", "T", "D"), mistakes=mistakes)
        expect_unchanged("split_heads", call, (x,))

    run_cases(one_case, HEAD_CASES, heads_shapes(), STEP_EXAMPLES)
    return 1.0


def check_merge_heads(sub, ctx: Context) -> float:
    def one_case(c: Heads) -> None:
        x = randn(ctx.generator(f"merge_heads {c}"), c.B, c.H, c.T, c.D, device=ctx.device,
                   dtype=c.dtype)
        x = strided(x) if c.strided else x
        mistakes = diagnosis.merge_heads(x)
        call = attempt(lambda: sub.call("merge_heads", x), c.label(), mistakes)
        expect_close("merge_heads(x)", call.value, oracle.merge_heads(x), c.label(), c.tol,
                     dims=("B", "T", "H*D"), mistakes=mistakes)
        expect_unchanged("merge_heads", call, (x,))

    run_cases(one_case, HEAD_CASES, heads_shapes(), STEP_EXAMPLES)
    return 1.0


SCORE_CASES = (
    Heads(2, 5, 4, 3),
    Heads(2, 3, 2, 4, Tk=6),
    Heads(1, 1, 1, 1),
    Heads(2, 4, 3, 16, Tk=2, strided=True),
    Heads(2, 5, 4, 8, dtype=torch.float32),
)


def check_scaled_scores(sub, ctx: Context) -> float:
    def compare(q: Tensor, k: Tensor, case: Label, tol: dict) -> None:
        mistakes = diagnosis.scaled_scores(q, k)
        call = attempt(lambda: sub.call("scaled_scores", q, k), case, mistakes)
        dims = ("B", "H", "Tq", "Tk")[4 - q.dim():]
        expect_close("scaled_scores(q, k)", call.value, oracle.scaled_scores(q, k), case, tol,
                     dims=dims, mistakes=mistakes)
        expect_unchanged("scaled_scores", call, (q, k))

    def one_case(c: Heads) -> None:
        gen = ctx.generator(f"scaled_scores {c}")
        q = randn(gen, c.B, c.H, c.T, c.D, device=ctx.device, dtype=c.dtype)
        k = randn(gen, c.B, c.H, c.Tk or c.T, c.D, device=ctx.device, dtype=c.dtype)
        q, k = (strided(q), strided(k)) if c.strided else (q, k)
        compare(q, k, c.label(), c.tol)

    run_cases(one_case, SCORE_CASES, heads_shapes(tk=True), STEP_EXAMPLES)
    # Leading dims are "...": a plain (B, T, D) input works too.
    gen = ctx.generator("scaled_scores")
    q = randn(gen, 3, 4, 6, device=ctx.device)
    k = randn(gen, 3, 7, 6, device=ctx.device)
    compare(q, k, msg("case.three_d"), TIGHT)
    return 1.0


def check_causal_mask(sub, ctx: Context) -> float:
    def one_case(seq_len: int) -> None:
        case = f"seq_len={seq_len}"
        expected = oracle.causal_mask(seq_len, device=ctx.device)
        mistakes = diagnosis.causal_mask(seq_len, device=ctx.device)
        call = attempt(lambda: sub.call("causal_mask", seq_len, device=ctx.device), case,
                       mistakes)
        got = expect_tensor(f"causal_mask({seq_len})", call.value, expected, case,
                            dims=("Tq", "Tk"), mistakes=mistakes)
        if not torch.equal(got, expected):
            wrong, drawing = describe_mask(got, expected)
            raise CheckFailed(
                msg("mask.blocked_pair", call=f"causal_mask({seq_len})", wrong=wrong),
                Picture(f"causal_mask({seq_len})", expected, got),
                diagnosis=Diagnosis(got, mistakes, TIGHT), case=case, drawing=drawing,
            )

    from hypothesis import strategies as st

    try:
        run_cases(one_case, (1, 2, 5, 16), st.integers(1, 12), STEP_EXAMPLES)
    except CheckFailed as err:
        if err.picture is not None and err.picture.expected.shape[-1] < PICTURED_MASK:
            err.picture = _larger_mask_picture(sub, ctx) or err.picture
        raise
    call = sub.call("causal_mask", 3)
    expect_tensor(msg("what.without_device", call="causal_mask(3)"), call.value,
                  oracle.causal_mask(3, "cpu"), msg("case.default_device"))
    return 1.0


PICTURED_MASK = 8  # a smaller failing mask is pictured at this size, where a pattern shows


def _larger_mask_picture(sub, ctx: Context) -> Picture | None:
    """The student's mask at PICTURED_MASK tokens beside the expected one, if it is wrong
    there too (the search shrinks a failure to 1 or 2 tokens, too small to see a pattern in)."""
    expected = oracle.causal_mask(PICTURED_MASK, device=ctx.device)
    try:
        got = expect_tensor("causal_mask", sub.call("causal_mask", PICTURED_MASK,
                                                    device=ctx.device).value, expected, "")
    except (CheckFailed, StudentCodeError):
        return None
    return None if torch.equal(got, expected) else Picture(f"causal_mask({PICTURED_MASK})",
                                                           expected, got)



ATTEND_CASES = (
    Scores(2, 3, 5, 7, 4),
    Scores(2, 3, 5, 5, 4, "causal"),
    Scores(2, 3, 5, 7, 4, "random"),
    Scores(2, 3, 5, 7, 4, "padding"),
    Scores(2, 3, 5, 5, 4, "causal", logit_scale=1e3),
    Scores(1, 1, 1, 1, 4),
    Scores(2, 3, 5, 5, 4, "causal", dtype=torch.float32),
)


def check_attend(sub, ctx: Context) -> float:
    def one_case(c: Scores) -> None:
        gen = ctx.generator(f"attend {c}")
        scores = randn(gen, c.B, c.H, c.Tq, c.Tk, device=ctx.device, dtype=c.dtype)
        scores = scores * c.logit_scale
        v = randn(gen, c.B, c.H, c.Tk, c.D, device=ctx.device, dtype=c.dtype)
        mask = c.draw_mask(gen, ctx.device)
        tol = tolerance(c.dtype)
        expected_out, expected_w = oracle.attend(scores, v, mask)
        mistakes = diagnosis.attend(scores, v, mask)
        call = attempt(lambda: sub.call("attend", scores, v, mask), c.label(), mistakes)
        out, weights = expect_output_pair("attend", call)
        what = msg("what.weights", name="attend")
        expect_close(what, weights, expected_w, c.label(), tol,
                     dims=("B", "H", "Tq", "Tk"), mistakes=mistakes, part=1)
        expect_close(msg("what.out", name="attend"), out, expected_out, c.label(), tol,
                     dims=("B", "H", "Tq", "D"), mistakes=mistakes, part=0)
        if mask is not None and bool((weights.masked_select(mask.expand_as(weights)) != 0).any()):
            raise CheckFailed(msg("attend.blocked_nonzero", what=what), case=c.label())
        expect_unchanged("attend", call, (scores, v) + (() if mask is None else (mask,)))

    from hypothesis import strategies as st

    shapes = st.builds(Scores, B=st.integers(1, 2), H=st.integers(1, 3), Tq=st.integers(1, 4),
                       Tk=st.integers(1, 4), D=st.integers(1, 3),
                       mask=st.sampled_from((None, "random")))
    run_cases(one_case, ATTEND_CASES, shapes, STEP_EXAMPLES)
    return 1.0



PROJECTION_CASES = (
    Projection(2, 5, 6, 4),
    Projection(2, 3, 3, 8, bias=False),
    Projection(1, 1, 1, 1),
    Projection(2, 4, 5, 5, strided=True),
    Projection(2, 5, 8, 8, dtype=torch.float32),
)


def check_output_projection(sub, ctx: Context) -> float:
    def one_case(c: Projection) -> None:
        gen = ctx.generator(f"output_projection {c}")
        x = randn(gen, c.B, c.T, c.d_in, device=ctx.device, dtype=c.dtype)
        x = strided(x) if c.strided else x
        weight = randn(gen, c.d_out, c.d_in, device=ctx.device, dtype=c.dtype)
        bias = randn(gen, c.d_out, device=ctx.device, dtype=c.dtype) if c.bias else None
        args = (x, weight) if bias is None else (x, weight, bias)
        mistakes = diagnosis.output_projection(x, weight, bias)
        call = attempt(lambda: sub.call("output_projection", *args), c.label(), mistakes)
        tol = tolerance(c.dtype)
        expect_close("output_projection(x, weight, bias)", call.value,
                     oracle.output_projection(x, weight, bias), c.label(), tol,
                     dims=("B", "T", "out_features"), mistakes=mistakes)
        expect_unchanged("output_projection", call, args)

    from hypothesis import strategies as st

    shapes = st.builds(Projection, B=st.integers(1, 2), T=st.integers(1, 3),
                       d_in=st.integers(1, 5), d_out=st.integers(1, 5),
                       bias=st.sampled_from((True, False)))
    run_cases(one_case, PROJECTION_CASES, shapes, STEP_EXAMPLES)
    return 1.0

