"""The known mistakes of llm_attention, by id (their sentences: `mistake.<id>` in
messages.py; their recomputations: variants.py)."""

CATALOGUE: tuple[str, ...] = (
    # RoPE
    "rope_interleaved", "rope_base_ignored", "rope_positions_ignored", "rope_reversed",
    "rope_exponent_halved", "rope_mixed_pairing",
    # grouped-query attention
    "kv_heads_tiled", "gqa_heads_tiled", "gqa_rope_missing", "gqa_rope_on_values",
    "gqa_not_causal", "gqa_rope_before_split", "gqa_groups_transposed", "gqa_group_summed",
    # the KV cache
    "cache_positions_restart", "cache_mask_top_left", "cache_attend_before_update",
    "cache_chunk_not_causal", "cache_causal_only_several", "cache_keys_rotated_after",
    # the sliding window
    "window_one_too_many", "window_one_too_few", "window_two_sided", "window_inverted",
    "window_not_causal",
    # FlashAttention
    "flash_acc_not_rescaled", "flash_sum_not_rescaled", "flash_softmax_per_block",
    "flash_no_running_max", "flash_logsumexp_without_max", "flash_causal_off_by_one",
    "flash_causal_top_left", "flash_nothing_rescaled", "flash_causal_ignored",
    "flash_causal_keys_cut", "flash_softmax_per_block_averaged",
    # FlashAttention's backward
    "flash_backward_no_delta", "flash_backward_unscaled", "flash_forward_failing",
)
