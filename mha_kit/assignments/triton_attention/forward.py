"""Checks of the row softmax and of the forward kernel: values against PyTorch (torch.softmax,
SDPA, torch.logsumexp) at small shapes that Triton's interpreter runs in well under a second,
the causal blocks above the diagonal skipped (counted in the interpreter), and softmax left to
the kernels."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...checks.core import CheckFailed, Context
from ...checks.diagnosis import Candidate
from ...checks.expect import expect_close, expect_unchanged
from ...checks.gradients import moved
from ...checks.inputs import randn
from ...checks.search import run_cases
from ...messages import Message, joined, msg
from . import oracle, variants
from .jobs import UNSTORED_JOB, WATCH_JOB, WORK_JOB

Tensor = torch.Tensor
FORWARD = "flash_forward"
SOFTMAX = "triton_softmax"
FLOAT32_TOL = {"rtol": 1e-4, "atol": 1e-5}
# float16 keeps 11 bits of mantissa; a GPU's tl.dot takes float32 as TF32 (as many) by default
HALF_TOL = {"rtol": 5e-3, "atol": 5e-3}


@dataclass(frozen=True)
class Rows:
    """x (rows, cols), a slice of a wider tensor where `wider` (its rows `wider` apart),
    its values spread as far as `spread`."""

    rows: int
    cols: int
    wider: int = 0
    spread: float = 1.0

    def label(self) -> Message:
        return msg("case.triton_rows", rows=self.rows, cols=self.cols, stride=self.wider,
                   spread=self.spread)

    def draw(self, gen: torch.Generator) -> Tensor:
        x = randn(gen, self.rows, self.wider or self.cols, device="cpu").float() * self.spread
        return x[:, :self.cols]


SOFTMAX_CASES = (Rows(4, 37), Rows(3, 1), Rows(5, 100, wider=128), Rows(3, 37, spread=100.0))


def on(device: str, candidates: list[Candidate]) -> list[Candidate]:
    """Mistakes' values computed on the CPU, moved to where the student's are."""
    return [(key, lambda make=make: moved(make(), device)) for key, make in candidates]


def check_softmax(sub, ctx: Context) -> float:
    """triton_softmax against torch.softmax over rows whose length is not a power of two."""
    def one_case(c: Rows) -> None:
        x = c.draw(ctx.generator("triton_softmax", c))
        given = moved(x, ctx.device)
        call = sub.call(SOFTMAX, given)
        expect_unchanged(SOFTMAX, call, {"x": given}, c.label())
        expect_close(msg("triton.softmax_out", name=SOFTMAX), call.value,
                     torch.softmax(x.double(), dim=-1).float().to(ctx.device), c.label(),
                     FLOAT32_TOL, dims=("rows", "cols"),
                     mistakes=on(ctx.device, variants.softmax_candidates(x)))

    run_cases(one_case, SOFTMAX_CASES)
    watch = sub.run_job(WATCH_JOB, msg("triton.watching", name=SOFTMAX), name=SOFTMAX,
                        args=moved((SOFTMAX_CASES[0].draw(torch.Generator()),), ctx.device),
                        kwargs={},
                        backward=False)
    used = watch.get("torch_op", 0) if isinstance(watch, dict) else 0
    if not isinstance(used, (str, type(None))):
        raise CheckFailed(msg("triton.bad_reply", name=SOFTMAX))
    if used is not None:
        raise CheckFailed(msg("triton.torch_computes", name=SOFTMAX, op=used[:60]))
    return 1.0


@dataclass(frozen=True)
class Flash:
    """q (B, H, Tq, D), k and v (B, H, Tk, D), blocks of block_m queries and block_n keys;
    `transposed`: each laid out (B, T, H, D) in memory, as a model's projections give them."""

    B: int
    H: int
    Tq: int
    Tk: int
    D: int
    block_m: int = 16
    block_n: int = 16
    causal: bool = False
    dtype: torch.dtype = torch.float32
    transposed: bool = False

    def tol(self, device: str) -> dict:
        return FLOAT32_TOL if self.dtype == torch.float32 and device == "cpu" else HALF_TOL

    def label(self) -> Message | str:
        return joined([f"q (B={self.B}, H={self.H}, Tq={self.Tq}, D={self.D}), Tk={self.Tk}, "
                       f"block_m={self.block_m}, block_n={self.block_n}"
                       + (", is_causal=True" if self.causal else ""),
                       str(self.dtype).removeprefix("torch.") if self.dtype != torch.float32
                       else "", msg("case.triton_transposed") if self.transposed else ""])

    def draw(self, gen: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        def one(T: int) -> Tensor:
            if self.transposed:
                return randn(gen, self.B, T, self.H, self.D, device="cpu").to(
                    self.dtype).transpose(1, 2)
            return randn(gen, self.B, self.H, T, self.D, device="cpu").to(self.dtype)

        return one(self.Tq), one(self.Tk), one(self.Tk)

    @property
    def kwargs(self) -> dict:
        return {"is_causal": self.causal, "block_m": self.block_m, "block_n": self.block_n}


FORWARD_CASES = (
    Flash(2, 2, 21, 21, 16),  # T = 1 block + 5
    Flash(1, 1, 5, 5, 16),  # T shorter than one block
    Flash(1, 1, 20, 45, 16, 16, 32),  # Tq != Tk, block_m != block_n
    Flash(1, 1, 21, 21, 16, dtype=torch.float16),
)
CAUSAL_CASES = (
    Flash(1, 1, 21, 21, 16, causal=True),
    Flash(1, 1, 5, 37, 16, causal=True),  # decoding: the last 5 of 37 tokens
    Flash(1, 1, 24, 45, 16, causal=True),  # Tq != Tk, the diagonal inside a block
    Flash(1, 1, 37, 37, 16, 32, 16, causal=True),
)
STRIDES_CASES = (Flash(1, 2, 21, 21, 16, transposed=True),
                 Flash(1, 2, 20, 37, 16, 16, 32, transposed=True))
# The causal work count: 2 query blocks of 64 and 4 key blocks of 32; query block m needs key
# blocks 0 .. 2m + 1 (6 of 8; 7 with one block too many). block_n differs from block_m and D:
# the count tells the products over key blocks by that size (`jobs.dot_work`).
WORK_CASE = Flash(1, 1, 128, 128, 16, 64, 32, causal=True)


def _pair(value: object, case: Message | str) -> tuple[object, object]:
    if not isinstance(value, tuple) or len(value) != 2:
        raise CheckFailed(msg("triton.flash_pair", name=FORWARD, type=type(value).__name__),
                          case=case)
    return value


def _forward_cases(sub, ctx: Context, check_id: str, cases: tuple[Flash, ...]) -> None:
    def one_case(c: Flash) -> None:
        q, k, v = c.draw(ctx.generator(check_id, c))
        want_out, want_lse = oracle.flash(q.double(), k.double(), v.double(), c.causal)
        given = moved((q, k, v), ctx.device)
        call = sub.call(FORWARD, *given, **c.kwargs)
        expect_unchanged(FORWARD, call, dict(zip("qkv", given)), c.label())
        out, lse = _pair(call.value, c.label())

        def unstored() -> Tensor | None:
            held = sub.run_job(UNSTORED_JOB, msg("triton.filling", name=FORWARD), q=given[0],
                               k=given[1], v=given[2], kwargs=c.kwargs)
            return lse.cpu() if held is True and isinstance(lse, Tensor) else None

        mistakes = on(ctx.device, variants.forward_candidates(q, k, v, c.causal, c.block_m,
                                                              c.block_n, unstored))
        expect_close(msg("triton.flash_out", name=FORWARD), out,
                     want_out.to(c.dtype).to(ctx.device), c.label(), c.tol(ctx.device),
                     dims=("B", "H", "Tq", "D"), mistakes=mistakes, part=0, beside=lse)
        expect_close(msg("triton.flash_lse", name=FORWARD), lse,
                     want_lse.float().to(ctx.device), c.label(), c.tol(ctx.device),
                     dims=("B", "H", "Tq"), mistakes=mistakes, part=1, beside=out)

    run_cases(one_case, cases)


def check_forward(sub, ctx: Context) -> float:
    """flash_forward, not causal: T not a multiple of the block, shorter than one, Tq != Tk,
    float16; then softmax left to the kernel, and no (Tq, Tk) tensor made around it."""
    _forward_cases(sub, ctx, "triton_flash_forward", FORWARD_CASES)
    expect_no_full_matrix(FORWARD, expect_kernel_computes(sub, ctx, FORWARD))
    return 1.0


def check_strides(sub, ctx: Context) -> float:
    """flash_forward on q, k and v laid out (B, T, H, D): the strides used, not assumed."""
    _forward_cases(sub, ctx, "triton_flash_strides", STRIDES_CASES)
    return 1.0


def causal_work(c: Flash, extra_blocks: int = 0, skip: bool = True) -> int:
    """The multiply-adds of q kᵀ and p v over the key blocks each query block needs (bottom-
    right causal), `extra_blocks` more each (up to Tk), or all of them (`skip` False)."""
    per_block = 2 * c.block_m * c.block_n * c.D
    blocks = 0
    for m in range(-(-c.Tq // c.block_m)):
        end = min(c.Tk, (m + 1) * c.block_m + c.Tk - c.Tq) if skip else c.Tk
        blocks += min(-(-c.Tk // c.block_n), -(-end // c.block_n) + extra_blocks)
    return c.B * c.H * blocks * per_block


def check_causal(sub, ctx: Context) -> float:
    """flash_forward with is_causal (bottom-right when Tq != Tk), then, in the interpreter,
    its matrix-product work: the key blocks above the diagonal are skipped."""
    _forward_cases(sub, ctx, "triton_flash_causal", CAUSAL_CASES)
    c = WORK_CASE
    q, k, v = moved(c.draw(ctx.generator("triton_flash_causal", "work")), ctx.device)
    work = sub.run_job(WORK_JOB, msg("triton.counting", name=FORWARD), q=q, k=k, v=v,
                       **c.kwargs)
    if work is None:  # kernels compiled: nothing to count
        return 1.0
    if not isinstance(work, int):
        raise CheckFailed(msg("triton.bad_reply", name=FORWARD))
    needed = causal_work(c)
    if work > needed:
        named = {causal_work(c, extra_blocks=1): "mistake.triton_causal_bound_long",
                 causal_work(c, skip=False): "mistake.triton_causal_not_skipped"}.get(work)
        raise CheckFailed(joined([msg("triton.causal_work", name=FORWARD, work=work,
                                      needed=needed, full=causal_work(c, skip=False)),
                                  msg(named) if named else ""]), case=c.label())
    return 1.0


# The watch's case: one head's (T, T) scores have twice the elements of q, k, v or the output,
# the largest tensors the Python side needs.
WATCH_CASE = Flash(1, 1, 32, 32, 16, causal=True)


def expect_kernel_computes(sub, ctx: Context, name: str, *, backward: bool = False) -> dict:
    """`name` run once on WATCH_CASE under the watch (with `backward`, its backward too):
    PyTorch computed no softmax or attention for it (the kernels must); the watch's report."""
    c = WATCH_CASE
    report = sub.run_job(WATCH_JOB, msg("triton.watching", name=name), name=name,
                         args=moved(c.draw(torch.Generator()), ctx.device), kwargs=c.kwargs,
                         backward=backward)
    made = report.get("made") if isinstance(report, dict) else None
    if not isinstance(report.get("torch_op") if made else 0, (str, type(None))) \
            or not isinstance(made.get("largest"), int) or not isinstance(made.get("op"), str):
        raise CheckFailed(msg("triton.bad_reply", name=name))
    if report["torch_op"] is not None:
        raise CheckFailed(msg("triton.torch_computes", name=name, op=report["torch_op"][:60]))
    return report


def expect_no_full_matrix(name: str, report: dict) -> None:
    """No tensor the watch saw made (`expect_kernel_computes`'s report) as large as one head's
    (Tq, Tk) scores."""
    c, made = WATCH_CASE, report["made"]
    if made["largest"] >= c.Tq * c.Tk:
        raise CheckFailed(msg("triton.full_matrix", name=name, elements=made["largest"],
                              op=made["op"][:60], limit=c.Tq * c.Tk), case=c.label())
