"""Correct ways to write a fused `MultiHeadAttention`, as students write them: the style set's
"fused" and "per-head" kinds (`styleset` adds the loops in disguise and names them all).

Each style's own code is the causal self-attention path (`causal`, and the parts it uses),
the one call the speed check makes; `Style` gives every style the rest of the contract.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

Tensor = torch.Tensor


def triu_mask(t: int, device: torch.device) -> Tensor:
    return torch.ones(t, t, dtype=torch.bool, device=device).triu(1)  # (T, T), True = blocked


class Style(nn.Module):
    """A complete `MultiHeadAttention` (the contract's constructor and forward): the speed
    check's call, causal self-attention without weights, takes the style's own path (`causal`);
    every other call takes one plain general path, so that a style passes the checks the speed
    check needs as a real submission (`mha-kit bench --reliability`, inside `mha-kit grade`)."""

    def __init__(self, embed_dim: int, num_heads: int, *, kdim=None, vdim=None, bias=True,
                 dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.setup(embed_dim, num_heads, dropout)

    def setup(self, embed_dim: int, num_heads: int, dropout: float = 0.0) -> None:
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = key if value is None else value
        if attn_mask is None and is_causal and not need_weights and key is query is value:
            return self.causal(query, key, value), None
        return self.general(query, key, value, attn_mask, is_causal, need_weights)

    def general(self, query, key, value, attn_mask, is_causal, need_weights):
        q, k, v = (Style.split(self, p) for p in Style.qkv(self, query, key, value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, Tq, Tk)
        if is_causal:
            causal = triu_mask(scores.shape[-1], q.device)[:scores.shape[-2]]
            attn_mask = causal if attn_mask is None else attn_mask | causal
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask, -math.inf)
        weights = self.dropout(scores.softmax(-1))
        out = self.out_proj(Style.merge(self, weights @ v))
        return out, weights if need_weights else None

    def causal(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        q, k, v = (self.split(p) for p in self.qkv(query, key, value))
        return self.out_proj(self.merge(self.attend(q, k, v)))

    # The parts, each the plain view/transpose way; styles replace one or more.
    def qkv(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.q_proj(query), self.k_proj(key), self.v_proj(value)  # 3 x (B, T, E)

    def split(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)

    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, T, T)
        scores = scores.masked_fill(triu_mask(q.shape[-2], q.device), -math.inf)
        return self.dropout(scores.softmax(-1)) @ v  # (B, H, T, D)

    def merge(self, x: Tensor) -> Tensor:
        return x.transpose(1, 2).flatten(2)  # (B, T, E)


class ViewTranspose(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        weights = self.dropout(scores.masked_fill(triu_mask(T, q.device), -math.inf).softmax(-1))
        return self.out_proj((weights @ v).transpose(1, 2).contiguous().view(B, T, E))


class ReshapePermute(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.reshape(B, T, self.num_heads, -1).permute(0, 2, 1, 3)
                   for p in self.qkv(query, key, value))
        scores = torch.matmul(q, k.permute(0, 1, 3, 2)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(T, q.device), float("-inf"))
        out = torch.matmul(F.softmax(scores, dim=-1), v)
        return self.out_proj(out.permute(0, 2, 1, 3).reshape(B, T, E))


class Einops(Style):
    def split(self, x):
        return rearrange(x, "b t (h d) -> b h t d", h=self.num_heads)

    def merge(self, x):
        return rearrange(x, "b h t d -> b t (h d)")


class Einsum(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, -1) for p in self.qkv(query, key, value))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.head_dim)
        weights = scores.masked_fill(triu_mask(T, q.device), float("-inf")).softmax(-1)
        return self.out_proj(torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, T, E))


class ChunkStack(Style):
    """`chunk` + `stack` to split, `unbind` + `cat` to merge: O(H) work, but in C++."""

    def split(self, x):
        return torch.stack(x.chunk(self.num_heads, dim=-1), dim=1)

    def merge(self, x):
        return torch.cat(x.unbind(1), dim=-1)


class SplitStack(Style):
    def split(self, x):
        return torch.stack(x.split(self.head_dim, dim=-1), dim=1)


class Bmm(Style):
    """Heads folded into the batch for `torch.bmm` (seed 000: the key permuted to (B·H, D, T))."""

    def causal(self, query, key, value):
        B, T, E = query.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = (p.view(B, T, H, D) for p in self.qkv(query, key, value))
        q = q.permute(0, 2, 1, 3).reshape(B * H, T, D)
        k = k.permute(0, 2, 3, 1).reshape(B * H, D, T)
        v = v.permute(0, 2, 1, 3).reshape(B * H, T, D)
        scores = torch.bmm(q, k) / math.sqrt(D)
        scores = scores.masked_fill(triu_mask(T, q.device), float("-inf"))
        out = torch.bmm(scores.softmax(-1), v).view(B, H, T, D)
        return self.out_proj(out.permute(0, 2, 1, 3).reshape(B, T, E))


class Baddbmm(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = (p.view(B, T, H, D).transpose(1, 2).reshape(B * H, T, D)
                   for p in self.qkv(query, key, value))
        bias = torch.zeros(T, T, device=q.device).masked_fill(triu_mask(T, q.device), -math.inf)
        scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=1 / math.sqrt(D))
        out = torch.bmm(scores.softmax(-1), v).view(B, H, T, D)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, E))


class ContiguousMatmul(Style):
    """Seed 001: permute, contiguous, view to (B·H, T, D); matmul; view back."""

    def causal(self, query, key, value):
        B, T, E = query.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = (p.view(B, T, H, D).permute(0, 2, 1, 3).contiguous().view(B * H, T, D)
                   for p in self.qkv(query, key, value))
        scores = torch.matmul(q, k.transpose(-2, -1)) / (D ** 0.5)
        weights = F.softmax(scores.masked_fill(triu_mask(T, q.device), -math.inf), dim=-1)
        out = torch.matmul(weights, v).view(B, H, T, D)
        return self.out_proj(out.permute(0, 2, 1, 3).contiguous().view(B, T, E))


class Where(Style):
    def attend(self, q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = torch.where(triu_mask(q.shape[-2], q.device), float("-inf"), scores)
        return scores.softmax(-1) @ v


class AdditiveMask(Style):
    def attend(self, q, k, v):
        T = q.shape[-2]
        additive = torch.full((T, T), float("-inf"), device=q.device).triu(1)
        return (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + additive).softmax(-1) @ v


class TrilEqualsZero(Style):
    def attend(self, q, k, v):
        T = q.shape[-2]
        keep = torch.tril(torch.ones(T, T, device=q.device))
        scores = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).masked_fill(keep == 0,
                                                                                   -1e9)
        return scores.softmax(-1) @ v


class BufferMask(Style):
    """Seed 004: a mask of the maximum length kept as a buffer, sliced, filled in place."""

    def setup(self, embed_dim, num_heads, dropout=0.0, context_length=256):
        super().setup(embed_dim, num_heads, dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1))

    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(2, 3)
        scores.masked_fill_(self.mask.bool()[:T, :T], -torch.inf)
        weights = self.dropout(torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1))
        return self.out_proj((weights @ v).transpose(1, 2).contiguous().view(B, T, E))


class TensorSqrt(Style):
    """Seed 002: the scale as a float32 tensor, built on every call; contiguous().view."""

    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.contiguous().view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scale = 1 / torch.sqrt(torch.tensor(self.head_dim, dtype=q.dtype, device=q.device))
        scores = (q @ k.transpose(2, 3) * scale).masked_fill(triu_mask(T, q.device), -math.inf)
        return self.out_proj((scores.softmax(-1) @ v).transpose(1, 2).contiguous().view(B, T, E))


class PrescaleQ(Style):
    def attend(self, q, k, v):
        scores = (q * self.head_dim ** -0.5) @ k.transpose(-2, -1)
        return scores.masked_fill(triu_mask(q.shape[-2], q.device), -math.inf).softmax(-1) @ v


class PackedQKV(Style):
    """One projection with the three weights concatenated in forward, then unbound."""

    def causal(self, query, key, value):
        B, T, E = query.shape
        weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        qkv = F.linear(query, weight, bias).view(B, T, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, T, D)
        return self.out_proj(self.merge(self.attend(q, k, v)))


class UnflattenFlatten(Style):
    def split(self, x):
        return x.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)


class MovedimContiguous(Style):
    def split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dim).movedim(2, 1).contiguous()

    def merge(self, x):
        return x.movedim(1, 2).contiguous().flatten(2)


class ManualSoftmax(Style):
    """Softmax by hand: subtract the row maximum, exponentiate, normalise."""

    def attend(self, q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(q.shape[-2], q.device), -math.inf)
        exp = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
        return exp / exp.sum(dim=-1, keepdim=True) @ v


class ManualSoftmaxKeepMask(Style):
    """Softmax by hand with a multiplicative 0/1 mask after exp (no -inf anywhere)."""

    def attend(self, q, k, v):
        T = q.shape[-2]
        keep = torch.tril(torch.ones(T, T, device=q.device))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        exp = torch.exp(scores - scores.max(dim=-1, keepdim=True).values) * keep
        return (exp / exp.sum(-1, keepdim=True)) @ v


class LogSoftmaxExp(Style):
    def attend(self, q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(q.shape[-2], q.device), -math.inf)
        return torch.log_softmax(scores, dim=-1).exp() @ v


class NnSoftmaxModule(Style):
    """Seed 000: an `nn.Softmax` module."""

    def setup(self, embed_dim, num_heads, dropout=0.0):
        super().setup(embed_dim, num_heads, dropout)
        self.softmax = nn.Softmax(dim=-1)

    def attend(self, q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        mask = torch.triu(torch.ones(q.shape[-2], q.shape[-2], device=q.device), 1).bool()
        return self.dropout(self.softmax(scores.masked_fill(mask, float("-inf")))) @ v


class Sdpa(Style):
    """F.scaled_dot_product_attention: forbidden when grading, measured with the policy off."""

    def attend(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


# ------------------------------------------- per-head Python work, the attention still batched


class PerHeadCatMerge(Style):
    """The issue's style: merge_heads concatenates the heads' slices in a comprehension."""

    def merge(self, x):
        return torch.cat([x[:, h] for h in range(self.num_heads)], dim=-1)


class PerHeadStackSplit(Style):
    """split_heads stacks column slices, one per head."""

    def split(self, x):
        D = self.head_dim
        return torch.stack([x[..., h * D:(h + 1) * D] for h in range(self.num_heads)], dim=1)


class PerHeadUnbindCat(Style):
    def merge(self, x):
        return torch.cat([head for head in x.unbind(dim=1)], dim=-1)


class PerHeadChunkStack(Style):
    def split(self, x):
        return torch.stack([chunk for chunk in x.chunk(self.num_heads, dim=-1)], dim=1)


class PerHeadSplitAndMerge(PerHeadStackSplit, PerHeadCatMerge):
    """Both: slices stacked in split_heads (q, k and v) and concatenated in merge_heads."""


class PerHeadChunkUnbind(PerHeadChunkStack, PerHeadUnbindCat):
    """Both: a comprehension over `chunk` in split_heads, over `unbind` in merge_heads."""


class EinopsEinsumManual(Einops):
    """Composite: einops to split and merge, einsum for both products, softmax by hand."""

    def attend(self, q, k, v):
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(q.shape[-2], q.device), -math.inf)
        exp = (scores - scores.amax(-1, keepdim=True)).exp()
        return torch.einsum("bhqk,bhkd->bhqd", exp / exp.sum(-1, keepdim=True), v)


class SeedsComposite(BufferMask):
    """Composite of the seeds: bmm on (B·H, ...) with the key permuted (000), an nn.Softmax
    module (000), the scale as a tensor (002), a buffer mask sliced and filled in place (004)."""

    def setup(self, embed_dim, num_heads, dropout=0.0):
        super().setup(embed_dim, num_heads, dropout)
        self.softmax = nn.Softmax(dim=-1)

    def causal(self, query, key, value):
        B, T, E = query.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = (p.view(B, T, H, D) for p in self.qkv(query, key, value))
        q = q.permute(0, 2, 1, 3).reshape(B * H, T, D)
        k = k.permute(0, 2, 3, 1).reshape(B * H, D, T)
        v = v.permute(0, 2, 1, 3).reshape(B * H, T, D)
        scores = torch.bmm(q, k) / torch.sqrt(torch.tensor(D, dtype=q.dtype, device=q.device))
        scores.masked_fill_(self.mask.bool()[:T, :T], -torch.inf)
        out = torch.bmm(self.dropout(self.softmax(scores)), v).view(B, H, T, D)
        return self.out_proj(out.permute(0, 2, 1, 3).reshape(B, T, E))
