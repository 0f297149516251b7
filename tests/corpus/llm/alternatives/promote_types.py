"""The reference answers, with GroupedQueryAttention.forward choosing its scores' dtype with
`torch.promote_types` (a dtype lookup, no tensor work: issue 42, the decoding speed check
refused it)."""

import math

import torch
from torch import nn


def apply_rope(x, positions, base=10000.0):
    """Rotate feature pairs (i, i + D/2) of x (..., T, D) by positions * base^(-2i/D)."""
    D = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, D, 2, device=x.device, dtype=torch.float64) / D)  # (D/2,)
    angles = positions.to(torch.float64)[:, None] * inv_freq  # (T, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (T, D/2)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]  # (..., T, D/2)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., T, D)


def repeat_kv(x, n_rep):
    """(B, Hkv, T, D) -> (B, Hkv * n_rep, T, D): each key/value head n_rep times in a row."""
    return x.repeat_interleave(n_rep, dim=1)  # (B, Hkv*n_rep, T, D)


class KVCache:
    """The keys and values seen so far, (B, Hkv, L, D) each."""

    def __init__(self):
        self.k = None
        self.v = None

    def update(self, k, v):
        """Append k, v (B, Hkv, t, D); return every key and value so far, (B, Hkv, L + t, D)."""
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)  # (B, Hkv, L+t, D)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)  # (B, Hkv, L+t, D)
        return self.k, self.v

    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with num_kv_heads key/value heads shared by groups of query heads."""

    def __init__(self, embed_dim, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        if embed_dim % num_heads or num_heads % num_kv_heads:
            raise ValueError("num_heads must divide embed_dim, num_kv_heads num_heads")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.rope_base = rope_base
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, E = x.shape
        start = 0 if cache is None else len(cache)
        H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = self.k_proj(x).view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)
        v = self.v_proj(x).view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)
        if self.rope_base is not None:
            positions = torch.arange(start, start + T, device=x.device)  # (T,)
            q = apply_rope(q, positions, self.rope_base)  # (B, H, T, D)
            k = apply_rope(k, positions, self.rope_base)  # (B, Hkv, T, D)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, L, D)
        n_rep = self.num_heads // self.num_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, L, D)
        L = k.shape[2]
        # the scores in the wider of the two dtypes, as mixed-precision code writes it
        dtype = torch.promote_types(q.dtype, k.dtype)
        scores = q.to(dtype) @ k.to(dtype).transpose(-2, -1) / math.sqrt(self.head_dim)
        query_pos = torch.arange(start, start + T, device=x.device)[:, None]  # (T, 1)
        blocked = torch.arange(L, device=x.device)[None, :] > query_pos  # (T, L)
        weights = scores.masked_fill(blocked, float("-inf")).softmax(dim=-1)  # (B, H, T, L)
        out = (weights @ v).transpose(1, 2).reshape(B, T, E)  # (B, T, E)
        return self.out_proj(out)  # (B, T, E)


def sliding_window_mask(T, window):
    """(T, T) bool, True where query i may attend key j: i - window < j <= i."""
    i = torch.arange(T)[:, None]  # (T, 1)
    j = torch.arange(T)[None, :]  # (1, T)
    return (j <= i) & (j > i - window)  # (T, T)


def flash_attention(q, k, v, *, is_causal=False, block_size=64):
    """softmax(q k^T / sqrt(D)) v over key blocks with an online softmax; (out, logsumexp).

    q (B, H, Tq, D), k and v (B, H, Tk, D); causal aligns the last query with the last key.
    """
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    scale = 1 / math.sqrt(D)
    row_max = q.new_full((B, H, Tq, 1), float("-inf"))  # (B, H, Tq, 1)
    row_sum = q.new_zeros((B, H, Tq, 1))  # (B, H, Tq, 1)
    acc = q.new_zeros((B, H, Tq, D))  # (B, H, Tq, D)
    query_pos = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)  # (Tq, 1)
    for start in range(0, Tk, block_size):
        end = start + block_size
        kb, vb = k[:, :, start:end], v[:, :, start:end]  # (B, H, b, D)
        scores = q @ kb.transpose(-2, -1) * scale  # (B, H, Tq, b)
        if is_causal:
            key_pos = torch.arange(start, start + kb.shape[2], device=q.device)[None, :]  # (1, b)
            scores = scores.masked_fill(key_pos > query_pos, float("-inf"))  # (B, H, Tq, b)
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))  # (B, H, Tq, 1)
        safe_max = new_max.masked_fill(new_max == float("-inf"), 0.0)  # rows with no key yet
        p = torch.exp(scores - safe_max)  # (B, H, Tq, b)
        correction = torch.exp(row_max - safe_max)  # (B, H, Tq, 1)
        row_sum = row_sum * correction + p.sum(dim=-1, keepdim=True)  # (B, H, Tq, 1)
        acc = acc * correction + p @ vb  # (B, H, Tq, D)
        row_max = new_max
    out = acc / row_sum  # (B, H, Tq, D)
    logsumexp = (row_max + torch.log(row_sum)).squeeze(-1)  # (B, H, Tq)
    return out, logsumexp


class FlashAttentionFunction(torch.autograd.Function):
    """flash_attention's forward; a backward that recomputes the scores block by block."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal, block_size):
        out, logsumexp = flash_attention(q, k, v, is_causal=is_causal, block_size=block_size)
        ctx.save_for_backward(q, k, v, out, logsumexp)
        ctx.is_causal, ctx.block_size = is_causal, block_size
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, logsumexp = ctx.saved_tensors
        Tq, D, Tk = q.shape[2], q.shape[3], k.shape[2]
        scale = 1 / math.sqrt(D)
        delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (B, H, Tq, 1)
        query_pos = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)  # (Tq, 1)
        grad_q = torch.zeros_like(q)  # (B, H, Tq, D)
        grad_k, grad_v = [], []
        for start in range(0, Tk, ctx.block_size):
            kb, vb = k[:, :, start:start + ctx.block_size], v[:, :, start:start + ctx.block_size]
            scores = q @ kb.transpose(-2, -1) * scale  # (B, H, Tq, b)
            if ctx.is_causal:
                key_pos = torch.arange(start, start + kb.shape[2], device=q.device)[None, :]
                scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
            p = torch.exp(scores - logsumexp[..., None])  # (B, H, Tq, b)
            grad_v.append(p.transpose(-2, -1) @ grad_out)  # (B, H, b, D)
            grad_p = grad_out @ vb.transpose(-2, -1)  # (B, H, Tq, b)
            grad_s = p * (grad_p - delta) * scale  # (B, H, Tq, b)
            grad_q = grad_q + grad_s @ kb  # (B, H, Tq, D)
            grad_k.append(grad_s.transpose(-2, -1) @ q)  # (B, H, b, D)
        return grad_q, torch.cat(grad_k, dim=2), torch.cat(grad_v, dim=2), None, None


def flash_attention_autograd(q, k, v, is_causal=False, block_size=64):
    """flash_attention's output, differentiated by FlashAttentionFunction.backward."""
    return FlashAttentionFunction.apply(q, k, v, is_causal, block_size)
