"""The kit's versions of the pieces that other checks' code calls, for a student whose own
fails its check: `GroupedQueryAttention` is then graded with these `apply_rope` and
`repeat_kv`, and `flash_attention_autograd`'s backward with this `flash_attention`
(`CheckSpec.stand_ins`). Plain PyTorch; none calls an API the policy forbids, and none makes
a (Tq, Tk) tensor, which the backward's memory check would count against the student."""

from __future__ import annotations

import torch

from ...oracle import flash_by_query_blocks
from .oracle import repeat_kv, rope_angles

Tensor = torch.Tensor
__all__ = ["apply_rope", "flash_attention", "repeat_kv"]


def apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """Feature i turned with feature i + D/2 by angle position · base^(-2i/D)."""
    angles = rope_angles(positions, x.shape[-1], base)  # (T, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (T, D/2)
    first, second = x.chunk(2, dim=-1)  # (..., T, D/2) each
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def flash_attention(q: Tensor, k: Tensor, v: Tensor, *, is_causal: bool = False,
                    block_size: int = 64) -> tuple[Tensor, Tensor]:
    """(out (B, H, Tq, D), logsumexp (B, H, Tq)), made a block of queries at a time against
    every key (`block_size` is the student's choice of key block, and changes nothing)."""
    return flash_by_query_blocks(q, k, v, is_causal)
