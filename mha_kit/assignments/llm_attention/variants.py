"""The known mistakes of llm_attention, recomputed from torch primitives: when a value check
fails, each is tried on the same inputs, and one that reproduces the answer is named
(`mistakes.py` lists their ids, `messages.py` their sentences). They only explain failures:
the expected values come from `oracle`."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...checks.diagnosis import RaisesKind
from ...runner.inprocess import load_weights
from . import oracle, piece_variants

Tensor = torch.Tensor
NEG_INF = float("-inf")
# A fresh KVCache's k or v, None, read as a tensor (cache.k.shape[2] before any update).
EMPTY_CACHE_READ = RaisesKind(("'NoneType' object has no attribute 'shape'",
                               "'NoneType' object has no attribute 'size'"))


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
    turned = piece_variants.turned_pairs(x[..., :half], x[..., half:], angles)
    return torch.cat(turned, dim=-1).to(x.dtype)


def rope_halves_swapped(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """The two rotated halves concatenated the other way round: [x1 sin + x2 cos, x1 cos -
    x2 sin]."""
    return oracle.rope(x, positions, base).roll(x.shape[-1] // 2, dims=-1)


def rope_float64_angles(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """Right values, in float64: cos and sin of the float64 angles never cast to x's dtype,
    so x times them promotes."""
    return oracle.rope(x.double(), positions, base)


def rope_angles_in_dtype(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """The frequencies, the angles, cos and sin all made in x's dtype: in bfloat16 a position
    keeps 8 bits, so late positions turn by angles off by whole radians."""
    exponents = torch.arange(0, x.shape[-1], 2, dtype=x.dtype, device=x.device) / x.shape[-1]
    angles = positions.to(x.dtype)[:, None] * base ** -exponents  # (T, D/2), in x's dtype
    return rope_with_angles(x, angles)


def rope_mixed_pairing(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """The interleaved convention's angles (each repeated twice in a row) on the rotate-half
    pairing: feature i and i + D/2 turn by different angles, so it is no rotation."""
    angles = oracle.rope_angles(positions, x.shape[-1], base).repeat_interleave(2, dim=-1)
    half = x.shape[-1] // 2
    cos, sin = angles.cos(), angles.sin()  # (T, D)
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x.double() * cos + rotated * sin).to(x.dtype)


def rope_exponents_candidates(x: Tensor, positions: Tensor, base: float) -> list:
    """Rotate-half RoPE with θ_i = base^(e_i) for a wrong exponent e_i in place of -2i/D:
    -i/D (the 2 left out), +2i/D (the minus left out, so the frequencies grow), -2i/(D/2)
    (over the pairs instead of D), or 2i/D rounded by floor division, -(2i // D) (0) or
    -2i // D where the minus comes first (-1 but for pair 0)."""
    D = x.shape[-1]
    twice = torch.arange(0, D, 2, dtype=torch.float64, device=x.device)  # 2i, i < D/2

    def turned(exponents: Tensor) -> Tensor:
        return rope_with_angles(x, positions.double()[:, None] * base ** exponents)

    return [("rope_exponent_halved", lambda: turned(-(twice / 2) / D)),
            ("rope_exponent_positive", lambda: turned(twice / D)),
            ("rope_exponent_doubled", lambda: turned(-twice / (D / 2))),
            ("rope_exponent_floored", lambda: turned(-(twice // D))),
            ("rope_exponent_floored", lambda: turned(-twice // D))]


def rope_cos_sin_swapped(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """cos and sin in each other's place, [x1 sin - x2 cos, x1 cos + x2 sin]: a turn by
    π/2 - θ, since cos θ = sin(π/2 - θ)."""
    return rope_with_angles(x, math.pi / 2 - oracle.rope_angles(positions, x.shape[-1], base))


def rope_table_candidates(x: Tensor, positions: Tensor, base: float) -> list:
    """The angle table built the wrong way round, (D/2, T), or as positions times the
    frequencies with no outer product, (T,) * (D/2,): torch's size mismatch where the
    student's code multiplies x's halves by its cos (either operand first), the values where
    the sizes happen to fit (T = D/2)."""
    D, half = x.shape[-1], x.shape[-1] // 2
    frequencies = base ** -(torch.arange(0, D, 2, dtype=torch.float64, device=x.device) / D)
    found = []
    for mistake_id, table in (
            ("rope_angles_transposed", lambda: frequencies[:, None] * positions.double()),
            ("rope_angles_not_outer", lambda: positions.double() * frequencies)):
        found += [(mistake_id, lambda table=table: x[..., :half] * table().cos()),
                  (mistake_id, lambda table=table: table().cos() * x[..., :half]),
                  (mistake_id, lambda table=table: rope_with_angles(x, table()))]
    return found


def rope_candidates(x: Tensor, positions: Tensor, base: float) -> list:
    """RoPE's known mistakes; for low-precision inputs, right values returned in float32
    (cos and sin cast to float32, or x cast and not cast back)."""
    T = x.shape[-2]
    promoted = ([("rope_output_float32", lambda: oracle.rope(x.float(), positions, base))]
                if x.dtype in (torch.float16, torch.bfloat16) else [])
    return [
        ("rope_interleaved", lambda: rope_interleaved(x, positions, base)),
        ("rope_base_ignored", lambda: oracle.rope(x, positions, 10000.0)),
        ("rope_positions_ignored", lambda: oracle.rope(x, torch.arange(T, device=x.device), base)),
        ("rope_reversed", lambda: oracle.rope(x, -positions, base)),
        *rope_exponents_candidates(x, positions, base),
        ("rope_mixed_pairing", lambda: rope_mixed_pairing(x, positions, base)),
        ("rope_halves_swapped", lambda: rope_halves_swapped(x, positions, base)),
        ("rope_float64_angles", lambda: rope_float64_angles(x, positions, base)),
        ("rope_angles_in_dtype", lambda: rope_angles_in_dtype(x, positions, base)),
        ("rope_angles_in_dtype", lambda: rope_with_angles(  # cast before cos and sin
            x, oracle.rope_angles(positions, x.shape[-1], base).to(x.dtype))),
        ("rope_cos_sin_swapped", lambda: rope_cos_sin_swapped(x, positions, base)),
        *rope_table_candidates(x, positions, base),
        *piece_variants.rope_layout_candidates(x, positions, base),
        *promoted,
    ]


# --------------------------------------------------------------------------- repeat_kv


def repeat_kv_candidates(x: Tensor, n_rep: int) -> list:
    """The heads tiled, repeated along another dim (the features too: D·n_rep of them), or
    repeated through a new axis of n_rep:
    one after the tokens (the reshape then mixes tokens into heads), or one after the heads
    merged by .view, which cannot merge an expanded (stride 0) axis: torch's error."""
    B, Hkv, T, D = x.shape
    return [("kv_heads_tiled", lambda: x.repeat(1, n_rep, 1, 1)),
            ("kv_expand_heads", lambda: x.expand(B, Hkv * n_rep, T, D)),
            ("kv_repeat_tokens", lambda: x.repeat_interleave(n_rep, 2)),
            ("kv_repeat_tokens", lambda: x.repeat(1, 1, n_rep, 1)),
            ("kv_repeat_batch", lambda: x.repeat_interleave(n_rep, 0)),
            ("kv_repeat_batch", lambda: x.repeat(n_rep, 1, 1, 1)),
            ("kv_repeat_features", lambda: x.repeat_interleave(n_rep, -1)),
            ("kv_repeat_features", lambda: x.repeat(1, 1, 1, n_rep)),
            ("kv_view_after_expand", lambda: x[:, :, None].expand(
                B, Hkv, n_rep, T, D).view(B, Hkv * n_rep, T, D)),
            ("kv_repeat_axis_after_tokens", lambda: x[:, :, :, None].expand(
                B, Hkv, T, n_rep, D).reshape(B, Hkv * n_rep, T, D))]


# --------------------------------------------------------------------------- GQA and the cache


def attend(q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None, *, scale: float,
           softmax_dim: int = -1, fill: float = NEG_INF, after_softmax: bool = False,
           rounded_to: torch.dtype | None = None, scale_weights: bool = False,
           key_dims: tuple[int, int] = (-2, -1)) -> Tensor:
    """softmax(q kᵀ · scale) v written out, as many key/value heads as query heads (else
    torch.matmul's error), the blocked scores filled with `fill` (or, `after_softmax`, the
    blocked weights with 0), the softmax over `softmax_dim`, the scores (and the softmax)
    in `rounded_to`, float16 or bfloat16, if given; `scale_weights`: the scale applied to
    the weights after the softmax instead; the keys transposed on `key_dims` (1, 2: heads, keys)."""
    scores = q @ k.transpose(*key_dims) * (1.0 if scale_weights else scale)  # (B, H, Tq, Tk)
    scores = scores if rounded_to is None else scores.to(rounded_to)
    if blocked is not None and not after_softmax:
        scores = scores.masked_fill(blocked, fill)
    weights = scores.softmax(softmax_dim)
    if blocked is not None and after_softmax:
        weights = weights.masked_fill(blocked, 0.0)
    weights = weights * scale if scale_weights else weights
    return weights.to(v.dtype) @ v  # (B, H, Tq, D)


def _heads(y: Tensor, count: int, D: int, split: str) -> Tensor:
    """(B, T, count·D) -> (B, count, T, D); read straight as (B, count, T, D) by a view with
    no transpose (`split="view"`), or as (B, T, D, count), head h taking every count-th
    feature (`split="interleaved"`). A projection of another width: the view's error."""
    B, T, _ = y.shape
    if split == "view":
        return y.view(B, count, T, D)
    if split == "interleaved":
        return y.view(B, T, D, count).permute(0, 3, 1, 2)
    return y.view(B, T, count, D).transpose(1, 2)


def gqa_steps(params: dict[str, Tensor], chunks: list[Tensor], num_heads: int,
              num_kv_heads: int, rope_base: float | None, *, tiled: bool = False,
              rope_on_values: bool = False, rope_before_split: bool = False,
              rope_keys: bool = True, groups: str = "", group_summed: str = "",
              causal: bool = True, restart: bool = False, top_left: bool = False,
              only_several: bool = False, before_update: str = "", rotated_after: bool = False,
              scale_by: str = "D", split: str = "", split_of: str = "qkv", merge: str = "",
              softmax_dim: int = -1, diagonal: bool = False, fill: float = NEG_INF,
              n_rep: int | None = None, only_new: bool = False, prepended: bool = False,
              out_proj: bool = True, mask_after_softmax: bool = False, k_from: str = "k",
              v_from: str = "v", values_get_keys: bool = False,
              kv_split_heads: int | None = None, anticausal: bool = False,
              rounded_to: torch.dtype | None = None, scale_weights: bool = False,
              key_dims: tuple[int, int] = (-2, -1)) -> list[Tensor]:
    """Grouped-query attention over `chunks` (B, t, E) fed one after the other through a
    cache, in float64, with one thing done wrong:
    - heads: tiled instead of repeated in a row, repeated `n_rep` times, the query heads
      grouped (r g) where they are (g r) on the way in or out (`groups`: "in", "out"), the
      query heads of a group summed (`group_summed`: the (B, T, Hkv·D) output that follows
      raises in "linear", out_proj, or in "reshape" to (B, T, E)), split by a view without
      the transpose (`split="view"`) or as (B, T, D, heads) (`split="interleaved"`), of the
      projections in `split_of` only, merged without the transpose
      (`merge="no_transpose"`), or returned without out_proj;
    - RoPE: also on the values, not on the keys, or on the whole embedding before the heads
      are split;
    - the mask: none, one that blocks the diagonal too (blocked scores filled with `fill`),
      one that blocks the past instead of the future (`anticausal`: j < i, or j <= i),
      aligned top-left (`only_several`: and none for a single token, as Hugging Face's
      `is_causal=T > 1`);
    - the projections: keys or values made by another one (`k_from`, `v_from`: "q", "k",
      "v"), or split into `kv_split_heads` heads (the view's error);
    - the scores: scaled by 1/√E, 1/D or not at all (`scale_by`: "E", "D_unrooted",
      "none"), rounded to a low-precision dtype with the softmax (`rounded_to`), the
      softmax over another dim, the blocked ones filled with 0 (`fill`), the blocked
      weights zeroed after the softmax, the weights scaled instead (`scale_weights`), or
      the keys transposed on other dims than the last two (`key_dims`);
    - the cache: positions restarting at 0 in each chunk, attending before the chunk's keys
      are in it (`before_update`: "after_prefill", or "always": the prefill sees no key),
      over the chunk's keys only (an update that returns what it was given), each call's
      keys put before those cached (`prepended`: torch.cat([k, self.k])), the keys cached
      before RoPE and rotated after, at the chunk's positions, or each call's keys appended
      to the stored values after the first (`values_get_keys`: torch.cat([self.v, k]))."""
    keys: list[Tensor] = []
    values: list[Tensor] = []
    outputs, start = [], 0
    group = num_heads // num_kv_heads
    repeats = group if n_rep is None else n_rep
    for x in chunks:
        B, T, E = x.shape
        D = E // num_heads
        x = x.double()
        positions = torch.arange(T) + (0 if restart else start)
        q = x @ params["q_proj.weight"].double().T
        k = x @ params[f"{k_from}_proj.weight"].double().T
        if rope_base is not None and rope_before_split:  # (B, T, E) and (B, T, Hkv·D) turned
            q, k = oracle.rope(q, positions, rope_base), oracle.rope(k, positions, rope_base)
        q = _heads(q, num_heads, D, split if "q" in split_of else "")  # (B, H, T, D)
        kv_heads = kv_split_heads or num_kv_heads
        k = _heads(k, kv_heads, D, split if "k" in split_of else "")  # (B, Hkv, T, D)
        v = _heads(x @ params[f"{v_from}_proj.weight"].double().T, kv_heads, D,
                   split if "v" in split_of else "")
        if rope_base is not None and not rope_before_split:
            q = oracle.rope(q, positions, rope_base)
            k = k if rotated_after or not rope_keys else oracle.rope(k, positions, rope_base)
            v = oracle.rope(v, positions, rope_base) if rope_on_values else v
        if groups == "in":  # query head r·Hkv + g in slot g·n_rep + r, with key/value head g
            q = q.view(B, group, num_kv_heads, T, D).transpose(1, 2).reshape(B, num_heads, T, D)
        # Attending before the update: the chunk's own keys are not seen (after the prefill,
        # or, "always", the prefill too: it attends over no key).
        blind = before_update == "always" or bool(before_update and keys)
        if values_get_keys and values:  # torch.cat([self.v, k]): this call's keys as values
            v = k
        seen_k, seen_v = ((list(keys), list(values)) if blind
                          else ([k], [v]) if only_new else (keys + [k], values + [v]))
        if prepended:  # the newest call's keys first, the prefill's last
            seen_k, seen_v = seen_k[::-1], seen_v[::-1]
        keys.append(k)
        values.append(v)
        if not seen_k:  # no key at all: the weights are empty, their product with v zero
            seen_k, seen_v = [k[:, :, :0]], [v[:, :, :0]]
        k_all, v_all = torch.cat(seen_k, dim=2), torch.cat(seen_v, dim=2)  # (B, Hkv, L, D)
        if rotated_after:  # every key turned at the chunk's positions (T,): broadcast
            k_all = oracle.rope(k_all, positions, rope_base)
        if tiled:  # kv head h serves query heads h, h + Hkv, ...: the order of tile()
            k_all, v_all = k_all.repeat(1, repeats, 1, 1), v_all.repeat(1, repeats, 1, 1)
        elif not group_summed:
            k_all, v_all = oracle.repeat_kv(k_all, repeats), oracle.repeat_kv(v_all, repeats)
        L = k_all.shape[2]
        blocked = None  # attending before the update, every key seen is in the past
        if causal and not (blind and L < start + T) and not (only_several and T == 1):
            # top-left: query i sees keys 0 .. i, as SDPA's is_causal aligns it
            key, query = torch.arange(L)[None, :], torch.arange(T)[:, None] + (
                0 if top_left or only_several else start)  # query i is token start + i
            blocked = key >= query if diagonal else key > query  # (T, L)
            blocked = ~blocked if anticausal else blocked  # the past: j <= i (j < i, diagonal)
        scale = {"E": E ** -0.5, "D": D ** -0.5, "D_unrooted": 1 / D, "none": 1.0}[scale_by]
        if group_summed:  # 'b g r t d, b g s d -> b g t s': one head per key/value head
            scores = torch.einsum("bgrtd,bgsd->bgts", q.view(B, num_kv_heads, group, T, D),
                                  k_all) * scale  # (B, Hkv, T, L)
            if blocked is not None:
                scores = scores.masked_fill(blocked, NEG_INF)
            out = scores.softmax(-1) @ v_all  # (B, Hkv, T, D)
        else:
            out = attend(q, k_all, v_all, blocked, scale=scale, softmax_dim=softmax_dim,
                         fill=fill, after_softmax=mask_after_softmax,
                         rounded_to=rounded_to, scale_weights=scale_weights,
                         key_dims=key_dims)  # (B, H, T, D)
        if groups == "out":  # slot g·n_rep + r written back to head r·Hkv + g
            out = out.view(B, num_kv_heads, group, T, D).transpose(1, 2).reshape(B, -1, T, D)
        if merge == "no_transpose":
            out = out.reshape(B, T, E)
        else:
            out = out.transpose(1, 2).reshape(B, T, E if group_summed == "reshape" else -1)
        outputs.append(F.linear(out, params["out_proj.weight"].double()) if out_proj else out)
        start += T
    return outputs


def gqa_candidates(params: dict[str, Tensor], x: Tensor, num_heads: int, num_kv_heads: int,
                   rope_base: float | None) -> list:
    def variant(base: float | None = rope_base, **bug) -> Tensor:
        return gqa_steps(params, [x], num_heads, num_kv_heads, base, **bug)[0].to(x.dtype)

    found = [("gqa_not_causal", lambda: variant(causal=False)),
             ("gqa_scale_by_embed_dim", lambda: variant(scale_by="E")),
             ("gqa_scale_unrooted", lambda: variant(scale_by="D_unrooted")),
             ("no_scaling", lambda: variant(scale_by="none")),
             ("mask_after_softmax", lambda: variant(mask_after_softmax=True)),
             ("gqa_v_from_k_proj", lambda: variant(v_from="k")),
             ("gqa_k_from_q_proj", lambda: variant(k_from="q")),
             ("gqa_kv_swapped", lambda: variant(k_from="v", v_from="k")),
             ("gqa_mask_filled_zero", lambda: variant(fill=0.0)),
             ("gqa_split_no_transpose", lambda: variant(split="view")),
             ("gqa_split_no_transpose", lambda: variant(split="view", merge="no_transpose")),
             ("gqa_split_no_transpose", lambda: variant(split="view", split_of="q")),
             ("gqa_split_interleaved", lambda: variant(split="interleaved")),
             ("gqa_split_interleaved", lambda: variant(split="interleaved", split_of="q")),
             ("gqa_no_out_proj", lambda: variant(out_proj=False)),
             ("gqa_merge_no_transpose", lambda: variant(merge="no_transpose")),
             ("gqa_softmax_over_queries", lambda: variant(softmax_dim=-2)),
             ("gqa_diagonal_blocked", lambda: variant(diagonal=True)),
             ("gqa_diagonal_blocked", lambda: variant(
                 diagonal=True, fill=torch.finfo(x.dtype).min)),
             ("gqa_mask_anticausal", lambda: variant(anticausal=True)),
             ("gqa_mask_anticausal", lambda: variant(anticausal=True, diagonal=True)),
             ("gqa_scores_low_precision", lambda: variant(rounded_to=torch.float16)),
             ("gqa_scores_low_precision", lambda: variant(rounded_to=torch.bfloat16)),
             ("gqa_weights_scaled", lambda: variant(scale_weights=True)),
             ("gqa_keys_transposed_wrong_dims", lambda: variant(key_dims=(1, 2)))]
    if 1 < num_kv_heads < num_heads:
        found += [("gqa_heads_tiled", lambda: variant(tiled=True)),
                  ("gqa_groups_transposed", lambda: variant(groups="in")),
                  ("gqa_groups_transposed", lambda: variant(groups="out"))]
    if num_kv_heads < num_heads:  # the sum of one head changes nothing
        found += [("gqa_group_summed", lambda: variant(group_summed="linear")),
                  ("gqa_group_summed", lambda: variant(group_summed="reshape")),
                  ("gqa_kv_split_num_heads", lambda: variant(kv_split_heads=num_heads)),
                  ("gqa_kv_not_repeated", lambda: variant(n_rep=1)),
                  ("gqa_kv_not_repeated", lambda: variant(n_rep=0))]
    if num_kv_heads * num_kv_heads != num_heads and num_kv_heads > 1:
        found.append(("gqa_n_rep_kv_heads", lambda: variant(n_rep=num_kv_heads)))
    if rope_base is not None:
        found += [("gqa_rope_missing", lambda: variant(None)),
                  ("gqa_rope_on_values", lambda: variant(rope_on_values=True)),
                  ("gqa_rope_before_split", lambda: variant(rope_before_split=True)),
                  ("gqa_rope_queries_only", lambda: variant(rope_keys=False))]
        if rope_base != 10000.0:
            found.append(("gqa_rope_default_base", lambda: variant(10000.0)))
    return found


def cache_candidates(params: dict[str, Tensor], chunks: list[Tensor], num_heads: int,
                     num_kv_heads: int, rope_base: float | None) -> list:
    """Each mistake's outputs of every call, one after the other (along T)."""

    def variant(base: float | None = rope_base, **bug) -> Tensor:
        steps = gqa_steps(params, chunks, num_heads, num_kv_heads, base, **bug)
        return torch.cat(steps, dim=1).to(chunks[0].dtype)

    found = [("cache_positions_restart", lambda: variant(restart=True)),
             ("cache_mask_top_left", lambda: variant(top_left=True)),
             ("cache_attend_before_update", lambda: variant(before_update="after_prefill")),
             ("cache_attend_before_update", lambda: variant(before_update="always")),
             ("cache_chunk_not_causal", lambda: variant(causal=False)),
             ("cache_causal_only_several", lambda: variant(only_several=True)),
             ("cache_returns_new_only", lambda: variant(only_new=True)),
             ("cache_returns_new_only", lambda: variant(only_new=True, top_left=True)),
             ("cache_prepends", lambda: variant(prepended=True)),
             ("cache_positions_restart", lambda: variant(restart=True, top_left=True)),
             ("cache_values_get_keys", lambda: variant(values_get_keys=True))]
    if rope_base is not None:
        found += [("cache_keys_rotated_after", lambda: variant(rotated_after=True)),
                  ("cache_rope_skipped", lambda: variant(None))]
    return found


def held_candidates(keys: Tensor, chunks: tuple[int, ...], rope_base: float | None) -> list:
    """What cache.update gives back (the keys or the values of every token, `keys`, along
    dim 2) by each mistake: the calls' tokens newest first (each call's put before those
    cached), or, RoPE's turns adding up, every key turned one position further (positions
    counted from 1), which leaves the outputs right."""
    found = [("cache_prepends", lambda: torch.cat(keys.split(list(chunks), dim=2)[::-1], dim=2))]
    if rope_base is not None:
        found.append(("rope_positions_from_one", lambda: oracle.rope(
            keys, torch.ones(keys.shape[2], device=keys.device), rope_base)))
    return found


def cache_length_candidates(B: int, H: int, Hkv: int, D: int, chunks: tuple[int, ...]) -> list:
    """len(cache) after each call, as each mistake gives it: another dim of the keys (B, Hkv,
    L, D) than L (len() of a tensor is its first, the batch; the heads, Hkv, or H after
    repeat_kv; the head size), an update that replaces what was stored (each call's tokens
    only) or that returns the concatenation without storing it (the prefill's tokens), or
    the calls counted (len() of a list of chunks)."""
    calls = len(chunks)
    return [*(("cache_len_wrong_dim", lambda n=n: torch.tensor([n] * calls))
              for n in (B, Hkv, H, D)),
            ("cache_update_replaces", lambda: torch.tensor(chunks)),
            ("cache_update_not_stored", lambda: torch.tensor(chunks[:1] * calls)),
            ("cache_len_counts_calls", lambda: torch.arange(1, calls + 1))]


def projection_candidates(params: dict[str, Tensor], owner: str, E: int, H: int,
                          Hkv: int) -> list:
    """The grader's weights loaded into modules whose projections have the widths of a
    mistake: the kit's error where one does not fit (`load_weights`), the very error a
    student's module so laid out meets. k_proj and v_proj of embed_dim features, as in
    multi-head attention (or from a head_dim of embed_dim // num_kv_heads, which gives as
    many); every projection from that head_dim (q_proj then the first too wide); q_proj of
    num_kv_heads heads, as k_proj."""
    D, wide = E // H, E // Hkv
    layouts = (("gqa_kv_proj_width", E, E), ("gqa_q_proj_width", H * wide, Hkv * wide),
               ("gqa_q_proj_width", Hkv * D, Hkv * D))
    return [(mistake_id, lambda q=q, kv=kv: _load_into_layout(params, owner, E, q, kv))
            for mistake_id, q, kv in layouts]


def _load_into_layout(params: dict[str, Tensor], owner: str, E: int, q_rows: int,
                      kv_rows: int) -> None:
    """`load_weights` into a module on meta with q_proj (q_rows, E), k_proj and v_proj
    (kv_rows, E), out_proj (E, q_rows), none with a bias."""
    module = nn.Module()
    for name, (rows, cols) in {"q_proj": (q_rows, E), "k_proj": (kv_rows, E),
                               "v_proj": (kv_rows, E), "out_proj": (E, q_rows)}.items():
        module.add_module(name, nn.Linear(cols, rows, bias=False, device="meta"))
    with torch.no_grad():
        load_weights(module, owner, params)


def _cat_along(B: int, H: int, Hkv: int, D: int, T: int, L: int, dim: int) -> Tensor:
    """The scores of a call of T tokens after L - T, its keys appended along `dim` (not the
    tokens): torch.cat's error, or the matmul's where the sizes let that dim grow."""
    k = torch.cat([torch.zeros(B, Hkv, L - T, D), torch.zeros(B, Hkv, T, D)], dim=dim)
    return torch.zeros(B, H, T, D) @ oracle.repeat_kv(k, H // Hkv).transpose(-2, -1)


def _square_masked(B: int, H: int, D: int, T: int, L: int, side: int, sdpa: bool) -> Tensor:
    """A call of T queries over L keys with a square (side, side) causal mask, merged back
    to (B, T, E): the mask's error, or the merge's where it broadcast the queries to side."""
    allowed = torch.ones(side, side, dtype=torch.bool).tril()
    q, kv = torch.zeros(B, H, T, D), torch.zeros(B, H, L, D)
    out = (F.scaled_dot_product_attention(q, kv, kv, attn_mask=allowed) if sdpa else
           (q @ kv.transpose(-2, -1)).masked_fill(~allowed, NEG_INF).softmax(-1) @ kv)
    return out.transpose(1, 2).reshape(B, T, H * D)


def cache_error_candidates(B: int, H: int, Hkv: int, D: int, chunks: tuple[int, ...],
                           rope_base: float | None) -> list:
    """The errors the calls after the prefill raise, for each mistake that raises one: the
    keys rotated after the update (the L cached keys broadcast against the T new tokens'
    angles), the keys appended along the heads (dim 1), the batch (torch.cat's default) or
    the features, or a square causal mask, (T, T) of
    the new tokens or (L, L) of every key, meeting the (T, L) scores (by masked_fill, or
    SDPA's attn_mask). Keys rotated after the update raise the very broadcast error of an
    (L, L) mask on a call of several tokens (L against T at dim 2), and come first: an
    (L, L) mask also raises on single-token steps, where they run, so the cases of a cause
    that raise on single-token steps too still name the mask (a match must agree on every
    one of them). A fresh cache's keys read before any update (its k still None) raise on
    the prefill itself."""
    found: list = [("cache_read_while_empty", lambda: EMPTY_CACHE_READ)]
    for n in range(1, len(chunks)):
        T, L = chunks[n], sum(chunks[:n + 1])  # the call's tokens, the keys it attends over
        if rope_base is not None:
            found.append(("cache_keys_rotated_after", lambda T=T, L=L: oracle.rope(
                torch.zeros(B, Hkv, L, D), torch.arange(L - T, L), rope_base)))
        found += [(mistake_id, lambda T=T, L=L, dim=dim: _cat_along(B, H, Hkv, D, T, L, dim))
                  for mistake_id, dim in (("cache_cat_heads", 1), ("cache_cat_wrong_dim", 0),
                                          ("cache_cat_wrong_dim", 3))]
        found += [("cache_square_mask", lambda T=T, L=L, side=side, sdpa=sdpa: _square_masked(
            B, H, D, T, L, side, sdpa)) for side in (T, L) for sdpa in (False, True)]
    return found
