"""Correct, einops style: heads are split and merged by `rearrange` patterns."""

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


def split_heads(x, num_heads):
    return rearrange(x, "b t (h d) -> b h t d", h=num_heads)


def scaled_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def causal_mask(seq_len, device=None):
    future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)
    return future.triu_(diagonal=1)  # in place on a tensor made here, not on an input


def attend(scores, v, mask=None):
    if mask is not None:
        scores = scores.masked_fill(mask, -math.inf)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def merge_heads(x):
    return rearrange(x, "b h t d -> b t (h d)")


def output_projection(x, weight, bias=None):
    return F.linear(x, weight, bias)


class AttentionHead(nn.Module):
    def __init__(self, embed_dim, head_dim, *, kdim=None, vdim=None, bias=True):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, head_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, head_dim, bias=bias)

    def forward(self, query, key, value, attn_mask=None):
        scores = scaled_scores(self.q_proj(query), self.k_proj(key))  # (B, Tq, Tk)
        return attend(scores, self.v_proj(value), attn_mask)


def _blocked(attn_mask, is_causal, tq, device):
    if is_causal:
        causal = causal_mask(tq, device)
        return causal if attn_mask is None else causal | attn_mask
    return attn_mask


class LoopedMultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"{num_heads} heads do not divide embed_dim={embed_dim}")
        self.heads = nn.ModuleList([
            AttentionHead(embed_dim, embed_dim // num_heads, kdim=kdim, vdim=vdim, bias=bias)
            for _ in range(num_heads)
        ])
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = query if value is None else value
        mask = _blocked(attn_mask, is_causal, query.size(1), query.device)
        results = [head(query, key, value, mask) for head in self.heads]
        out = self.out_proj(torch.cat([o for o, _ in results], dim=-1))
        weights = rearrange([w for _, w in results], "h b q k -> b h q k")
        return out, (weights if need_weights else None)


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"{num_heads} heads do not divide embed_dim={embed_dim}")
        self.h = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = query if value is None else value
        q = split_heads(self.q_proj(query), self.h)  # (B, H, Tq, D)
        k = split_heads(self.k_proj(key), self.h)  # (B, H, Tk, D)
        v = split_heads(self.v_proj(value), self.h)  # (B, H, Tk, D)
        scores = scaled_scores(q, k)  # (B, H, Tq, Tk)
        mask = _blocked(attn_mask, is_causal, query.size(1), query.device)
        if mask is not None:
            scores = scores.masked_fill(mask, -math.inf)
        weights = self.drop(scores.softmax(dim=-1))
        out = self.out_proj(merge_heads(weights @ v))  # (B, Tq, E)
        return out, (weights if need_weights else None)
