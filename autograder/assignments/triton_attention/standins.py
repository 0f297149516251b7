"""The kit's `flash_forward`, for a student whose own fails its checks: the backward is then
graded with this one (`CheckSpec.stand_ins`). Plain PyTorch, without softmax (the watch of
the backward check counts one against the student's Function)."""

from __future__ import annotations

import math

import torch

Tensor = torch.Tensor
__all__ = ["flash_forward"]


def flash_forward(q: Tensor, k: Tensor, v: Tensor, is_causal: bool = False, block_m: int = 16,
                  block_n: int = 16) -> tuple[Tensor, Tensor]:
    """(out (B, H, Tq, D), logsumexp (B, H, Tq) in float32); causal aligns the last query with
    the last key. The block sizes change nothing here."""
    Tq, Tk = q.shape[2], k.shape[2]
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        rows = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)
        scores = scores.masked_fill(torch.arange(Tk, device=q.device)[None, :] > rows,
                                    float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # (B, H, Tq)
    return (torch.exp(scores - lse[..., None]) @ v.float()).to(q.dtype), lse
