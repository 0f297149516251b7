"""Public code: Triton's fused-attention tutorial (python/tutorials/06-fused-attention.py) as
of 2022-10-23, which Tri Dao's flash-attention keeps as flash_attn/flash_attn_triton_og.py
("Downloaded from https://github.com/openai/triton/blob/master/python/tutorials/
06-fused-attention.py for benchmarking. We fixed a few dtype cast to make it work for bf16"),
graded through this adapter. Today's tutorial builds its kernels on tl.make_block_ptr (and, on a
Hopper GPU, tensor descriptors), which triton 3.9 has removed, and asks for a GPU driver at
import: this is the newest version of it that runs here.

Published: Dao-AILab/flash-attention, flash_attn/flash_attn_triton_og.py
@ f1a73d074002226c42ce65a1df170ecff9f022c0 (2023-08-18); BSD 3-Clause licence (the tutorial's
own: MIT). Written for triton 2.0's `tl.dot(a, b, trans_a=..., trans_b=...)`: the five calls
take `tl.trans` instead (same product). Nothing else changes (`ADAPTATIONS`). Its attention
is always causal, with blocks of 128 and no boundary mask (T a multiple of 128, Tq = Tk), and
it keeps the row maximum m and the sum l apart: the glue passes the scale 1/sqrt(D), ignores
is_causal and the blocks, which the published API does not take, and gives m + log(l) as the
logsumexp, from the tensors its Function saves, read through a context of its own.
"""
# ruff: noqa: F821 (the glue calls the published code, which comes before it)

import math
from types import SimpleNamespace

UPSTREAM = (("Dao-AILab/flash-attention", "f1a73d074002226c42ce65a1df170ecff9f022c0",
             "flash_attn/flash_attn_triton_og.py", "BSD-3-Clause"),)
ADAPTATIONS = (
    ("tl.dot(q, k, trans_b=True)", "tl.dot(q, tl.trans(k))", 2, "triton 3: no trans_b"),
    ("tl.dot(p.to(do.dtype), do, trans_a=True)", "tl.dot(tl.trans(p.to(do.dtype)), do)", 1,
     "triton 3: no trans_a"),
    ("tl.dot(do, v, trans_b=True)", "tl.dot(do, tl.trans(v))", 1, "triton 3: no trans_b"),
    ("tl.dot(ds.to(q.dtype), q, trans_a=True)", "tl.dot(tl.trans(ds.to(q.dtype)), q)", 1,
     "triton 3: no trans_a"),
)


def flash_forward(q, k, v, is_causal=False, block_m=16, block_n=16):
    ctx = SimpleNamespace()
    ctx.save_for_backward = lambda *saved: setattr(ctx, "saved", saved)
    out = _attention.forward(ctx, q, k, v, 1 / math.sqrt(q.shape[-1]))
    row_sum, row_max = ctx.saved[4:6]
    return out, (row_max + row_sum.log()).reshape(q.shape[:3])


def flash_attention_triton(q, k, v, is_causal=False, block_m=16, block_n=16):
    return attention(q, k, v, 1 / math.sqrt(q.shape[-1]))
