"""The known mistakes of llm_attention's FlashAttention, forward and backward, recomputed from
torch primitives (`variants` holds the other pieces'): when a value check fails, each is tried on
the same inputs, and one that reproduces the answer is named. They only explain failures: the
expected values come from `oracle`."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...checks.diagnosis import RaisesKind
from . import oracle

Tensor = torch.Tensor
NEG_INF = float("-inf")
# torch's words for tensors whose sizes do not fit: elementwise (broadcasting), batched
# matmul and torch.cat (of blocks). Inside FlashAttention's loops, a reduction over the wrong
# axis or a product of the wrong operands: their likely causes are named (`size_mismatch`),
# not recomputed.
SIZE_MISMATCH = RaisesKind(("must match the size of tensor", "broadcast",
                            "Expected size for first two dimensions of batch2 tensor",
                            "Sizes of tensors must match except in dimension"))
# batched matmul's words alone: in the backward, a product of the wrong operands.
MATMUL_MISMATCH = RaisesKind(("Expected size for first two dimensions of batch2 tensor",
                              "mat1 and mat2 shapes cannot be multiplied"))

# The floors a divisor gets against 0 / 0 (`sum.clamp_min(1e-12)`): where a block's sum lies
# below one (a block far below the running maximum), what is divided depends on it.
DIVISOR_FLOORS = (1e-6, 1e-12, 1e-30)


def size_mismatch(mistake_id: str) -> tuple[str, Callable[[], RaisesKind]]:
    """The candidate that names the likely causes of a size mismatch (`mistake_id`: of the
    forward, or of the backward), after every recomputed one."""
    return mistake_id, lambda: SIZE_MISMATCH


def flash_variant(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, block: int, *,
                  rescale_acc: bool = True, rescale_sum: bool = True, shift: int = 0,
                  top_left: bool = False, per_block: str = "", running_max: bool = True,
                  max_start: float = NEG_INF, scale: float | None = None,
                  partial_block: bool = True, running_dtype: torch.dtype | None = None,
                  acc_dtype: torch.dtype | None = None, correction_inverted: bool = False,
                  max_kept: bool = True, keys_from_zero: bool = False, block_max: bool = False,
                  keys_short: int = 0, p_floor: float | None = None, normalised: bool = True,
                  max_before_mask: bool = False, p_old_max: bool = False,
                  fill: float = NEG_INF, lse_log: bool = True, anticausal: bool = False
                  ) -> tuple[Tensor, Tensor]:
    """FlashAttention's key-block loop, in the inputs' dtype, with one thing done wrong: the
    accumulator or the sum not rescaled when the maximum grows, the causal diagonal moved by
    `shift` or aligned top-left, each block's softmax normalised on its own (`per_block`:
    the blocks "added", "averaged", or averaged over the blocks a query sees a key in,
    "averaged_seen"), no running maximum (exp of the raw scores), one started at
    `max_start` (0, not -inf), each block's own maximum taken for the running one
    (`block_max`: right but where a block is all masked, whose maximum -inf then zeroes
    what came before), the scores scaled by `scale` rather than 1/√D, the last, shorter
    block of keys left out, each block sliced `keys_short` keys short (a key lost per block),
    each block's p divided by its own sum, floored at `p_floor` (0: no floor), before it is
    rescaled and added, the output not divided by the running sum at the end (`normalised`),
    the block's maximum taken before the causal mask (`max_before_mask`: of blocked keys
    too, under which the allowed ones can underflow), p taken against the maximum before
    the block (`p_old_max`: -inf at the first block, so p = inf), the running values made in
    `running_dtype` (torch.full's default, whatever the inputs' dtype) or the accumulator
    alone in `acc_dtype`, the correction inverted, e^(m' - m): e^(+inf) at the first block,
    0 · inf = NaN, the new maximum never kept (`max_kept`: each block rescales what came
    before by e^(-inf) = 0), the keys of each block numbered from 0 in the causal mask
    (`keys_from_zero`), the blocked scores filled with `fill` (0: future keys keep a weight),
    the logsumexp without its log, max + sum (`lse_log`), or the mask's comparison inverted,
    the keys before the diagonal blocked (`anticausal`)."""
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    last = torch.arange(Tq)[:, None] + (0 if top_left else Tk - Tq) + shift  # (Tq, 1)
    dtype = running_dtype or q.dtype
    row_max = torch.full((B, H, Tq, 1), max_start if running_max else 0.0, dtype=dtype)
    row_sum = torch.zeros(B, H, Tq, 1, dtype=dtype)  # (B, H, Tq, 1)
    acc = torch.zeros(B, H, Tq, D, dtype=acc_dtype or dtype)  # (B, H, Tq, D)
    blocks = torch.zeros(B, H, Tq, 1, dtype=dtype)  # the blocks counted in an average
    end = block - keys_short
    for start in range(0, Tk if partial_block else Tk - block + 1, block):
        kb, vb = k[:, :, start:start + end], v[:, :, start:start + end]  # (B, H, b, D)
        scores = q @ kb.transpose(-2, -1) * (D ** -0.5 if scale is None else scale)
        unmasked = scores  # (B, H, Tq, b)
        if is_causal:
            keys = torch.arange(kb.shape[2]) + (0 if keys_from_zero else start)  # (b,)
            scores = scores.masked_fill(keys < last if anticausal else keys > last, fill)
        if per_block:
            acc = acc + scores.softmax(-1).nan_to_num() @ vb
            seen = (scores > NEG_INF).any(-1, keepdim=True)
            blocks = blocks + (seen if per_block == "averaged_seen" else 1)
            continue
        block_top = (unmasked if max_before_mask else scores).amax(-1, keepdim=True)
        new_max = (block_top if block_max else torch.maximum(row_max, block_top) if running_max
                   else row_max)  # (B, H, Tq, 1)
        safe = new_max.masked_fill(new_max == NEG_INF, 0.0)
        p = torch.exp(scores - (row_max if p_old_max else safe))  # (B, H, Tq, b)
        if p_floor is not None:
            p = p / p.sum(-1, keepdim=True).clamp_min(p_floor)
        correction = torch.exp(safe - row_max if correction_inverted
                               else row_max - safe)  # (B, H, Tq, 1)
        row_sum = (row_sum * correction if rescale_sum else row_sum) + p.sum(-1, keepdim=True)
        acc = (acc * correction if rescale_acc else acc) + p @ vb
        row_max = new_max if max_kept else row_max
    if per_block:
        blocked = oracle.causal_blocked(Tq, Tk) if is_causal else None
        out = acc if per_block == "added" else acc / blocks
        return out, oracle.logsumexp(q, k, blocked)
    return (acc / row_sum if normalised else acc,
            (row_max + (row_sum.log() if lse_log else row_sum)).squeeze(-1))


def flash_keys_cut(q: Tensor, k: Tensor, v: Tensor, query_block: int,
                   end: Callable[[int, int], int]) -> tuple[Tensor, Tensor]:
    """Causal attention whose queries, in blocks [qs, qe) of `query_block`, see no key from
    `end(qs, qe)` on, where their key loop stops: (out, logsumexp), NaN and -inf for a query
    that sees no key (0 / 0, log 0)."""
    Tq, Tk = q.shape[2], k.shape[2]
    blocked = oracle.causal_blocked(Tq, Tk)  # (Tq, Tk)
    keys = torch.arange(Tk)
    for qs in range(0, Tq, query_block):
        qe = min(qs + query_block, Tq)
        blocked[qs:qe] |= keys >= end(qs, qe)
    scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(blocked, NEG_INF)
    return scores.softmax(-1) @ v, torch.logsumexp(scores, -1)


def flash_key_ends(Tq: int, Tk: int, block: int) -> list[tuple[int, Callable[[int, int], int]]]:
    """The causal key loop stopped one key or one block early, or at qe without the offset
    Tk - Tq: (query block, the key it stops at) for queries in blocks of `block`
    (FlashAttention-2's loop, whose key range for the queries [qs, qe) ends at min(Tk, qe +
    Tk - Tq)) and all at once (the range [0, Tk)); the end as sliced, or rounded up to whole
    key blocks (k[:, :, s:s + block])."""
    offset = Tk - Tq

    def hi(qs: int, qe: int) -> int:
        return min(Tk, qe + offset)

    exact = [(query_block, end) for query_block in sorted({min(block, Tq), Tq})
             for end in (lambda qs, qe: hi(qs, qe) - 1, lambda qs, qe: hi(qs, qe) - block)]
    if block < Tq:  # the queries' own diagonal block left out
        exact.append((block, lambda qs, qe: qs + offset))
    if offset:  # the range of Tq keys and Tq queries, with fewer queries than keys
        exact += [(query_block, lambda qs, qe: qe) for query_block in sorted({min(block, Tq), Tq})]
    whole = [(query_block, lambda qs, qe, end=end: -(-end(qs, qe) // block) * block)
             for query_block, end in exact]
    return exact + whole


def flash_candidates(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, block: int) -> list:
    """Each mistake's (out, logsumexp) in the inputs' dtype, computed in float64 but for the
    running maximum missing, started at 0 or each block's own, p taken against the old one,
    and each block's p normalised, whose overflow and underflow show in the inputs' own
    dtype, and running values in the default dtype, whose error only shows there. A running
    maximum started at 0 comes first: where it is wrong (every score of a row far below 0)
    so is no running maximum, which is also wrong where scores are far above 0."""
    q64, k64, v64 = q.double(), k.double(), v.double()

    def variant(causal: bool = is_causal, **bug) -> tuple[Tensor, Tensor]:
        out, lse = flash_variant(q64, k64, v64, causal, block, **bug)
        return out.to(q.dtype), lse.to(q.dtype)

    def lse_without_max() -> tuple[Tensor, Tensor]:
        blocked = oracle.causal_blocked(q.shape[2], k.shape[2]) if is_causal else None
        out, lse = oracle.flash(q64, k64, v64, is_causal)
        scores = (q64 @ k64.transpose(-2, -1) / q.shape[-1] ** 0.5)
        if blocked is not None:
            scores = scores.masked_fill(blocked, NEG_INF)
        return out.to(q.dtype), (lse - scores.amax(-1)).to(q.dtype)

    def lse_base2() -> tuple[Tensor, Tensor]:
        out, lse = variant()
        return out, lse * math.log2(math.e)  # m / ln 2 + log2(ℓ): Triton's exp2 units

    def lse_keepdim() -> tuple[Tensor, Tensor]:
        out, lse = variant()
        return out, lse[..., None]  # (B, H, Tq, 1): the running sum's shape

    def keys_cut(query_block: int, end: Callable[[int, int], int],
                 unseen: float) -> tuple[Tensor, Tensor]:
        out, lse = flash_keys_cut(q64, k64, v64, query_block, end)
        return out.masked_fill(out.isnan(), unseen).to(q.dtype), lse.to(q.dtype)

    found = [
        ("flash_max_from_zero", lambda: flash_variant(q, k, v, is_causal, block,
                                                      max_start=0.0)),
        ("flash_acc_not_rescaled", lambda: variant(rescale_acc=False)),
        ("flash_sum_not_rescaled", lambda: variant(rescale_sum=False)),
        ("flash_nothing_rescaled", lambda: variant(rescale_acc=False, rescale_sum=False)),
        ("flash_softmax_per_block", lambda: variant(per_block="added")),
        ("flash_softmax_per_block_averaged", lambda: variant(per_block="averaged")),
        ("flash_softmax_per_block_averaged", lambda: variant(per_block="averaged_seen")),
        ("flash_no_running_max", lambda: flash_variant(q, k, v, is_causal, block,
                                                       running_max=False)),
        ("flash_logsumexp_without_max", lse_without_max),
        ("flash_not_scaled", lambda: variant(scale=1.0)),
        ("flash_scale_inverted", lambda: variant(scale=q.shape[-1] ** 0.5)),
        ("flash_scale_inverted", lambda: flash_variant(  # scores D times larger, rounded as theirs
            q, k, v, is_causal, block, scale=q.shape[-1] ** 0.5)),
        ("scale_by_d", lambda: variant(scale=1 / q.shape[-1])),
        ("flash_last_block_skipped", lambda: variant(partial_block=False)),
        ("flash_lse_keepdim", lse_keepdim),
        ("flash_lse_base2", lse_base2),
        ("flash_correction_inverted", lambda: variant(correction_inverted=True)),
        ("flash_max_not_kept", lambda: variant(max_kept=False)),
        ("flash_block_max_only", lambda: flash_variant(q, k, v, is_causal, block,
                                                       block_max=True)),
        ("flash_keys_short", lambda: variant(keys_short=1)),
        ("flash_not_normalised", lambda: variant(normalised=False)),
        ("flash_p_old_max", lambda: flash_variant(q, k, v, is_causal, block,
                                                  p_old_max=True)),
    ]
    found += [("flash_p_normalised", lambda floor=floor: flash_variant(
        q, k, v, is_causal, block, p_floor=floor)) for floor in (0.0, *DIVISOR_FLOORS)]
    found.append(("flash_lse_without_log", lambda: variant(lse_log=False)))
    if q.dtype != torch.float32:  # right values, returned in float32: both, or the logsumexp
        found.append(("flash_output_float32", lambda: tuple(t.float() for t in variant())))
        found.append(("flash_lse_float32", lambda: (
            variant()[0], flash_variant(q64, k64, v64, is_causal, block)[1].float())))
    if q.dtype not in (torch.float32, torch.float64):  # in float64 the running values promote
        default = torch.get_default_dtype()
        found += [("flash_default_dtype", lambda: flash_variant(
            q, k, v, is_causal, block, running_dtype=default)),
                  ("flash_default_dtype", lambda: flash_variant(
                      q, k, v, is_causal, block, acc_dtype=default))]
    if is_causal:
        found += [("flash_causal_off_by_one", lambda: variant(shift=-1)),
                  ("flash_causal_off_by_one", lambda: variant(shift=1)),
                  ("flash_causal_ignored", lambda: variant(causal=False)),
                  ("flash_causal_keys_from_zero", lambda: variant(keys_from_zero=True)),
                  ("flash_max_before_mask", lambda: flash_variant(
                      q, k, v, is_causal, block, max_before_mask=True)),
                  ("flash_causal_filled_zero", lambda: variant(fill=0.0)),
                  ("flash_causal_inverted", lambda: variant(anticausal=True))]
        if q.shape[2] != k.shape[2]:
            found.append(("flash_causal_top_left", lambda: variant(top_left=True)))
        # A query that sees no key: 0 / 0 in an online softmax, 0 from an empty slice's.
        found += [("flash_causal_keys_cut", lambda qb=qb, end=end, unseen=unseen: keys_cut(
            qb, end, unseen)) for qb, end in flash_key_ends(q.shape[2], k.shape[2], block)
                  for unseen in (math.nan, 0.0)]
    return found


def flash_gradients(q: Tensor, k: Tensor, v: Tensor, d_out: Tensor, is_causal: bool,
                    block: int, *, delta: bool = True, dq_scales: int = 1,
                    dk_scales: int = 1, dv_from_out: bool = False, masked: bool = True,
                    delta_per_block: bool = False, p_per_block: bool = False,
                    dk_untransposed: bool = False, dq_accumulated: bool = True,
                    lse_unsqueezed: bool = True, dp_from_keys: bool = False,
                    order: str = "qkv", dv_transposed: bool = False,
                    delta_keepdim: bool = True, scores_scaled: bool = True,
                    mask_shift: int = 0, mask_fill: float = NEG_INF,
                    keys_from_zero: bool = False, delta_from_out: bool = True,
                    dp_transposed: bool = True, delta_sign: float = 1.0,
                    ds_times_p: bool = True, anticausal: bool = False,
                    ds_sign: float = 1.0) -> dict[str, Tensor]:
    """FlashAttention's backward over key blocks, in float64, from the oracle's logsumexp, with
    one thing done wrong: the scores recomputed without the scale, or with the causal diagonal
    moved by `mask_shift` (by Tq - Tk: aligned top-left), dS = P ∘ dP without δ = rowsum(dO ∘
    O), dQ or dK scaled `dq_scales` or `dk_scales` times (0: without the scale, 2: twice), dV =
    Pᵀ·out (not Pᵀ·dO), dV = dOᵀ·P (dV transposed: torch.cat's or autograd's error where the
    shapes do not fit), δ summed without keepdim (broadcast along the keys: torch's error where
    b differs from Tq), the scores recomputed without the causal mask, δ summed over one block's
    keys (Σ_j P·dP) rather than rowsum(dO ∘ O), P a softmax within each block rather than exp(S
    - logsumexp), dK = dS·q (not dSᵀ·q, torch.matmul's error where the shapes do not fit), dQ
    overwritten by each block rather than summed over them, the logsumexp (B, H, Tq) subtracted
    without a trailing dim (broadcast along the keys: torch's error where b differs from Tq), dP
    = dO·kᵀ (not dO·vᵀ), or the gradients returned in another `order` than (dq, dk, dv) ("kqv":
    dK first; autograd's error where a gradient's shape does not fit its input's), the
    blocked scores filled with `mask_fill` (0: P = exp(-logsumexp) there), each block's keys
    numbered from 0 in the causal mask, δ = rowsum(dO) without O, dP = dO·v_block (torch's
    error where b differs from D), dS = P ∘ (dP + δ) (`delta_sign` -1), or dS = dP - δ
    without P, the causal mask's comparison inverted (`anticausal`), or dS = P ∘ (δ - dP)
    (`ds_sign` -1: dQ and dK negated)."""
    q, k, v, d_out = q.double(), k.double(), v.double(), d_out.double()
    Tq, D, Tk = q.shape[2], q.shape[3], k.shape[2]
    scale = D ** -0.5
    keys, last = torch.arange(Tk), torch.arange(Tq)[:, None] + Tk - Tq + mask_shift
    blocked = ((keys < last if anticausal else keys > last) if is_causal
               else None)  # (Tq, Tk)
    out, lse = oracle.flash(q, k, v, is_causal)
    rows = (d_out * out if delta_from_out else d_out).sum(-1, keepdim=delta_keepdim)  # δ
    dq, dk, dv = torch.zeros_like(q), [], []
    for start in range(0, Tk, block):
        kb, vb = k[:, :, start:start + block], v[:, :, start:start + block]  # (B, H, b, D)
        scores = q @ kb.transpose(-2, -1) * (scale if scores_scaled else 1.0)
        if blocked is not None and masked:
            keys = slice(0, kb.shape[2]) if keys_from_zero else slice(start, start + block)
            scores = scores.masked_fill(blocked[:, keys], mask_fill)
        p = (scores.softmax(-1) if p_per_block
             else torch.exp(scores - (lse[..., None] if lse_unsqueezed else lse)))
        dv.append(d_out.transpose(-2, -1) @ p if dv_transposed
                  else p.transpose(-2, -1) @ (out if dv_from_out else d_out))  # (B, H, b, D)
        dp = d_out @ ((kb if dp_from_keys else vb).transpose(-2, -1) if dp_transposed
                      else vb)  # (B, H, Tq, b)
        ds = ds_sign * (p if ds_times_p else 1.0) * (dp - delta_sign * (
            (p * dp).sum(-1, keepdim=True) if delta_per_block
            else rows if delta else 0.0))  # (B, H, Tq, b)
        dq = (dq if dq_accumulated else 0.0) + ds @ kb * scale ** dq_scales
        dk.append((ds if dk_untransposed else ds.transpose(-2, -1)) @ q
                  * scale ** dk_scales)  # (B, H, b, D)
    grads = {"q": dq, "k": torch.cat(dk, dim=2), "v": torch.cat(dv, dim=2)}
    inputs = {"q": q, "k": k, "v": v}
    returned = dict(zip("qkv", (grads[wrt] for wrt in order)))
    for index, wrt in enumerate("qkv"):  # autograd's check of a Function's gradients
        if returned[wrt].shape != inputs[wrt].shape:
            raise RuntimeError(f"returned an invalid gradient at index {index} - got "
                               f"{list(returned[wrt].shape)} but expected shape compatible "
                               f"with {list(inputs[wrt].shape)}")
    return returned


def flash_gradient_candidates(q: Tensor, k: Tensor, v: Tensor, d_out: Tensor, is_causal: bool,
                              block: int) -> Callable[[str], list]:
    """For the gradient of each input ("q", "k", "v"), each backward mistake's, in the
    inputs' dtype; and, for an error of the backward, the likely causes of a size mismatch."""
    bugs = [("flash_backward_no_delta", {"delta": False}),
            ("flash_backward_unscaled", {"dq_scales": 0}),
            ("flash_backward_unscaled", {"dk_scales": 0}),
            ("flash_backward_unscaled", {"dq_scales": 0, "dk_scales": 0}),
            ("flash_backward_scaled_twice", {"dq_scales": 2}),
            ("flash_backward_scaled_twice", {"dk_scales": 2}),
            ("flash_backward_scaled_twice", {"dq_scales": 2, "dk_scales": 2}),
            ("flash_dv_from_output", {"dv_from_out": True}),
            ("flash_delta_per_block", {"delta_per_block": True}),
            ("flash_p_softmax_per_block", {"p_per_block": True}),
            ("flash_dk_not_transposed", {"dk_untransposed": True}),
            ("flash_dq_overwritten", {"dq_accumulated": False}),
            ("flash_backward_lse_broadcast", {"lse_unsqueezed": False}),
            ("flash_backward_lse_broadcast", {"delta_keepdim": False}),
            ("flash_dp_from_keys", {"dp_from_keys": True}),
            ("flash_dq_dk_swapped", {"order": "kqv"}),
            *(("flash_gradients_misordered", {"order": order})
              for order in ("qvk", "vkq", "kvq", "vqk")),
            ("flash_dv_transposed", {"dv_transposed": True}),
            ("flash_backward_p_unscaled", {"scores_scaled": False}),
            ("flash_delta_without_output", {"delta_from_out": False}),
            ("flash_dp_not_transposed", {"dp_transposed": False}),
            ("flash_delta_sign_flipped", {"delta_sign": -1.0}),
            ("flash_ds_without_p", {"ds_times_p": False}),
            ("flash_ds_negated", {"ds_sign": -1.0})]
    if is_causal:
        bugs += [("flash_backward_not_causal", {"masked": False}),
                 ("flash_causal_off_by_one", {"mask_shift": -1}),
                 ("flash_causal_off_by_one", {"mask_shift": 1}),
                 ("flash_causal_keys_from_zero", {"keys_from_zero": True}),
                 ("flash_causal_filled_zero", {"mask_fill": 0.0}),
                 ("flash_causal_inverted", {"anticausal": True})]
        if q.shape[2] != k.shape[2]:  # aligned top-left: query i sees keys j <= i
            bugs.append(("flash_causal_top_left", {"mask_shift": q.shape[2] - k.shape[2]}))

    def of(wrt: str) -> list:
        return [*((mistake_id, lambda bug=bug: flash_gradients(
            q, k, v, d_out, is_causal, block, **bug)[wrt].to(q.dtype))
            for mistake_id, bug in bugs), ("flash_backward_matmul_mismatch",
                                           lambda: MATMUL_MISMATCH),
            size_mismatch("flash_backward_size_mismatch")]

    return of


