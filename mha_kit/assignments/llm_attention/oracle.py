"""The expected values of llm_attention, from PyTorch: complex multiplication for RoPE,
`repeat_interleave`, `F.scaled_dot_product_attention` and `torch.logsumexp` (FlashAttention's
`flash`, `logsumexp` and the bottom-right `causal_blocked` are the kit's, `mha_kit.oracle`,
shared with triton_attention). Everything here computes in the dtype it is given (the checks
pass float64)."""

from __future__ import annotations

from functools import cache

import torch
import torch.nn.functional as F

from ...oracle import causal_blocked, flash, logsumexp

__all__ = ["attention", "causal_blocked", "flash", "gqa", "keys_values", "logsumexp", "repeat_kv",
           "rope", "rope_angles", "sdpa_has_gqa"]

Tensor = torch.Tensor


@cache
def sdpa_has_gqa() -> bool:
    """Whether SDPA repeats key/value heads itself (`enable_gqa`, torch >= 2.5)."""
    try:
        F.scaled_dot_product_attention(torch.zeros(1, 2, 1, 1), torch.zeros(1, 1, 1, 1),
                                       torch.zeros(1, 1, 1, 1), enable_gqa=True)
    except TypeError:
        return False
    return True


def rope_angles(positions: Tensor, dim: int, base: float) -> Tensor:
    """(T, D/2): position m times base^(-2i/D), in float64."""
    exponents = torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim
    return positions.to(torch.float64)[:, None] * base ** -exponents  # (T, D/2)


def rope(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """Rotary embedding with the rotate-half pairing (feature i with i + D/2), written as a
    complex multiplication: (x_i + j x_{i+D/2}) * e^{j m θ_i}."""
    half = x.shape[-1] // 2
    z = torch.complex(x[..., :half].double(), x[..., half:].double())  # (..., T, D/2)
    angles = rope_angles(positions, x.shape[-1], base)  # (T, D/2)
    turned = z * torch.polar(torch.ones_like(angles), angles)  # (..., T, D/2)
    return torch.cat([turned.real, turned.imag], dim=-1).to(x.dtype)  # (..., T, D)


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """(B, Hkv, T, D) -> (B, Hkv * n_rep, T, D), each head n_rep times in a row."""
    return torch.repeat_interleave(x, n_rep, dim=1)


def attention(q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None) -> Tensor:
    """SDPA with a boolean mask (True: may attend); key/value heads shared by groups of query
    heads when there are fewer of them."""
    allowed = None if blocked is None else ~blocked
    n_rep = q.shape[1] // k.shape[1]
    if n_rep > 1 and sdpa_has_gqa():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
    return F.scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep),
                                          attn_mask=allowed)


def gqa(params: dict[str, Tensor], x: Tensor, num_heads: int, num_kv_heads: int,
        rope_base: float | None) -> Tensor:
    """Causal grouped-query self-attention over x (B, T, E), bias-free projections, RoPE on q
    and k at positions 0..T-1 (none with `rope_base` None)."""
    B, T, E = x.shape
    D = E // num_heads
    q = F.linear(x, params["q_proj.weight"]).view(B, T, num_heads, D).transpose(1, 2)
    if rope_base is not None:
        q = rope(q, torch.arange(T, device=x.device), rope_base)
    k, v = keys_values(params, x, num_kv_heads, D, rope_base)
    out = attention(q, k, v, causal_blocked(T, T, x.device))  # (B, H, T, D)
    return F.linear(out.transpose(1, 2).reshape(B, T, E), params["out_proj.weight"])


def keys_values(params: dict[str, Tensor], x: Tensor, num_kv_heads: int, head_dim: int,
                rope_base: float | None, rotated: bool = True) -> tuple[Tensor, Tensor]:
    """The keys and values of x (B, T, E), (B, Hkv, T, D) each: what a KV cache holds after
    these T tokens, the keys rotated by RoPE at positions 0..T-1 (unless not `rotated`)."""
    B, T, _ = x.shape
    k = F.linear(x, params["k_proj.weight"]).view(B, T, num_kv_heads, head_dim).transpose(1, 2)
    v = F.linear(x, params["v_proj.weight"]).view(B, T, num_kv_heads, head_dim).transpose(1, 2)
    if rope_base is not None and rotated:
        k = rope(k, torch.arange(T, device=x.device), rope_base)
    return k, v
