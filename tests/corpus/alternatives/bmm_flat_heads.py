"""Correct, in the bmm style of seed tutorial 000: heads folded into the batch, (B*H, T, D).

Keys are permuted straight to (B*H, D, Tk), so torch.bmm needs no transpose, and the softmax
is an nn.Softmax over dim 2 of the 3-d scores.
"""

import math

import torch
from torch import nn


def split_heads(x, num_heads):
    batch, tokens, _ = x.shape
    return x.reshape(batch, tokens, num_heads, -1).permute(0, 2, 1, 3)


def scaled_scores(q, k):
    *lead, tq, d = q.shape
    q3 = q.reshape(-1, tq, d)  # (N, Tq, D)
    k3 = k.reshape(-1, k.shape[-2], d).permute(0, 2, 1)  # (N, D, Tk)
    return torch.bmm(q3, k3).reshape(*lead, tq, k.shape[-2]) / math.sqrt(d)


def causal_mask(seq_len, device=None):
    rows = torch.arange(seq_len, device=device).unsqueeze(1)
    cols = torch.arange(seq_len, device=device).unsqueeze(0)
    return cols - rows >= 1


_softmax_keys = nn.Softmax(dim=2)  # over the keys of (N, Tq, Tk)


def attend(scores, v, mask=None):
    *lead, tq, tk = scores.shape
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = _softmax_keys(scores.reshape(-1, tq, tk))  # (N, Tq, Tk)
    out = torch.bmm(weights, v.reshape(-1, tk, v.shape[-1]))  # (N, Tq, D)
    return out.reshape(*lead, tq, v.shape[-1]), weights.reshape(*lead, tq, tk)


def merge_heads(x):
    batch, heads, tokens, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(batch, tokens, heads * d)


def output_projection(x, weight, bias=None):
    flat = x.reshape(-1, x.shape[-1])  # (B*T, d_in)
    out = flat.mm(weight.t()) if bias is None else torch.addmm(bias, flat, weight.t())
    return out.reshape(*x.shape[:-1], weight.shape[0])


class AttentionHead(nn.Module):
    def __init__(self, embed_dim, head_dim, *, kdim=None, vdim=None, bias=True):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, head_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, head_dim, bias=bias)
        self.softmax = nn.Softmax(dim=2)

    def forward(self, query, key, value, attn_mask=None):
        q = self.q_proj(query)  # (B, Tq, D)
        k = self.k_proj(key).permute(0, 2, 1)  # (B, D, Tk)
        score = torch.bmm(q, k) / math.sqrt(q.shape[-1])  # (B, Tq, Tk)
        if attn_mask is not None:
            score = score.masked_fill(attn_mask, float("-inf"))
        weight = self.softmax(score)
        return torch.bmm(weight, self.v_proj(value)), weight


def _full_mask(attn_mask, is_causal, tq, device):
    if is_causal:
        causal = causal_mask(tq, device)
        attn_mask = causal if attn_mask is None else attn_mask | causal
    return attn_mask


class LoopedMultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim is not divisible by num_heads")
        self.heads = nn.ModuleList(
            AttentionHead(embed_dim, embed_dim // num_heads, kdim=kdim, vdim=vdim, bias=bias)
            for _ in range(num_heads)
        )
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = query if value is None else value
        mask = _full_mask(attn_mask, is_causal, query.shape[1], query.device)
        pairs = [head(query, key, value, mask) for head in self.heads]
        output = self.out_proj(torch.cat([p[0] for p in pairs], dim=2))
        return output, torch.stack([p[1] for p in pairs], dim=1) if need_weights else None


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim is not divisible by num_heads")
        self.num_heads = num_heads
        self.hidden_size = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.softmax = nn.Softmax(dim=2)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = query if value is None else value
        batch, n_q, n_k, h = query.shape[0], query.shape[1], key.shape[1], self.num_heads
        q = self.q_proj(query).reshape(batch, n_q, h, -1)  # (B, Tq, H, D)
        k = self.k_proj(key).reshape(batch, n_k, h, -1)  # (B, Tk, H, D)
        v = self.v_proj(value).reshape(batch, n_k, h, -1)  # (B, Tk, H, D)
        q = q.permute(0, 2, 1, 3).reshape(batch * h, n_q, -1)  # (B*H, Tq, D)
        k = k.permute(0, 2, 3, 1).reshape(batch * h, self.hidden_size, n_k)  # (B*H, D, Tk)
        v = v.permute(0, 2, 1, 3).reshape(batch * h, n_k, -1)  # (B*H, Tk, D)
        score = torch.bmm(q, k) / math.sqrt(self.hidden_size)  # (B*H, Tq, Tk)
        mask = _full_mask(attn_mask, is_causal, n_q, query.device)
        if mask is not None:
            score = score.masked_fill(mask, float("-inf"))
        weight = self.dropout(self.softmax(score))  # (B*H, Tq, Tk)
        output = torch.bmm(weight, v).reshape(batch, h, n_q, -1)  # (B, H, Tq, D)
        output = output.permute(0, 2, 1, 3).reshape(batch, n_q, -1)  # (B, Tq, H*D)
        weights = weight.reshape(batch, h, n_q, n_k) if need_weights else None
        return self.out_proj(output), weights
