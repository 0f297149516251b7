"""The style set: correct fused modules (`styles`) and loops over heads in disguise, by
name. `mha-kit bench --calibrate` and `--reliability` run them through the real speed check
(docs/speed.md); `mha-kit grade` can grade one as a submission:
`from mha_kit.assignments.mha.styleset import STYLES; MultiHeadAttention = STYLES["einsum"]`.

Each style's kind (`kind`) follows its name's prefix:

- "fused" (no prefix): all heads at once, no per-head Python work. Must earn the points.
- "per-head" (`per-head:`): the attention is batched, but split_heads or merge_heads does cheap
  per-head Python work (slices, `cat`, `stack`, `unbind` or `chunk` in a comprehension). It
  only moves data: the policy (docs/speed.md) lets it earn the points. Must earn them.
- "loop" (`loop:`): the whole attention runs head by head. Must earn nothing, by its time and
  by the count of calls made once per head.
- "partial loop" (`loop:`, in PARTIAL_LOOPS): one step of it runs head by head. As fast as
  some per-head styles: the count alone stops it. Must earn nothing.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import styles as s
from .baselines import FusedReference, HeadLoopReference, as_student_class
from .styles import Style, triu_mask

# ---------------------------------------------------------------- loops over heads in disguise


class LoopColumnSlices(Style):
    """Fused projections, then one head's columns at a time."""

    def causal(self, query, key, value):
        q, k, v = self.qkv(query, key, value)
        mask, D = triu_mask(q.shape[1], q.device), self.head_dim
        outs = []
        for h in range(self.num_heads):
            cols = slice(h * D, (h + 1) * D)
            scores = q[..., cols] @ k[..., cols].transpose(-2, -1) / math.sqrt(D)
            outs.append(scores.masked_fill(mask, -math.inf).softmax(-1) @ v[..., cols])
        return self.out_proj(torch.cat(outs, dim=-1))


class LoopPerHeadLinear(Style):
    """Slices of the fused weights, one small projection per head: the looped module inside."""

    def causal(self, query, key, value):
        mask, D = triu_mask(query.shape[1], query.device), self.head_dim
        outs = []
        for h in range(self.num_heads):
            rows = slice(h * D, (h + 1) * D)
            q, k, v = (F.linear(x, p.weight[rows], p.bias[rows]) for x, p in
                       ((query, self.q_proj), (key, self.k_proj), (value, self.v_proj)))
            scores = (q @ k.transpose(-2, -1) / math.sqrt(D)).masked_fill(mask, -math.inf)
            outs.append(scores.softmax(-1) @ v)
        return self.out_proj(torch.cat(outs, dim=-1))


class LoopSoftmaxOnly(Style):
    """Batched scores and weighted sum; only the masked softmax goes head by head."""

    def attend(self, q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        mask = triu_mask(q.shape[-2], q.device)
        weights = torch.stack([scores[:, h].masked_fill(mask, -math.inf).softmax(-1)
                               for h in range(self.num_heads)], dim=1)
        return weights @ v


class LoopWeightedSumOnly(Style):
    """Batched scores and softmax; only the weighted sum goes head by head (one matmul each)."""

    def attend(self, q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        weights = scores.masked_fill(triu_mask(q.shape[-2], q.device), -math.inf).softmax(-1)
        return torch.stack([weights[:, h] @ v[:, h] for h in range(self.num_heads)], dim=1)


class LoopScoresOnly(Style):
    """Only the scores go head by head (one matmul each); mask, softmax, weighted sum batched."""

    def attend(self, q, k, v):
        kt = k.transpose(-2, -1)
        scores = torch.stack([q[:, h] @ kt[:, h] for h in range(self.num_heads)], dim=1)
        scores = scores / math.sqrt(self.head_dim)
        return scores.masked_fill(triu_mask(q.shape[-2], q.device), -math.inf).softmax(-1) @ v


STYLES: dict[str, type[nn.Module]] = {
    "kit fused reference": as_student_class(FusedReference),
    "view/transpose": s.ViewTranspose,
    "reshape/permute": s.ReshapePermute,
    "einops": s.Einops,
    "einsum": s.Einsum,
    "chunk + stack, unbind + cat": s.ChunkStack,
    "split + stack": s.SplitStack,
    "bmm (seed 000)": s.Bmm,
    "baddbmm, additive mask": s.Baddbmm,
    "contiguous().view, matmul (seed 001)": s.ContiguousMatmul,
    "torch.where mask": s.Where,
    "additive -inf mask": s.AdditiveMask,
    "tril == 0, -1e9": s.TrilEqualsZero,
    "buffer mask, in place (seed 004)": s.BufferMask,
    "tensor sqrt scale (seed 002)": s.TensorSqrt,
    "pre-scaled q": s.PrescaleQ,
    "packed qkv in forward": s.PackedQKV,
    "unflatten/flatten": s.UnflattenFlatten,
    "movedim + contiguous": s.MovedimContiguous,
    "manual softmax": s.ManualSoftmax,
    "manual softmax, 0/1 mask": s.ManualSoftmaxKeepMask,
    "log_softmax().exp()": s.LogSoftmaxExp,
    "nn.Softmax module (seed 000)": s.NnSoftmaxModule,
    "SDPA (policy off)": s.Sdpa,
    "per-head: cat of slices in merge": s.PerHeadCatMerge,
    "per-head: stack of slices in split": s.PerHeadStackSplit,
    "per-head: unbind comprehension": s.PerHeadUnbindCat,
    "per-head: chunk comprehension": s.PerHeadChunkStack,
    "per-head: slices in split and merge": s.PerHeadSplitAndMerge,
    "per-head: chunk and unbind comprehensions": s.PerHeadChunkUnbind,
    "einops, einsum, manual softmax": s.EinopsEinsumManual,
    "seeds: bmm, nn.Softmax, tensor scale, buffer mask": s.SeedsComposite,
    "loop: kit head loop": as_student_class(HeadLoopReference),
    "loop: column slices": LoopColumnSlices,
    "loop: per-head linear": LoopPerHeadLinear,
    "loop: softmax only": LoopSoftmaxOnly,
    "loop: weighted sum only": LoopWeightedSumOnly,
    "loop: scores only": LoopScoresOnly,
}


PARTIAL_LOOPS = frozenset({"loop: softmax only", "loop: weighted sum only", "loop: scores only"})

# `mha-kit bench --reliability`: few enough for N = 100 in every condition, yet covering the
# slowest correct style (slices in both split and merge, the merge among them), chunk
# and unbind comprehensions, einops, einsum, bmm, the seeds' styles, a softmax by hand, the
# fastest loop (decided by the count) and a whole loop (decided by time and count).
RELIABILITY = (
    "per-head: slices in split and merge",
    "per-head: chunk and unbind comprehensions",
    "einops, einsum, manual softmax",
    "seeds: bmm, nn.Softmax, tensor scale, buffer mask",
    "loop: softmax only",
    "loop: column slices",
)


def kind(name: str) -> str:
    """"fused", "per-head", "loop" or "partial loop" (see the module's docstring)."""
    if name.startswith("loop:"):
        return "partial loop" if name in PARTIAL_LOOPS else "loop"
    return "per-head" if name.startswith("per-head:") else "fused"


def must_earn(name: str) -> bool:
    """Whether the style must earn the speed points (every time), or never earn them."""
    return kind(name) in ("fused", "per-head")
