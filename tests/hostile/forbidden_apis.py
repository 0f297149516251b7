"""Hostile: correct step functions, but modules built on the APIs the exercise forbids."""

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.functional import scaled_dot_product_attention as sdpa  # an alias is still seen


def split_heads(x, num_heads):
    b, t, e = x.shape
    return x.reshape(b, t, num_heads, e // num_heads).transpose(1, 2)


def scaled_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def causal_mask(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)


def attend(scores, v, mask=None):
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def output_projection(x, weight, bias=None):
    return F.linear(x, weight, bias)


class AttentionHead(nn.Module):
    def __init__(self, embed_dim, head_dim, *, kdim=None, vdim=None, bias=True):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, head_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, head_dim, bias=bias)

    def forward(self, query, key, value, attn_mask=None):
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        allowed = None if attn_mask is None else ~attn_mask
        out = sdpa(q, k, v, attn_mask=allowed)
        return out, attend(scaled_scores(q, k), v, attn_mask)[1]


class LoopedMultiHeadAttention(nn.Module):
    """Per-head weights as asked, but the work done by nn.MultiheadAttention."""

    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        self.heads = nn.ModuleList(
            AttentionHead(embed_dim, embed_dim // num_heads, kdim=kdim, vdim=vdim, bias=bias)
            for _ in range(num_heads))
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.inner = nn.MultiheadAttention(embed_dim, num_heads, bias=bias, kdim=kdim,
                                           vdim=vdim, batch_first=True)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = key if value is None else value
        inner = self.inner
        with torch.no_grad():
            q_w, k_w, v_w = (torch.cat([getattr(h, f"{n}_proj").weight for h in self.heads])
                             for n in "qkv")
            if inner._qkv_same_embed_dim:
                inner.in_proj_weight.copy_(torch.cat([q_w, k_w, v_w]))
            else:
                inner.q_proj_weight.copy_(q_w)
                inner.k_proj_weight.copy_(k_w)
                inner.v_proj_weight.copy_(v_w)
            if inner.in_proj_bias is not None:
                inner.in_proj_bias.copy_(torch.cat(
                    [getattr(h, f"{n}_proj").bias for n in "qkv" for h in self.heads]))
            inner.out_proj.load_state_dict(self.out_proj.state_dict())
        return self.inner(query, key, value, attn_mask=attn_mask, need_weights=need_weights,
                          average_attn_weights=False)


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = key if value is None else value
        q, k, v = (split_heads(p(x), self.num_heads) for p, x in
                   ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        if is_causal:
            causal = causal_mask(q.shape[-2], device=q.device)
            attn_mask = causal if attn_mask is None else attn_mask | causal
        allowed = None if attn_mask is None else ~attn_mask
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        weights = attend(scaled_scores(q, k), v, attn_mask)[1] if need_weights else None
        return self.out_proj(merge_heads(out)), weights
