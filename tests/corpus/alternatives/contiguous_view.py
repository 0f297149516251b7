"""Correct, in the style of seed tutorial 001: permute, then .contiguous().view(...).

The heads are folded into the batch as (B*H, T, D) and the scale is head_dim ** 0.5.
"""

import torch
import torch.nn.functional as F
from torch import nn


def split_heads(x, num_heads):
    batch, seq_len, embed = x.shape
    head_dim = embed // num_heads
    return x.contiguous().view(batch, seq_len, num_heads, head_dim).permute(0, 2, 1, 3)


def scaled_scores(q, k):
    return torch.matmul(q, k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)


def causal_mask(seq_len, device=None):
    return ~torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def attend(scores, v, mask=None):
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    attention_weights = F.softmax(scores, dim=-1)
    return torch.matmul(attention_weights, v), attention_weights


def merge_heads(x):
    batch, num_heads, seq_len, head_dim = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(batch, seq_len, num_heads * head_dim)


def output_projection(x, weight, bias=None):
    out = torch.matmul(x, weight.T)
    return out + bias if bias is not None else out


class AttentionHead(nn.Module):
    def __init__(self, embed_dim, head_dim, *, kdim=None, vdim=None, bias=True):
        super().__init__()
        self.head_dim = head_dim
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, head_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, head_dim, bias=bias)

    def forward(self, query, key, value, attn_mask=None):
        Q, K, V = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / (self.head_dim ** 0.5)
        return attend(scores, V, attn_mask)


def _with_causal(attn_mask, is_causal, seq_len, device):
    if not is_causal:
        return attn_mask
    causal = causal_mask(seq_len, device)
    return causal if attn_mask is None else causal | attn_mask


class LoopedMultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        head_dim = embed_dim // num_heads
        if head_dim * num_heads != embed_dim:
            raise ValueError("Embedding size must be divisible by number of heads")
        self.heads = nn.ModuleList(
            [AttentionHead(embed_dim, head_dim, kdim=kdim, vdim=vdim, bias=bias)
             for _ in range(num_heads)]
        )
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = query if value is None else value
        mask = _with_causal(attn_mask, is_causal, query.shape[1], query.device)
        outputs = [head(query, key, value, mask) for head in self.heads]
        output = self.out_proj(torch.cat([o for o, _ in outputs], dim=-1))
        attention_weights = torch.stack([w for _, w in outputs], dim=1)
        return output, attention_weights if need_weights else None


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError("Embedding size must be divisible by number of heads")
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(kdim or embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(vdim or embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key=None, value=None, *, attn_mask=None, is_causal=False,
                need_weights=True):
        key = query if key is None else key
        value = query if value is None else value
        batch_size, q_len, k_len = query.shape[0], query.shape[1], key.shape[1]
        H, D = self.num_heads, self.head_dim
        Q = self.q_proj(query).reshape(batch_size, q_len, H, D)  # (B, Tq, H, D)
        K = self.k_proj(key).reshape(batch_size, k_len, H, D)  # (B, Tk, H, D)
        V = self.v_proj(value).reshape(batch_size, k_len, H, D)  # (B, Tk, H, D)
        Q = Q.permute(0, 2, 1, 3).contiguous().view(batch_size * H, q_len, D)
        K = K.permute(0, 2, 1, 3).contiguous().view(batch_size * H, k_len, D)
        V = V.permute(0, 2, 1, 3).contiguous().view(batch_size * H, k_len, D)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / (D ** 0.5)  # (B*H, Tq, Tk)
        mask = _with_causal(attn_mask, is_causal, q_len, query.device)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        attention_weights = self.dropout(F.softmax(scores, dim=-1))
        output = torch.matmul(attention_weights, V)  # (B*H, Tq, D)
        output = output.view(batch_size, H, q_len, D)
        output = output.permute(0, 2, 1, 3).contiguous().view(batch_size, q_len, H * D)
        weights = attention_weights.view(batch_size, H, q_len, k_len)
        return self.out_proj(output), weights if need_weights else None
