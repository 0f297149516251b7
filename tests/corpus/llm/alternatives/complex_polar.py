"""Correct, complex-number style: RoPE as z * e^(i m theta) by torch.polar, rotate-half pairs."""

# Also: Hugging Face's expand/reshape repeat_kv, a cache of chunks joined by torch.cat, the
# window as tril & triu, a flash loop with torch.where masks.

import torch
import torch.nn.functional as F
from torch import nn


def apply_rope(x, positions, base=10000.0):
    D = x.shape[-1]
    half = D // 2
    real_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    freqs = 1.0 / base ** (torch.arange(half, device=x.device, dtype=real_dtype) * 2 / D)
    angles = torch.outer(positions.to(real_dtype), freqs)  # (T, D/2)
    rotations = torch.polar(torch.ones_like(angles), angles)  # (T, D/2) complex, |e^{ia}| = 1
    # pair feature i with feature i + D/2: x_i is the real part, x_{i+D/2} the imaginary part
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1).to(real_dtype)  # (..., T, D/2, 2)
    z = torch.view_as_complex(pairs.contiguous())  # (..., T, D/2)
    turned = torch.view_as_real(z * rotations)  # (..., T, D/2, 2)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).to(x.dtype)  # (..., T, D)


def repeat_kv(x, n_rep):
    # Hugging Face's Llama: a broadcast view, then one copy
    B, Hkv, T, D = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(B, Hkv, n_rep, T, D).reshape(B, Hkv * n_rep, T, D)


class KVCache:
    def __init__(self):
        self.keys = []
        self.values = []
        self.length = 0

    def update(self, k, v):
        self.keys.append(k)
        self.values.append(v)
        self.length += k.shape[-2]
        return torch.cat(self.keys, dim=-2), torch.cat(self.values, dim=-2)

    def __len__(self):
        return self.length


class GroupedQueryAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        assert embed_dim % num_heads == 0 and num_heads % num_kv_heads == 0
        self.h, self.hkv = num_heads, num_kv_heads
        self.d = embed_dim // num_heads
        self.rope_base = rope_base
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * self.d, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * self.d, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        past = len(cache) if cache is not None else 0
        q = self.q_proj(x).unflatten(-1, (self.h, self.d)).transpose(1, 2)
        k = self.k_proj(x).unflatten(-1, (self.hkv, self.d)).transpose(1, 2)
        v = self.v_proj(x).unflatten(-1, (self.hkv, self.d)).transpose(1, 2)
        if self.rope_base is not None:
            pos = torch.arange(past, past + T, device=x.device)
            q = apply_rope(q, pos, self.rope_base)
            k = apply_rope(k, pos, self.rope_base)
        if cache is not None:
            k, v = cache.update(k, v)
        k = repeat_kv(k, self.h // self.hkv)
        v = repeat_kv(v, self.h // self.hkv)
        L = k.shape[-2]
        # bottom-right causal: the new tokens are the last T of L
        mask = torch.ones(T, L, dtype=torch.bool, device=x.device).tril(diagonal=L - T)
        att = (q @ k.transpose(-2, -1)) / self.d ** 0.5
        att = att.masked_fill(~mask, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.out_proj(y.transpose(1, 2).flatten(-2))


def sliding_window_mask(T, window):
    ones = torch.ones(T, T, dtype=torch.bool)
    return torch.tril(ones) & torch.triu(ones, diagonal=1 - window)


def flash_attention(q, k, v, *, is_causal=False, block_size=64):
    Tq, D = q.shape[-2], q.shape[-1]
    Tk = k.shape[-2]
    scale = D ** -0.5
    m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)  # (B, H, Tq)
    l = torch.zeros(q.shape[:-1], dtype=q.dtype, device=q.device)  # noqa: E741
    o = torch.zeros_like(q)
    rows = torch.arange(Tq, device=q.device).unsqueeze(1) + (Tk - Tq)
    for j in range(0, Tk, block_size):
        kj, vj = k[..., j:j + block_size, :], v[..., j:j + block_size, :]
        s = torch.matmul(q, kj.transpose(-1, -2)) * scale
        if is_causal:
            cols = torch.arange(j, j + kj.shape[-2], device=q.device).unsqueeze(0)
            s = torch.where(cols <= rows, s, float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe.unsqueeze(-1))
        alpha = torch.exp(m - m_safe)
        l = alpha * l + p.sum(-1)  # noqa: E741
        o = alpha.unsqueeze(-1) * o + torch.matmul(p, vj)
        m = m_new
    return o / l.unsqueeze(-1), m + torch.log(l)


class _Flash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal, block_size):
        o, lse = flash_attention(q, k, v, is_causal=is_causal, block_size=block_size)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        ctx.block_size = block_size
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        Tq, D = q.shape[-2], q.shape[-1]
        Tk = k.shape[-2]
        scale = D ** -0.5
        delta = (do * o).sum(-1, keepdim=True)
        rows = torch.arange(Tq, device=q.device).unsqueeze(1) + (Tk - Tq)
        dq = torch.zeros_like(q)
        dk = torch.zeros_like(k)
        dv = torch.zeros_like(v)
        for j in range(0, Tk, ctx.block_size):
            sl = slice(j, j + ctx.block_size)
            kj, vj = k[..., sl, :], v[..., sl, :]
            s = torch.matmul(q, kj.transpose(-1, -2)) * scale
            if ctx.is_causal:
                cols = torch.arange(j, j + kj.shape[-2], device=q.device).unsqueeze(0)
                s = torch.where(cols <= rows, s, float("-inf"))
            p = torch.exp(s - lse.unsqueeze(-1))
            dv[..., sl, :] = p.transpose(-1, -2) @ do
            ds = p * (do @ vj.transpose(-1, -2) - delta) * scale
            dq += ds @ kj
            dk[..., sl, :] = ds.transpose(-1, -2) @ q
        return dq, dk, dv, None, None


def flash_attention_autograd(q, k, v, is_causal=False, block_size=64):
    return _Flash.apply(q, k, v, is_causal, block_size)
