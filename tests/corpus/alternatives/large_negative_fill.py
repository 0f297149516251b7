"""Correct, in the style of many tutorials: blocked scores are filled with -1e9, the scale is a
Python float from `.size(-1)`, the causal mask is `torch.tril` of ones made on the inputs'
device, the output projection adds a bias of zeros made with `device=x.device`, and the fused
module caches its head size as a Python int.
"""

import math

import torch
from torch import nn


def split_heads(x, num_heads):
    b, t, e = x.size()
    return x.view(b, t, num_heads, e // num_heads).permute(0, 2, 1, 3)


def scaled_scores(q, k):
    return torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(k.size(-1)))


def causal_mask(seq_len, device=None):
    return torch.tril(torch.ones(seq_len, seq_len, device=device)) == 0


def attend(scores, v, mask=None):
    if mask is not None:
        scores = scores.masked_fill(mask, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights


def merge_heads(x):
    b, h, t, d = x.size()
    return x.permute(0, 2, 1, 3).contiguous().view(b, t, h * d)


def output_projection(x, weight, bias=None):
    if bias is None:
        bias = torch.zeros(weight.shape[0], dtype=x.dtype, device=x.device)
    return x @ weight.T + bias


class AttentionHead(nn.Module):
    def __init__(self, embed_dim, head_dim, *, kdim=None, vdim=None, bias=True):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, head_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, head_dim, bias=bias)

    def forward(self, query, key, value, attn_mask=None):
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        return attend(scaled_scores(q, k), v, attn_mask)


def _mask(attn_mask, is_causal, tokens, device):
    if is_causal:
        causal = causal_mask(tokens, device=device)
        attn_mask = causal if attn_mask is None else attn_mask | causal
    return attn_mask


class LoopedMultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be a multiple of num_heads")
        self.heads = nn.ModuleList(
            AttentionHead(embed_dim, embed_dim // num_heads, kdim=kdim, vdim=vdim, bias=bias)
            for _ in range(num_heads))
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = key if value is None else value
        mask = _mask(attn_mask, is_causal, query.size(1), query.device)
        results = [head(query, key, value, mask) for head in self.heads]
        out = self.out_proj(torch.cat([r[0] for r in results], dim=-1))
        return out, torch.stack([r[1] for r in results], dim=1) if need_weights else None


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be a multiple of num_heads")
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
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
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        mask = _mask(attn_mask, is_causal, query.size(1), query.device)
        if mask is not None:
            scores = scores.masked_fill(mask, -1e9)
        weights = self.dropout(torch.softmax(scores, dim=-1))
        return self.out_proj(merge_heads(torch.matmul(weights, v))), (
            weights if need_weights else None)
