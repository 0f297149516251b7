"""The name the extension track defines (solutions/mha_extensions)."""

from ...catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry("GeneralMultiHeadAttention",
          "GeneralMultiHeadAttention(query_dim, num_heads, *, key_dim=None, value_dim=None,"
          " qk_head_dim=None, v_head_dim=None, out_dim=None, context_length=None, dropout=0.0,"
          " qkv_bias=True)"),
)
