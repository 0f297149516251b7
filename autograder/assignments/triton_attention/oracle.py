"""The expected values of triton_attention, from PyTorch: `torch.softmax`, SDPA with a
boolean mask, `torch.logsumexp`, and gradients by autograd through an explicit softmax. Each
computes in the dtype it is given (the checks pass float64)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def causal_blocked(tq: int, tk: int) -> Tensor:
    """(Tq, Tk) True where blocked: query i is the last Tq of Tk tokens (bottom-right aligned,
    as in decoding), so it sees keys j <= i + Tk - Tq."""
    i = torch.arange(tq)[:, None] + (tk - tq)
    return torch.arange(tk)[None, :] > i


def scores(q: Tensor, k: Tensor, blocked: Tensor | None, scale: float | None = None) -> Tensor:
    """(B, H, Tq, Tk) q·k_j / sqrt(D) (or times `scale`), -inf where blocked."""
    s = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    return s if blocked is None else s.masked_fill(blocked, float("-inf"))


def flash(q: Tensor, k: Tensor, v: Tensor, is_causal: bool) -> tuple[Tensor, Tensor]:
    """What flash_forward returns: SDPA's output and the logsumexp of the scores (B, H, Tq)."""
    blocked = causal_blocked(q.shape[2], k.shape[2]) if is_causal else None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if blocked is None
                                         else ~blocked)
    return out, torch.logsumexp(scores(q, k, blocked), dim=-1)


def attention(q: Tensor, k: Tensor, v: Tensor, is_causal: bool) -> Tensor:
    """softmax(q kᵀ / sqrt(D)) v written out, for autograd to differentiate."""
    blocked = causal_blocked(q.shape[2], k.shape[2]) if is_causal else None
    return torch.softmax(scores(q, k, blocked), dim=-1) @ v
