"""The kit's versions of the pieces that other checks' code calls, for a student whose own
fails its check: `GroupedQueryAttention` is then graded with these `apply_rope` and
`repeat_kv`, and `flash_attention_autograd`'s backward with this `flash_attention`
(`CheckSpec.stand_ins`). Plain PyTorch; none calls an API the policy forbids, and none makes
a (Tq, Tk) tensor, which the backward's memory check would count against the student."""

from __future__ import annotations

import torch

from .oracle import repeat_kv, rope_angles

Tensor = torch.Tensor
__all__ = ["apply_rope", "flash_attention", "repeat_kv"]
QUERY_BLOCK = 64  # queries per block of flash_attention's scores


def apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """Feature i turned with feature i + D/2 by angle position · base^(-2i/D)."""
    angles = rope_angles(positions, x.shape[-1], base)  # (T, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (T, D/2)
    first, second = x.chunk(2, dim=-1)  # (..., T, D/2) each
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def flash_attention(q: Tensor, k: Tensor, v: Tensor, *, is_causal: bool = False,
                    block_size: int = 64) -> tuple[Tensor, Tensor]:
    """(out (B, H, Tq, D), logsumexp (B, H, Tq)), the scores made QUERY_BLOCK queries at a
    time against every key; causal aligns the last query with the last key."""
    Tq, Tk = q.shape[2], k.shape[2]
    outs, sums = [], []
    for start in range(0, Tq, QUERY_BLOCK):
        qb = q[:, :, start:start + QUERY_BLOCK]  # (B, H, b, D)
        scores = qb @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, H, b, Tk)
        if is_causal:  # query i sees keys j <= i + Tk - Tq
            rows = torch.arange(start, start + qb.shape[2], device=q.device)[:, None]  # (b, 1)
            keys = torch.arange(Tk, device=q.device)[None, :]  # (1, Tk)
            scores = scores.masked_fill(keys > rows + (Tk - Tq), float("-inf"))  # (B, H, b, Tk)
        sums.append(torch.logsumexp(scores, dim=-1))  # (B, H, b)
        outs.append(torch.exp(scores - sums[-1][..., None]) @ v)  # (B, H, b, D)
    return torch.cat(outs, dim=2), torch.cat(sums, dim=2)  # (B, H, Tq, D), (B, H, Tq)
