"""A complete, correct submission in plain .py form: the base that the corpus mutates.

Written in a different style from the solution notebook (reshape/permute, matmul), so that
the grader is shown a second correct way. tests/corpus/mutants.py derives each buggy
submission from it by one labelled text edit.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


def split_heads(x, num_heads):
    b, t, e = x.shape
    return x.reshape(b, t, num_heads, e // num_heads).permute(0, 2, 1, 3)


def scaled_scores(q, k):
    return torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])


def causal_mask(seq_len, device=None):
    return torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device), diagonal=1)


def attend(scores, v, mask=None):
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


def merge_heads(x):
    b, h, t, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, t, h * d)


def output_projection(x, weight, bias=None):
    out = torch.matmul(x, weight.t())
    if bias is not None:
        out = out + bias
    return out


class AttentionHead(nn.Module):
    def __init__(self, embed_dim, head_dim, *, kdim=None, vdim=None, bias=True):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, head_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, head_dim, bias=bias)

    def forward(self, query, key, value, attn_mask=None):
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        return attend(scaled_scores(q, k), v, attn_mask)


def _combined_mask(attn_mask, is_causal, tq, device):
    if not is_causal:
        return attn_mask
    causal = causal_mask(tq, device=device)
    return causal if attn_mask is None else attn_mask | causal


class LoopedMultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        head_dim = embed_dim // num_heads
        self.heads = nn.ModuleList(
            AttentionHead(embed_dim, head_dim, kdim=kdim, vdim=vdim, bias=bias)
            for _ in range(num_heads)
        )
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = key if value is None else value
        mask = _combined_mask(attn_mask, is_causal, query.shape[1], query.device)
        outs, weights = zip(*(head(query, key, value, mask) for head in self.heads))
        out = self.out_proj(torch.cat(outs, dim=-1))
        return out, torch.stack(weights, dim=1) if need_weights else None


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
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = key if value is None else value
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        mask = _combined_mask(attn_mask, is_causal, query.shape[1], query.device)
        scores = scaled_scores(q, k)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = self.dropout(F.softmax(scores, dim=-1))
        out = self.out_proj(merge_heads(torch.matmul(weights, v)))
        return out, weights if need_weights else None
