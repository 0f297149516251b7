"""Correct, log-space FlashAttention: a running logsumexp (torch.logaddexp), no max and sum."""

# Also: GPT-NeoX-style RoPE in the input's dtype (cos/sin of cat(freqs, freqs)), repeat_kv by
# .repeat on a new axis, a cache of (keys, values) grown by torch.cat, the causal mask by
# torch.triu, and a backward whose outer loop runs over query blocks.

import torch
import torch.nn.functional as F
from torch import nn


def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device).float() / d))
    freqs = positions.float()[:, None] * inv_freq[None, :]  # (T, d/2), float32 as in HF's code
    emb = torch.cat([freqs, freqs], dim=-1)  # (T, d)
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.cos().to(x.dtype) + torch.cat([-x2, x1], dim=-1) * emb.sin().to(x.dtype)


def repeat_kv(x, n_rep):
    return x.unsqueeze(2).repeat(1, 1, n_rep, 1, 1).flatten(1, 2)


class KVCache:
    def __init__(self):
        self.kv = None

    def update(self, k, v):
        if self.kv is None:
            self.kv = (k, v)
        else:
            self.kv = (torch.cat([self.kv[0], k], dim=2), torch.cat([self.kv[1], v], dim=2))
        return self.kv

    def __len__(self):
        return 0 if self.kv is None else self.kv[0].size(2)


class GroupedQueryAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        self.n_head, self.n_kv_head = num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.rope_base = rope_base
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, self.n_kv_head * self.head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, self.n_kv_head * self.head_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        B, T, C = x.size()
        q = self.q_proj(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
        start = 0 if cache is None else len(cache)
        if self.rope_base is not None:
            pos = torch.arange(start, start + T, device=x.device)
            q, k = apply_rope(q, pos, self.rope_base), apply_rope(k, pos, self.rope_base)
        if cache is not None:
            k, v = cache.update(k, v)
        k = repeat_kv(k, self.n_head // self.n_kv_head)
        v = repeat_kv(v, self.n_head // self.n_kv_head)
        S = k.size(2)
        future = torch.ones(T, S, dtype=torch.bool, device=x.device).triu(diagonal=start + 1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / self.head_dim ** 0.5)
        att = F.softmax(att.masked_fill(future, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.out_proj(y)


def sliding_window_mask(T, window):
    return torch.ones(T, T).tril().triu(diagonal=-(window - 1)).bool()


def _scores(q, kb, start, Tq, Tk, is_causal):
    s = q @ kb.transpose(-2, -1) * q.shape[-1] ** -0.5
    if is_causal:
        qpos = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)
        kpos = torch.arange(start, start + kb.shape[-2], device=q.device)[None, :]
        s = s.masked_fill(kpos > qpos, float("-inf"))
    return s


def flash_attention(q, k, v, *, is_causal=False, block_size=64):
    Tq, Tk = q.shape[-2], k.shape[-2]
    lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
    out = torch.zeros_like(q)  # normalised by exp(lse) at every step
    for start in range(0, Tk, block_size):
        kb, vb = k[..., start:start + block_size, :], v[..., start:start + block_size, :]
        s = _scores(q, kb, start, Tq, Tk, is_causal)  # (B, H, Tq, b)
        new_lse = torch.logaddexp(lse, torch.logsumexp(s, dim=-1))  # (B, H, Tq)
        out = (out * torch.exp(lse - new_lse)[..., None]
               + torch.exp(s - new_lse[..., None]) @ vb)
        lse = new_lse
    return out, lse


class FlashAttentionFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal, block_size):
        out, lse = flash_attention(q, k, v, is_causal=is_causal, block_size=block_size)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.is_causal, ctx.block_size = is_causal, block_size
        return out

    @staticmethod
    def backward(ctx, grad_out):
        """Query blocks outside (dq finished per block), key blocks inside."""
        q, k, v, out, lse = ctx.saved_tensors
        Tq, Tk, bs = q.shape[-2], k.shape[-2], ctx.block_size
        scale = q.shape[-1] ** -0.5
        dk, dv, dq_blocks = torch.zeros_like(k), torch.zeros_like(v), []
        for qs in range(0, Tq, bs):
            qb, gb = q[..., qs:qs + bs, :], grad_out[..., qs:qs + bs, :]
            ob = out[..., qs:qs + bs, :]
            lse_b = lse[..., qs:qs + bs, None]
            delta = (gb * ob).sum(-1, keepdim=True)
            dq_b = torch.zeros_like(qb)
            rows = torch.arange(qs, qs + qb.shape[-2], device=q.device)[:, None] + (Tk - Tq)
            for ks in range(0, Tk, bs):
                kb, vb = k[..., ks:ks + bs, :], v[..., ks:ks + bs, :]
                s = qb @ kb.transpose(-2, -1) * scale
                if ctx.is_causal:
                    cols = torch.arange(ks, ks + kb.shape[-2], device=q.device)[None, :]
                    s = s.masked_fill(cols > rows, float("-inf"))
                p = torch.exp(s - lse_b)
                dv[..., ks:ks + bs, :] += p.transpose(-2, -1) @ gb
                ds = p * (gb @ vb.transpose(-2, -1) - delta) * scale
                dq_b += ds @ kb
                dk[..., ks:ks + bs, :] += ds.transpose(-2, -1) @ qb
            dq_blocks.append(dq_b)
        return torch.cat(dq_blocks, dim=-2), dk, dv, None, None


def flash_attention_autograd(q, k, v, is_causal=False, block_size=64):
    return FlashAttentionFn.apply(q, k, v, is_causal, block_size)
