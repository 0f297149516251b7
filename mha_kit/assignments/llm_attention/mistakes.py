"""The known mistakes of llm_attention, by id (their sentences: `mistake.<id>` in
messages.py; their recomputations: variants.py)."""

CATALOGUE: tuple[str, ...] = (
    # RoPE
    "rope_interleaved", "rope_base_ignored", "rope_positions_ignored", "rope_reversed",
    "rope_exponent_halved", "rope_mixed_pairing", "rope_exponent_positive",
    "rope_halves_swapped", "rope_float64_angles", "rope_angles_in_dtype",
    # grouped-query attention
    "kv_heads_tiled", "gqa_heads_tiled", "gqa_rope_missing", "gqa_rope_on_values",
    "gqa_not_causal", "gqa_rope_before_split", "gqa_groups_transposed", "gqa_group_summed",
    "gqa_scale_by_embed_dim", "gqa_scale_unrooted", "gqa_mask_filled_zero",
    "gqa_split_no_transpose", "gqa_merge_no_transpose",
    "gqa_softmax_over_queries", "gqa_rope_default_base", "gqa_rope_queries_only",
    "gqa_diagonal_blocked", "gqa_n_rep_kv_heads", "kv_repeat_tokens", "kv_repeat_batch",
    "kv_view_after_expand", "kv_repeat_axis_after_tokens", "gqa_split_interleaved",
    "gqa_no_out_proj", "gqa_kv_proj_width", "gqa_q_proj_width",
    # the KV cache
    "cache_positions_restart", "cache_mask_top_left", "cache_attend_before_update",
    "cache_chunk_not_causal", "cache_causal_only_several", "cache_keys_rotated_after",
    "cache_returns_new_only", "cache_cat_heads", "cache_square_mask", "cache_prepends",
    "cache_len_wrong_dim", "cache_update_replaces", "cache_len_counts_calls",
    # the sliding window
    "window_one_too_many", "window_one_too_few", "window_two_sided", "window_inverted",
    "window_not_causal", "window_self_excluded", "window_transposed",
    # FlashAttention
    "flash_acc_not_rescaled", "flash_sum_not_rescaled", "flash_softmax_per_block",
    "flash_no_running_max", "flash_logsumexp_without_max", "flash_causal_off_by_one",
    "flash_causal_top_left", "flash_nothing_rescaled", "flash_causal_ignored",
    "flash_causal_keys_cut", "flash_softmax_per_block_averaged", "flash_not_scaled",
    "flash_last_block_skipped", "flash_max_from_zero", "flash_default_dtype",
    "flash_lse_keepdim", "flash_correction_inverted", "flash_max_not_kept",
    "flash_output_float32", "flash_causal_keys_from_zero", "flash_size_mismatch",
    # FlashAttention's backward
    "flash_backward_no_delta", "flash_backward_unscaled", "flash_forward_failing",
    "flash_dv_from_output", "flash_delta_per_block", "flash_p_softmax_per_block",
    "flash_dk_not_transposed", "flash_backward_not_causal", "flash_dq_overwritten",
    "flash_backward_lse_broadcast", "flash_dp_from_keys", "flash_dq_dk_swapped",
    "flash_backward_size_mismatch",
    # RoPE's angle table, the projections and the cache's store (issue 42)
    "rope_cos_sin_swapped", "rope_angles_transposed", "rope_angles_not_outer",
    "gqa_v_from_k_proj", "gqa_k_from_q_proj", "cache_rope_skipped", "cache_values_get_keys",
    "rope_exponent_doubled", "rope_exponent_floored", "kv_expand_heads",
    "gqa_kv_split_num_heads", "gqa_kv_not_repeated", "gqa_kv_swapped", "cache_cat_wrong_dim",
    # FlashAttention, forward and backward: issue 42's further mistakes
    "flash_block_max_only", "flash_keys_short", "flash_p_normalised",
    "flash_backward_scaled_twice", "flash_gradients_misordered", "flash_dv_transposed",
    "flash_not_normalised", "flash_max_before_mask", "flash_backward_p_unscaled",
    "flash_p_old_max", "flash_lse_base2",
    # FlashAttention: the mask's fill, the logsumexp's log and dtype, δ, dP and dS (issue 42)
    "flash_causal_filled_zero", "flash_lse_without_log", "flash_lse_float32",
    "flash_delta_without_output", "flash_dp_not_transposed", "flash_delta_sign_flipped",
    "flash_ds_without_p", "flash_backward_matmul_mismatch", "flash_scale_inverted",
    "flash_causal_inverted",
    # RoPE, repeat_kv, GQA's mask and dtype, the cache's store: issue 42's further mistakes
    "rope_pairs_relaid", "kv_repeat_features", "cache_update_not_stored", "gqa_mask_anticausal",
    "gqa_scores_low_precision", "gqa_weights_scaled", "rope_positions_from_one",
    # FlashAttention's dS, the cache's length, RoPE's dtype, GQA's transposed keys (issue 42)
    "flash_ds_negated", "cache_read_while_empty", "rope_output_float32",
    "gqa_keys_transposed_wrong_dims",
)
