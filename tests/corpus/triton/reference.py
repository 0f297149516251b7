"""The reference answer of triton_attention: a row softmax, FlashAttention-2's forward and its
backward, in Triton (run on the CPU through Triton's interpreter, TRITON_INTERPRET=1)."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, x_row_stride, out_row_stride,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=inside, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + cols, e / tl.sum(e, axis=0), mask=inside)


def triton_softmax(x):
    """The softmax of a (rows, cols) tensor over its last dimension, one program per row."""
    rows, cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(rows,)](x, out, cols, x.stride(0), out.stride(0),
                            BLOCK=triton.next_power_of_2(cols))
    return out


@triton.jit
def flash_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
                     sqb, sqh, sqt, sqd, skb, skh, skt, skd, svb, svh, svt, svd,
                     sob, soh, sot, sod, H, Tq, Tk, scale,
                     D: tl.constexpr, IS_CAUSAL: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q_rows = offs_m[:, None] < Tq
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqt + offs_d[None, :] * sqd,
                mask=q_rows, other=0.0)
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    offset = Tk - Tq  # bottom-right: query i sees keys j <= i + Tk - Tq
    hi = Tk
    if IS_CAUSAL:
        hi = tl.minimum(Tk, (start_m + 1) * BLOCK_M + offset)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + b * skb + h * skh + cols[:, None] * skt + offs_d[None, :] * skd,
                    mask=cols[:, None] < Tk, other=0.0)
        v = tl.load(v_ptr + b * svb + h * svh + cols[:, None] * svt + offs_d[None, :] * svd,
                    mask=cols[:, None] < Tk, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        keep = cols[None, :] < Tk
        if IS_CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None] + offset)
        s = tl.where(keep, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * sot + offs_d[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=q_rows)
    tl.store(lse_ptr + bh * Tq + offs_m, m_i + tl.log(l_i), mask=offs_m < Tq)


def flash_forward(q, k, v, is_causal=False, block_m=16, block_n=16):
    """FlashAttention-2's forward: (out, logsumexp) for q (B, H, Tq, D), k and v (B, H, Tk, D)."""
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    out = torch.empty_like(q)
    lse = torch.empty((B, H, Tq), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(Tq, block_m), B * H)
    flash_fwd_kernel[grid](q, k, v, out, lse, *q.stride(), *k.stride(), *v.stride(),
                           *out.stride(), H, Tq, Tk, 1 / math.sqrt(D), D=D,
                           IS_CAUSAL=is_causal, BLOCK_M=block_m, BLOCK_N=block_n)
    return out, lse


@triton.jit
def flash_bwd_delta_kernel(o_ptr, do_ptr, delta_ptr, Tq, D: tl.constexpr,
                           BLOCK_M: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    rows = offs_m[:, None] < Tq
    at = bh * Tq * D + offs_m[:, None] * D + offs_d[None, :]
    o = tl.load(o_ptr + at, mask=rows, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + at, mask=rows, other=0.0).to(tl.float32)
    tl.store(delta_ptr + bh * Tq + offs_m, tl.sum(o * do, axis=1), mask=offs_m < Tq)


@triton.jit
def flash_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
                          Tq, Tk, scale, D: tl.constexpr, IS_CAUSAL: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_n = tl.program_id(0)
    bh = tl.program_id(1)
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    key_rows = offs_n[:, None] < Tk
    kv_at = bh * Tk * D + offs_n[:, None] * D + offs_d[None, :]
    k = tl.load(k_ptr + kv_at, mask=key_rows, other=0.0)
    v = tl.load(v_ptr + kv_at, mask=key_rows, other=0.0)
    dk = tl.zeros((BLOCK_N, D), tl.float32)
    dv = tl.zeros((BLOCK_N, D), tl.float32)
    offset = Tk - Tq
    lo = 0
    if IS_CAUSAL:  # queries before start_n - offset see none of these keys
        lo = tl.maximum(0, start_n * BLOCK_N - offset) // BLOCK_M * BLOCK_M
    for start_m in range(lo, Tq, BLOCK_M):
        rows = start_m + offs_m
        q_at = bh * Tq * D + rows[:, None] * D + offs_d[None, :]
        q = tl.load(q_ptr + q_at, mask=rows[:, None] < Tq, other=0.0)
        do = tl.load(do_ptr + q_at, mask=rows[:, None] < Tq, other=0.0)
        lse = tl.load(lse_ptr + bh * Tq + rows, mask=rows < Tq, other=0.0)
        delta = tl.load(delta_ptr + bh * Tq + rows, mask=rows < Tq, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale  # (BLOCK_M, BLOCK_N)
        keep = (rows[:, None] < Tq) & (offs_n[None, :] < Tk)
        if IS_CAUSAL:
            keep = keep & (offs_n[None, :] <= rows[:, None] + offset)
        p = tl.where(keep, tl.exp(s - lse[:, None]), 0.0)
        dv += tl.dot(tl.trans(p).to(do.dtype), do)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds).to(q.dtype), q)
    tl.store(dk_ptr + kv_at, (dk * scale).to(dk_ptr.dtype.element_ty), mask=key_rows)
    tl.store(dv_ptr + kv_at, dv.to(dv_ptr.dtype.element_ty), mask=key_rows)


@triton.jit
def flash_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
                        Tq, Tk, scale, D: tl.constexpr, IS_CAUSAL: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    rows = offs_m[:, None] < Tq
    q_at = bh * Tq * D + offs_m[:, None] * D + offs_d[None, :]
    q = tl.load(q_ptr + q_at, mask=rows, other=0.0)
    do = tl.load(do_ptr + q_at, mask=rows, other=0.0)
    lse = tl.load(lse_ptr + bh * Tq + offs_m, mask=offs_m < Tq, other=0.0)
    delta = tl.load(delta_ptr + bh * Tq + offs_m, mask=offs_m < Tq, other=0.0)
    dq = tl.zeros((BLOCK_M, D), tl.float32)
    offset = Tk - Tq
    hi = Tk
    if IS_CAUSAL:
        hi = tl.minimum(Tk, (start_m + 1) * BLOCK_M + offset)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_at = bh * Tk * D + cols[:, None] * D + offs_d[None, :]
        k = tl.load(k_ptr + kv_at, mask=cols[:, None] < Tk, other=0.0)
        v = tl.load(v_ptr + kv_at, mask=cols[:, None] < Tk, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        keep = rows & (cols[None, :] < Tk)
        if IS_CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None] + offset)
        p = tl.where(keep, tl.exp(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    tl.store(dq_ptr + q_at, (dq * scale).to(dq_ptr.dtype.element_ty), mask=rows)


class FlashAttentionTriton(torch.autograd.Function):
    """FlashAttention-2 in Triton: saves q, k, v, out and the logsumexp, recomputes the rest."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal, block_m, block_n):
        out, lse = flash_forward(q, k, v, is_causal, block_m, block_n)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.is_causal, ctx.block_m, ctx.block_n = is_causal, block_m, block_n
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, out, lse = ctx.saved_tensors
        q, k, v, out, d_out = (t.contiguous() for t in (q, k, v, out, d_out))
        B, H, Tq, D = q.shape
        Tk = k.shape[2]
        bm, bn, scale = ctx.block_m, ctx.block_n, 1 / math.sqrt(D)
        delta = torch.empty_like(lse)
        flash_bwd_delta_kernel[(triton.cdiv(Tq, bm), B * H)](out, d_out, delta, Tq, D=D,
                                                            BLOCK_M=bm)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        flash_bwd_dkdv_kernel[(triton.cdiv(Tk, bn), B * H)](
            q, k, v, d_out, lse, delta, dk, dv, Tq, Tk, scale, D=D, IS_CAUSAL=ctx.is_causal,
            BLOCK_M=bm, BLOCK_N=bn)
        flash_bwd_dq_kernel[(triton.cdiv(Tq, bm), B * H)](
            q, k, v, d_out, lse, delta, dq, Tq, Tk, scale, D=D, IS_CAUSAL=ctx.is_causal,
            BLOCK_M=bm, BLOCK_N=bn)
        return dq, dk, dv, None, None, None


def flash_attention_triton(q, k, v, is_causal=False, block_m=16, block_n=16):
    """FlashAttention-2 with its backward: the output, differentiable in q, k and v."""
    return FlashAttentionTriton.apply(q, k, v, is_causal, block_m, block_n)
