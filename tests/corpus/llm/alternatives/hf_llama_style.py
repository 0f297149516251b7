"""Correct, Hugging Face Llama style: float32 inv_freq/cos/sin, rotate_half, eager attention."""

# RoPE, repeat_kv and the attention follow transformers' modeling_llama.py (LlamaRotaryEmbedding,
# rotate_half, apply_rotary_pos_emb, repeat_kv, eager_attention_forward, the causal mask of
# finfo.min); the cache is a one-layer DynamicCache. FlashAttention accumulates half inputs in
# float32, as the CUDA kernels do.

import math

import torch
from torch import nn


def _inv_freq(dim, base, device=None):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(
        device=device, dtype=torch.float) / dim))


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0, device=None):
        super().__init__()
        self.register_buffer("inv_freq", _inv_freq(dim, base, device), persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(
            position_ids.shape[0], -1, 1).to(x.device)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def apply_rope(x, positions, base=10000.0):
    rotary = LlamaRotaryEmbedding(x.shape[-1], base, device=x.device)
    cos, sin = rotary(x, positions[None, :])  # (1, T, D)
    if x.dim() == 2:  # (T, D): no head axis to broadcast over
        cos, sin = cos[0], sin[0]
    elif x.dim() > 3:
        cos = cos.view((1,) * (x.dim() - 2) + cos.shape[-2:])
        sin = sin.view((1,) * (x.dim() - 2) + sin.shape[-2:])
    return (x * cos) + (rotate_half(x) * sin)


def repeat_kv(hidden_states, n_rep):
    """
    This is the equivalent of torch.repeat_interleave(x, dim=1, repeats=n_rep). The hidden states
    go from (batch, num_key_value_heads, seqlen, head_dim) to
    (batch, num_attention_heads, seqlen, head_dim)
    """
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(
        batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class KVCache:
    """One layer of a DynamicCache."""

    def __init__(self):
        self.key_cache = []
        self.value_cache = []

    def update(self, key_states, value_states):
        if not self.key_cache:
            self.key_cache.append(key_states)
            self.value_cache.append(value_states)
        else:
            self.key_cache[0] = torch.cat([self.key_cache[0], key_states], dim=-2)
            self.value_cache[0] = torch.cat([self.value_cache[0], value_states], dim=-2)
        return self.key_cache[0], self.value_cache[0]

    def get_seq_length(self):
        return self.key_cache[0].shape[-2] if self.key_cache else 0

    def __len__(self):
        return self.get_seq_length()


def eager_attention_forward(query, key, value, attention_mask, scaling, num_key_value_groups):
    key_states = repeat_kv(key, num_key_value_groups)
    value_states = repeat_kv(value, num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = attn_weights + causal_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output.transpose(1, 2).contiguous()


def causal_mask_with_cache_position(sequence_length, target_length, dtype, device,
                                    cache_position):
    min_dtype = torch.finfo(dtype).min
    causal_mask = torch.full((sequence_length, target_length), fill_value=min_dtype, dtype=dtype,
                             device=device)
    if sequence_length != 1:
        causal_mask = torch.triu(causal_mask, diagonal=1)
    causal_mask *= torch.arange(target_length, device=device) > cache_position.reshape(-1, 1)
    return causal_mask[None, None, :, :]


class GroupedQueryAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_kv_heads, rope_base=10000.0):
        super().__init__()
        self.head_dim = embed_dim // num_heads
        self.num_heads = num_heads
        self.num_key_value_heads = num_kv_heads
        self.num_key_value_groups = num_heads // num_kv_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(num_heads * self.head_dim, embed_dim, bias=False)
        self.rotary_emb = (None if rope_base is None
                           else LlamaRotaryEmbedding(self.head_dim, rope_base))

    def forward(self, x, cache=None):
        input_shape = x.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(x).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(x).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(x).view(hidden_shape).transpose(1, 2)

        past_seen_tokens = cache.get_seq_length() if cache is not None else 0
        cache_position = torch.arange(past_seen_tokens, past_seen_tokens + x.shape[1],
                                      device=x.device)
        if self.rotary_emb is not None:
            cos, sin = self.rotary_emb(value_states, cache_position.unsqueeze(0))
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        if cache is not None:
            key_states, value_states = cache.update(key_states, value_states)

        mask = causal_mask_with_cache_position(x.shape[1], key_states.shape[-2], x.dtype,
                                               x.device, cache_position)
        attn_output = eager_attention_forward(query_states, key_states, value_states, mask,
                                              self.scaling, self.num_key_value_groups)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.out_proj(attn_output)


def sliding_window_mask(T, window):
    cache_position = torch.arange(T)
    kv_idx = torch.arange(T)[None, :]
    q_idx = cache_position[:, None]
    causal = kv_idx <= q_idx
    inside = q_idx - kv_idx < window  # as transformers' sliding_window_overlay
    return causal & inside


def _acc_dtype(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def flash_attention(q, k, v, *, is_causal=False, block_size=64):
    in_dtype = q.dtype
    q, k, v = (t.to(_acc_dtype(in_dtype)) for t in (q, k, v))
    *batch, Tq, D = q.shape
    Tk = k.shape[-2]
    scale = 1.0 / math.sqrt(D)
    m_i = torch.full((*batch, Tq, 1), -math.inf, dtype=q.dtype, device=q.device)
    l_i = torch.zeros((*batch, Tq, 1), dtype=q.dtype, device=q.device)
    acc = torch.zeros_like(q)
    offs_m = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)
    for start_n in range(0, Tk, block_size):
        k_blk = k[..., start_n:start_n + block_size, :]
        v_blk = v[..., start_n:start_n + block_size, :]
        qk = q @ k_blk.transpose(-1, -2) * scale
        if is_causal:
            offs_n = torch.arange(start_n, start_n + k_blk.shape[-2], device=q.device)[None, :]
            qk = qk.masked_fill(offs_n > offs_m, -math.inf)
        m_ij = torch.maximum(m_i, qk.amax(-1, keepdim=True))
        m_ij_safe = torch.nan_to_num(m_ij, neginf=0.0)
        p = torch.exp(qk - m_ij_safe)
        alpha = torch.exp(m_i - m_ij_safe)
        l_i = l_i * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v_blk
        m_i = m_ij
    out = acc / l_i
    lse = (m_i + torch.log(l_i)).squeeze(-1)
    return out.to(in_dtype), lse.to(in_dtype)


class FlashAttnFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, block_size):
        out, lse = flash_attention(q, k, v, is_causal=causal, block_size=block_size)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.block_size = causal, block_size
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        Tq, D = q.shape[-2:]
        Tk = k.shape[-2]
        scale = 1.0 / math.sqrt(D)
        delta = (dout * out).sum(-1, keepdim=True)
        offs_m = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)
        dq = torch.zeros_like(q)
        dks, dvs = [], []
        for start_n in range(0, Tk, ctx.block_size):
            k_blk = k[..., start_n:start_n + ctx.block_size, :]
            v_blk = v[..., start_n:start_n + ctx.block_size, :]
            qk = q @ k_blk.transpose(-1, -2) * scale
            if ctx.causal:
                offs_n = torch.arange(start_n, start_n + k_blk.shape[-2],
                                      device=q.device)[None, :]
                qk = qk.masked_fill(offs_n > offs_m, -math.inf)
            p = torch.exp(qk - lse.unsqueeze(-1))
            dvs.append(p.transpose(-1, -2) @ dout)
            ds = p * (dout @ v_blk.transpose(-1, -2) - delta)
            dq = dq + ds @ k_blk * scale
            dks.append(ds.transpose(-1, -2) @ q * scale)
        return dq, torch.cat(dks, dim=-2), torch.cat(dvs, dim=-2), None, None


def flash_attention_autograd(q, k, v, is_causal=False, block_size=64):
    return FlashAttnFunc.apply(q, k, v, is_causal, block_size)
