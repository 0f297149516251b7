"""Correct, linear-algebra style: RoPE by 2x2 rotation matrices (einsum), GQA with no repeat."""

# The query heads are grouped (B, Hkv, n_rep, T, D) and meet their one key/value head
# (B, Hkv, 1, L, D) by broadcasting: no key or value is ever copied. The cache preallocates
# buffers, doubling their capacity when full, and keeps a write index.

import math

import torch
from torch import nn


def rotation_matrices(positions, dim, base, dtype, device):
    """(T, D/2, 2, 2): [[cos, -sin], [sin, cos]] per position and frequency."""
    theta = base ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
    angle = positions.to(device=device, dtype=torch.float64)[:, None] * theta[None, :]
    c, s = torch.cos(angle), torch.sin(angle)
    rot = torch.stack([torch.stack([c, -s], dim=-1), torch.stack([s, c], dim=-1)], dim=-2)
    return rot.to(dtype)


def apply_rope(x, positions, base=10000.0):
    D = x.shape[-1]
    R = rotation_matrices(positions, D, base, x.dtype, x.device)  # (T, D/2, 2, 2)
    pairs = torch.stack([x[..., : D // 2], x[..., D // 2:]], dim=-1)  # (..., T, D/2, 2)
    turned = torch.einsum("tfij,...tfj->...tfi", R, pairs)  # (..., T, D/2, 2)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1)


def repeat_kv(x, n_rep):
    B, Hkv, T, D = x.shape
    return x.unsqueeze(2).expand(B, Hkv, n_rep, T, D).reshape(B, Hkv * n_rep, T, D)


class KVCache:
    """Preallocated key/value buffers (B, Hkv, capacity, D), grown by doubling."""

    def __init__(self, initial_capacity=4):
        self.k_buf = None
        self.v_buf = None
        self.capacity = initial_capacity
        self.pos = 0  # write index: tokens stored

    def _grow(self, needed, like_k, like_v):
        capacity = self.capacity
        while capacity < needed:
            capacity *= 2
        if self.k_buf is not None and capacity == self.k_buf.shape[2]:
            return
        B, Hkv, _, D = like_k.shape
        k_buf = like_k.new_zeros(B, Hkv, capacity, D)
        v_buf = like_v.new_zeros(B, Hkv, capacity, like_v.shape[-1])
        if self.k_buf is not None:
            k_buf[:, :, : self.pos] = self.k_buf[:, :, : self.pos]
            v_buf[:, :, : self.pos] = self.v_buf[:, :, : self.pos]
        self.k_buf, self.v_buf, self.capacity = k_buf, v_buf, capacity

    def update(self, k, v):
        t = k.shape[2]
        self._grow(self.pos + t, k, v)
        self.k_buf[:, :, self.pos: self.pos + t] = k
        self.v_buf[:, :, self.pos: self.pos + t] = v
        self.pos += t
        return self.k_buf[:, :, : self.pos], self.v_buf[:, :, : self.pos]

    def __len__(self):
        return self.pos


class GroupedQueryAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        self.H, self.Hkv = num_heads, num_kv_heads
        self.D = embed_dim // num_heads
        self.rope_base = rope_base
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * self.D, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * self.D, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, E = x.shape
        H, Hkv, D = self.H, self.Hkv, self.D
        n_rep = H // Hkv
        offset = len(cache) if cache is not None else 0
        q = self.q_proj(x).reshape(B, T, H, D).permute(0, 2, 1, 3)  # (B, H, T, D)
        k = self.k_proj(x).reshape(B, T, Hkv, D).permute(0, 2, 1, 3)  # (B, Hkv, T, D)
        v = self.v_proj(x).reshape(B, T, Hkv, D).permute(0, 2, 1, 3)
        if self.rope_base is not None:
            pos = torch.arange(T, device=x.device) + offset
            q, k = apply_rope(q, pos, self.rope_base), apply_rope(k, pos, self.rope_base)
        if cache is not None:
            k, v = cache.update(k, v)
        L = k.shape[2]
        qg = q.reshape(B, Hkv, n_rep, T, D)  # query heads h = g * n_rep + r share kv head g
        kg, vg = k.unsqueeze(2), v.unsqueeze(2)  # (B, Hkv, 1, L, D)
        scores = torch.matmul(qg, kg.transpose(-1, -2)) / math.sqrt(D)  # (B, Hkv, n_rep, T, L)
        i = torch.arange(offset, offset + T, device=x.device).view(T, 1)
        j = torch.arange(L, device=x.device).view(1, L)
        scores = scores.masked_fill(j > i, float("-inf"))
        out = torch.matmul(scores.softmax(-1), vg)  # (B, Hkv, n_rep, T, D)
        out = out.reshape(B, H, T, D).transpose(1, 2).reshape(B, T, E)
        return self.out_proj(out)


def sliding_window_mask(T, window):
    full = torch.ones(T, T, dtype=torch.bool)
    too_old = torch.tril(full, diagonal=-window)  # j <= i - window
    return torch.tril(full) & ~too_old


def flash_attention(q, k, v, *, is_causal=False, block_size=64):
    """FlashAttention-2's loop order: query blocks outside, key blocks inside."""
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    scale = D ** -0.5
    outs, lses = [], []
    for qs in range(0, Tq, block_size):
        qi = q[:, :, qs:qs + block_size] * scale  # (B, H, Bq, D)
        bq = qi.shape[2]
        m = torch.full((B, H, bq), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, bq), dtype=q.dtype, device=q.device)  # noqa: E741
        o = torch.zeros((B, H, bq, v.shape[-1]), dtype=q.dtype, device=q.device)
        last_key = qs + bq - 1 + (Tk - Tq)  # the last key the last query of the block sees
        for ks in range(0, Tk, block_size):
            if is_causal and ks > last_key:
                break  # every later block is in the future of every query here
            kj, vj = k[:, :, ks:ks + block_size], v[:, :, ks:ks + block_size]
            s = qi @ kj.transpose(-1, -2)  # (B, H, Bq, Bk)
            if is_causal:
                rows = torch.arange(qs, qs + bq, device=q.device)[:, None] + (Tk - Tq)
                cols = torch.arange(ks, ks + kj.shape[2], device=q.device)[None, :]
                s = s.masked_fill(cols > rows, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1))
            m_use = m_new.masked_fill(m_new == float("-inf"), 0)
            p = torch.exp(s - m_use[..., None])
            corr = torch.exp(m - m_use)
            l = corr * l + p.sum(-1)  # noqa: E741
            o = corr[..., None] * o + p @ vj
            m = m_new
        outs.append(o / l[..., None])
        lses.append(m + l.log())
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, block_size=64):
        o, lse = flash_attention(q, k, v, is_causal=is_causal, block_size=block_size)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal, ctx.block_size = is_causal, block_size
        return o

    @staticmethod
    def backward(ctx, dO):
        """Key blocks outside, query blocks inside (FlashAttention-2's backward)."""
        q, k, v, o, lse = ctx.saved_tensors
        Tq, D = q.shape[2], q.shape[3]
        Tk = k.shape[2]
        b = ctx.block_size
        scale = D ** -0.5
        Delta = (dO * o).sum(-1)  # (B, H, Tq)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for ks in range(0, Tk, b):
            kj, vj = k[:, :, ks:ks + b], v[:, :, ks:ks + b]
            dkj, dvj = torch.zeros_like(kj), torch.zeros_like(vj)
            for qs in range(0, Tq, b):
                qi, dOi = q[:, :, qs:qs + b], dO[:, :, qs:qs + b]
                s = qi @ kj.transpose(-1, -2) * scale
                if ctx.is_causal:
                    rows = torch.arange(qs, qs + qi.shape[2], device=q.device)[:, None] + Tk - Tq
                    cols = torch.arange(ks, ks + kj.shape[2], device=q.device)[None, :]
                    s = s.masked_fill(cols > rows, float("-inf"))
                p = torch.exp(s - lse[:, :, qs:qs + b, None])
                dvj += p.transpose(-1, -2) @ dOi
                dp = dOi @ vj.transpose(-1, -2)
                ds = p * (dp - Delta[:, :, qs:qs + b, None]) * scale
                dq[:, :, qs:qs + b] += ds @ kj
                dkj += ds.transpose(-1, -2) @ qi
            dk[:, :, ks:ks + b] = dkj
            dv[:, :, ks:ks + b] = dvj
        return dq, dk, dv, None, None


def flash_attention_autograd(q, k, v, is_causal=False, block_size=64):
    return FlashAttention2.apply(q, k, v, is_causal, block_size)
