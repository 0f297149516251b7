"""Checks of FlashAttention in PyTorch: `flash_attention`'s values and gradients, the memory
it uses, and `flash_attention_autograd`'s backward.

The values come from SDPA and `torch.logsumexp`. The memory is measured on the `meta` device,
where tensors have sizes and no data (`jobs.memory`): on the CPU, fused kernels hide their
intermediates; on meta everything decomposes, and a (Tq, Tk) tensor shows however it is made.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from ...checks.core import TIGHT, CheckFailed, Context
from ...checks.diagnosis import Diagnosis
from ...checks.expect import attempt, expect_close, expect_unchanged
from ...checks.gradients import backward_for, call_with, expect_gradients, expect_on_meta, moved
from ...checks.inputs import randn
from ...checks.search import run_cases
from ...messages import Message, joined, msg
from ...oracle import gradients
from ...runner.protocol import StudentCodeError
from ...runner.student_code import NAME_KEEP, shown
from . import flash_variants, oracle
from .jobs import MEMORY_JOB
from .pieces import HALF_TOL

Tensor = torch.Tensor
FLASH = "flash_attention"
AUTOGRAD = "flash_attention_autograd"
FLOAT64_TOL = {"rtol": 1e-6, "atol": 1e-6}
FLOAT32_TOL = {"rtol": 1e-4, "atol": 1e-4}


@dataclass(frozen=True)
class Flash:
    """q (B, H, Tq, D), k and v (B, H, Tk, D), keys in blocks of `block`."""

    B: int
    H: int
    Tq: int
    Tk: int
    D: int
    block: int
    causal: bool = False
    logit_scale: float = 1.0  # q multiplied by it: scores spread as far as logit_scale
    dtype: torch.dtype = torch.float64
    # Every score of query 0 near -1e4 and of query 1 near +1e3: e^score underflows to 0 and
    # overflows to inf in float64; only a running maximum, started at -inf (not 0), keeps both.
    extreme_rows: bool = False

    @property
    def tol(self) -> dict:
        return {torch.float64: FLOAT64_TOL, torch.float32: FLOAT32_TOL}.get(self.dtype,
                                                                              HALF_TOL)

    def label(self) -> Message | str:
        return joined([f"q (B={self.B}, H={self.H}, Tq={self.Tq}, D={self.D}), Tk={self.Tk}, "
                       f"block_size={self.block}" + (", is_causal=True" if self.causal else ""),
                       msg("case.llm_large_scores") if self.logit_scale > 1 else "",
                       msg("case.llm_extreme_rows") if self.extreme_rows else "",
                       str(self.dtype).removeprefix("torch.") if self.dtype != torch.float64
                       else ""])

    def draw(self, gen: torch.Generator, device: str) -> tuple[Tensor, Tensor, Tensor]:
        q = randn(gen, self.B, self.H, self.Tq, self.D, device=device) * self.logit_scale
        k = randn(gen, self.B, self.H, self.Tk, self.D, device=device)
        v = randn(gen, self.B, self.H, self.Tk, self.D, device=device)
        if self.extreme_rows:  # feature 0: about 10 in every key; in q_0 and q_1, what
            k[..., 0] += 10.0  # takes their scores near -1e4 and +1e3
            q[..., 0, 0], q[..., 1, 0] = -1e3 * self.D ** 0.5, 1e2 * self.D ** 0.5
        return q.to(self.dtype), k.to(self.dtype), v.to(self.dtype)


FLASH_CASES = (
    Flash(2, 2, 10, 10, 8, 4),  # T = 2 blocks + 2
    Flash(1, 2, 9, 9, 4, 4, causal=True),  # T = 2 blocks + 1
    Flash(2, 1, 3, 11, 8, 4, causal=True),  # decoding: the last 3 of 11 tokens
    Flash(1, 1, 1, 7, 4, 3),  # one query
    Flash(1, 2, 16, 16, 8, 16, causal=True),  # one block
    Flash(1, 1, 5, 5, 4, 8),  # a block longer than T
    Flash(1, 2, 12, 12, 8, 4, causal=True, logit_scale=100.0, dtype=torch.float32),
    Flash(1, 2, 12, 12, 8, 4, dtype=torch.bfloat16),
    Flash(1, 2, 6, 6, 4, 4, extreme_rows=True),
)
# The memory check's size: a (Tq, Tk) matrix of one head has 16.8 M elements, a block of the
# scores at most H * Tq * block = 2.1 M.
MEMORY_SHAPE = {"B": 1, "H": 2, "T": 4096, "D": 64, "block": 256}
# The same watch on real tensors, whose values are checked too: the code measured is the code
# graded (code that builds the matrix there and something else on meta passes on meta alone).
# Smaller, for time: a (Tq, Tk) matrix of one head has 0.26 M elements (1 MB in float32), a
# block of the scores at most H * Tq * block = 0.07 M, and what a Function should save (q, k,
# v, out: 4 * H * T * D) 0.07 M.
REAL_SHAPE = {"B": 1, "H": 2, "T": 512, "D": 16, "block": 64}


def _pair(name: str, value: Any, case: Message | str) -> tuple[Any, Any]:
    if not isinstance(value, tuple) or len(value) != 2:
        raise CheckFailed(msg("llm.flash_pair", name=name, type=type(value).__name__),
                          case=case)
    return value


def check_flash_forward(sub, ctx: Context) -> float:
    def one_case(c: Flash) -> None:
        gen = ctx.generator("llm_flash_forward", c)
        q, k, v = c.draw(gen, ctx.device)
        want_out, want_lse = oracle.flash(q.double(), k.double(), v.double(), c.causal)
        # Gradients through the output; the logsumexp may be non-differentiable, as
        # FlashAttention's own (`ctx.mark_non_differentiable`).
        through_out = backward_for(gen, c.dtype, (want_out,), ("out",), {0: "q", 1: "k", 2: "v"})
        backward = None if through_out is None else dataclasses.replace(
            through_out, cotangents=(through_out.cotangents[0], None),
            outputs=("out", "logsumexp"))
        mistakes = flash_variants.flash_candidates(q, k, v, c.causal, c.block)
        call = attempt(lambda: sub.call_backward(
            FLASH, (q, k, v), {"is_causal": c.causal, "block_size": c.block}, backward)
            if backward else sub.call(FLASH, q, k, v, is_causal=c.causal, block_size=c.block),
            c.label(), [*mistakes, flash_variants.size_mismatch("flash_size_mismatch")])
        expect_unchanged(FLASH, call, {"q": q, "k": k, "v": v}, c.label())
        out, lse = _pair(FLASH, call.value, c.label())
        expect_close(msg("llm.flash_out", name=FLASH), out, want_out.to(c.dtype), c.label(),
                     c.tol, dims=("B", "H", "Tq", "D"), mistakes=mistakes, part=0, beside=lse)
        expect_close(msg("llm.flash_lse", name=FLASH), lse, want_lse.to(c.dtype), c.label(),
                     c.tol, dims=("B", "H", "Tq"), mistakes=mistakes, part=1, beside=out)
        expect_gradients(FLASH, call, backward, lambda: gradients(
            lambda *a: oracle.flash(*a, c.causal), (q, k, v), backward.inputs,
            backward.cotangents), c.label(), c.tol)

    run_cases(one_case, FLASH_CASES)
    c = FLASH_CASES[1]
    qkv = c.draw(ctx.generator("llm_flash_forward", "meta"), "cpu")
    expect_on_meta(ctx, FLASH, lambda device: sub.call(
        FLASH, *moved(qkv, device), is_causal=True, block_size=c.block), c.label())
    return 1.0


def _memory_case(causal: bool, real: bool = False) -> Message | str:
    s = REAL_SHAPE if real else MEMORY_SHAPE
    return msg("case.llm_memory_real" if real else "case.llm_memory", B=s["B"], H=s["H"],
               T=s["T"], D=s["D"], block=s["block"], causal=causal)


def _real_inputs(ctx: Context, causal: bool) -> tuple[Tensor, Tensor, Tensor]:
    s = REAL_SHAPE
    gen = ctx.generator("llm_flash_memory", "real", causal)
    return tuple(randn(gen, s["B"], s["H"], s["T"], s["D"], device="cpu").float() for _ in range(3))


def _measure(sub, name: str, causal: bool, backward: bool,
             inputs: tuple[Tensor, Tensor, Tensor] | None = None,
             want: Tensor | None = None) -> dict[str, Any]:
    """The memory job's report on meta tensors, or on the real `inputs` (then with the output
    compared with `want`, by default the oracle's)."""
    s = REAL_SHAPE if inputs else MEMORY_SHAPE
    shape = (s["B"], s["H"], s["T"], s["D"])
    case = _memory_case(causal, inputs is not None)
    try:
        report = sub.run_job(MEMORY_JOB, msg("llm.measuring", name=name), name=name,
                             q_shape=shape, k_shape=shape, is_causal=causal,
                             block_size=s["block"], backward=backward, inputs=inputs)
    except StudentCodeError as err:
        if err.kind == "raised" and name == FLASH:  # its error, with a size mismatch's causes
            raise CheckFailed(err.message, diagnosis=Diagnosis(err, [
                flash_variants.size_mismatch("flash_size_mismatch")], TIGHT),
                exc_type=err.exc_type) from None
        if err.kind != "timeout":
            raise
        raise CheckFailed(msg("llm.memory_too_slow", name=name, T=s["T"], block=s["block"],
                              blocks=(s["T"] // s["block"]) ** 2), case=case) from None
    if isinstance(report, dict) and report.get("reads_values") is True:
        raise CheckFailed(msg("llm.reads_values", name=name), case=case)
    if not isinstance(report, dict):
        raise CheckFailed(msg("llm.bad_memory_reply", name=name))
    if inputs is not None:
        out = report.get("out")
        out = out[0] if name == FLASH and isinstance(out, tuple) and len(out) == 2 else out
        want = oracle.flash(*inputs, causal)[0] if want is None else want
        expect_close(msg("llm.flash_out", name=name), out, want, case, FLOAT32_TOL,
                     dims=("B", "H", "Tq", "D"))
    return report


def _expect_no_full_matrix(name: str, part: Any, causal: bool, stage: str,
                           real: bool = False) -> None:
    """No tensor made while `name` ran (`part`, a SizeWatch report) as large as one head's
    (Tq, Tk) scores, and not as many elements alive at once as the scores of every head."""
    shape = REAL_SHAPE if real else MEMORY_SHAPE
    limit = shape["T"] ** 2
    if not isinstance(part, dict) or not isinstance(part.get("largest"), int):
        raise CheckFailed(msg("llm.bad_memory_reply", name=name))
    if part["largest"] >= limit:
        raise CheckFailed(msg(f"llm.full_matrix_{stage}", name=name, elements=part["largest"],
                              shape=tuple(part.get("shape", ())), op=str(part.get("op", ""))[:80],
                              limit=limit), case=_memory_case(causal, real))
    # Alive at once: the scores of every head. A loop's temporaries stay far below it (the
    # reference peaks at 9 M: a few blocks of 2 M while the next ones are made); blocks kept
    # in a list reach it.
    every_head = shape["H"] * limit
    peak = part.get("peak")
    if not isinstance(peak, int) or peak >= every_head:
        raise CheckFailed(msg("llm.blocks_kept", name=name, elements=peak, limit=every_head),
                          case=_memory_case(causal, real))


def check_flash_memory(sub, ctx: Context) -> float:
    """On meta tensors, then on real ones: the output there is the oracle's, or, where
    flash_attention fails its own check (wrong values cost that check, not this one), what it
    gives outside the watch: the code measured is the code graded."""
    forward = ctx.results["llm_flash_forward"]  # run first (CheckSpec.consults)
    for causal in (False, True):
        report = _measure(sub, FLASH, causal, backward=False)
        _expect_no_full_matrix(FLASH, report.get("forward"), causal, "forward")
        inputs = _real_inputs(ctx, causal)
        own = None if forward.passed else _pair(FLASH, sub.call(
            FLASH, *inputs, is_causal=causal, block_size=REAL_SHAPE["block"]).value,
            _memory_case(causal, True))[0]
        report = _measure(sub, FLASH, causal, backward=False, inputs=inputs, want=own)
        _expect_no_full_matrix(FLASH, report.get("forward"), causal, "forward", real=True)
    return 1.0


BACKWARD_CASES = (Flash(2, 2, 9, 9, 8, 4), Flash(1, 2, 9, 9, 4, 4, causal=True),
                  Flash(2, 1, 3, 11, 8, 4, causal=True), Flash(1, 1, 6, 6, 4, 8))


def check_flash_backward(sub, ctx: Context) -> float:
    forward = ctx.results.get("llm_flash_forward")

    def one_case(c: Flash) -> None:
        gen = ctx.generator("llm_flash_backward", c)
        q, k, v = c.draw(gen, ctx.device)
        want = oracle.flash(q, k, v, c.causal)[0]
        backward = backward_for(gen, c.dtype, (want,), ("out",), {0: "q", 1: "k", 2: "v"})
        call = call_with(sub, AUTOGRAD, (q, k, v, c.causal, c.block), backward)
        mistakes = flash_variants.flash_candidates(q, k, v, c.causal, c.block)
        if forward is not None and not forward.passed:  # its forward, not the kit's, ran?
            mistakes.insert(0, ("flash_forward_failing",
                                lambda: (_own_forward(sub, q, k, v, c),)))  # named first
        expect_close(msg("llm.flash_out", name=AUTOGRAD), call.value, want, c.label(), c.tol,
                     dims=("B", "H", "Tq", "D"), part=0, mistakes=mistakes)
        expect_gradients(AUTOGRAD, call, backward, lambda: gradients(
            lambda *a: oracle.flash(*a, c.causal)[0], (q, k, v), backward.inputs,
            backward.cotangents), c.label(), c.tol, mistakes=None if backward is None else
            flash_variants.flash_gradient_candidates(q, k, v, backward.cotangents[0], c.causal,
                                               c.block))

    run_cases(one_case, BACKWARD_CASES)
    for causal in (False, True):
        for inputs in (None, _real_inputs(ctx, causal)):
            real = inputs is not None
            report = _measure(sub, AUTOGRAD, causal, backward=True, inputs=inputs)
            _expect_little_kept(report, causal, real)  # first: what the graph keeps is alive
            _expect_no_full_matrix(AUTOGRAD, report.get("forward"), causal, "forward", real)
            if report.get("backward") is None:
                raise CheckFailed(msg("llm.no_graph", name=AUTOGRAD),
                                  case=_memory_case(causal, real))
            _expect_no_full_matrix(AUTOGRAD, report.get("backward"), causal, "backward", real)
    return 1.0


def _own_forward(sub, q: Tensor, k: Tensor, v: Tensor, c: Flash) -> Any:
    """The output of the student's own flash_attention, which fails its check, whatever
    stands in for it here: a Function that computes its forward without calling it (a copy,
    a helper they share) gives the same wrong output."""
    with sub.own_code():
        return _pair(FLASH, sub.call(FLASH, q, k, v, is_causal=c.causal,
                                     block_size=c.block).value, c.label())[0]


def _expect_little_kept(report: dict[str, Any], causal: bool, real: bool) -> None:
    """What the autograd graph keeps for backward (the tensors it saves, and those a custom
    Function put on `ctx`) is less than one head's (Tq, Tk) matrix; the message says where
    the most is kept."""
    limit = (REAL_SHAPE if real else MEMORY_SHAPE)["T"] ** 2
    saved, in_ctx = report.get("saved"), report.get("in_ctx")
    largest = in_ctx.get("largest") if isinstance(in_ctx, dict) else None
    if not (isinstance(saved, int) and isinstance(in_ctx, dict)
            and isinstance(in_ctx.get("elements"), int) and isinstance(largest, dict)
            and isinstance(largest.get("where"), str) and isinstance(largest.get("shape"), tuple)
            and all(type(d) is int for d in largest["shape"])
            and isinstance(in_ctx.get("function"), bool)):
        raise CheckFailed(msg("llm.bad_memory_reply", name=AUTOGRAD))
    if saved + in_ctx["elements"] < limit:
        return
    if in_ctx["elements"] > saved:
        text = msg("llm.keeps_in_ctx", name=AUTOGRAD, elements=saved + in_ctx["elements"],
                   where=shown(largest["where"], NAME_KEEP), shape=largest["shape"],
                   limit=limit)
    else:
        text = msg("llm.function_saves_too_much" if in_ctx["function"] else
                   "llm.saves_too_much", name=AUTOGRAD, elements=saved, limit=limit)
    raise CheckFailed(text, case=_memory_case(causal, real))
