"""The kit's `flash_forward`, for a student whose own fails its checks: the backward is then
graded with this one (`CheckSpec.stand_ins`). Plain PyTorch, without softmax and a block of
queries at a time (the backward check's watch counts a softmax, or a (Tq, Tk) tensor, against
the student's Function)."""

from __future__ import annotations

import math

import torch

Tensor = torch.Tensor
__all__ = ["flash_forward"]


def flash_forward(q: Tensor, k: Tensor, v: Tensor, is_causal: bool = False, block_m: int = 16,
                  block_n: int = 16) -> tuple[Tensor, Tensor]:
    """(out (B, H, Tq, D), logsumexp (B, H, Tq) in float32), block_m queries at a time against
    every key; causal aligns the last query with the last key."""
    Tq, Tk = q.shape[2], k.shape[2]
    outs, sums = [], []
    for start in range(0, Tq, block_m):
        qb = q[:, :, start:start + block_m].float()  # (B, H, b, D)
        scores = qb @ k.float().transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, b, Tk)
        if is_causal:  # query i sees keys j <= i + Tk - Tq
            rows = torch.arange(start, start + qb.shape[2], device=q.device)[:, None]
            keys = torch.arange(Tk, device=q.device)[None, :]
            scores = scores.masked_fill(keys > rows + (Tk - Tq), float("-inf"))
        sums.append(torch.logsumexp(scores, dim=-1))  # (B, H, b)
        outs.append(torch.exp(scores - sums[-1][..., None]) @ v.float())  # (B, H, b, D)
    return torch.cat(outs, dim=2).to(q.dtype), torch.cat(sums, dim=2)
