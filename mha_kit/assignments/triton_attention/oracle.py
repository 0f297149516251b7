"""The expected values of triton_attention, from PyTorch: `torch.softmax`, and FlashAttention's
output and logsumexp (`mha_kit.oracle.flash`: SDPA with a boolean mask and
`torch.logsumexp`), and gradients by autograd through an explicit softmax. Each computes in the
dtype it is given (the checks pass float64)."""

from __future__ import annotations

import torch

from ...oracle import blocked_scores, causal_blocked, flash

__all__ = ["attention", "blocked_scores", "causal_blocked", "flash"]

Tensor = torch.Tensor


def attention(q: Tensor, k: Tensor, v: Tensor, is_causal: bool) -> Tensor:
    """softmax(q kᵀ / sqrt(D)) v written out, for autograd to differentiate."""
    blocked = causal_blocked(q.shape[2], k.shape[2], q.device) if is_causal else None
    return torch.softmax(blocked_scores(q, k, blocked), dim=-1) @ v
