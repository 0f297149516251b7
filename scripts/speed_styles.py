"""Run the real speed check on many ways students write a fused module, and on loops in disguise.

The data behind the thresholds in autograder/timing.py (see docs/speed.md):

    .venv/bin/python scripts/speed_styles.py --repeats 5 [--device cuda] [--only NAME ...]

Each style below is the causal self-attention path of a correct `MultiHeadAttention`, written
the way a student might. The `loop:` styles have the fused API but loop over heads inside
forward, and must earn nothing.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from dataclasses import replace

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from autograder.runtime import default_device
from autograder.speed import config as speed_config
from autograder.speed import measure as speed_measure
from autograder.speed.baselines import FusedReference, HeadLoopReference, as_student_class
from autograder.speed.bench import busy_core, repeated_checks

Tensor = torch.Tensor


class Style(nn.Module):
    """What every style shares: the contract's constructor and the call the speed check makes."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(0.0)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        assert attn_mask is None and is_causal, "only the speed check's causal call"
        key = query if key is None else key
        value = key if value is None else value
        return self.causal(query, key, value), None

    def causal(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        raise NotImplementedError

    def qkv(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.q_proj(query), self.k_proj(key), self.v_proj(value)  # 3 x (B, T, E)


def triu_mask(t: int, device: torch.device) -> Tensor:
    return torch.ones(t, t, dtype=torch.bool, device=device).triu(1)  # (T, T), True = blocked


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
    def causal(self, query, key, value):
        q, k, v = (rearrange(p, "b t (h d) -> b h t d", h=self.num_heads)
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(q.shape[2], q.device), float("-inf"))
        return self.out_proj(rearrange(scores.softmax(-1) @ v, "b h t d -> b t (h d)"))


class Einsum(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, -1) for p in self.qkv(query, key, value))
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.head_dim)
        weights = scores.masked_fill(triu_mask(T, q.device), float("-inf")).softmax(-1)
        return self.out_proj(torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, T, E))


class ChunkCat(Style):
    def causal(self, query, key, value):
        q, k, v = (torch.stack(p.chunk(self.num_heads, dim=-1), dim=1)
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(q.shape[2], q.device), float("-inf"))
        return self.out_proj(torch.cat((scores.softmax(-1) @ v).unbind(1), dim=-1))


class SplitStack(Style):
    def causal(self, query, key, value):
        q, k, v = (torch.stack(p.split(self.head_dim, dim=-1), dim=1)
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(q.shape[2], q.device), float("-inf"))
        out = scores.softmax(-1) @ v  # (B, H, T, D)
        return self.out_proj(out.transpose(1, 2).flatten(2))


class Bmm(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = (p.view(B, T, H, D).transpose(1, 2).reshape(B * H, T, D)
                   for p in self.qkv(query, key, value))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(D)
        scores = scores.masked_fill(triu_mask(T, q.device), float("-inf"))
        out = torch.bmm(scores.softmax(-1), v).view(B, H, T, D)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, E))


class Baddbmm(Bmm):
    def causal(self, query, key, value):
        B, T, E = query.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = (p.view(B, T, H, D).transpose(1, 2).reshape(B * H, T, D)
                   for p in self.qkv(query, key, value))
        bias = torch.zeros(T, T, device=q.device).masked_fill(triu_mask(T, q.device), -math.inf)
        scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=1 / math.sqrt(D))
        out = torch.bmm(scores.softmax(-1), v).view(B, H, T, D)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, E))


class Where(ViewTranspose):
    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = torch.where(triu_mask(T, q.device), float("-inf"), scores)
        return self.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, E))


class AdditiveMask(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        additive = torch.full((T, T), float("-inf"), device=q.device).triu(1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + additive
        return self.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, E))


class TrilEqualsZero(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        keep = torch.tril(torch.ones(T, T, device=q.device))
        scores = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).masked_fill(keep == 0,
                                                                                   -1e9)
        return self.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, E))


class BufferMask(Style):
    """The seed tutorial's way: a mask of the maximum length kept as a buffer, sliced."""

    def __init__(self, embed_dim: int, num_heads: int, context_length: int = 256):
        super().__init__(embed_dim, num_heads)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1))

    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(2, 3)
        scores = scores.masked_fill(self.mask.bool()[:T, :T], -torch.inf)
        weights = self.dropout(torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1))
        return self.out_proj((weights @ v).transpose(1, 2).contiguous().view(B, T, E))


class TensorSqrt(Style):
    """The seed tutorial's scale: a new tensor and a sqrt on every call."""

    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scale = torch.sqrt(torch.tensor(self.head_dim, dtype=q.dtype, device=q.device))
        scores = (q @ k.transpose(-2, -1) / scale).masked_fill(triu_mask(T, q.device), -math.inf)
        return self.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, E))


class PrescaleQ(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scores = (q * self.head_dim ** -0.5) @ k.transpose(-2, -1)
        scores = scores.masked_fill(triu_mask(T, q.device), -math.inf)
        return self.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, E))


class PackedQKV(Style):
    """One projection with the three weights concatenated in forward, then chunked."""

    def causal(self, query, key, value):
        B, T, E = query.shape
        weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        qkv = F.linear(query, weight, bias).view(B, T, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # 3 x (B, H, T, D)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(T, q.device), -math.inf)
        return self.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, E))


class UnflattenFlatten(Style):
    def causal(self, query, key, value):
        q, k, v = (p.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scores = q @ k.mT / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(q.shape[2], q.device), -math.inf)
        return self.out_proj((scores.softmax(-1) @ v).transpose(1, 2).flatten(2))


class MovedimContiguous(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).movedim(2, 1).contiguous()
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(-2, -1).contiguous() / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(T, q.device), -math.inf)
        out = (scores.softmax(-1) @ v).movedim(1, 2).contiguous()  # (B, T, H, D)
        return self.out_proj(out.view(B, T, E))


class ManualSoftmax(Style):
    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(triu_mask(T, q.device), -math.inf)
        exp = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
        weights = exp / exp.sum(dim=-1, keepdim=True)
        return self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, E))


class NnSoftmaxModule(Style):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__(embed_dim, num_heads)
        self.softmax = nn.Softmax(dim=-1)

    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        mask = torch.triu(torch.ones(T, T, device=q.device), diagonal=1).bool()
        weights = self.dropout(self.softmax(scores.masked_fill(mask, float("-inf"))))
        return self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, E))


class Sdpa(Style):
    """F.scaled_dot_product_attention when no weights are asked for."""

    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, E))


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


class LoopSoftmaxOnly(ViewTranspose):
    """Batched scores and weighted sum; only the masked softmax goes head by head."""

    def causal(self, query, key, value):
        B, T, E = query.shape
        q, k, v = (p.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(query, key, value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        mask = triu_mask(T, q.device)
        weights = torch.stack([scores[:, h].masked_fill(mask, -math.inf).softmax(-1)
                               for h in range(self.num_heads)], dim=1)
        return self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, E))


STYLES: dict[str, type[nn.Module]] = {
    "kit fused reference": as_student_class(FusedReference),
    "view/transpose": ViewTranspose,
    "reshape/permute": ReshapePermute,
    "einops": Einops,
    "einsum": Einsum,
    "chunk + cat": ChunkCat,
    "split + stack": SplitStack,
    "bmm": Bmm,
    "baddbmm additive mask": Baddbmm,
    "torch.where mask": Where,
    "additive -inf mask": AdditiveMask,
    "tril == 0, -1e9": TrilEqualsZero,
    "buffer mask (seed 004)": BufferMask,
    "torch.sqrt(torch.tensor(d))": TensorSqrt,
    "pre-scaled q": PrescaleQ,
    "packed qkv in forward": PackedQKV,
    "unflatten/flatten": UnflattenFlatten,
    "movedim + contiguous": MovedimContiguous,
    "manual softmax": ManualSoftmax,
    "nn.Softmax module": NnSoftmaxModule,
    "F.scaled_dot_product_attention": Sdpa,
    "loop: kit head loop": as_student_class(HeadLoopReference),
    "loop: column slices": LoopColumnSlices,
    "loop: per-head linear": LoopPerHeadLinear,
    "loop: softmax only": LoopSoftmaxOnly,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="speed checks per style")
    parser.add_argument("--device", default=None, choices=("cpu", "cuda"))
    parser.add_argument("--only", action="append", metavar="NAME", help="only this style")
    parser.add_argument("--config", metavar="B,T,E,H", help="try another graded config")
    parser.add_argument("--wall-clock", action="store_true",
                        help="time with time.perf_counter instead of the process's CPU time")
    parser.add_argument("--busy-core", action="store_true",
                        help="keep one CPU core busy with another process meanwhile")
    args = parser.parse_args()
    device = args.device or default_device()
    if args.wall_clock:
        speed_measure.CPU_CLOCK = time.perf_counter
    if args.config:
        graded = speed_config.config_for(device)
        B, T, E, H = (int(n) for n in args.config.split(","))
        key = "cuda" if device == "cuda" else "cpu"
        speed_config.CONFIGS[key] = replace(graded, B=B, T=T, E=E, H=H)
    print(speed_config.config_for(device), f"clock: {speed_measure.CPU_CLOCK.__name__}")
    print(f"{'style':<32} {'speedup over looped':>26} {'x kit fused':>18} {'points':>16}")
    started = time.perf_counter()
    with busy_core(args.busy_core):
        for name, cls in STYLES.items():
            if args.only and name not in args.only:
                continue
            # The real graded check; the SDPA style is measured with the forbidden list off.
            runs = repeated_checks({name: cls}, args.repeats, device, forbidden={})[name]
            line = f"{name:<32}"
            for column, fmt in (("speedup", "{:.1f}"), ("ref_ratio", "{:.2f}"),
                                ("fraction", "{:.2f}")):
                values = [getattr(r, column) for r in runs]
                low, mid, high = min(values), statistics.median(values), max(values)
                line += f" {fmt.format(low):>6} {fmt.format(mid):>6} {fmt.format(high):>6} "
            print(line, flush=True)
    print(f"(min, median, max over {args.repeats} checks each; {device}; "
          f"{'one core busy; ' if args.busy_core else ''}{time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
