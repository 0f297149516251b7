"""The student contract: the exact names students implement, and what each must do.

This is the one place that names them. Checks, messages, the CLI and the docs read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """One name a submission must define."""

    name: str
    signature: str
    summary: str


STEP_FUNCTIONS: tuple[Entry, ...] = (
    Entry("split_heads", "split_heads(x, num_heads)", "(B, T, H*D) -> (B, H, T, D)"),
    Entry(
        "scaled_scores", "scaled_scores(q, k)", "(..., Tq, D), (..., Tk, D) -> q @ k^T / sqrt(D)"
    ),
    Entry(
        "causal_mask",
        "causal_mask(seq_len, device=None)",
        "bool (T, T), True where key j > query i (blocked)",
    ),
    Entry(
        "attend",
        "attend(scores, v, mask=None)",
        "(out, weights): softmax over keys with blocked positions at -inf, then weights @ v",
    ),
    Entry("merge_heads", "merge_heads(x)", "(B, H, T, D) -> (B, T, H*D)"),
    Entry("output_projection", "output_projection(x, weight, bias=None)", "x @ weight^T + bias"),
)

MODULES: tuple[Entry, ...] = (
    Entry(
        "AttentionHead",
        "AttentionHead(embed_dim, head_dim, *, kdim=None, vdim=None, bias=True)",
        "one head: q_proj, k_proj, v_proj; forward(query, key, value, attn_mask=None)"
        " -> (out (B, Tq, head_dim), weights (B, Tq, Tk))",
    ),
    Entry(
        "LoopedMultiHeadAttention",
        "LoopedMultiHeadAttention(embed_dim, num_heads, *, kdim=None, vdim=None, bias=True,"
        " dropout=0.0)",
        "heads (nn.ModuleList of AttentionHead) + out_proj; loops over heads",
    ),
    Entry(
        "MultiHeadAttention",
        "MultiHeadAttention(embed_dim, num_heads, *, kdim=None, vdim=None, bias=True, dropout=0.0)",
        "fused: q_proj, k_proj, v_proj, out_proj; forward(query, key=None, value=None, *,"
        " attn_mask=None, is_causal=False, need_weights=True) -> (out, weights (B, H, Tq, Tk))",
    ),
)

# The extension track (solutions/mha_extensions): the seed tutorials' variants in one module.
EXTENSION_MODULES: tuple[Entry, ...] = (
    Entry(
        "GeneralMultiHeadAttention",
        "GeneralMultiHeadAttention(query_dim, num_heads, *, key_dim=None, value_dim=None,"
        " qk_head_dim=None, v_head_dim=None, out_dim=None, context_length=None, dropout=0.0,"
        " qkv_bias=True)",
        "q_proj: query_dim -> H*qk_head_dim, k_proj: key_dim -> H*qk_head_dim, v_proj: value_dim"
        " -> H*v_head_dim, out_proj: H*v_head_dim -> out_dim (always with a bias); buffer `mask`"
        " (context_length, context_length), nonzero = blocked, when context_length is set;"
        " forward(query, key=None, value=None) -> (out (B, Tq, out_dim), weights (B, H, Tq, Tk))."
        " Defaults: key_dim and value_dim = query_dim, qk_head_dim = query_dim // num_heads"
        " (ValueError unless it divides), v_head_dim = qk_head_dim, out_dim = query_dim",
    ),
)

# The shapes warm-up (solutions/shapes).
SHAPE_FUNCTIONS: tuple[Entry, ...] = (
    Entry(
        "split_heads_view",
        "split_heads_view(x, num_heads)",
        "(B, T, H*D) -> (B, H, T, D) with view and transpose: a view of x, no copy",
    ),
    Entry(
        "merge_heads_transpose",
        "merge_heads_transpose(x)",
        "(B, H, T, D) -> (B, T, H*D) with transpose then reshape (or contiguous().view)",
    ),
    Entry(
        "split_heads_rearrange",
        "split_heads_rearrange(x, num_heads)",
        "(B, T, H*D) -> (B, H, T, D) with einops.rearrange",
    ),
    Entry(
        "merge_heads_rearrange",
        "merge_heads_rearrange(x)",
        "(B, H, T, D) -> (B, T, H*D) with einops.rearrange",
    ),
    Entry(
        "view_quiz",
        "view_quiz()",
        "a tuple of bools, one per expression of autograder.shapes_checks.VIEW_QUIZ, in order:"
        " True when the result shares x's memory",
    ),
)

ENTRIES: dict[str, Entry] = {
    e.name: e for e in STEP_FUNCTIONS + MODULES + EXTENSION_MODULES + SHAPE_FUNCTIONS
}


def signature_of(name: str) -> str:
    """The documented signature of a contract name, for messages."""
    return ENTRIES[name].signature
