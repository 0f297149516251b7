"""Correct, bmm style: RoPE as a (D, D) block rotation matrix, baddbmm GQA, padded key blocks."""

# Also: a cache that stores (B, T, Hkv, D) as flash-attn's kv cache does and transposes on the
# way out, a window from the difference i - j, and a FlashAttention that pads the keys to a
# whole number of blocks and masks the padding (as Triton kernels do with their bounds).

import math

import torch
import torch.nn.functional as F
from torch import nn


def apply_rope(x, positions, base=10000.0):
    D = x.shape[-1]
    h = D // 2
    theta = torch.pow(base, -2.0 * torch.arange(h, dtype=torch.float64, device=x.device) / D)
    ang = positions.double()[:, None] * theta  # (T, h)
    cos, sin = ang.cos(), ang.sin()
    R = torch.zeros(positions.shape[0], D, D, dtype=torch.float64, device=x.device)
    idx = torch.arange(h, device=x.device)
    R[:, idx, idx] = cos
    R[:, idx + h, idx + h] = cos
    R[:, idx, idx + h] = -sin
    R[:, idx + h, idx] = sin
    # out[t] = R[t] @ x[t]: row vectors times R^T
    out = (x.double().unsqueeze(-2) @ R.transpose(-1, -2)).squeeze(-2)
    return out.to(x.dtype)


def repeat_kv(x, n_rep):
    B, Hkv, T, D = x.shape
    idx = torch.arange(Hkv * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


class KVCache:
    def __init__(self):
        self.k = None  # (B, L, Hkv, D)
        self.v = None

    def update(self, k, v):
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        self.k = k if self.k is None else torch.cat((self.k, k), dim=1)
        self.v = v if self.v is None else torch.cat((self.v, v), dim=1)
        return self.k.transpose(1, 2), self.v.transpose(1, 2)

    def __len__(self):
        return 0 if self.k is None else self.k.size(1)


class GroupedQueryAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        if num_heads % num_kv_heads:
            raise ValueError("num_kv_heads must divide num_heads")
        self.H, self.G = num_heads, num_kv_heads
        self.D = embed_dim // num_heads
        self.base = rope_base
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * self.D, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * self.D, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, E = x.shape
        H, G, D = self.H, self.G, self.D
        p0 = 0 if cache is None else len(cache)
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)
        k = self.k_proj(x).view(B, T, G, D).transpose(1, 2)
        v = self.v_proj(x).view(B, T, G, D).transpose(1, 2)
        if self.base is not None:
            pos = torch.arange(p0, p0 + T, device=x.device)
            q, k = apply_rope(q, pos, self.base), apply_rope(k, pos, self.base)
        if cache is not None:
            k, v = cache.update(k, v)
        L = k.shape[2]
        k, v = repeat_kv(k, H // G), repeat_kv(v, H // G)
        bias = torch.zeros(T, L, dtype=x.dtype, device=x.device)
        bias = bias.masked_fill(torch.arange(L, device=x.device)
                                > torch.arange(p0, p0 + T, device=x.device)[:, None],
                                float("-inf"))
        scores = torch.baddbmm(bias.expand(B * H, T, L), q.reshape(B * H, T, D),
                               k.reshape(B * H, L, D).transpose(1, 2), alpha=1 / math.sqrt(D))
        out = torch.bmm(torch.softmax(scores, dim=-1), v.reshape(B * H, L, D))
        return self.out_proj(out.view(B, H, T, D).transpose(1, 2).reshape(B, T, E))


def sliding_window_mask(T, window):
    diff = torch.arange(T).unsqueeze(1) - torch.arange(T).unsqueeze(0)  # i - j
    return (diff >= 0) & (diff < window)


def _padded(t, block):
    extra = -t.shape[2] % block
    return F.pad(t, (0, 0, 0, extra)) if extra else t


def _block_scores(q, kb, start, Tq, Tk, is_causal):
    s = q @ kb.transpose(-1, -2) / math.sqrt(q.shape[-1])
    cols = torch.arange(start, start + kb.shape[2], device=q.device)[None, :]
    valid = cols < Tk  # the padding is no key
    if is_causal:
        valid = valid & (cols <= torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq))
    return s.masked_fill(~valid, float("-inf"))


def flash_attention(q, k, v, *, is_causal=False, block_size=64):
    Tq, Tk = q.shape[2], k.shape[2]
    kp, vp = _padded(k, block_size), _padded(v, block_size)
    m = q.new_full(q.shape[:3] + (1,), float("-inf"))
    l = q.new_zeros(q.shape[:3] + (1,))  # noqa: E741
    acc = torch.zeros_like(q)
    for start in range(0, kp.shape[2], block_size):
        s = _block_scores(q, kp[:, :, start:start + block_size], start, Tq, Tk, is_causal)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = (s - shift).exp()
        r = (m - shift).exp()
        l = l * r + p.sum(-1, keepdim=True)  # noqa: E741
        acc = acc * r + p @ vp[:, :, start:start + block_size]
        m = m_new
    return acc / l, (m + l.log())[..., 0]


class PaddedFlash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal, block_size):
        out, lse = flash_attention(q, k, v, is_causal=is_causal, block_size=block_size)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.is_causal, ctx.block_size = is_causal, block_size
        return out

    @staticmethod
    def backward(ctx, g):
        q, k, v, out, lse = ctx.saved_tensors
        Tq, Tk, bs = q.shape[2], k.shape[2], ctx.block_size
        kp, vp = _padded(k, bs), _padded(v, bs)
        scale = 1 / math.sqrt(q.shape[-1])
        delta = (g * out).sum(-1, keepdim=True)
        dq = torch.zeros_like(q)
        dkp, dvp = torch.zeros_like(kp), torch.zeros_like(vp)
        for start in range(0, kp.shape[2], bs):
            kb, vb = kp[:, :, start:start + bs], vp[:, :, start:start + bs]
            p = (_block_scores(q, kb, start, Tq, Tk, ctx.is_causal) - lse[..., None]).exp()
            dvp[:, :, start:start + bs] = p.transpose(-1, -2) @ g
            ds = p * (g @ vb.transpose(-1, -2) - delta) * scale
            dq += ds @ kb
            dkp[:, :, start:start + bs] = ds.transpose(-1, -2) @ q
        return dq, dkp[:, :, :Tk], dvp[:, :, :Tk], None, None


def flash_attention_autograd(q, k, v, is_causal=False, block_size=64):
    return PaddedFlash.apply(q, k, v, is_causal, block_size)
