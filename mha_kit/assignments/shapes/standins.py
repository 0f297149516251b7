"""The kit's versions of the pieces the roundtrip check uses, for a student whose own fails its
check (`CheckSpec.stand_ins`)."""

import torch

Tensor = torch.Tensor


def split_heads_view(x: Tensor, num_heads: int) -> Tensor:
    """(B, T, H*D) -> (B, H, T, D), a view of x."""
    B, T, E = x.shape
    return x.view(B, T, num_heads, E // num_heads).transpose(1, 2)  # (B, H, T, D)


def merge_heads_transpose(x: Tensor) -> Tensor:
    """(B, H, T, D) -> (B, T, H*D), whatever x's strides."""
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H*D)
