"""The names the multi-head attention assignment defines (solutions/mha)."""

from ...catalog import Entry

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

ENTRIES = STEP_FUNCTIONS + MODULES
