"""The names the llm_attention assignment defines (solutions/llm_attention)."""

from ...catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry("apply_rope", "apply_rope(x, positions, base=10000.0)"),
    Entry("repeat_kv", "repeat_kv(x, n_rep)"),
    Entry("GroupedQueryAttention",
          "GroupedQueryAttention(embed_dim, num_heads, num_kv_heads, rope_base=10000.0)",
          "forward(x, cache=None)"),
    Entry("KVCache", "KVCache()  # update(k, v), (B, Hkv, t, D) each, before repeat_kv -> "
                     "(keys, values) so far; len(cache)"),
    Entry("sliding_window_mask", "sliding_window_mask(T, window)"),
    Entry("flash_attention", "flash_attention(q, k, v, *, is_causal=False, block_size=64)"),
    Entry("flash_attention_autograd",
          "flash_attention_autograd(q, k, v, is_causal=False, block_size=64)"),
)
