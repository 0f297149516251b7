"""Correct, einops student style: rearrange/repeat everywhere, complex RoPE, torch.split blocks."""

# RoPE as complex numbers on halves: rearrange(x, "... (two h) -> ... h two") pairs feature i
# with i + D/2. The causal mask of a key block is a tril with an offset. The backward of the
# autograd function loops over query blocks only, each against all the keys.

import torch
from einops import rearrange, repeat
from torch import nn


def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    freqs = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angles = torch.einsum("t,f->tf", positions.double(), freqs)  # (T, d/2)
    cis = torch.polar(torch.ones_like(angles), angles)
    pairs = rearrange(x.double(), "... (two h) -> ... h two", two=2).contiguous()
    turned = torch.view_as_real(torch.view_as_complex(pairs) * cis)
    return rearrange(turned, "... h two -> ... (two h)").to(x.dtype)


def repeat_kv(x, n_rep):
    return repeat(x, "b h t d -> b (h r) t d", r=n_rep)


class KVCache:
    def __init__(self):
        self.cache = {"k": [], "v": []}

    def update(self, k, v):
        self.cache["k"].append(k)
        self.cache["v"].append(v)
        return torch.cat(self.cache["k"], dim=2), torch.cat(self.cache["v"], dim=2)

    def __len__(self):
        return sum(k.shape[2] for k in self.cache["k"])


class GroupedQueryAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        self.heads, self.kv_heads = num_heads, num_kv_heads
        self.rope_base = rope_base
        head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * head_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

    def forward(self, x, cache=None):
        q = rearrange(self.q_proj(x), "b t (h d) -> b h t d", h=self.heads)
        k = rearrange(self.k_proj(x), "b t (h d) -> b h t d", h=self.kv_heads)
        v = rearrange(self.v_proj(x), "b t (h d) -> b h t d", h=self.kv_heads)
        n = q.shape[2]
        past = 0 if cache is None else len(cache)
        if self.rope_base is not None:
            pos = torch.arange(past, past + n, device=x.device)
            q = apply_rope(q, pos, self.rope_base)
            k = apply_rope(k, pos, self.rope_base)
        if cache is not None:
            k, v = cache.update(k, v)
        k = repeat_kv(k, self.heads // self.kv_heads)
        v = repeat_kv(v, self.heads // self.kv_heads)
        sim = torch.einsum("bhid,bhjd->bhij", q, k) * q.shape[-1] ** -0.5
        i = torch.arange(past, past + n, device=x.device)
        j = torch.arange(k.shape[2], device=x.device)
        sim = sim.masked_fill(rearrange(j, "j -> 1 j") > rearrange(i, "i -> i 1"),
                              -torch.finfo(sim.dtype).max)
        out = torch.einsum("bhij,bhjd->bhid", sim.softmax(dim=-1), v)
        return self.out_proj(rearrange(out, "b h t d -> b t (h d)"))


def sliding_window_mask(T, window):
    return torch.triu(torch.tril(torch.ones(T, T, dtype=torch.bool)), diagonal=1 - window)


def flash_attention(q, k, v, *, is_causal=False, block_size=64):
    Tq, d = q.shape[-2:]
    Tk = k.shape[-2]
    q = q * d ** -0.5
    m = torch.full_like(q[..., 0], float("-inf"))  # (B, H, Tq)
    den = torch.zeros_like(q[..., 0])
    num = torch.zeros_like(q)
    start = 0
    for kb, vb in zip(k.split(block_size, dim=-2), v.split(block_size, dim=-2)):
        s = torch.einsum("bhid,bhjd->bhij", q, kb)
        if is_causal:
            allowed = torch.ones(Tq, kb.shape[-2], dtype=torch.bool, device=q.device).tril(
                diagonal=Tk - Tq - start)
            s = s.masked_fill(~allowed, float("-inf"))
        m_new = torch.max(m, s.max(dim=-1).values)
        m_fin = torch.nan_to_num(m_new, neginf=0.0)
        w = torch.exp(s - m_fin[..., None])
        scale_old = torch.exp(m - m_fin)
        den = den * scale_old + w.sum(-1)
        num = num * scale_old[..., None] + torch.einsum("bhij,bhjd->bhid", w, vb)
        m = m_new
        start += kb.shape[-2]
    return num / den[..., None], m + den.log()


class FlashFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal, block_size):
        out, lse = flash_attention(q, k, v, is_causal=is_causal, block_size=block_size)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.is_causal, ctx.block_size = is_causal, block_size
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        Tq, d = q.shape[-2:]
        Tk = k.shape[-2]
        scale = d ** -0.5
        dk, dv, dqs = torch.zeros_like(k), torch.zeros_like(v), []
        start = 0
        for qb, dob, ob, lb in zip(q.split(ctx.block_size, -2), dout.split(ctx.block_size, -2),
                                   out.split(ctx.block_size, -2), lse.split(ctx.block_size, -1)):
            s = torch.einsum("bhid,bhjd->bhij", qb, k) * scale  # (B, H, bq, Tk)
            if ctx.is_causal:
                allowed = torch.ones(qb.shape[-2], Tk, dtype=torch.bool, device=q.device).tril(
                    diagonal=Tk - Tq + start)
                s = s.masked_fill(~allowed, float("-inf"))
            p = torch.exp(s - lb[..., None])
            dv += torch.einsum("bhij,bhid->bhjd", p, dob)
            dp = torch.einsum("bhid,bhjd->bhij", dob, v)
            ds = p * (dp - (dob * ob).sum(-1, keepdim=True)) * scale
            dqs.append(torch.einsum("bhij,bhjd->bhid", ds, k))
            dk += torch.einsum("bhij,bhid->bhjd", ds, qb)
            start += qb.shape[-2]
        return torch.cat(dqs, dim=-2), dk, dv, None, None


def flash_attention_autograd(q, k, v, is_causal=False, block_size=64):
    return FlashFn.apply(q, k, v, is_causal, block_size)
