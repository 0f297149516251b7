"""Correct, einsum style: q is scaled before the product, and the mask goes in by torch.where."""

import torch
from torch import nn


def split_heads(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)  # (B, H, T, D)


def scaled_scores(q, k):
    q = q * q.shape[-1] ** -0.5  # scale first: the same product, smaller numbers
    return torch.einsum("...id,...jd->...ij", q, k)


def causal_mask(seq_len, device=None):
    pos = torch.arange(seq_len, device=device)
    return pos[None, :] > pos[:, None]  # key j after query i


def attend(scores, v, mask=None):
    if mask is not None:
        scores = torch.where(mask, scores.new_tensor(float("-inf")), scores)
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("...ij,...jd->...id", weights, v), weights


def merge_heads(x):
    return x.transpose(1, 2).flatten(2)  # (B, T, H*D)


def output_projection(x, weight, bias=None):
    out = torch.einsum("...i,oi->...o", x, weight)
    return out if bias is None else out + bias


def _linear(layer, x):
    return output_projection(x, layer.weight, layer.bias)


class AttentionHead(nn.Module):
    def __init__(self, embed_dim, head_dim, *, kdim=None, vdim=None, bias=True):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(kdim if kdim else embed_dim, head_dim, bias=bias)
        self.v_proj = nn.Linear(vdim if vdim else embed_dim, head_dim, bias=bias)

    def forward(self, query, key, value, attn_mask=None):
        q, k = _linear(self.q_proj, query), _linear(self.k_proj, key)
        v = _linear(self.v_proj, value)
        return attend(scaled_scores(q, k), v, attn_mask)


def _mask_for(attn_mask, is_causal, query):
    if not is_causal:
        return attn_mask
    causal = causal_mask(query.shape[1], query.device)
    return causal if attn_mask is None else torch.logical_or(attn_mask, causal)


class LoopedMultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("num_heads must divide embed_dim")
        d = embed_dim // num_heads
        self.heads = nn.ModuleList(
            [AttentionHead(embed_dim, d, kdim=kdim, vdim=vdim, bias=bias) for _ in range(num_heads)]
        )
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = query if value is None else value
        mask = _mask_for(attn_mask, is_causal, query)
        outs, weights = [], []
        for head in self.heads:
            o, w = head(query, key, value, mask)
            outs.append(o)
            weights.append(w)
        out = _linear(self.out_proj, torch.cat(outs, dim=-1))
        return out, torch.stack(weights, dim=1) if need_weights else None


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("num_heads must divide embed_dim")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim if kdim else embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim if vdim else embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = query if value is None else value
        q = split_heads(_linear(self.q_proj, query), self.num_heads)
        k = split_heads(_linear(self.k_proj, key), self.num_heads)
        v = split_heads(_linear(self.v_proj, value), self.num_heads)
        mask = _mask_for(attn_mask, is_causal, query)
        scores = scaled_scores(q, k)
        if mask is not None:
            scores = torch.where(mask, scores.new_tensor(float("-inf")), scores)
        weights = self.attn_dropout(torch.softmax(scores, dim=-1))
        mixed = torch.einsum("bhij,bhjd->bhid", weights, v)
        return _linear(self.out_proj, merge_heads(mixed)), weights if need_weights else None
