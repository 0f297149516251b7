"""Checks of the three functions: `apply_rope`, `repeat_kv` and `sliding_window_mask`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...checks.core import TIGHT, CheckFailed, Context
from ...checks.diagnosis import Diagnosis
from ...checks.expect import attempt, expect_close, expect_tensor, expect_unchanged
from ...checks.gradients import backward_for, call_with, expect_gradients, expect_on_meta, moved
from ...checks.inputs import randn, strided
from ...checks.search import run_cases
from ...messages import Message, joined, msg
from ...oracle import gradients
from . import oracle, piece_variants, variants

Tensor = torch.Tensor
# RoPE's angles are position × frequency: computed in float32, as Hugging Face's Llama does
# even for float64 inputs, an angle of a few hundred radians is off by 1e-5 (one float32 step
# at 300). Real mistakes move values by 1e-1 or more.
ROPE_TOL = {"rtol": 1e-4, "atol": 1e-4}
HALF_TOL = {"rtol": 3e-2, "atol": 3e-2}  # bfloat16 keeps 8 bits of mantissa


@dataclass(frozen=True)
class Rope:
    """x of `shape` (..., T, D) at positions `start + step * t` (t = 0 .. T-1)."""

    shape: tuple[int, ...]
    base: float = 10000.0
    start: int = 0
    step: int = 1
    strided: bool = False
    dtype: torch.dtype = torch.float64

    def positions(self) -> Tensor:
        return self.start + self.step * torch.arange(self.shape[-2])

    def label(self) -> Message | str:
        T = self.shape[-2]
        where = (f"positions {self.start}..{self.start + self.step * (T - 1)}"
                 + (f" step {self.step}" if self.step != 1 else ""))
        return joined([f"x {self.shape}", where, f"base={self.base:g}",
                       msg("case.non_contiguous_input") if self.strided else "",
                       "" if self.dtype == torch.float64
                       else str(self.dtype).removeprefix("torch.")])

    def tolerance(self) -> dict[str, float]:
        return HALF_TOL if self.dtype == torch.bfloat16 else ROPE_TOL


ROPE_CASES = (
    Rope((2, 3, 5, 8)),
    Rope((1, 4, 6), base=500.0, start=7),
    Rope((2, 2, 3, 16), start=40, step=13),
    Rope((1, 1, 1, 2), start=5),
    Rope((2, 6, 12), base=10.0),
    Rope((2, 2, 5, 8), start=300, base=1e6),
    Rope((2, 3, 5, 8), strided=True),
    Rope((2, 3, 5, 8), start=3, dtype=torch.float32),
    # Late positions in bfloat16, as a long prompt has them: angles made in bfloat16 are off
    # by whole radians there (a position keeps 8 bits).
    Rope((1, 2, 6, 8), start=2000, step=37, dtype=torch.bfloat16),
)


def _rope_call(sub, c: Rope, x: Tensor, positions: Tensor, backward=None):
    return call_with(sub, "apply_rope", (x, positions, c.base), backward)


def _expect_norm_kept(got: Tensor, x: Tensor, c: Rope) -> None:
    """A rotation keeps every pair's length, hence every feature vector's."""
    lengths, before = got.double().norm(dim=-1), x.double().norm(dim=-1)
    if not torch.allclose(lengths, before, **ROPE_TOL):
        worst = int((lengths - before).abs().flatten().argmax())
        found = Diagnosis(got, variants.rope_candidates(x, c.positions().to(x.device), c.base),
                          ROPE_TOL)
        raise CheckFailed(msg("llm.rope_norm", got=f"{float(lengths.flatten()[worst]):.4g}",
                              expected=f"{float(before.flatten()[worst]):.4g}"),
                          diagnosis=found, case=c.label())


def _expect_relative(sub, ctx: Context) -> None:
    """⟨R(m)q, R(n)k⟩ depends on m - n only: moving every position by 9 keeps the scores."""
    gen = ctx.generator("llm_rope", "relative")
    c = Rope((1, 2, 6, 8), base=100.0)
    q, k = randn(gen, *c.shape, device=ctx.device), randn(gen, *c.shape, device=ctx.device)
    scores = []
    for shift in (0, 9):
        positions = (c.positions() + shift).to(ctx.device)
        rq = expect_tensor("apply_rope(q, positions)", sub.call(
            "apply_rope", q, positions, c.base).value, q, c.label())
        rk = expect_tensor("apply_rope(k, positions)", sub.call(
            "apply_rope", k, positions, c.base).value, k, c.label())
        scores.append(rq @ rk.transpose(-2, -1))  # (1, 2, T, T)
    if not torch.allclose(scores[0], scores[1], **ROPE_TOL):
        raise CheckFailed(msg("llm.rope_relative", shift=9), case=c.label())


def check_rope(sub, ctx: Context) -> float:
    first = ROPE_CASES[0]
    x = randn(ctx.generator("llm_rope", "norm"), *first.shape, device=ctx.device)
    positions = first.positions().to(ctx.device)
    got = attempt(lambda: sub.call("apply_rope", x, positions, first.base), first.label(),
                  variants.rope_candidates(x, positions, first.base)).value
    _expect_norm_kept(expect_tensor("apply_rope(x, positions, base)", got, x, first.label()),
                      x, first)
    _expect_relative(sub, ctx)

    def one_case(c: Rope) -> None:
        gen = ctx.generator("llm_rope", c)
        x = randn(gen, *c.shape, device=ctx.device)
        positions = c.positions().to(ctx.device)
        want = oracle.rope(x, positions, c.base)
        backward = backward_for(gen, c.dtype, (want,), ("out",), {0: "x"})
        x = (strided(x) if c.strided else x).to(c.dtype)
        mistakes = variants.rope_candidates(x, positions, c.base)
        call = attempt(lambda: _rope_call(sub, c, x, positions, backward), c.label(), mistakes)
        expect_unchanged("apply_rope", call, {"x": x}, c.label())
        expect_close("apply_rope(x, positions, base)", call.value, want.to(c.dtype), c.label(),
                     c.tolerance(), mistakes=mistakes)
        expect_gradients("apply_rope", call, backward, lambda: gradients(
            lambda t: oracle.rope(t, positions, c.base), (x,), {0: "x"}, backward.cotangents),
            c.label(), c.tolerance())

    run_cases(one_case, ROPE_CASES)
    c = ROPE_CASES[0]
    expect_on_meta(ctx, "apply_rope", lambda device: sub.call(
        "apply_rope", *moved((torch.zeros(c.shape, dtype=torch.float64), c.positions()), device),
        c.base), c.label())
    return 1.0


@dataclass(frozen=True)
class Repeat:
    B: int
    Hkv: int
    T: int
    D: int
    n_rep: int
    strided: bool = False

    def label(self) -> Message | str:
        return joined([f"x (B={self.B}, Hkv={self.Hkv}, T={self.T}, D={self.D}), "
                       f"n_rep={self.n_rep}",
                       msg("case.non_contiguous_input") if self.strided else ""])


# B differs from Hkv, and Hkv from T, where n_rep > 1: heads repeated along the batch (or the
# tokens) then give sizes in no other order, which the shape message would take for a
# transpose.
REPEAT_CASES = (Repeat(3, 2, 3, 4, 3), Repeat(2, 1, 5, 2, 4), Repeat(2, 3, 2, 2, 1),
                Repeat(1, 4, 2, 3, 2), Repeat(3, 2, 3, 4, 2, strided=True))


def check_repeat_kv(sub, ctx: Context) -> float:
    def one_case(c: Repeat) -> None:
        x = randn(ctx.generator("llm_repeat_kv", c), c.B, c.Hkv, c.T, c.D, device=ctx.device)
        x = strided(x) if c.strided else x
        mistakes = variants.repeat_kv_candidates(x, c.n_rep)
        call = attempt(lambda: sub.call("repeat_kv", x, c.n_rep), c.label(), mistakes)
        expect_unchanged("repeat_kv", call, {"x": x}, c.label())
        expect_close("repeat_kv(x, n_rep)", call.value, oracle.repeat_kv(x, c.n_rep), c.label(),
                     TIGHT, dims=("B", "H", "T", "D"), mistakes=mistakes)

    run_cases(one_case, REPEAT_CASES)
    c = REPEAT_CASES[0]
    expect_on_meta(ctx, "repeat_kv", lambda device: sub.call(
        "repeat_kv", torch.zeros(c.B, c.Hkv, c.T, c.D, device=device), c.n_rep), c.label())
    return 1.0


@dataclass(frozen=True)
class Window:
    T: int
    window: int

    def label(self) -> str:
        return f"T={self.T}, window={self.window}"


WINDOW_CASES = (Window(6, 3), Window(5, 1), Window(4, 4), Window(4, 10), Window(1, 1),
                Window(8, 2), Window(7, 5))


def check_sliding_window(sub, ctx: Context) -> float:
    def one_case(c: Window) -> None:
        i, j = torch.arange(c.T)[:, None], torch.arange(c.T)[None, :]
        want = (j <= i) & (j > i - c.window)  # (T, T) True: may attend
        got = sub.call("sliding_window_mask", c.T, c.window).value
        if isinstance(got, Tensor) and got.is_floating_point():  # an additive 0/-inf mask
            raise CheckFailed(msg("llm.window_float", dtype=str(got.dtype)), case=c.label())
        expect_close("sliding_window_mask(T, window)", got, want, c.label(), TIGHT,
                     dims=("Tq", "Tk"), mistakes=piece_variants.window_candidates(c.T, c.window))

    run_cases(one_case, WINDOW_CASES)
    return 1.0
