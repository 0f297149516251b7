"""The known mistakes of triton_attention, recomputed from torch primitives in float64: when a
value check fails, each is tried on the same inputs, and one that reproduces the answer is
named (`mistakes.py` lists their ids, `messages.py` their sentences). They only explain
failures: the expected values come from `oracle`."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ...checks.diagnosis import Candidate
from . import oracle

Tensor = torch.Tensor
NEG_INF = float("-inf")


def next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


# --------------------------------------------------------------------------- the row softmax


def softmax_candidates(x: Tensor) -> list[Candidate]:
    """Padding lanes loaded as 0 (not -inf) and counted in the sum; exp without the maximum
    subtracted, in x's own dtype (where it overflows). Rows assumed contiguous read the gaps
    of the copy the student is given, whose values no one set: nothing to reproduce."""
    cols = x.shape[1]

    def other_zero() -> Tensor:
        padded = F.pad(x.double(), (0, next_power_of_2(cols) - cols))
        return torch.softmax(padded, dim=-1)[:, :cols].to(x.dtype)

    def no_max() -> Tensor:
        e = torch.exp(x)
        return e / e.sum(dim=-1, keepdim=True)

    return [("triton_softmax_other_zero", other_zero), ("triton_softmax_no_max", no_max)]


def as_contiguous(x: Tensor) -> Tensor:
    """What a kernel that assumes x contiguous reads: x's memory from its first element on, in
    row-major order of its shape."""
    return torch.as_strided(x, x.shape, torch.empty(x.shape).stride())


# --------------------------------------------------------------------------- the forward


def _masked(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor,
            scale: float | None = None) -> tuple[Tensor, Tensor]:
    """(out, logsumexp) over the keys `allowed` (Tq, Tk); a query that sees none gets NaN
    and -inf, as a kernel's 0 / 0 and log(0) give."""
    s = oracle.blocked_scores(q, k, ~allowed, scale)
    return torch.softmax(s, dim=-1) @ v, torch.logsumexp(s, dim=-1)


def _allowed(tq: int, tk: int, is_causal: bool) -> Tensor:
    return ~oracle.causal_blocked(tq, tk) if is_causal else torch.ones(tq, tk, dtype=torch.bool)


def block_loop(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, block_n: int, *,
               rescale_acc: bool = True, rescale_sum: bool = True) -> tuple[Tensor, Tensor]:
    """The online softmax over key blocks with the accumulator or the sum not rescaled when
    the running maximum grows."""
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    allowed = _allowed(Tq, Tk, is_causal)
    row_max = torch.full((B, H, Tq, 1), NEG_INF, dtype=q.dtype)
    row_sum = torch.zeros(B, H, Tq, 1, dtype=q.dtype)
    acc = torch.zeros(B, H, Tq, D, dtype=q.dtype)
    for start in range(0, Tk, block_n):
        end = min(start + block_n, Tk)
        s = oracle.blocked_scores(q, k[:, :, start:end], ~allowed[:, start:end])
        new_max = torch.maximum(row_max, s.amax(-1, keepdim=True))
        safe = new_max.masked_fill(new_max == NEG_INF, 0.0)
        p = torch.exp(s - safe)
        alpha = torch.exp(row_max - safe)
        row_sum = (row_sum * alpha if rescale_sum else row_sum) + p.sum(-1, keepdim=True)
        acc = (acc * alpha if rescale_acc else acc) + p @ v[:, :, start:end]
        row_max = new_max
    return acc / row_sum, (row_max + row_sum.log()).squeeze(-1)


def bound_short(q: Tensor, k: Tensor, v: Tensor, block_m: int, block_n: int,
                short_by: int) -> tuple[Tensor, Tensor]:
    """Causal, with query block m's loop ending at min(Tk, (m + 1) · block_m + Tk - Tq -
    short_by): only the key blocks that start before it are seen."""
    Tq, Tk = q.shape[2], k.shape[2]
    rows = torch.arange(Tq)[:, None]
    hi = ((rows // block_m + 1) * block_m + Tk - Tq - short_by).clamp(max=Tk)
    seen_end = (hi.clamp(min=0) + block_n - 1) // block_n * block_n  # whole blocks
    allowed = _allowed(Tq, Tk, True) & (torch.arange(Tk)[None, :] < seen_end)
    return _masked(q, k, v, allowed)


def forward_candidates(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, block_m: int,
                       block_n: int, unstored: Callable[[], Tensor | None]) -> list[Candidate]:
    """Each mistake's (out, logsumexp), in float64, cast to the inputs' dtype (the logsumexp
    to float32 where the inputs are half: kernels keep it in float32). `unstored()`: the
    logsumexp the student's kernel gives back when it never stores it (what the memory held),
    None if it does store it."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    Tq, Tk = q.shape[2], k.shape[2]

    def cast(pair: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        out, lse = pair
        return out.to(q.dtype), lse.to(q.dtype if q.dtype == torch.float64 else torch.float32)

    def right() -> tuple[Tensor, Tensor]:
        return oracle.flash(q64, k64, v64, is_causal)

    def lse_without_max() -> tuple[Tensor, Tensor]:
        out, lse = right()
        s = oracle.blocked_scores(q64, k64,
                                  oracle.causal_blocked(Tq, Tk) if is_causal else None)
        return out, lse - s.amax(-1)

    def other_zero() -> tuple[Tensor, Tensor]:
        pad = (Tk + block_n - 1) // block_n * block_n - Tk
        padded = [F.pad(t, (0, 0, 0, pad)) for t in (k64, v64)]
        return oracle.flash(q64, *padded, False)

    def strides_contiguous() -> tuple[Tensor, Tensor]:
        return oracle.flash(*(as_contiguous(t).double() for t in (q, k, v)), is_causal)

    def strides_contiguous_out() -> tuple[Tensor, Tensor]:
        """The output written with contiguous strides into a tensor laid out like q."""
        out, lse = strides_contiguous()
        return out.flatten().as_strided(q.shape, q.stride()), lse

    def lse_not_stored() -> tuple[Tensor, Tensor] | None:
        held = unstored()
        return None if held is None else (cast(right())[0], held)

    found = [
        ("triton_lse_not_stored", lse_not_stored),
        ("triton_acc_not_rescaled", lambda: cast(block_loop(q64, k64, v64, is_causal, block_n,
                                                            rescale_acc=False))),
        ("triton_sum_not_rescaled", lambda: cast(block_loop(q64, k64, v64, is_causal, block_n,
                                                            rescale_sum=False))),
        ("triton_scale_missing", lambda: cast(_masked(q64, k64, v64, _allowed(Tq, Tk, is_causal),
                                                      scale=1.0))),
        ("triton_lse_without_max", lambda: cast(lse_without_max())),
    ]
    if not is_causal and Tk % block_n:
        found.append(("triton_boundary_other_zero", lambda: cast(other_zero())))
    if is_causal:
        found += [("triton_causal_bound_short",
                   lambda s=s: cast(bound_short(q64, k64, v64, block_m, block_n, s)))
                  for s in sorted({block_n, block_m})]
    if not all(t.is_contiguous() for t in (q, k, v)):
        found += [("triton_strides_contiguous", lambda: cast(strides_contiguous())),
                  ("triton_strides_contiguous", lambda: cast(strides_contiguous_out()))]
    return found


# --------------------------------------------------------------------------- the backward


def delta_missing(q: Tensor, k: Tensor, v: Tensor, d_out: Tensor,
                  is_causal: bool) -> dict[str, Tensor]:
    """The gradients with dS = P ∘ dP, δ = rowsum(dO ∘ O) left out (dV is unchanged)."""
    q64, k64, v64, do64 = (t.double() for t in (q, k, v, d_out))
    scale = 1 / math.sqrt(q.shape[-1])
    blocked = oracle.causal_blocked(q.shape[2], k.shape[2]) if is_causal else None
    p = torch.softmax(oracle.blocked_scores(q64, k64, blocked), dim=-1)  # (B, H, Tq, Tk)
    ds = p * (do64 @ v64.transpose(-2, -1))
    return {"q": (ds @ k64 * scale).to(q.dtype), "k": (ds.transpose(-2, -1) @ q64 * scale)
            .to(q.dtype), "v": (p.transpose(-2, -1) @ do64).to(q.dtype)}
