"""The kit's versions of the six steps and of `AttentionHead`, for a student whose own fails
its check: the modules that call them are then graded on their own (`CheckSpec.stand_ins`).
Plain PyTorch, as the oracle computes them; none calls an API the policy forbids."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...oracle import (
    attend,
    causal_mask,
    merge_heads,
    output_projection,
    scaled_scores,
    split_heads,
)

Tensor = torch.Tensor
__all__ = ["AttentionHead", "attend", "causal_mask", "merge_heads", "output_projection",
           "scaled_scores", "split_heads"]


class AttentionHead(nn.Module):
    """One head, as the contract has it; `dropout` as the notebook's version takes it."""

    def __init__(self, embed_dim: int, head_dim: int, *, kdim: int | None = None,
                 vdim: int | None = None, bias: bool = True, dropout: float = 0.0):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, head_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, head_dim, bias=bias)
        self.dropout = dropout

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                attn_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)  # (B, T*, head_dim)
        _, weights = attend(scaled_scores(q, k), v, attn_mask)  # (B, Tq, Tk)
        weights = F.dropout(weights, self.dropout, self.training)  # (B, Tq, Tk)
        return weights @ v, weights  # (B, Tq, head_dim), (B, Tq, Tk)
