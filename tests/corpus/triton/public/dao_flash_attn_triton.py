"""Public code: Tri Dao's FlashAttention in Triton (flash_attn/flash_attn_triton.py, forward
and backward kernels, `FlashAttnFunc`), graded through this adapter.

Published: Dao-AILab/flash-attention, flash_attn/flash_attn_triton.py
@ f1a73d074002226c42ce65a1df170ecff9f022c0 (2023-08-18, its last change); BSD 3-Clause
licence. Written for triton 2.0's `tl.dot(a, b, trans_a=..., trans_b=...)`, which triton 3
no longer has: the four calls take `tl.trans` instead (same product); the `is_cuda` assertion
goes (the interpreter runs on CPU tensors). Nothing else changes: `ADAPTATIONS` lists every
edit. Its layout is (B, T, H, D): the glue transposes (views, no copy), slices the logsumexp
it pads to a multiple of 128, and leaves its blocks (128 x 128, fixed) as they are.
"""
# ruff: noqa: F821 (the glue calls the published code, which comes before it)

UPSTREAM = (("Dao-AILab/flash-attention", "f1a73d074002226c42ce65a1df170ecff9f022c0",
             "flash_attn/flash_attn_triton.py", "BSD-3-Clause"),)
ADAPTATIONS = (
    ("tl.dot(q, k, trans_b=True)", "tl.dot(q, tl.trans(k))", 2, "triton 3: no trans_b"),
    ("tl.dot(p.to(do.dtype), do, trans_a=True)", "tl.dot(tl.trans(p.to(do.dtype)), do)", 1,
     "triton 3: no trans_a"),
    ("tl.dot(do, v, trans_b=True)", "tl.dot(do, tl.trans(v))", 1, "triton 3: no trans_b"),
    ("tl.dot(ds, q, trans_a=True)", "tl.dot(tl.trans(ds), q)", 1, "triton 3: no trans_a"),
    ("    assert q.is_cuda and k.is_cuda and v.is_cuda\n", "", 1,
     "the interpreter runs on CPU tensors"),
)


def flash_forward(q, k, v, is_causal=False, block_m=16, block_n=16):
    out, lse, _ = _flash_attn_forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                      causal=is_causal)
    return out.transpose(1, 2), lse[:, :, :q.shape[2]]


def flash_attention_triton(q, k, v, is_causal=False, block_m=16, block_n=16):
    return flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None,
                           is_causal).transpose(1, 2)
