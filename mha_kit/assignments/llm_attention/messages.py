"""The sentences of llm_attention's checks and mistakes, by id, in English and Chinese (see
`mha_kit.messages`); the Chinese ones are in messages_zh.py, more of both, for RoPE, GQA and
the cache and for FlashAttention, in messages_decoding.py and messages_flash.py."""

from . import messages_decoding, messages_flash
from .messages_zh import ZH

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "llm.rope_norm": "apply_rope changed the length of a feature vector (‖out‖ = {got}, "
                         "‖x‖ = {expected}): a rotation keeps lengths. Each pair (x_i, "
                         "x_(i+D/2)) must become (x_i cos θ - x_(i+D/2) sin θ, x_i sin θ + "
                         "x_(i+D/2) cos θ), both with the same angle θ",
        "llm.rope_relative": "the scores R(m)q · R(n)k changed when every position moved by "
                             "{shift}: with RoPE they depend on m - n only. Check that the "
                             "angle is position × frequency, with the positions you are given",
        "case.llm_decoding": "{module}; a prefill of {prefill} tokens, then {steps} at a time "
                             "through one KVCache",
        "llm.decoding": "{name} (decoding with a KVCache)",
        "llm.keeps_state": "{name} gave a different output the second time it ran on the same "
                           "x without a cache: forward(x) must keep nothing between calls "
                           "(a cache belongs in the KVCache passed to it)",
        "llm.cache_length": "len(cache) after each call was {got}, not {expected}: the cache "
                            "must grow by exactly the tokens of each call",
        "llm.step_output": "{name} output of call {step} with the cache",
        "llm.cached_output": "{name} outputs of the calls with the cache, one after the other "
                             "(each must equal the matching rows of attention over the whole "
                             "sequence)",
        "llm.bad_decoding_reply": "decoding with {name} and a KVCache gave back something other "
                                  "than outputs and lengths",
        "llm.cache_not_updated": "{name} decoded the right values without calling "
                                 "cache.update(k, v): right outputs alone are not a cache. "
                                 "Keep the keys (rotated by RoPE) and the values of past tokens "
                                 "in the KVCache: each call computes them for its new tokens "
                                 "only, and cache.update returns those of every token so far",
        "llm.cache_update_reply": "cache.update(k, v) gave back a {type}, not the pair (keys, "
                                  "values) of every token so far, (B, Hkv, L, D) each: the "
                                  "cache must keep keys and values, not what they are made from",
        "llm.cache_keys": "the keys that the last cache.update(k, v) gave back (those of every "
                          "token so far, each rotated by RoPE at its own position)",
        "llm.cache_values": "the values that the last cache.update(k, v) gave back (those of "
                            "every token so far)",
        "case.llm_large_scores": "scores in the hundreds",
        "case.llm_extreme_rows": "every score of query 0 near -10000, of query 1 near "
                                 "+1000",
        "llm.flash_pair": "{name} must return a pair (out, logsumexp), not a {type}",
        "llm.flash_out": "{name} output",
        "llm.flash_lse": "{name} logsumexp",
        "case.llm_memory": "on the meta device, B={B}, H={H}, Tq=Tk={T}, D={D}, "
                           "block_size={block}, is_causal={causal}",
        "case.llm_memory_real": "on the CPU, float32, B={B}, H={H}, Tq=Tk={T}, D={D}, "
                                "block_size={block}, is_causal={causal}",
        "llm.measuring": "{name} (memory watch)",
        "llm.reads_values": "{name} reads a tensor's values into Python (.item(), int(t), "
                            "float(t), or `if` on a tensor): the memory check runs it on the "
                            "meta device, where tensors have shapes and no values. Compute the "
                            "block bounds from shapes (q.shape, range(0, Tk, block_size)) "
                            "and keep the arithmetic in tensors",
        "llm.memory_too_slow": "{name} did not finish within the time limit at T={T} on the "
                               "meta device: the memory check calls it with block_size={block}, "
                               "so a loop over blocks of that size takes {blocks} steps. Use "
                               "the block_size you are given for your blocks",
        "llm.blocks_kept": "the tensors {name} made held {elements} elements at once, as many as "
                           "the scores of every head, H × Tq × Tk ({limit}): blocks kept (in a "
                           "list, say) add up to the matrix. Keep a block only while you use it",
        "llm.bad_memory_reply": "the memory watch of {name} gave back no sizes",
        "llm.full_matrix_forward": "{name} made a tensor of {elements} elements (shape "
                                   "{shape}, by {op}): the full (Tq, Tk) matrix of one head "
                                   "has {limit}. FlashAttention never builds it: go over the "
                                   "keys in blocks, keeping a running maximum, a running sum "
                                   "and a rescaled output",
        "llm.full_matrix_backward": "the backward of {name} made a tensor of {elements} "
                                    "elements (shape {shape}, by {op}): the full (Tq, Tk) "
                                    "matrix of one head has {limit}. Recompute the scores "
                                    "block by block from q, k and the saved logsumexp",
        "llm.no_graph": "the output of {name} is not connected to q, k and v: return "
                        "YourFunction.apply(q, k, v, is_causal, block_size)",
        "llm.saves_too_much": "the autograd graph of {name} keeps {elements} elements alive "
                              "for backward, as many as the full (Tq, Tk) matrix of one head "
                              "({limit}): autograd through the block loop saves every block's "
                              "scores. Write an autograd.Function that saves q, k, v, out and "
                              "the logsumexp only",
        "llm.function_saves_too_much": "the autograd.Function of {name} saves {elements} "
                                       "elements for backward with save_for_backward, as many "
                                       "as the full (Tq, Tk) matrix of one head ({limit}): "
                                       "save q, k, v, out and the logsumexp only, and recompute "
                                       "the scores block by block in backward",
        "llm.keeps_in_ctx": "the autograd graph of {name} keeps {elements} elements alive for "
                            "backward, as many as the full (Tq, Tk) matrix of one head "
                            "({limit}), most of them in `{where}` (shape {shape}), an attribute "
                            "of the Function's ctx: tensors kept there stay alive as saved ones "
                            "do. Keep q, k, v, out and the logsumexp only (ctx.save_for_backward)"
                            ", and recompute the scores block by block in backward",
        "llm.counting_decoding": "{name} (decoding through the KVCache, its work counted)",
        "llm.speed_malformed": "the counting run gave back something other than its counts",
        "llm.speed_spot": "{name} decoded other values while counted than the oracle's",
        "llm.speed_measured": "work per decoded token after a prefill of {P} tokens, counted "
                              "(the FLOPs of matrix products, the elements other torch "
                              "operations read and write): {cached:.1f} M through your KVCache, "
                              "{recomputed:.0f} M to recompute the prefix (the kit's count), "
                              "{ratio:.1f}× less; time, not graded: {cpu:.2f} ms of CPU per "
                              "token, {wall:.2f} ms wall (on {device}{config})",
        "llm.speed_passed": "{measured}; needed: at least {needed:g}× less",
        "llm.speed_too_slow": "{measured}; a cache does at least {needed:g}× less work here. "
                              "Keep the keys and values of past tokens in the KVCache and "
                              "compute them for the new token only, then attend over the tokens "
                              "the cache holds: attention over a preallocated buffer costs the "
                              "buffer's whole length at every step",
        "llm.speed_reads": "{name} read tensor values into Python while decoding through the "
                           "KVCache ({how}): the check counts the work of torch operations, and "
                           "work on values taken out of tensors, in Python or NumPy, would "
                           "escape the count. Decode with tensor operations only (a position is "
                           "len(cache), a Python int)",
        "llm.speed_uncounted": "{name} ran {ops} while decoding through the KVCache: the check "
                               "counts the work of matrix products, elementwise operations, "
                               "reductions, copies and indexing, and cannot count these "
                               "operations, whose work may far exceed the elements they touch. "
                               "Decode with the operations it counts, and it is scored",
        "llm.speed_unseen": "the work counted, {work:.2f} M per token, is less than computing "
                            "one token's key and value takes ({least:.2f} M): work done where "
                            "the counter cannot see it (another thread, code outside PyTorch) "
                            "is not scored",
        "waiting.llm_kv_cache": "counted only once decoding with the KVCache gives the right "
                                "outputs",
        "waiting.llm_gqa": "run once GroupedQueryAttention passes its check without a cache: "
                           "the cache is read and written inside its forward, which no "
                           "version of the kit's can stand in for",
        "mistake.rope_interleaved": (
            "This matches the interleaved pairing, features (2i, 2i + 1) rotated together, as "
            "Meta's original Llama code pairs them. This kit pairs feature i with i + D/2 "
            "(rotate-half, as Hugging Face's Llama does): x1 = x[..., :D/2], x2 = x[..., D/2:]."),
        "mistake.rope_base_ignored": (
            "This matches RoPE with base 10000 whatever the base given: use the `base` "
            "argument in the frequencies base^(-2i/D)."),
        "mistake.rope_positions_ignored": (
            "This matches positions 0, 1, ..., T-1 in place of the positions given: the angle "
            "of token t is positions[t] × θ_i."),
        "mistake.rope_reversed": (
            "This matches rotating by -θ: the first half becomes x1 cos θ - x2 sin θ, the "
            "second x1 sin θ + x2 cos θ."),
        "mistake.rope_exponent_halved": (
            "This matches the frequencies base^(-i/D) for i = 0 .. D/2 - 1: the exponent is "
            "2i/D, i.e. torch.arange(0, D, 2) / D."),
        "mistake.rope_mixed_pairing": (
            "This matches the two conventions mixed: the angles repeated in a row "
            "(repeat_interleave, the interleaved convention's) with the rotate-half pairing. "
            "With rotate-half, feature i and i + D/2 share angle θ_i: "
            "torch.cat([angles, angles], dim=-1)."),
        "mistake.kv_heads_tiled": (
            "This matches the heads tiled (x.repeat(1, n_rep, 1, 1): heads 0, 1, 0, 1) where "
            "each head is repeated in a row (0, 0, 1, 1): torch.repeat_interleave(x, n_rep, "
            "dim=1), or x[:, :, None].expand(...).reshape(...)."),
        "mistake.gqa_heads_tiled": (
            "This matches the key/value heads tiled: query heads h·n_rep .. (h+1)·n_rep - 1 "
            "share key/value head h, so repeat each head in a row (repeat_kv), not the whole "
            "set (repeat)."),
        "mistake.gqa_rope_missing": (
            "This matches attention without RoPE: rotate q and k (not v) with apply_rope at "
            "their positions, unless rope_base is None."),
        "mistake.gqa_rope_on_values": (
            "This matches RoPE applied to the values too: only q and k are rotated; the "
            "values carry content, not position."),
        "mistake.gqa_not_causal": (
            "This matches attention without the causal mask: token t may only see tokens "
            "0 .. t."),
        "mistake.cache_positions_restart": (
            "This matches positions restarting at 0 in each call, for RoPE (and maybe for the "
            "causal mask): a call with a cache starts at position len(cache), read before the "
            "update."),
        "mistake.cache_mask_top_left": (
            "This matches the causal mask aligned top-left (SDPA's is_causal=True with fewer "
            "queries than keys): a new token at position p sees every key 0 .. p, so query i "
            "of a call sees keys j <= len(cache) + i."),
        "mistake.cache_attend_before_update": (
            "This matches attending before the cache is updated: the new tokens do not see "
            "themselves. Call cache.update(k, v) first and attend over what it returns."),
        "mistake.cache_chunk_not_causal": (
            "This matches no mask within a call of several tokens, or a mask whose offset is "
            "len(cache) read after cache.update (every query then shifted by the call's "
            "tokens): each sees the ones after it. Read start = len(cache) before the update "
            "and block keys j > start + i for query i."),
        "mistake.window_one_too_many": (
            "This matches a window of window + 1 keys: query i sees j with i - window < j <= i, "
            "itself and the window - 1 keys before it."),
        "mistake.window_one_too_few": (
            "This matches a window of window - 1 keys: query i sees j with i - window < j <= i, "
            "itself and the window - 1 keys before it."),
        "mistake.window_two_sided": (
            "This matches a window on both sides: the mask is causal too, j <= i."),
        "mistake.window_inverted": (
            "This matches the mask inverted: True means the query may attend (SDPA's "
            "convention), so True on and below the diagonal, inside the window."),
        "mistake.flash_acc_not_rescaled": (
            "This matches the output accumulator not rescaled when the maximum grows: multiply "
            "it by exp(old_max - new_max) before adding the new block's p @ v."),
        "mistake.flash_sum_not_rescaled": (
            "This matches the running sum not rescaled when the maximum grows: multiply it by "
            "exp(old_max - new_max) before adding the new block's sum."),
        "mistake.flash_softmax_per_block": (
            "This matches a softmax taken within each block and the blocks added: the "
            "normaliser is the sum over every key, so keep a running sum and divide once at "
            "the end."),
        "mistake.flash_no_running_max": (
            "This matches exp() of the raw scores, without subtracting a running maximum: "
            "large scores overflow to inf. Keep the row's maximum so far and subtract it."),
        "mistake.flash_logsumexp_without_max": (
            "This matches the logsumexp without the maximum: it is max + log(sum), the sum "
            "being of exp(score - max)."),
        "mistake.flash_causal_off_by_one": (
            "This matches the causal boundary off by one: query i of Tq sees keys j <= i + "
            "Tk - Tq, itself included."),
        "mistake.flash_causal_top_left": (
            "This matches the causal mask aligned top-left: with fewer queries than keys the "
            "queries are the last Tq tokens, so query i sees keys j <= i + Tk - Tq."),
        "mistake.gqa_rope_before_split": (
            "This matches RoPE applied to the whole embedding before the heads are split: each "
            "head is rotated on its own, its feature i with its i + D/2 (D = head_dim). Split q "
            "and k into heads first, then apply_rope to (B, H, T, D)."),
        "mistake.gqa_groups_transposed": (
            "This matches the query heads grouped in the wrong order, (r g) where they are "
            "(g r): query heads g·n_rep .. (g+1)·n_rep - 1 share key/value head g, so split them "
            "as '(g r d)' (q.view(B, T, Hkv, n_rep, D)) and merge them back in the same order."),
        "mistake.gqa_group_summed": (
            "This matches the query heads of a group summed (an einsum such as 'b g r t d, b g "
            "s d -> b g t s', without r in the output): that leaves one head per key/value "
            "head. Keep r, 'b g r t d, b g s d -> b g r t s': each query head has its own "
            "scores."),
        "mistake.cache_causal_only_several": (
            "This matches a causal mask only for calls of several tokens, aligned top-left "
            "(is_causal=T > 1, as Hugging Face once wrote it): after the prefill, query i of a "
            "call is at position len(cache) + i and sees keys j <= len(cache) + i."),
        "mistake.cache_keys_rotated_after": (
            "This matches the keys cached before RoPE and rotated after, at the new tokens' "
            "positions: every cached key then turns by the newest angle. Rotate k at its own "
            "positions before cache.update(k, v), so that the cache holds rotated keys."),
        "mistake.window_not_causal": (
            "This matches the window without its causal part: query i also sees every key "
            "after it. Keep both bounds: (j <= i) & (j > i - window)."),
        "mistake.flash_nothing_rescaled": (
            "This matches neither the running sum nor the output accumulator rescaled when the "
            "maximum grows: multiply both by exp(old_max - new_max) before adding the new "
            "block's sum and its p @ v."),
        "mistake.flash_causal_ignored": (
            "This matches is_causal ignored: with is_causal=True, query i of Tq sees keys "
            "j <= i + Tk - Tq only. Mask each block's scores with -inf before its maximum."),
        "mistake.flash_causal_keys_cut": (
            "This matches the causal key range stopping early, one key or one block short or "
            "at qe without the offset Tk - Tq: the queries [qs, qe) need every key before "
            "min(Tk, qe + Tk - Tq), their diagonal block included; the mask inside that block "
            "does the rest."),
        "mistake.flash_softmax_per_block_averaged": (
            "This matches a softmax taken within each block and the blocks averaged: each "
            "block's softmax has its own normaliser, and no average combines them. Keep a "
            "running maximum and sum, rescale them, and divide once at the end."),
        "mistake.flash_backward_no_delta": (
            "This matches the backward without δ = rowsum(dO ∘ O): the softmax's gradient is "
            "dS = P ∘ (dP - δ), with dP = dO Vᵀ, for dQ and dK alike."),
        "mistake.flash_backward_unscaled": (
            "This matches dQ or dK without the softmax's scale: the scores are S = Q Kᵀ / √D, "
            "so dQ = dS K / √D and dK = dSᵀ Q / √D."),
        "mistake.flash_forward_failing": (
            "This matches the output of your flash_attention, which fails llm_flash_forward: "
            "this forward is the same wrong one. Fix flash_attention first (its check says "
            "what is wrong), or call it in your Function's forward: while yours fails, the "
            "backward is then graded with the kit's."),
        "llm.window_float": "sliding_window_mask(T, window) has dtype {dtype}: it must return "
                            "a torch.bool mask, True where query i MAY attend key j (SDPA's "
                            "convention for a boolean attn_mask), not an additive 0/-inf mask",
        "llm.cache_shared": "a new KVCache already held {length} tokens once another had been "
                            "used: its keys and values live in class attributes (a list in the "
                            "class body, say), which every cache shares. Make them in __init__ "
                            "(self.k = None), so that each cache starts empty",
        "llm.cache_heads": "{name} passed keys of {got} heads to cache.update, not the "
                           "num_kv_heads = {Hkv} heads of k_proj: the cache then holds the keys "
                           "and values after repeat_kv, {n_rep} times the memory it needs (the "
                           "reason for GQA is a cache of Hkv heads). Update the cache first, "
                           "then repeat what it returns",
        "mistake.flash_default_dtype": (
            "This matches the running maximum, sum and accumulator made by torch.full or "
            "torch.zeros without dtype= and device=: they are then float32, PyTorch's default "
            "dtype, on the CPU, whatever q is (bfloat16 here, on a GPU when graded there). "
            "Make them with q.new_full / q.new_zeros, or pass dtype=q.dtype, device=q.device."),
        "mistake.gqa_scale_by_embed_dim": (
            "This matches scores scaled by 1/√E, E the embedding size: each head's scores are "
            "scaled by 1/√D, D = E / num_heads its head dim (q.shape[-1])."),
        "mistake.gqa_scale_unrooted": (
            "This matches scores divided by D, not by √D: the scale is 1/√D, "
            "1 / math.sqrt(head_dim) (D ** -0.5)."),
        "mistake.gqa_mask_filled_zero": (
            "This matches the blocked scores filled with 0: a score of 0 still gets the weight "
            "e^0 in the softmax, so the future is seen. Fill them with float('-inf')."),
        "mistake.gqa_split_no_transpose": (
            "This matches heads split with .view(B, H, T, D) and no transpose: the projection "
            "is (B, T, H·D), so view it as (B, T, H, D), then .transpose(1, 2)."),
        "mistake.gqa_merge_no_transpose": (
            "This matches the heads merged by reshaping (B, H, T, D) straight to (B, T, E): "
            "transpose(1, 2) back to (B, T, H, D) first, then reshape."),
        "mistake.gqa_softmax_over_queries": (
            "This matches the softmax over the queries (dim=-2): each query's weights over the "
            "keys sum to 1, softmax(dim=-1)."),
        "mistake.gqa_rope_default_base": (
            "This matches apply_rope called without the layer's base, so with 10000: pass "
            "self.rope_base, apply_rope(q, positions, self.rope_base)."),
        "mistake.gqa_rope_queries_only": (
            "This matches RoPE on the queries only: rotate the keys too, at their own "
            "positions, or the scores do not depend on m - n."),
        "mistake.gqa_diagonal_blocked": (
            "This matches a causal mask that also blocks each token itself (j >= i): token t "
            "sees tokens 0 .. t, itself included, so block j > i only (triu(diagonal=1)); the "
            "first token, seeing nothing, gets NaN."),
        "mistake.gqa_n_rep_kv_heads": (
            "This matches repeat_kv(k, num_kv_heads): n_rep is the number of query heads per "
            "key/value head, num_heads // num_kv_heads, so that the Hkv heads become H."),
        "mistake.kv_repeat_tokens": (
            "This matches the repeat along the tokens (dim 2): the heads are dim 1 of (B, Hkv, "
            "T, D), each repeated n_rep times in a row."),
        "mistake.kv_repeat_batch": (
            "This matches the repeat along the batch (dim 0): the heads are dim 1 of (B, Hkv, "
            "T, D), each repeated n_rep times in a row."),
        "mistake.cache_returns_new_only": (
            "This matches an update that returns only the keys and values it was given: "
            "update must append them and return every key and value so far, (B, Hkv, "
            "len(cache), D)."),
        "mistake.cache_cat_heads": (
            "This matches the keys appended along dim 1, the heads: the cache is (B, Hkv, L, "
            "D), so new tokens go along dim 2, torch.cat([self.k, k], dim=2)."),
        "mistake.cache_square_mask": (
            "This matches a square (T, T) or (L, L) causal mask with a cache: a call has Tq = "
            "T new queries (a decoding step: Tq = 1) against Tk = len(cache) keys, so the "
            "mask is (Tq, Tk), key j blocked for query i when j > start + i."),
        "mistake.window_self_excluded": (
            "This matches a window that leaves out the token itself (j < i rather than "
            "j <= i): query i sees j with i - window < j <= i, itself and the window - 1 keys "
            "before it."),
        "mistake.flash_not_scaled": (
            "This matches the scores not scaled: multiply q @ kᵀ by 1/√D, D = q.shape[-1]."),
        "mistake.flash_last_block_skipped": (
            "This matches the last, shorter block of keys left out: go over range(0, Tk, "
            "block_size) and slice k[:, :, start:start + block_size], which is shorter at the "
            "end."),
        "mistake.flash_max_from_zero": (
            "This matches the running maximum started at 0, not -inf: a row whose scores are "
            "all far below 0 then sums exp(score - 0) = 0, and 0 / 0 is NaN. Start it at "
            "-inf (q.new_full(..., float(\"-inf\")))."),
        "mistake.flash_dv_from_output": (
            "This matches dV = Pᵀ · out: the gradient of the values is Pᵀ · dO, the output's "
            "gradient (grad_out), not the output."),
        "mistake.flash_delta_per_block": (
            "This matches δ summed over one block's keys: δ_i = Σ_j P_ij dP_ij over every "
            "key, which is rowsum(dO ∘ O): compute it once, before the loop."),
        "mistake.flash_p_softmax_per_block": (
            "This matches P recomputed as a softmax within each block: P = exp(S - "
            "logsumexp), with the logsumexp saved by the forward over every key."),
        "mistake.flash_dk_not_transposed": (
            "This matches dK = dS · q: dS is (Tq, b), so the keys' gradient is dSᵀ · q, "
            "(b, D)."),
        "mistake.flash_backward_not_causal": (
            "This matches the backward recomputing the scores without the causal mask: mask "
            "them there as the forward does, or blocked keys get a weight exp(S - "
            "logsumexp)."),
        "mistake.rope_exponent_positive": (
            "This matches the frequencies base^(+2i/D), the minus sign of the exponent left "
            "out: they grow with i instead of shrinking. θ_i = base^(-2i/D), so pair 0 turns "
            "fastest and the last pair slowest."),
        "mistake.rope_halves_swapped": (
            "This matches the two rotated halves concatenated in the wrong order: the first "
            "half of the output is x1·cos - x2·sin (feature i), the second x1·sin + x2·cos "
            "(feature i + D/2)."),
        "mistake.rope_float64_angles": (
            "This matches cos and sin left in float64, the dtype of the angles: x times them "
            "is promoted to float64. Cast them to x.dtype (.to(x.dtype)) before they meet x."),
        "mistake.rope_angles_in_dtype": (
            "This matches the angles computed in x's dtype, or cast to it before cos and sin: "
            "bfloat16 keeps 8 bits of a number, so a position or an angle in the thousands is "
            "off by whole radians. Compute the angles in float32 or float64 and cast only cos "
            "and sin to x.dtype."),
        "mistake.kv_view_after_expand": (
            "This matches a new axis of n_rep made by .expand, then merged into the heads by "
            ".view: an expanded axis has stride 0, which a view cannot merge with the heads. "
            "Use .reshape there (it copies), or a function that repeats along dim 1."),
        "mistake.kv_repeat_axis_after_tokens": (
            "This matches the new axis of n_rep placed after the tokens, (B, Hkv, T, n_rep, D): "
            "reshaping that to (B, Hkv·n_rep, T, D) mixes tokens into heads. The copies of a "
            "head must sit next to it, so the new axis goes right after the heads."),
        "mistake.gqa_split_interleaved": (
            "This matches heads split as (B, T, D, H) and permuted: head h then takes every "
            "H-th feature. Head h owns the features h·D .. (h+1)·D - 1: view as (B, T, H, D), "
            "then .transpose(1, 2)."),
        "mistake.gqa_no_out_proj": (
            "This matches the merged heads returned without out_proj: the module's output is "
            "self.out_proj of the (B, T, E) merged heads."),
        "mistake.window_transposed": (
            "This matches i and j swapped: the band lies above the diagonal, keys after the "
            "query. Rows are queries i (torch.arange(T)[:, None]) and columns keys j: query i "
            "sees i - window < j <= i."),
        "mistake.flash_lse_keepdim": (
            "This matches the logsumexp returned with the running sum's trailing dim of 1, "
            "(B, H, Tq, 1): it is one number per query, (B, H, Tq), so .squeeze(-1) it."),
        "mistake.flash_correction_inverted": (
            "This matches the rescaling factor inverted, exp(new_max - old_max): at the first "
            "block old_max is -inf, so the factor is inf and 0 · inf is NaN. The old sum and "
            "accumulator shrink when the maximum grows: exp(old_max - new_max)."),
        "mistake.flash_max_not_kept": (
            "This matches the new maximum never kept (row_max = new_max left out): each block "
            "then rescales what came before by exp(-inf) = 0, so only the last block counts. "
            "Keep the maximum after each block."),
        "mistake.flash_output_float32": (
            "This matches right values returned in float32 (.float(), or a float32 "
            "accumulator returned as it is): return the output and the logsumexp in q's "
            "dtype, .to(q.dtype)."),
        "mistake.flash_causal_keys_from_zero": (
            "This matches each block's keys numbered from 0 in the causal mask: key j of the "
            "block that starts at `start` is token start + j, so compare the queries' "
            "positions with torch.arange(start, start + b)."),
        "mistake.flash_dq_overwritten": (
            "This matches dQ overwritten in each key block (dq = dS · k_block) instead of "
            "summed over them: every key block adds to a query's gradient (dq = dq + ...)."),
        "mistake.flash_backward_lse_broadcast": (
            "This matches a per-query value of shape (B, H, Tq) used against a (B, H, Tq, b) "
            "block without a trailing dim, so that it is broadcast along the keys, not the "
            "queries: the logsumexp subtracted from the scores, or δ = rowsum(dO ∘ O) summed "
            "without keepdim=True. Keep the last dim: logsumexp[..., None], "
            "(dO * O).sum(-1, keepdim=True)."),
        "mistake.flash_dp_from_keys": (
            "This matches dP = dO · kᵀ: P multiplies the values, so its gradient is dO · vᵀ, "
            "with the block's values."),
        "mistake.flash_dq_dk_swapped": (
            "This matches the gradients of q and k returned in each other's place: backward "
            "returns them in the order of forward's arguments, (dq, dk, dv, ...)."),
        "mistake.gqa_kv_proj_width": (
            "This matches k_proj and v_proj sized embed_dim → embed_dim, as in multi-head "
            "attention, or a head_dim of embed_dim // num_kv_heads: each gives num_kv_heads · "
            "head_dim features, with head_dim = embed_dim // num_heads, the size of a query "
            "head."),
        "mistake.gqa_q_proj_width": (
            "This matches q_proj sized with the wrong head count: a head_dim of embed_dim // "
            "num_kv_heads, or num_kv_heads heads as k_proj has. q_proj gives num_heads · "
            "head_dim = embed_dim features, with head_dim = embed_dim // num_heads."),
        "mistake.cache_prepends": (
            "This matches an update that puts the new keys and values before the cached ones, "
            "torch.cat([k, self.k], dim=2): the cache keeps the tokens in order, oldest "
            "first, so that key j is token j for the causal mask. Append after them: "
            "torch.cat([self.k, k], dim=2)."),
        "mistake.cache_len_wrong_dim": (
            "This matches __len__ reading another dim of the cached keys (B, Hkv, L, D) than "
            "L: len() of a tensor is its first dim, the batch, and shape[1] the heads. Return "
            "self.k.shape[2], the tokens so far (0 before the first update)."),
        "mistake.cache_update_replaces": (
            "This matches an update that replaces the stored keys and values with the new "
            "ones: len(cache) is then the last call's tokens. Append along the tokens: "
            "self.k = torch.cat([self.k, k], dim=2)."),
        "mistake.cache_len_counts_calls": (
            "This matches __len__ counting the calls to update (the chunks kept in a list), "
            "not the tokens: add up each chunk's tokens, k.shape[2]."),
        "mistake.flash_size_mismatch": (
            "This matches a maximum or a sum over the wrong axis, or one without "
            "keepdim=True, the likely causes of a size mismatch in flash_attention's loop: "
            "take each block's maximum and sum over the keys, amax(dim=-1, keepdim=True) and "
            "sum(dim=-1, keepdim=True), so that the running m and ℓ stay (B, H, Tq, 1) and "
            "broadcast against the scores (B, H, Tq, b) and the accumulator (B, H, Tq, D)."),
        "mistake.flash_backward_size_mismatch": (
            "This matches one of the likely causes of a size mismatch in the backward: δ = "
            "rowsum(dO ∘ O) summed over another axis than the features, or without keepdim "
            "(it is (B, H, Tq, 1): sum(dim=-1, keepdim=True)); dV = Pᵀ · dO, (B, H, b, D), "
            "not dOᵀ · P nor a product with v; dQ += dS · k_block and dK = dSᵀ · q, each "
            "from dS and the other input."),
    },
    "zh": ZH,
}
for more in (messages_decoding, messages_flash):  # files of their own, each within 500 lines
    for language, sentences in more.TEMPLATES.items():
        if TEMPLATES[language].keys() & sentences.keys():  # one sentence per id, never two
            raise ValueError(f"{more.__name__} repeats ids: "
                             f"{sorted(TEMPLATES[language].keys() & sentences.keys())}")
        TEMPLATES[language] |= sentences
