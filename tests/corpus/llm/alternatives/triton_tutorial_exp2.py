"""Correct, Triton-tutorial style in PyTorch: FA2 loops in base 2 (exp2/log2), fp32 accumulators."""

# Also: a LitGPT-style RoPE table (cos/sin of every position so far, a buffer grown on demand,
# indexed by the positions), GQA by einsum over grouped heads, a preallocated cache with a
# write index, and an xor of two tril for the window.

import math

import torch
from torch import nn

LOG2E = 1.4426950408889634


def build_rope_cache(seq_len, n_elem, base=10000.0, device=None, dtype=torch.float64):
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, device=device, dtype=dtype) / n_elem))
    seq_idx = torch.arange(seq_len, device=device, dtype=dtype)
    idx_theta = torch.outer(seq_idx, theta).repeat(1, 2)  # (seq_len, n_elem)
    return torch.cos(idx_theta), torch.sin(idx_theta)


def rope_with_table(x, cos, sin):
    head_size = x.size(-1)
    x1 = x[..., : head_size // 2]
    x2 = x[..., head_size // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return ((x * cos) + (rotated * sin)).to(dtype=x.dtype)


def apply_rope(x, positions, base=10000.0):
    cos, sin = build_rope_cache(int(positions.max()) + 1, x.shape[-1], base, x.device)
    cos, sin = cos[positions], sin[positions]  # (T, D): the rows of these positions
    return rope_with_table(x, cos.to(x.dtype), sin.to(x.dtype))


def repeat_kv(x, n_rep):
    B, Hkv, T, D = x.shape
    return x.view(B, Hkv, 1, T, D).expand(-1, -1, n_rep, -1, -1).reshape(B, -1, T, D)


class KVCache:
    def __init__(self, max_len=16):
        self.max_len = max_len
        self.k = self.v = None
        self.n = 0

    def update(self, k, v):
        B, Hkv, t, D = k.shape
        if self.k is None or self.n + t > self.k.shape[2]:
            cap = self.max_len if self.k is None else self.k.shape[2]
            while cap < self.n + t:
                cap *= 2
            new_k = torch.empty(B, Hkv, cap, D, dtype=k.dtype, device=k.device)
            new_v = torch.empty(B, Hkv, cap, v.shape[-1], dtype=v.dtype, device=v.device)
            if self.k is not None:
                new_k[:, :, : self.n].copy_(self.k[:, :, : self.n])
                new_v[:, :, : self.n].copy_(self.v[:, :, : self.n])
            self.k, self.v = new_k, new_v
        self.k[:, :, self.n: self.n + t].copy_(k)
        self.v[:, :, self.n: self.n + t].copy_(v)
        self.n += t
        return self.k[:, :, : self.n], self.v[:, :, : self.n]

    def __len__(self):
        return self.n


class GroupedQueryAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        self.n_head, self.n_query_groups = num_heads, num_kv_heads
        self.head_size = embed_dim // num_heads
        self.rope_base = rope_base
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * self.head_size, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * self.head_size, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.register_buffer("cos", None, persistent=False)
        self.register_buffer("sin", None, persistent=False)

    def rope_table(self, length, device):
        if self.cos is None or self.cos.shape[0] < length or self.cos.device != device:
            self.cos, self.sin = build_rope_cache(max(length, 32), self.head_size,
                                                  self.rope_base, device)
        return self.cos, self.sin

    def forward(self, x, cache=None):
        B, T, E = x.shape
        G, D = self.n_query_groups, self.head_size
        R = self.n_head // G
        start = len(cache) if cache is not None else 0
        q = self.q_proj(x).view(B, T, G, R, D)
        k = self.k_proj(x).view(B, T, G, D).transpose(1, 2)  # (B, G, T, D)
        v = self.v_proj(x).view(B, T, G, D).transpose(1, 2)
        q = q.permute(0, 2, 3, 1, 4)  # (B, G, R, T, D)
        if self.rope_base is not None:
            cos, sin = self.rope_table(start + T, x.device)
            cos, sin = cos[start:start + T].to(x.dtype), sin[start:start + T].to(x.dtype)
            q, k = rope_with_table(q, cos, sin), rope_with_table(k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v)
        S = k.shape[2]
        att = torch.einsum("bgrtd,bgsd->bgrts", q, k) / math.sqrt(D)
        allowed = torch.tril(torch.ones(T, S, dtype=torch.bool, device=x.device),
                             diagonal=S - T)
        att = torch.where(allowed, att, torch.tensor(float("-inf"), dtype=att.dtype,
                                                     device=att.device)).softmax(dim=-1)
        y = torch.einsum("bgrts,bgsd->btgrd", att, v).reshape(B, T, E)
        return self.out_proj(y)


def sliding_window_mask(T, window):
    ones = torch.ones(T, T, dtype=torch.bool)
    return torch.tril(ones) ^ torch.tril(ones, -window)


def _acc(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def flash_attention(q, k, v, *, is_causal=False, block_size=64):
    B, H, N_CTX_Q, HEAD_DIM = q.shape
    N_CTX_K = k.shape[2]
    acc_t = _acc(q.dtype)
    qk_scale = HEAD_DIM ** -0.5 * LOG2E  # scores in base 2: exp(x) = exp2(x * log2 e)
    out = torch.empty(B, H, N_CTX_Q, HEAD_DIM, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, H, N_CTX_Q, dtype=q.dtype, device=q.device)
    for start_m in range(0, N_CTX_Q, block_size):
        q_blk = q[:, :, start_m:start_m + block_size].to(acc_t)
        BLOCK_M = q_blk.shape[2]
        m_i = torch.full((B, H, BLOCK_M), -float("inf"), dtype=acc_t, device=q.device)
        l_i = torch.zeros(B, H, BLOCK_M, dtype=acc_t, device=q.device)
        acc = torch.zeros(B, H, BLOCK_M, HEAD_DIM, dtype=acc_t, device=q.device)
        offs_m = torch.arange(start_m, start_m + BLOCK_M, device=q.device) + N_CTX_K - N_CTX_Q
        hi = min(N_CTX_K, start_m + BLOCK_M + N_CTX_K - N_CTX_Q) if is_causal else N_CTX_K
        for start_n in range(0, hi, block_size):
            k_blk = k[:, :, start_n:min(start_n + block_size, hi)].to(acc_t)
            v_blk = v[:, :, start_n:min(start_n + block_size, hi)].to(acc_t)
            qk = (q_blk @ k_blk.transpose(-1, -2)) * qk_scale
            if is_causal:
                offs_n = torch.arange(start_n, start_n + k_blk.shape[2], device=q.device)
                qk = torch.where(offs_m[:, None] >= offs_n[None, :], qk, -float("inf"))
            m_ij = torch.maximum(m_i, qk.max(-1).values)
            m_ij_safe = torch.where(m_ij == -float("inf"), 0.0, m_ij)
            p = torch.exp2(qk - m_ij_safe[..., None])
            alpha = torch.exp2(m_i - m_ij_safe)
            l_i = l_i * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ v_blk
            m_i = m_ij
        out[:, :, start_m:start_m + BLOCK_M] = (acc / l_i[..., None]).to(q.dtype)
        lse[:, :, start_m:start_m + BLOCK_M] = ((m_i + torch.log2(l_i)) / LOG2E).to(q.dtype)
    return out, lse


class _attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, block_size):
        o, lse = flash_attention(q, k, v, is_causal=causal, block_size=block_size)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.BLOCK = causal, block_size
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        N_CTX_Q, HEAD_DIM = q.shape[2], q.shape[3]
        N_CTX_K = k.shape[2]
        sm_scale = HEAD_DIM ** -0.5
        BLOCK = ctx.BLOCK
        delta = (o * do).sum(-1)  # the preprocess kernel
        dq = torch.zeros_like(q)
        dk = torch.empty_like(k)
        dv = torch.empty_like(v)
        for start_n in range(0, N_CTX_K, BLOCK):  # one program per key block
            k_blk, v_blk = k[:, :, start_n:start_n + BLOCK], v[:, :, start_n:start_n + BLOCK]
            offs_n = torch.arange(start_n, start_n + k_blk.shape[2], device=q.device)
            dk_blk, dv_blk = torch.zeros_like(k_blk), torch.zeros_like(v_blk)
            for start_m in range(0, N_CTX_Q, BLOCK):
                q_blk, do_blk = q[:, :, start_m:start_m + BLOCK], do[:, :, start_m:start_m + BLOCK]
                offs_m = (torch.arange(start_m, start_m + q_blk.shape[2], device=q.device)
                          + N_CTX_K - N_CTX_Q)
                qk = q_blk @ k_blk.transpose(-1, -2) * (sm_scale * LOG2E)
                if ctx.causal:
                    qk = torch.where(offs_m[:, None] >= offs_n[None, :], qk, -float("inf"))
                p = torch.exp2(qk - lse[:, :, start_m:start_m + BLOCK, None] * LOG2E)
                dv_blk += p.transpose(-1, -2) @ do_blk
                dp = do_blk @ v_blk.transpose(-1, -2)
                ds = p * (dp - delta[:, :, start_m:start_m + BLOCK, None])
                dk_blk += ds.transpose(-1, -2) @ q_blk * sm_scale
                dq[:, :, start_m:start_m + BLOCK] += ds @ k_blk * sm_scale
            dk[:, :, start_n:start_n + BLOCK] = dk_blk
            dv[:, :, start_n:start_n + BLOCK] = dv_blk
        return dq, dk, dv, None, None


def flash_attention_autograd(q, k, v, is_causal=False, block_size=64):
    return _attention.apply(q, k, v, is_causal, block_size)
