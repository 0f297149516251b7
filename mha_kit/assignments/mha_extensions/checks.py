"""Checks of the extension track: `GeneralMultiHeadAttention`, the seed tutorials' variants.

Expected values come from `oracle.sdpa_attention` (`F.scaled_dot_product_attention`), which
takes a per-head value size that differs from the query/key size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ... import oracle
from ...checks.core import TIGHT, CheckFailed, Context, tolerance
from ...checks.expect import (
    expect_blocked_zero,
    expect_close,
    expect_dropout,
    expect_no_dropout_in_eval,
    expect_output_pair,
    expect_unchanged,
    expect_value_error,
    float64,
)
from ...checks.inputs import randn, random_params, strided
from ...messages import Message, joined, msg
from ...runner.protocol import ModuleRun, StudentCodeError

Tensor = torch.Tensor
NAME = "GeneralMultiHeadAttention"


@dataclass(frozen=True)
class Case:
    """One configuration of the general module; None means "leave the default"."""

    B: int
    Tq: int
    query_dim: int
    H: int
    Tk: int | None = None  # None: self-attention, forward(x) alone
    key_dim: int | None = None
    value_dim: int | None = None
    qk_head_dim: int | None = None
    v_head_dim: int | None = None
    out_dim: int | None = None
    context_length: int | None = None
    qkv_bias: bool = True
    pass_value: bool = True  # False: forward(query, key), value defaults to key
    grader_mask: bool = False  # the grader writes its own pattern into the `mask` buffer
    strided: bool = False
    logit_scale: float = 1.0
    dtype: torch.dtype = torch.float64

    @property
    def dqk(self) -> int:
        return self.qk_head_dim or self.query_dim // self.H

    @property
    def dv(self) -> int:
        return self.v_head_dim or self.dqk

    @property
    def tol(self) -> dict:
        return tolerance(self.dtype, self.logit_scale)

    def kwargs(self) -> dict[str, Any]:
        """Constructor keywords: only those the case sets, so that defaults are exercised."""
        names = ("key_dim", "value_dim", "qk_head_dim", "v_head_dim", "out_dim", "context_length")
        chosen: dict[str, Any] = {n: getattr(self, n) for n in names if getattr(self, n)}
        return chosen if self.qkv_bias else {**chosen, "qkv_bias": False}

    def label(self) -> Message | str:
        """The case in messages; its English, `str()`, also seeds its inputs."""
        parts = [f"{NAME}({self.query_dim}, {self.H}"]
        parts += [f"{k}={v}" for k, v in self.kwargs().items()]
        text = ", ".join(parts) + f"), B={self.B}, " + (
            f"Tq={self.Tq}, Tk={self.Tk}" if self.Tk else f"T={self.Tq}")
        notes = [msg(note) for note, on in (("case.value_defaults_to_key", not self.pass_value),
                                            ("case.grader_mask", self.grader_mask),
                                            ("case.non_contiguous_inputs", self.strided),
                                            ("case.large_logits", self.logit_scale > 1)) if on]
        return joined([text, *notes, "float32" if self.dtype == torch.float32 else ""])


@dataclass
class Drawn:
    args: tuple[Tensor, ...]  # forward's positional arguments
    params: dict[str, Tensor | None]
    blocked: Tensor | None  # (Tq, Tk) True = blocked, or None


def draw(c: Case, gen: torch.Generator, device: str) -> Drawn:
    """Inputs, random weights and biases, and the mask, in float64 then cast to c.dtype."""
    kdim, vdim = c.key_dim or c.query_dim, c.value_dim or c.query_dim
    out_dim = c.out_dim or c.query_dim

    def draw(*shape: int) -> Tensor:
        return randn(gen, *shape, device=device)

    query = draw(c.B, c.Tq, c.query_dim)
    key = draw(c.B, c.Tk, kdim) if c.Tk else query
    value = (draw(c.B, c.Tk, vdim) if c.pass_value else key) if c.Tk else query
    shapes = {"q_proj": (c.H * c.dqk, c.query_dim), "k_proj": (c.H * c.dqk, kdim),
              "v_proj": (c.H * c.dv, vdim), "out_proj": (out_dim, c.H * c.dv)}
    biased = ("q_proj", "k_proj", "v_proj", "out_proj") if c.qkv_bias else ("out_proj",)
    params = random_params(gen, shapes, biased=biased, logit_scale=c.logit_scale, device=device)
    blocked = None
    if c.context_length:
        full = oracle.causal_mask(c.context_length, device=device)
        if c.grader_mask:  # also block some earlier keys, never the diagonal
            extra = torch.rand(c.context_length, c.context_length, generator=gen) < 0.3
            full = full | (extra.to(device) & ~torch.eye(c.context_length, dtype=torch.bool,
                                                         device=device))
            params["mask"] = full
        blocked = full[:c.Tq, :c.Tq]  # (T, T)
    args = (query, key, value) if c.Tk and c.pass_value else (query, key) if c.Tk else (query,)
    args = tuple(strided(a) if c.strided else a for a in args)
    cast = {k: v if v is None or v.dtype == torch.bool else v.to(c.dtype)
            for k, v in params.items()}
    return Drawn(tuple(a.to(c.dtype) for a in args), cast, blocked)


def expected(c: Case, d: Drawn) -> tuple[Tensor, Tensor]:
    """Output (B, Tq, out_dim) and per-head weights (B, H, Tq, Tk), computed in float64."""
    query = d.args[0].double()
    key = d.args[1].double() if len(d.args) > 1 else query  # the defaults of forward
    value = d.args[2].double() if len(d.args) > 2 else key
    out, weights = oracle.sdpa_attention(float64(d.params), query, key, value, c.H, d.blocked)
    return out.to(c.dtype), weights.to(c.dtype)


def _run(sub, c: Case, d: Drawn, *, training: bool = False, **init: Any) -> tuple[Any, Any]:
    call = sub.run_module(ModuleRun(NAME, (c.query_dim, c.H), {**c.kwargs(), **init}, d.params,
                                    d.args, {}, dtype=c.dtype, training=training, seed=0))
    expect_unchanged(f"{NAME}.forward", call, dict(zip(("query", "key", "value"), d.args)),
                     c.label())
    return expect_output_pair(f"{NAME}.forward", call)


def _compare(sub, ctx: Context, check_id: str, cases: tuple[Case, ...]) -> float:
    gen = ctx.generator(check_id)
    for c in cases:
        d = draw(c, gen, ctx.device)
        out, weights = _run(sub, c, d)
        want_out, want_weights = expected(c, d)
        what = msg("what.weights_dims", name=NAME, dims="(B, H, Tq, Tk)")
        expect_close(what, weights, want_weights, c.label(), c.tol)
        expect_blocked_zero(what, weights, d.blocked, c.label())
        expect_close(msg("what.output_dims", name=NAME, dims="(B, Tq, out_dim)"), out, want_out,
                     c.label(), c.tol)
    return 1.0


def check_self_attention(sub, ctx: Context) -> float:
    return _compare(sub, ctx, "ext_self_attention", (
        Case(2, 5, 16, 4),
        Case(1, 1, 4, 1),
        Case(2, 4, 6, 6),  # one feature per head
        Case(3, 6, 12, 3, qkv_bias=False),
        Case(2, 5, 16, 4, strided=True),
        Case(2, 5, 16, 4, logit_scale=1e3),
        Case(2, 5, 16, 4, dtype=torch.float32),
    ))


def check_cross_dims(sub, ctx: Context) -> float:
    return _compare(sub, ctx, "ext_cross_dims", (
        Case(2, 3, 5, 2, Tk=6, key_dim=7, value_dim=4, qk_head_dim=3, out_dim=6),
        Case(1, 4, 8, 4, Tk=1, key_dim=3, value_dim=3, qk_head_dim=2),
        Case(2, 3, 10, 3, Tk=5, key_dim=6, value_dim=9, qk_head_dim=4, strided=True),
        Case(2, 3, 8, 2, Tk=5, key_dim=6, value_dim=6, qk_head_dim=4, pass_value=False),
        Case(2, 4, 9, 2, Tk=3, key_dim=5, value_dim=7, qk_head_dim=5, dtype=torch.float32),
    ))


def check_qk_v_head_dims(sub, ctx: Context) -> float:
    return _compare(sub, ctx, "ext_qk_v_head_dims", (
        Case(2, 5, 12, 3, qk_head_dim=2, v_head_dim=5),
        Case(2, 4, 12, 4, qk_head_dim=6, v_head_dim=1, out_dim=7),
        Case(1, 3, 6, 2, qk_head_dim=1, v_head_dim=4, qkv_bias=False),
        Case(2, 3, 12, 3, Tk=4, key_dim=5, value_dim=7, qk_head_dim=4, v_head_dim=2, out_dim=9),
        Case(2, 5, 12, 3, qk_head_dim=2, v_head_dim=5, dtype=torch.float32),
    ))


def check_causal_buffer(sub, ctx: Context) -> float:
    return _compare(sub, ctx, "ext_causal_buffer", (
        Case(2, 6, 16, 4, context_length=8),
        Case(2, 8, 16, 4, context_length=8),
        Case(1, 1, 8, 2, context_length=4),
        Case(2, 5, 12, 3, qk_head_dim=2, v_head_dim=5, context_length=9),
        Case(2, 6, 16, 4, context_length=10, grader_mask=True),
        Case(2, 6, 16, 4, context_length=8, logit_scale=1e3),
        Case(2, 6, 16, 4, context_length=8, dtype=torch.float32),
    ))


def check_dropout(sub, ctx: Context) -> float:
    c = Case(2, 6, 16, 4, context_length=8)
    d = draw(c, ctx.generator("ext_dropout"), ctx.device)
    want_out, want_weights = expected(c, d)
    out, weights = _run(sub, c, d, dropout=0.5)
    expect_no_dropout_in_eval(NAME, weights, want_weights, 0.5,
                              joined([c.label(), msg("case.eval_dropout", p=0.5)]))
    expect_close(msg("what.output", name=NAME), out, want_out,
                 joined([c.label(), msg("case.eval_dropout", p=0.5)]), TIGHT)

    out, weights = _run(sub, c, d, dropout=0.5, training=True)
    p = d.params
    v = oracle.split_heads(F.linear(d.args[0], p["v_proj.weight"], p["v_proj.bias"]), c.H)
    expect_dropout(NAME, out, weights, want_weights, v, p, 0.5,
                   joined([c.label(), msg("case.train_dropout", p=0.5)]))
    return 1.0


def check_size_errors(sub, ctx: Context) -> float:
    expect_value_error(sub, NAME, (10, 3), {}, msg("why.features_split", dim=10, heads=3))
    expect_value_error(sub, NAME, (10, 4), {"v_head_dim": 2},
                       msg("why.qk_default", dim=10, heads=4))
    try:
        sub.check_constructor(NAME, 10, 3, qk_head_dim=4)
    except StudentCodeError as err:
        if err.kind != "raised":  # missing, a stub, a timeout, a crash: reported as they are
            raise
        raise CheckFailed(msg("ext.should_work", call=f"{NAME}(10, 3, qk_head_dim=4)",
                              error=err.message)) from None
    return 1.0
