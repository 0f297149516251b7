"""The kit's own attention modules: speed baselines and bench rows, never expected values.

Every class takes its weights from one `params` dict in the fused naming (q_proj.weight,
..., out_proj.bias), so that all of them compute the same function on the same inputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

Tensor = torch.Tensor


def _linear(params: dict, name: str, rows: slice = slice(None)) -> nn.Linear:
    weight = params[f"{name}.weight"][rows]
    bias = params.get(f"{name}.bias")
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    layer.to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias[rows])
    return layer


def _blocked(tq: int, tk: int, device: torch.device) -> Tensor:
    return torch.ones(tq, tk, dtype=torch.bool, device=device).triu(1)  # (Tq, Tk)


class LoopedReference(nn.Module):
    """One small attention per head, concatenated: the seed tutorials' starting point."""

    def __init__(self, params: dict, num_heads: int):
        super().__init__()
        head_dim = params["q_proj.weight"].shape[0] // num_heads
        self.heads = nn.ModuleList()
        for h in range(num_heads):
            rows = slice(h * head_dim, (h + 1) * head_dim)
            head = nn.ModuleDict({n: _linear(params, n, rows) for n in ("q_proj", "k_proj",
                                                                         "v_proj")})
            self.heads.append(head)
        self.out_proj = _linear(params, "out_proj")

    def forward(self, x: Tensor) -> Tensor:
        T = x.shape[1]
        blocked = _blocked(T, T, x.device)
        outs = []
        for head in self.heads:
            q, k, v = head["q_proj"](x), head["k_proj"](x), head["v_proj"](x)  # (B, T, D)
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, T, T)
            scores = scores.masked_fill(blocked, float("-inf"))
            outs.append(torch.softmax(scores, dim=-1) @ v)  # (B, T, D)
        return self.out_proj(torch.cat(outs, dim=-1))  # (B, T, E)


class FusedReference(nn.Module):
    """All heads in one batched matmul, split with view and transpose (nanoGPT style)."""

    def __init__(self, params: dict, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            _linear(params, n) for n in ("q_proj", "k_proj", "v_proj", "out_proj")
        )

    def split(self, x: Tensor) -> Tensor:
        B, T, E = x.shape
        return x.view(B, T, self.num_heads, E // self.num_heads).transpose(1, 2)  # (B, H, T, D)

    def merge(self, x: Tensor) -> Tensor:
        B, H, T, D = x.shape
        return x.transpose(1, 2).reshape(B, T, H * D)  # (B, T, E)

    def attention(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
        scores = scores.masked_fill(_blocked(q.shape[-2], k.shape[-2], q.device), float("-inf"))
        return torch.softmax(scores, dim=-1) @ v  # (B, H, T, D)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = (self.split(p(x)) for p in (self.q_proj, self.k_proj, self.v_proj))
        return self.out_proj(self.merge(self.attention(q, k, v)))  # (B, T, E)


class EinopsReference(FusedReference):
    """The same with einops.rearrange for splitting and merging."""

    def split(self, x: Tensor) -> Tensor:
        return rearrange(x, "b t (h d) -> b h t d", h=self.num_heads)

    def merge(self, x: Tensor) -> Tensor:
        return rearrange(x, "b h t d -> b t (h d)")


class EinsumReference(FusedReference):
    """Scores and the weighted sum written as einsum."""

    def attention(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(_blocked(q.shape[-2], k.shape[-2], q.device), float("-inf"))
        return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(scores, dim=-1), v)


class SdpaReference(FusedReference):
    """`F.scaled_dot_product_attention`, the fused kernel PyTorch ships."""

    def attention(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class HeadLoopReference(FusedReference):
    """Fused projections, then attention one head at a time: the loop in disguise that the
    speed check must reject (`mha-kit bench --reliability`)."""

    def attention(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        heads = [FusedReference.attention(self, q[:, h], k[:, h], v[:, h])
                 for h in range(q.shape[1])]
        return torch.stack(heads, dim=1)  # (B, H, T, D)


class TorchMHA(nn.Module):
    """`nn.MultiheadAttention` itself, causal, without returning weights."""

    def __init__(self, params: dict, num_heads: int):
        super().__init__()
        from ...oracle import torch_mha

        self.mha = torch_mha(params, params["q_proj.weight"].shape[0], num_heads)

    def forward(self, x: Tensor) -> Tensor:
        blocked = _blocked(x.shape[1], x.shape[1], x.device)
        return self.mha(x, x, x, attn_mask=blocked, need_weights=False)[0]


BENCH_ROWS: dict[str, type[nn.Module]] = {
    "looped": LoopedReference,
    "fused (view/transpose)": FusedReference,
    "einops": EinopsReference,
    "einsum": EinsumReference,
    "F.scaled_dot_product_attention": SdpaReference,
    "nn.MultiheadAttention": TorchMHA,
}


def as_student_class(kit_cls: type[FusedReference]) -> type[nn.Module]:
    """A fused-naming kit module shaped like a student's `MultiHeadAttention` (constructor
    (embed_dim, num_heads), causal self-attention only), to run the real speed check on it."""

    class MultiHeadAttention(kit_cls):
        def __init__(self, embed_dim: int, num_heads: int):
            blank = {}  # the grader loads the real weights by name afterwards
            for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
                blank[f"{name}.weight"] = torch.zeros(embed_dim, embed_dim)
                blank[f"{name}.bias"] = torch.zeros(embed_dim)
            super().__init__(blank, num_heads)

        def forward(self, query: Tensor, *, attn_mask: None = None, is_causal: bool = True,
                    need_weights: bool = False) -> tuple[Tensor, None]:
            assert attn_mask is None and is_causal and not need_weights, "causal self-attention"
            return super().forward(query), None

    return MultiHeadAttention
