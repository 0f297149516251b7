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

ENTRIES: dict[str, Entry] = {e.name: e for e in STEP_FUNCTIONS + MODULES}


def signature_of(name: str) -> str:
    """The documented signature of a contract name, for messages."""
    return ENTRIES[name].signature
