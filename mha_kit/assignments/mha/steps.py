"""The checks of the six step functions, each against torch formulas in `oracle`."""

from __future__ import annotations

import torch

from ... import oracle
from ...checks import diagnosis
from ...checks.core import TIGHT, CheckFailed, Context, Picture, tolerance
from ...checks.diagnosis import Diagnosis
from ...checks.expect import (
    Label,
    attempt,
    expect_blocked_zero,
    expect_close,
    expect_output_pair,
    expect_tensor,
    expect_unchanged,
)
from ...checks.feedback import describe_mask
from ...checks.gradients import backward_for, call_with, expect_gradients, expect_on_meta, moved
from ...checks.inputs import (
    Heads,
    Projection,
    Scores,
    heads_shapes,
    randn,
    strided,
)
from ...checks.scale import scale_of_scores, scale_reading
from ...checks.search import pictured, run_cases
from ...messages import msg
from ...runner.protocol import Call, StudentCodeError

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
        gen = ctx.generator("split_heads", c)
        x = randn(gen, c.B, c.T, c.H * c.D, device=ctx.device, dtype=c.dtype)
        x = strided(x) if c.strided else x
        mistakes = diagnosis.split_heads(x, c.H)
        expected = oracle.split_heads(x, c.H)
        backward = backward_for(gen, c.dtype, (expected,), ("out",), {0: "x"})
        call = attempt(lambda: call_with(sub, "split_heads", (x, c.H), backward), c.label(),
                       mistakes)
        expect_close("split_heads(x, num_heads)", call.value, expected,
                     c.label(), c.tol, dims=("B", "H", "T", "D"), mistakes=mistakes)
        expect_unchanged("split_heads", call, {"x": x}, c.label())
        expect_gradients("split_heads", call, backward, lambda: oracle.gradients(
            oracle.split_heads, (x, c.H), {0: "x"}, backward.cotangents), c.label(), c.tol)

    run_cases(one_case, HEAD_CASES, heads_shapes(), STEP_EXAMPLES,
              lambda: _labelled_picture(sub, ctx, "split_heads"))
    c = HEAD_CASES[0]
    expect_on_meta(ctx, "split_heads", lambda device: sub.call(
        "split_heads", randn(ctx.generator("split_heads"), c.B, c.T, c.H * c.D, device=device),
        c.H), c.label())
    return 1.0


def check_merge_heads(sub, ctx: Context) -> float:
    def one_case(c: Heads) -> None:
        gen = ctx.generator("merge_heads", c)
        x = randn(gen, c.B, c.H, c.T, c.D, device=ctx.device, dtype=c.dtype)
        x = strided(x) if c.strided else x
        mistakes = diagnosis.merge_heads(x)
        expected = oracle.merge_heads(x)
        backward = backward_for(gen, c.dtype, (expected,), ("out",), {0: "x"})
        call = attempt(lambda: call_with(sub, "merge_heads", (x,), backward), c.label(),
                       mistakes)
        expect_close("merge_heads(x)", call.value, expected, c.label(), c.tol,
                     dims=("B", "T", "H*D"), mistakes=mistakes)
        expect_unchanged("merge_heads", call, {"x": x}, c.label())
        expect_gradients("merge_heads", call, backward, lambda: oracle.gradients(
            oracle.merge_heads, (x,), {0: "x"}, backward.cotangents), c.label(), c.tol)

    run_cases(one_case, HEAD_CASES, heads_shapes(), STEP_EXAMPLES,
              lambda: _labelled_picture(sub, ctx, "merge_heads"))
    c = HEAD_CASES[0]
    expect_on_meta(ctx, "merge_heads", lambda device: sub.call(
        "merge_heads", randn(ctx.generator("merge_heads"), c.B, c.H, c.T, c.D, device=device)),
        c.label())
    return 1.0


# A failure of split_heads or merge_heads is pictured on labelled numbers: each feature holds
# token·100 + head·10 + feature, so the picture shows where every number went.
LABELLED = Heads(1, 6, 2, 3)


def labelled_heads(c: Heads = LABELLED, device: str = "cpu") -> Tensor:
    """(B, T, H·D) whose feature h·D + d of token t holds 100t + 10h + d."""
    t = torch.arange(c.T, dtype=torch.float64).view(1, c.T, 1, 1)
    h = torch.arange(c.H, dtype=torch.float64).view(1, 1, c.H, 1)
    d = torch.arange(c.D, dtype=torch.float64).view(1, 1, 1, c.D)
    return (100 * t + 10 * h + d).expand(c.B, c.T, c.H, c.D).reshape(
        c.B, c.T, c.H * c.D).to(device)


def _labelled_picture(sub, ctx: Context, name: str) -> Picture | None:
    x = labelled_heads(LABELLED, ctx.device)
    if name == "split_heads":
        args, expected, call = (x, LABELLED.H), oracle.split_heads(x, LABELLED.H), \
            f"split_heads(x, {LABELLED.H})"
    else:
        x = oracle.split_heads(x, LABELLED.H)
        args, expected, call = (x,), oracle.merge_heads(x), "merge_heads(x)"
    got = sub.call(name, *args).value
    if not isinstance(got, Tensor) or (got.shape == expected.shape
                                       and torch.equal(got.to(expected.dtype), expected)):
        return None
    return Picture(msg("picture.labelled", call=call, shape=tuple(x.shape)), expected, got,
                   cells=True, source=x)


SCORE_CASES = (
    Heads(2, 5, 4, 3),
    Heads(2, 3, 2, 4, Tk=6),
    Heads(1, 1, 1, 1),
    Heads(2, 4, 3, 16, Tk=2, strided=True),
    Heads(2, 5, 4, 8, dtype=torch.float32),
)


def check_scaled_scores(sub, ctx: Context) -> float:
    def compare(q: Tensor, k: Tensor, case: Label, tol: dict, gen: torch.Generator) -> None:
        mistakes = diagnosis.scaled_scores(q, k)
        expected = oracle.scaled_scores(q, k)
        backward = backward_for(gen, q.dtype, (expected,), ("out",), {0: "q", 1: "k"})
        call = attempt(lambda: call_with(sub, "scaled_scores", (q, k), backward), case,
                       mistakes)
        dims = ("B", "H", "Tq", "Tk")[4 - q.dim():]
        raw = q.double() @ k.double().transpose(-2, -1)  # (..., Tq, Tk)
        expect_close("scaled_scores(q, k)", call.value, expected, case, tol,
                     dims=dims, mistakes=mistakes, read=lambda got: scale_reading(
                         scale_of_scores(got, raw, tol), q.shape[-1]))
        expect_unchanged("scaled_scores", call, {"q": q, "k": k}, case)
        expect_gradients("scaled_scores", call, backward, lambda: oracle.gradients(
            oracle.scaled_scores, (q, k), backward.inputs, backward.cotangents), case, tol)

    def one_case(c: Heads) -> None:
        gen = ctx.generator("scaled_scores", c)
        q = randn(gen, c.B, c.H, c.T, c.D, device=ctx.device, dtype=c.dtype)
        k = randn(gen, c.B, c.H, c.Tk or c.T, c.D, device=ctx.device, dtype=c.dtype)
        q, k = (strided(q), strided(k)) if c.strided else (q, k)
        compare(q, k, c.label(), c.tol, gen)

    run_cases(one_case, SCORE_CASES, heads_shapes(tk=True), STEP_EXAMPLES,
              pictured(one_case, Heads(1, 8, 2, 4)))
    # Leading dims are "...": a plain (B, T, D) input works too.
    gen = ctx.generator("scaled_scores")
    q = randn(gen, 3, 4, 6, device=ctx.device)
    k = randn(gen, 3, 7, 6, device=ctx.device)
    compare(q, k, msg("case.three_d"), TIGHT, gen)
    c = SCORE_CASES[1]
    expect_on_meta(ctx, "scaled_scores", lambda device: sub.call(
        "scaled_scores", randn(gen, c.B, c.H, c.T, c.D, device=device),
        randn(gen, c.B, c.H, c.Tk or c.T, c.D, device=device)), c.label())
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
    expect_on_meta(ctx, "causal_mask", lambda device: sub.call("causal_mask", 5, device=device),
                   "seq_len=5", wrong_output="device.output_argument")  # meta is its argument
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
        gen = ctx.generator("attend", c)
        scores = randn(gen, c.B, c.H, c.Tq, c.Tk, device=ctx.device, dtype=c.dtype)
        scores = scores * c.logit_scale
        v = randn(gen, c.B, c.H, c.Tk, c.D, device=ctx.device, dtype=c.dtype)
        mask = c.draw_mask(gen, ctx.device)
        tol = tolerance(c.dtype)
        expected_out, expected_w = oracle.attend(scores, v, mask)
        mistakes = diagnosis.attend(scores, v, mask)
        backward = backward_for(gen, c.dtype, (expected_out, expected_w), ("out", "weights"),
                                {0: "scores", 1: "v"})
        call = attempt(lambda: call_with(sub, "attend", (scores, v, mask), backward), c.label(),
                       mistakes)
        out, weights = expect_output_pair("attend", call)
        what = msg("what.weights", name="attend")
        expect_close(what, weights, expected_w, c.label(), tol,
                     dims=("B", "H", "Tq", "Tk"), mistakes=mistakes, part=1)
        expect_close(msg("what.out", name="attend"), out, expected_out, c.label(), tol,
                     dims=("B", "H", "Tq", "D"), mistakes=mistakes, part=0)
        expect_blocked_zero(what, weights, mask, c.label())
        expect_unchanged("attend", call, {"scores": scores, "v": v, "mask": mask}, c.label())
        expect_gradients("attend", call, backward, lambda: oracle.gradients(
            oracle.attend, (scores, v, mask), backward.inputs, backward.cotangents), c.label(),
            tol)

    from hypothesis import strategies as st

    shapes = st.builds(Scores, B=st.integers(1, 2), H=st.integers(1, 3), Tq=st.integers(1, 4),
                       Tk=st.integers(1, 4), D=st.integers(1, 3),
                       mask=st.sampled_from((None, "random")))
    run_cases(one_case, ATTEND_CASES, shapes, STEP_EXAMPLES,
              pictured(one_case, Scores(1, 2, 8, 8, 4, "causal")))
    c, gen = ATTEND_CASES[1], ctx.generator("attend")  # a causal mask
    expect_on_meta(ctx, "attend", lambda device: sub.call("attend", *moved((
        randn(gen, c.B, c.H, c.Tq, c.Tk, device="cpu"),
        randn(gen, c.B, c.H, c.Tk, c.D, device="cpu"), c.draw_mask(gen, "cpu")), device)),
        c.label())
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
        gen = ctx.generator("output_projection", c)
        x = randn(gen, c.B, c.T, c.d_in, device=ctx.device, dtype=c.dtype)
        x = strided(x) if c.strided else x
        weight = randn(gen, c.d_out, c.d_in, device=ctx.device, dtype=c.dtype)
        bias = randn(gen, c.d_out, device=ctx.device, dtype=c.dtype) if c.bias else None
        args = (x, weight) if bias is None else (x, weight, bias)
        mistakes = diagnosis.output_projection(x, weight, bias)
        expected = oracle.output_projection(x, weight, bias)
        backward = backward_for(gen, c.dtype, (expected,), ("out",),
                                dict(enumerate(("x", "weight", "bias")[:len(args)])))
        call = attempt(lambda: call_with(sub, "output_projection", args, backward), c.label(),
                       mistakes)
        tol = tolerance(c.dtype)
        expect_close("output_projection(x, weight, bias)", call.value,
                     expected, c.label(), tol,
                     dims=("B", "T", "out_features"), mistakes=mistakes)
        expect_unchanged("output_projection", call, {"x": x, "weight": weight, "bias": bias},
                         c.label())
        expect_gradients("output_projection", call, backward, lambda: oracle.gradients(
            oracle.output_projection, args, backward.inputs, backward.cotangents), c.label(),
            tol)

    from hypothesis import strategies as st

    shapes = st.builds(Projection, B=st.integers(1, 2), T=st.integers(1, 3),
                       d_in=st.integers(1, 5), d_out=st.integers(1, 5),
                       bias=st.sampled_from((True, False)))
    run_cases(one_case, PROJECTION_CASES, shapes, STEP_EXAMPLES,
              pictured(one_case, Projection(1, 8, 6, 6)))
    gen = ctx.generator("output_projection")
    for c in PROJECTION_CASES[:2]:  # with a bias, and without: a bias made up on the CPU
        def meta_call(device: str, c: Projection = c) -> Call:
            x = randn(gen, c.B, c.T, c.d_in, device=device)
            weight = randn(gen, c.d_out, c.d_in, device=device)
            bias = (randn(gen, c.d_out, device=device),) if c.bias else ()
            return sub.call("output_projection", x, weight, *bias)

        expect_on_meta(ctx, "output_projection", meta_call, c.label())
    return 1.0

