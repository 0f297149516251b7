"""The known mistakes of llm_attention, recomputed from torch primitives: when a value check
fails, each is tried on the same inputs, and one that reproduces the answer is named
(`mistakes.py` lists their ids, `messages.py` their sentences). They only explain failures:
the expected values come from `oracle`."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

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


def attend(q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None, *, scale: float,
           softmax_dim: int = -1, fill: float = NEG_INF) -> Tensor:
    """softmax(q kᵀ · scale) v written out, as many key/value heads as query heads (else
    torch.matmul's error), the blocked scores filled with `fill`, the softmax over
    `softmax_dim`."""
    scores = q @ k.transpose(-2, -1) * scale  # (B, H, Tq, Tk)
    if blocked is not None:
        scores = scores.masked_fill(blocked, fill)
    return scores.softmax(softmax_dim) @ v  # (B, H, Tq, D)


def _heads(y: Tensor, count: int, split: str) -> Tensor:
    """(B, T, count·D) -> (B, count, T, D); read straight as (B, count, T, D) by a view with
    no transpose (`split="view"`)."""
    B, T, width = y.shape
    if split == "view":
        return y.view(B, count, T, width // count)
    return y.view(B, T, count, width // count).transpose(1, 2)


def gqa_steps(params: dict[str, Tensor], chunks: list[Tensor], num_heads: int,
              num_kv_heads: int, rope_base: float | None, *, tiled: bool = False,
              rope_on_values: bool = False, causal: bool = True, restart: bool = False,
              top_left: bool = False, before_update: bool = False, scale_by: str = "D",
              split: str = "", merge: str = "", softmax_dim: int = -1,
              rope_keys: bool = True, diagonal: bool = False, fill: float = NEG_INF,
              n_rep: int | None = None, only_new: bool = False) -> list[Tensor]:
    """Grouped-query attention over `chunks` (B, t, E) fed one after the other through a
    cache, in float64, with one thing done wrong: heads tiled instead of repeated in a row,
    RoPE also on the values or not on the keys, no causal mask or one that blocks the
    diagonal too (blocked scores filled with `fill`), positions restarting at 0 in each
    chunk, the mask aligned top-left, attending before the chunk's keys are in the cache or
    over the chunk's keys only (an update that returns what it was given), the scale
    1/√E (`scale_by`), heads split by a view without the transpose (`split="view"`) or
    merged without it (`merge="no_transpose"`), the softmax over another dim, the key/value
    heads repeated `n_rep` times."""
    keys: list[Tensor] = []
    values: list[Tensor] = []
    outputs, start = [], 0
    for x in chunks:
        B, T, E = x.shape
        D = E // num_heads
        x = x.double()
        q = _heads(x @ params["q_proj.weight"].double().T, num_heads, split)  # (B, H, T, D)
        k = _heads(x @ params["k_proj.weight"].double().T, num_kv_heads, split)
        v = _heads(x @ params["v_proj.weight"].double().T, num_kv_heads, split)
        if rope_base is not None:
            positions = torch.arange(T) + (0 if restart else start)
            q = oracle.rope(q, positions, rope_base)
            k = oracle.rope(k, positions, rope_base) if rope_keys else k
            v = oracle.rope(v, positions, rope_base) if rope_on_values else v
        # Attending before the update: the chunk's own keys are not seen (the prefill's are:
        # with an empty cache such code attends over the prefill's own keys).
        seen_k, seen_v = ((list(keys), list(values)) if before_update and keys
                          else ([k], [v]) if only_new else (keys + [k], values + [v]))
        keys.append(k)
        values.append(v)
        k_all, v_all = torch.cat(seen_k, dim=2), torch.cat(seen_v, dim=2)  # (B, Hkv, L, D)
        repeats = num_heads // num_kv_heads if n_rep is None else n_rep
        if tiled:  # kv head h serves query heads h, h + Hkv, ...: the order of tile()
            k_all, v_all = k_all.repeat(1, repeats, 1, 1), v_all.repeat(1, repeats, 1, 1)
        else:
            k_all, v_all = oracle.repeat_kv(k_all, repeats), oracle.repeat_kv(v_all, repeats)
        L = k_all.shape[2]
        blocked = None  # attending before the update, every key seen is in the past
        if causal and not (before_update and L < start + T):
            # top-left: query i sees keys 0 .. i, as SDPA's is_causal aligns it
            key, query = torch.arange(L)[None, :], torch.arange(T)[:, None] + (
                0 if top_left else start)  # query i is token start + i
            blocked = key >= query if diagonal else key > query  # (T, L)
        out = attend(q, k_all, v_all, blocked, scale=(E if scale_by == "E" else D) ** -0.5,
                     softmax_dim=softmax_dim, fill=fill)  # (B, H, T, D)
        out = out.reshape(B, T, E) if merge == "no_transpose" else out.transpose(1, 2).reshape(
            B, T, E)
        outputs.append(out @ params["out_proj.weight"].double().T)
        start += T
    return outputs


def gqa_candidates(params: dict[str, Tensor], x: Tensor, num_heads: int, num_kv_heads: int,
                   rope_base: float | None) -> list:
    def variant(base: float | None = rope_base, **bug) -> Tensor:
        return gqa_steps(params, [x], num_heads, num_kv_heads, base, **bug)[0].to(x.dtype)

    found = [("gqa_not_causal", lambda: variant(causal=False)),
             ("gqa_scale_by_embed_dim", lambda: variant(scale_by="E")),
             ("gqa_split_no_transpose", lambda: variant(split="view")),
             ("gqa_split_no_transpose", lambda: variant(split="view", merge="no_transpose")),
             ("gqa_merge_no_transpose", lambda: variant(merge="no_transpose")),
             ("gqa_softmax_over_queries", lambda: variant(softmax_dim=-2)),
             ("gqa_diagonal_blocked", lambda: variant(diagonal=True)),
             ("gqa_diagonal_blocked", lambda: variant(
                 diagonal=True, fill=torch.finfo(x.dtype).min))]
    if 1 < num_kv_heads < num_heads:
        found.append(("gqa_heads_tiled", lambda: variant(tiled=True)))
    if num_kv_heads * num_kv_heads != num_heads and num_kv_heads > 1:
        found.append(("gqa_n_rep_kv_heads", lambda: variant(n_rep=num_kv_heads)))
    if rope_base is not None:
        found += [("gqa_rope_missing", lambda: variant(None)),
                  ("gqa_rope_on_values", lambda: variant(rope_on_values=True)),
                  ("gqa_rope_queries_only", lambda: variant(rope_keys=False))]
        if rope_base != 10000.0:
            found.append(("gqa_rope_default_base", lambda: variant(10000.0)))
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
            ("cache_chunk_not_causal", lambda: variant(causal=False)),
            ("cache_returns_new_only", lambda: variant(only_new=True)),
            ("cache_returns_new_only", lambda: variant(only_new=True, top_left=True))]


# --------------------------------------------------------------------------- sliding window


def window_candidates(T: int, window: int) -> list:
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    right = (j <= i) & (j > i - window)
    return [
        ("window_one_too_many", lambda: (j <= i) & (j >= i - window)),
        ("window_self_excluded", lambda: (j < i) & (j >= i - window)),
        ("window_one_too_few", lambda: (j <= i) & (j > i - window + 1)),
        ("window_two_sided", lambda: (j - i).abs() < window),
        ("window_inverted", lambda: ~right),
    ]


# --------------------------------------------------------------------------- FlashAttention


def flash_variant(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, block: int, *,
                  rescale_acc: bool = True, rescale_sum: bool = True, shift: int = 0,
                  top_left: bool = False, per_block: bool = False,
                  running_max: bool = True, max_start: float = NEG_INF, scaled: bool = True,
                  partial_block: bool = True, running_dtype: torch.dtype | None = None
                  ) -> tuple[Tensor, Tensor]:
    """FlashAttention's key-block loop, in the inputs' dtype, with one thing done wrong: the
    accumulator or the sum not rescaled when the maximum grows, the causal diagonal moved by
    `shift` or aligned top-left, each block's softmax normalised on its own, no running
    maximum (exp of the raw scores), one started at `max_start` (0, not -inf), the scores
    not scaled by 1/√D, the last, shorter block of keys left out, or the running values made
    in `running_dtype` (torch.full's default, whatever the inputs' dtype)."""
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    last = torch.arange(Tq)[:, None] + (0 if top_left else Tk - Tq) + shift  # (Tq, 1)
    dtype = running_dtype or q.dtype
    row_max = torch.full((B, H, Tq, 1), max_start if running_max else 0.0, dtype=dtype)
    row_sum = torch.zeros(B, H, Tq, 1, dtype=dtype)  # (B, H, Tq, 1)
    acc = torch.zeros(B, H, Tq, D, dtype=dtype)  # (B, H, Tq, D)
    for start in range(0, Tk if partial_block else Tk - block + 1, block):
        kb, vb = k[:, :, start:start + block], v[:, :, start:start + block]  # (B, H, b, D)
        scores = q @ kb.transpose(-2, -1) / (D ** 0.5 if scaled else 1.0)  # (B, H, Tq, b)
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
    running maximum missing or started at 0, whose overflow and underflow show in the
    inputs' own dtype, and running values in the default dtype, whose error only shows
    there. A running maximum started at 0 comes first: where it is wrong (every score of a
    row far below 0) so is no running maximum, which is also wrong where scores are far
    above 0."""
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
        ("flash_max_from_zero", lambda: flash_variant(q, k, v, is_causal, block,
                                                      max_start=0.0)),
        ("flash_acc_not_rescaled", lambda: variant(rescale_acc=False)),
        ("flash_sum_not_rescaled", lambda: variant(rescale_sum=False)),
        ("flash_softmax_per_block", lambda: variant(per_block=True)),
        ("flash_no_running_max", lambda: flash_variant(q, k, v, is_causal, block,
                                                       running_max=False)),
        ("flash_logsumexp_without_max", lse_without_max),
        ("flash_not_scaled", lambda: variant(scaled=False)),
        ("flash_last_block_skipped", lambda: variant(partial_block=False)),
    ]
    if q.dtype not in (torch.float32, torch.float64):  # in float64 the running values promote
        found.append(("flash_default_dtype", lambda: flash_variant(
            q, k, v, is_causal, block, running_dtype=torch.get_default_dtype())))
    if is_causal:
        found += [("flash_causal_off_by_one", lambda: variant(shift=-1)),
                  ("flash_causal_off_by_one", lambda: variant(shift=1))]
        if q.shape[2] != k.shape[2]:
            found.append(("flash_causal_top_left", lambda: variant(top_left=True)))
    return found


def flash_gradients(q: Tensor, k: Tensor, v: Tensor, d_out: Tensor, is_causal: bool,
                    block: int, *, dv_from_out: bool = False, masked: bool = True,
                    delta_per_block: bool = False, p_per_block: bool = False,
                    dk_untransposed: bool = False) -> dict[str, Tensor]:
    """FlashAttention's backward over key blocks, in float64, from the oracle's logsumexp,
    with one thing done wrong: dV = Pᵀ·out (not Pᵀ·dO), the scores recomputed without the
    causal mask, δ summed over one block's keys (Σ_j P·dP) rather than rowsum(dO ∘ O), P a
    softmax within each block rather than exp(S - logsumexp), or dK = dS·q (not dSᵀ·q,
    torch.matmul's error where the shapes do not fit)."""
    q, k, v, d_out = q.double(), k.double(), v.double(), d_out.double()
    Tq, D, Tk = q.shape[2], q.shape[3], k.shape[2]
    blocked = oracle.causal_blocked(Tq, Tk) if is_causal else None
    out, lse = oracle.flash(q, k, v, is_causal)
    delta = (d_out * out).sum(-1, keepdim=True)  # (B, H, Tq, 1)
    dq, dk, dv = torch.zeros_like(q), [], []
    for start in range(0, Tk, block):
        kb, vb = k[:, :, start:start + block], v[:, :, start:start + block]  # (B, H, b, D)
        scores = q @ kb.transpose(-2, -1) / D ** 0.5  # (B, H, Tq, b)
        if blocked is not None and masked:
            scores = scores.masked_fill(blocked[:, start:start + block], NEG_INF)
        p = scores.softmax(-1) if p_per_block else torch.exp(scores - lse[..., None])
        dv.append(p.transpose(-2, -1) @ (out if dv_from_out else d_out))  # (B, H, b, D)
        dp = d_out @ vb.transpose(-2, -1)  # (B, H, Tq, b)
        ds = p * (dp - ((p * dp).sum(-1, keepdim=True) if delta_per_block else delta))
        ds = ds / D ** 0.5  # (B, H, Tq, b)
        dq = dq + ds @ kb
        dk.append((ds if dk_untransposed else ds.transpose(-2, -1)) @ q)  # (B, H, b, D)
    return {"q": dq, "k": torch.cat(dk, dim=2), "v": torch.cat(dv, dim=2)}


def flash_gradient_candidates(q: Tensor, k: Tensor, v: Tensor, d_out: Tensor, is_causal: bool,
                              block: int) -> Callable[[str], list]:
    """For the gradient of each input ("q", "k", "v"), each backward mistake's, in the
    inputs' dtype."""
    bugs = [("flash_dv_from_output", {"dv_from_out": True}),
            ("flash_delta_per_block", {"delta_per_block": True}),
            ("flash_p_softmax_per_block", {"p_per_block": True}),
            ("flash_dk_not_transposed", {"dk_untransposed": True})]
    if is_causal:
        bugs.append(("flash_backward_not_causal", {"masked": False}))

    def of(wrt: str) -> list:
        return [(mistake_id, lambda bug=bug: flash_gradients(
            q, k, v, d_out, is_causal, block, **bug)[wrt].to(q.dtype))
            for mistake_id, bug in bugs]

    return of


def _cat_heads(B: int, H: int, Hkv: int, D: int, T: int, L: int) -> Tensor:
    """The scores of a call of T tokens after L - T, its keys appended along the heads:
    torch.cat's error, or the matmul's where the sizes let the heads grow."""
    k = torch.cat([torch.zeros(B, Hkv, L - T, D), torch.zeros(B, Hkv, T, D)], dim=1)
    return torch.zeros(B, H, T, D) @ oracle.repeat_kv(k, H // Hkv).transpose(-2, -1)


def _square_masked(B: int, H: int, D: int, T: int, L: int, side: int, sdpa: bool) -> Tensor:
    """A call of T queries over L keys with a square (side, side) causal mask, merged back
    to (B, T, E): the mask's error, or the merge's where it broadcast the queries to side."""
    allowed = torch.ones(side, side, dtype=torch.bool).tril()
    q, kv = torch.zeros(B, H, T, D), torch.zeros(B, H, L, D)
    out = (F.scaled_dot_product_attention(q, kv, kv, attn_mask=allowed) if sdpa else
           (q @ kv.transpose(-2, -1)).masked_fill(~allowed, NEG_INF).softmax(-1) @ kv)
    return out.transpose(1, 2).reshape(B, T, H * D)


def cache_error_candidates(B: int, H: int, Hkv: int, D: int, chunks: tuple[int, ...]) -> list:
    """The errors the calls after the prefill raise, for each mistake that raises one: the
    keys appended along the heads (dim 1), or a square causal mask, (T, T) of the new tokens
    or (L, L) of every key, meeting the (T, L) scores (by masked_fill, or SDPA's attn_mask)."""
    found: list = []
    for n in range(1, len(chunks)):
        T, L = chunks[n], sum(chunks[:n + 1])  # the call's tokens, the keys it attends over
        found.append(("cache_cat_heads", lambda T=T, L=L: _cat_heads(B, H, Hkv, D, T, L)))
        found += [("cache_square_mask", lambda T=T, L=L, side=side, sdpa=sdpa: _square_masked(
            B, H, D, T, L, side, sdpa)) for side in (T, L) for sdpa in (False, True)]
    return found
