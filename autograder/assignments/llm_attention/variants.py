"""The known mistakes of llm_attention, recomputed from torch primitives: when a value check
fails, each is tried on the same inputs, and one that reproduces the answer is named
(`mistakes.py` lists their ids, `messages.py` their sentences). They only explain failures:
the expected values come from `oracle`."""

from __future__ import annotations

import torch

from . import oracle

Tensor = torch.Tensor
NEG_INF = float("-inf")


# --------------------------------------------------------------------------- RoPE


def rope_interleaved(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """Pairs (2i, 2i + 1), as Meta's original Llama code rotates them."""
    angles = oracle.rope_angles(positions, x.shape[-1], base)  # (T, D/2)
    z = torch.complex(x[..., 0::2].double(), x[..., 1::2].double())  # (..., T, D/2)
    turned = z * torch.polar(torch.ones_like(angles), angles)
    return torch.stack([turned.real, turned.imag], dim=-1).flatten(-2).to(x.dtype)


def rope_with_angles(x: Tensor, angles: Tensor) -> Tensor:
    """Rotate-half pairing with per-pair angles (T, D/2) of the caller's making."""
    half = x.shape[-1] // 2
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_exponent_halved(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """θ_i = base^(-i/D) for i = 0 .. D/2 - 1: the 2 of 2i/D left out."""
    exponents = torch.arange(x.shape[-1] // 2, dtype=torch.float64, device=x.device) / x.shape[-1]
    return rope_with_angles(x, positions.double()[:, None] * base ** -exponents)


def rope_mixed_pairing(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """The interleaved convention's angles (each repeated twice in a row) on the rotate-half
    pairing: feature i and i + D/2 turn by different angles, so it is no rotation."""
    angles = oracle.rope_angles(positions, x.shape[-1], base).repeat_interleave(2, dim=-1)
    half = x.shape[-1] // 2
    cos, sin = angles.cos(), angles.sin()  # (T, D)
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x.double() * cos + rotated * sin).to(x.dtype)


def rope_candidates(x: Tensor, positions: Tensor, base: float) -> list:
    T = x.shape[-2]
    return [
        ("rope_interleaved", lambda: rope_interleaved(x, positions, base)),
        ("rope_base_ignored", lambda: oracle.rope(x, positions, 10000.0)),
        ("rope_positions_ignored", lambda: oracle.rope(x, torch.arange(T, device=x.device), base)),
        ("rope_reversed", lambda: oracle.rope(x, -positions, base)),
        ("rope_exponent_halved", lambda: rope_exponent_halved(x, positions, base)),
        ("rope_mixed_pairing", lambda: rope_mixed_pairing(x, positions, base)),
    ]


# --------------------------------------------------------------------------- GQA and the cache


def gqa_steps(params: dict[str, Tensor], chunks: list[Tensor], num_heads: int,
              num_kv_heads: int, rope_base: float | None, *, tiled: bool = False,
              rope_on_values: bool = False, causal: bool = True, restart: bool = False,
              top_left: bool = False, before_update: bool = False) -> list[Tensor]:
    """Grouped-query attention over `chunks` (B, t, E) fed one after the other through a
    cache, in float64, with one thing done wrong: heads tiled instead of repeated in a row,
    RoPE also on the values, no causal mask, positions restarting at 0 in each chunk, the
    mask aligned top-left, or attending before the chunk's keys are in the cache."""
    keys: list[Tensor] = []
    values: list[Tensor] = []
    outputs, start = [], 0
    for x in chunks:
        B, T, E = x.shape
        D = E // num_heads
        x = x.double()
        q = (x @ params["q_proj.weight"].double().T).view(B, T, num_heads, D).transpose(1, 2)
        k = (x @ params["k_proj.weight"].double().T).view(B, T, num_kv_heads, D).transpose(1, 2)
        v = (x @ params["v_proj.weight"].double().T).view(B, T, num_kv_heads, D).transpose(1, 2)
        if rope_base is not None:
            positions = torch.arange(T) + (0 if restart else start)
            q, k = oracle.rope(q, positions, rope_base), oracle.rope(k, positions, rope_base)
            v = oracle.rope(v, positions, rope_base) if rope_on_values else v
        # Attending before the update: the chunk's own keys are not seen (the prefill's are:
        # with an empty cache such code attends over the prefill's own keys).
        seen_k, seen_v = ((list(keys), list(values)) if before_update and keys
                          else (keys + [k], values + [v]))
        keys.append(k)
        values.append(v)
        k_all, v_all = torch.cat(seen_k, dim=2), torch.cat(seen_v, dim=2)  # (B, Hkv, L, D)
        n_rep = num_heads // num_kv_heads
        if tiled:  # kv head h serves query heads h, h + Hkv, ...: the order of tile()
            k_all, v_all = k_all.repeat(1, n_rep, 1, 1), v_all.repeat(1, n_rep, 1, 1)
        L = k_all.shape[2]
        blocked = None  # attending before the update, every key seen is in the past
        if causal and not (before_update and L < start + T):
            # top-left: query i sees keys 0 .. i, as SDPA's is_causal aligns it
            blocked = (torch.arange(L)[None, :] > torch.arange(T)[:, None] if top_left
                       else oracle.causal_blocked(T, L))  # (T, L)
        out = oracle.attention(q, k_all, v_all, blocked)  # (B, H, T, D)
        out = out.transpose(1, 2).reshape(B, T, E) @ params["out_proj.weight"].double().T
        outputs.append(out)
        start += T
    return outputs


def gqa_candidates(params: dict[str, Tensor], x: Tensor, num_heads: int, num_kv_heads: int,
                   rope_base: float | None) -> list:
    def variant(base: float | None = rope_base, **bug) -> Tensor:
        return gqa_steps(params, [x], num_heads, num_kv_heads, base, **bug)[0].to(x.dtype)

    found = [("gqa_not_causal", lambda: variant(causal=False))]
    if 1 < num_kv_heads < num_heads:
        found.append(("gqa_heads_tiled", lambda: variant(tiled=True)))
    if rope_base is not None:
        found += [("gqa_rope_missing", lambda: variant(None)),
                  ("gqa_rope_on_values", lambda: variant(rope_on_values=True))]
    return found


def cache_candidates(params: dict[str, Tensor], chunks: list[Tensor], num_heads: int,
                     num_kv_heads: int, rope_base: float | None) -> list:
    """Each mistake's outputs of every call, one after the other (along T)."""

    def variant(**bug) -> Tensor:
        steps = gqa_steps(params, chunks, num_heads, num_kv_heads, rope_base, **bug)
        return torch.cat(steps, dim=1).to(chunks[0].dtype)

    return [("cache_positions_restart", lambda: variant(restart=True)),
            ("cache_mask_top_left", lambda: variant(top_left=True)),
            ("cache_attend_before_update", lambda: variant(before_update=True)),
            ("cache_chunk_not_causal", lambda: variant(causal=False))]


# --------------------------------------------------------------------------- sliding window


def window_candidates(T: int, window: int) -> list:
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    right = (j <= i) & (j > i - window)
    return [
        ("window_one_too_many", lambda: (j <= i) & (j >= i - window)),
        ("window_one_too_few", lambda: (j <= i) & (j > i - window + 1)),
        ("window_two_sided", lambda: (j - i).abs() < window),
        ("window_inverted", lambda: ~right),
    ]


# --------------------------------------------------------------------------- FlashAttention


def flash_variant(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, block: int, *,
                  rescale_acc: bool = True, rescale_sum: bool = True, shift: int = 0,
                  top_left: bool = False, per_block: bool = False,
                  running_max: bool = True) -> tuple[Tensor, Tensor]:
    """FlashAttention's key-block loop, in the inputs' dtype, with one thing done wrong: the
    accumulator or the sum not rescaled when the maximum grows, the causal diagonal moved by
    `shift` or aligned top-left, each block's softmax normalised on its own, or no running
    maximum (exp of the raw scores)."""
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    last = torch.arange(Tq)[:, None] + (0 if top_left else Tk - Tq) + shift  # (Tq, 1)
    row_max = torch.full((B, H, Tq, 1), NEG_INF if running_max else 0.0, dtype=q.dtype)
    row_sum = torch.zeros(B, H, Tq, 1, dtype=q.dtype)  # (B, H, Tq, 1)
    acc = torch.zeros(B, H, Tq, D, dtype=q.dtype)  # (B, H, Tq, D)
    for start in range(0, Tk, block):
        kb, vb = k[:, :, start:start + block], v[:, :, start:start + block]  # (B, H, b, D)
        scores = q @ kb.transpose(-2, -1) / D ** 0.5  # (B, H, Tq, b)
        if is_causal:
            keys = torch.arange(start, start + kb.shape[2])[None, :]  # (1, b)
            scores = scores.masked_fill(keys > last, NEG_INF)
        if per_block:
            acc = acc + scores.softmax(-1).nan_to_num() @ vb
            continue
        new_max = (torch.maximum(row_max, scores.amax(-1, keepdim=True)) if running_max
                   else row_max)  # (B, H, Tq, 1)
        safe = new_max.masked_fill(new_max == NEG_INF, 0.0)
        p = torch.exp(scores - safe)  # (B, H, Tq, b)
        correction = torch.exp(row_max - safe)  # (B, H, Tq, 1)
        row_sum = (row_sum * correction if rescale_sum else row_sum) + p.sum(-1, keepdim=True)
        acc = (acc * correction if rescale_acc else acc) + p @ vb
        row_max = new_max
    if per_block:
        blocked = oracle.causal_blocked(Tq, Tk) if is_causal else None
        return acc, oracle.logsumexp(q, k, blocked)
    return acc / row_sum, (row_max + row_sum.log()).squeeze(-1)


def flash_candidates(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, block: int) -> list:
    """Each mistake's (out, logsumexp) in the inputs' dtype, computed in float64 but for the
    missing running maximum, whose overflow only shows in the inputs' own dtype."""
    q64, k64, v64 = q.double(), k.double(), v.double()

    def variant(**bug) -> tuple[Tensor, Tensor]:
        out, lse = flash_variant(q64, k64, v64, is_causal, block, **bug)
        return out.to(q.dtype), lse.to(q.dtype)

    def lse_without_max() -> tuple[Tensor, Tensor]:
        blocked = oracle.causal_blocked(q.shape[2], k.shape[2]) if is_causal else None
        out, lse = oracle.flash(q64, k64, v64, is_causal)
        scores = (q64 @ k64.transpose(-2, -1) / q.shape[-1] ** 0.5)
        if blocked is not None:
            scores = scores.masked_fill(blocked, NEG_INF)
        return out.to(q.dtype), (lse - scores.amax(-1)).to(q.dtype)

    found = [
        ("flash_acc_not_rescaled", lambda: variant(rescale_acc=False)),
        ("flash_sum_not_rescaled", lambda: variant(rescale_sum=False)),
        ("flash_softmax_per_block", lambda: variant(per_block=True)),
        ("flash_no_running_max", lambda: flash_variant(q, k, v, is_causal, block,
                                                       running_max=False)),
        ("flash_logsumexp_without_max", lse_without_max),
    ]
    if is_causal:
        found += [("flash_causal_off_by_one", lambda: variant(shift=-1)),
                  ("flash_causal_off_by_one", lambda: variant(shift=1))]
        if q.shape[2] != k.shape[2]:
            found.append(("flash_causal_top_left", lambda: variant(top_left=True)))
    return found
