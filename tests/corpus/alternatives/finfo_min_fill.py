"""Correct, with the habits a GPU tolerates and a meta tensor does not: the mask is applied only
`if mask.any()` (data-dependent control flow), blocked scores get `torch.finfo(dtype).min`
instead of -inf, the scale is a 0-dim float32 tensor and the causal mask is built with
`device=query.device`. The device check runs on meta tensors, which have no data: it must not
count `.any()` against a submission, nor a 0-dim CPU scalar, which a GPU accepts.
"""

import torch
import torch.nn.functional as F
from torch import nn


def split_heads(x, num_heads):
    b, t, e = x.shape
    return x.view(b, t, num_heads, e // num_heads).transpose(1, 2)


def scaled_scores(q, k):
    scale = 1 / torch.sqrt(torch.tensor(q.shape[-1]))  # 0-dim, on the CPU: fine on a GPU
    return q @ k.transpose(-2, -1) * scale


def causal_mask(seq_len, device=None):
    rows = torch.arange(seq_len, device=device)
    return rows[None, :] > rows[:, None]


def attend(scores, v, mask=None):
    if mask is not None and mask.any():  # nothing to fill when no key is blocked
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1)
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
        scores = scaled_scores(self.q_proj(query), self.k_proj(key))
        return attend(scores, self.v_proj(value), attn_mask)


def _blocked(attn_mask, is_causal, tokens, device):
    if not is_causal:
        return attn_mask
    future = causal_mask(tokens, device=device)
    return future if attn_mask is None else attn_mask | future


class LoopedMultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("num_heads must divide embed_dim")
        self.heads = nn.ModuleList(
            [AttentionHead(embed_dim, embed_dim // num_heads, kdim=kdim, vdim=vdim, bias=bias)
             for _ in range(num_heads)])
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = key if value is None else value
        mask = _blocked(attn_mask, is_causal, query.shape[1], query.device)
        outs = [head(query, key, value, mask) for head in self.heads]
        out = self.out_proj(torch.cat([o for o, _ in outs], dim=-1))
        return out, torch.stack([w for _, w in outs], dim=1) if need_weights else None


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("num_heads must divide embed_dim")
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
        scores = scaled_scores(q, k)
        mask = _blocked(attn_mask, is_causal, query.shape[1], query.device)
        if mask is not None and mask.any():
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        weights = self.dropout(scores.softmax(dim=-1))
        out = self.out_proj(merge_heads(weights @ v))
        return out, weights if need_weights else None
