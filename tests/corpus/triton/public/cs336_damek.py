"""Public code: a CS336 (Stanford, spring 2025) assignment 2 solution: FlashAttention-2's
forward in Triton (`flash_fwd_kernel`, block pointers), its backward in PyTorch under
torch.compile, behind `FlashAttention`.

Published: damek/cs336-assignment2-systems, cs336_systems/flashattention.py
@ 749e968710845df6bb5e8c15d8767b7214e229e6 (2025-09-02); MIT licence (the course's, Stanford
University 2025). No edit (`ADAPTATIONS` is empty). Its layout is (batch, T, D), tiles of
16 x 16 fixed: the glue folds heads into the batch (a reshape, which copies a non-contiguous
input: the strides check grades that copy, not the kernel) and reads the logsumexp the
Function saves through a context of its own. It cannot run with triton 3.9, which has removed
tl.make_block_ptr (compiled as well as interpreted): the verdict is Triton's own error.
"""
# ruff: noqa: F821 (the glue calls the published code, which comes before it)

from types import SimpleNamespace

UPSTREAM = (("damek/cs336-assignment2-systems", "749e968710845df6bb5e8c15d8767b7214e229e6",
             "cs336_systems/flashattention.py", "MIT"),)
ADAPTATIONS = ()


def _folded(t):
    return t.reshape(-1, *t.shape[2:])


def flash_forward(q, k, v, is_causal=False, block_m=16, block_n=16):
    ctx = SimpleNamespace()
    ctx.save_for_backward = lambda *saved: setattr(ctx, "saved", saved)
    out = FlashAttention.forward(ctx, _folded(q), _folded(k), _folded(v), is_causal)
    return out.reshape(q.shape), ctx.saved[3].reshape(q.shape[:3])


def flash_attention_triton(q, k, v, is_causal=False, block_m=16, block_n=16):
    return FlashAttention.apply(_folded(q), _folded(k), _folded(v), is_causal).reshape(q.shape)
