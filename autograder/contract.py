"""The student contract: the exact names students implement, with their signatures.

This is the one place that names them. Checks, messages and the CLI read it; what each name
must do is in the README's contract table and docs/grading.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """One name a submission must define."""

    name: str
    signature: str
    forward: str = ""  # a module's forward, whose options the checks vary too


STEP_FUNCTIONS: tuple[Entry, ...] = (
    Entry("split_heads", "split_heads(x, num_heads)"),
    Entry("scaled_scores", "scaled_scores(q, k)"),
    Entry("causal_mask", "causal_mask(seq_len, device=None)"),
    Entry("attend", "attend(scores, v, mask=None)"),
    Entry("merge_heads", "merge_heads(x)"),
    Entry("output_projection", "output_projection(x, weight, bias=None)"),
)

_MHA_FORWARD = ("forward(query, key=None, value=None, *, attn_mask=None, is_causal=False,"
                " need_weights=True)")
MODULES: tuple[Entry, ...] = (
    Entry("AttentionHead",
          "AttentionHead(embed_dim, head_dim, *, kdim=None, vdim=None, bias=True)",
          "forward(query, key, value, attn_mask=None)"),
    Entry("LoopedMultiHeadAttention",
          "LoopedMultiHeadAttention(embed_dim, num_heads, *, kdim=None, vdim=None, bias=True,"
          " dropout=0.0)", _MHA_FORWARD),
    Entry("MultiHeadAttention",
          "MultiHeadAttention(embed_dim, num_heads, *, kdim=None, vdim=None, bias=True,"
          " dropout=0.0)", _MHA_FORWARD),
)

# The extension track (solutions/mha_extensions): the seed tutorials' variants in one module.
EXTENSION_MODULES: tuple[Entry, ...] = (
    Entry("GeneralMultiHeadAttention",
          "GeneralMultiHeadAttention(query_dim, num_heads, *, key_dim=None, value_dim=None,"
          " qk_head_dim=None, v_head_dim=None, out_dim=None, context_length=None, dropout=0.0,"
          " qkv_bias=True)"),
)

# The shapes warm-up (solutions/shapes).
SHAPE_FUNCTIONS: tuple[Entry, ...] = (
    Entry("split_heads_view", "split_heads_view(x, num_heads)"),
    Entry("merge_heads_transpose", "merge_heads_transpose(x)"),
    Entry("split_heads_rearrange", "split_heads_rearrange(x, num_heads)"),
    Entry("merge_heads_rearrange", "merge_heads_rearrange(x)"),
    Entry("view_quiz", "view_quiz()"),
)

ENTRIES: dict[str, Entry] = {
    e.name: e for e in STEP_FUNCTIONS + MODULES + EXTENSION_MODULES + SHAPE_FUNCTIONS
}


def signature_of(name: str) -> str:
    """The documented signature of a contract name, for messages."""
    return ENTRIES[name].signature
