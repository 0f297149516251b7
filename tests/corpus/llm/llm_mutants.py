"""Single-mistake submissions of llm_attention: each is reference.py with one mistake made
(one or a few exact text edits), labelled with what the grader must say.

`fails` is the exact set of checks the mistake must fail (a check that waits for a failing
one counts as failed); `named` the ids the grader must name: a mistake of `mistakes.py`, or
the id of the message that says what is wrong where no value is wrong (the cache's length,
the memory used).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REFERENCE = Path(__file__).with_name("reference.py")

# A piece that fails its own check costs only that check: the module that calls it is graded
# with the kit's version (CheckSpec.stand_ins), as the backward is with the kit's forward.
ROPE = frozenset({"llm_rope"})
GQA = frozenset({"llm_gqa", "llm_kv_cache"})  # the cache waits for the module
CACHE = frozenset({"llm_kv_cache"})
WINDOW = frozenset({"llm_sliding_window"})
FLASH = frozenset({"llm_flash_forward"})
MEMORY = frozenset({"llm_flash_memory"})
BACKWARD = frozenset({"llm_flash_backward"})

_PAIRS = """    x1, x2 = x[..., : D // 2], x[..., D // 2:]  # (..., T, D/2)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., T, D)"""
_MASKED = 'weights = scores.masked_fill(blocked, float("-inf")).softmax(dim=-1)  # (B, H, T, L)'
_FLASH_MASK = ('scores = scores.masked_fill(key_pos > query_pos, float("-inf"))'
               '  # (B, H, Tq, b)')
_WINDOW = "return (j <= i) & (j > i - window)  # (T, T)"
_AUTOGRAD = "return FlashAttentionFunction.apply(q, k, v, is_causal, block_size)"
_ROPE_QK = """        if self.rope_base is not None:
            positions = torch.arange(start, start + T, device=x.device)  # (T,)
            q = apply_rope(q, positions, self.rope_base)  # (B, H, T, D)
            k = apply_rope(k, positions, self.rope_base)  # (B, Hkv, T, D)
"""
_CACHED = """        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, L, D)
"""
_GROUPED = """        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, L, D)
        L = k.shape[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, T, L)"""
_GRAD_S = "grad_s = p * (grad_p - delta) * scale  # (B, H, Tq, b)"


@dataclass(frozen=True)
class Mutant:
    label: str
    edits: tuple[tuple[str, str], ...]
    fails: frozenset[str]
    named: frozenset[str]

    def source(self) -> str:
        """reference.py with the edits made; each old text occurs there exactly once."""
        text = REFERENCE.read_text()
        for old, new in self.edits:
            count = text.count(old)
            assert count == 1, f"{self.label}: {old!r} occurs {count} times"
            text = text.replace(old, new)
        return text


def _one(label: str, old: str, new: str, fails: frozenset[str], *named: str) -> Mutant:
    return Mutant(label, ((old, new),), fails, frozenset(named))


MUTANTS: tuple[Mutant, ...] = (
    # RoPE
    _one("RoPE pairs (2i, 2i + 1), as Meta's Llama", _PAIRS,
         """    x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, D/2)
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., T, D/2, 2)
    return out.flatten(-2)  # (..., T, D)""", ROPE, "rope_interleaved"),
    _one("RoPE ignores the base", "inv_freq = base ** (", "inv_freq = 10000.0 ** (", ROPE,
         "rope_base_ignored"),
    _one("RoPE counts positions from 0", "angles = positions.to(torch.float64)[:, None]",
         "angles = torch.arange(x.shape[-2], device=x.device, dtype=torch.float64)[:, None]",
         ROPE, "rope_positions_ignored"),
    _one("RoPE turns the other way", "x1 * cos - x2 * sin, x1 * sin + x2 * cos",
         "x1 * cos + x2 * sin, x2 * cos - x1 * sin", ROPE, "rope_reversed"),
    _one("RoPE frequencies base^(-i/D)", "torch.arange(0, D, 2, device=x.device",
         "torch.arange(0, D // 2, device=x.device", ROPE, "rope_exponent_halved"),
    _one("RoPE angles repeated in a row with the rotate-half pairing", _PAIRS,
         """    x1, x2 = x[..., : D // 2], x[..., D // 2:]  # (..., T, D/2)
    cos, sin = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)  # (T, D)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin  # (..., T, D)""",
         ROPE, "llm.rope_norm", "rope_mixed_pairing"),
    _one("RoPE makes its frequencies on the CPU", "torch.arange(0, D, 2, device=x.device, ",
         "torch.arange(0, D, 2, ", ROPE, "device.cpu_tensor"),
    _one("RoPE cuts the graph", "x1, x2 = x[..., : D // 2], x[..., D // 2:]",
         "x1, x2 = x[..., : D // 2].detach(), x[..., D // 2:].detach()", ROPE, "grad.detached"),
    # grouped-query attention
    _one("repeat_kv tiles the heads", "x.repeat_interleave(n_rep, dim=1)",
         "x.repeat(1, n_rep, 1, 1)", frozenset({"llm_repeat_kv"}), "kv_heads_tiled"),
    _one("repeat_kv left as released, the module complete", "    return x.repeat_interleave(",
         "    raise NotImplementedError\n    return x.repeat_interleave(",
         frozenset({"llm_repeat_kv"}), "runner.not_implemented"),
    _one("the module tiles the heads itself",
         "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, L, D)",
         "k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)  # (B, H, L, D)", GQA,
         "gqa_heads_tiled"),
    _one("the module forgets RoPE", "if self.rope_base is not None:", "if False:", GQA,
         "gqa_rope_missing"),
    _one("the module rotates the values too",
         "k = apply_rope(k, positions, self.rope_base)  # (B, Hkv, T, D)",
         "k = apply_rope(k, positions, self.rope_base)  # (B, Hkv, T, D)\n"
         "            v = apply_rope(v, positions, self.rope_base)  # (B, Hkv, T, D)",
         GQA, "gqa_rope_on_values"),
    _one("the module is not causal", _MASKED, "weights = scores.softmax(dim=-1)", GQA,
         "gqa_not_causal"),
    _one("the module cuts the graph before out_proj", "return self.out_proj(out)  # (B, T, E)",
         "return self.out_proj(out.detach())  # (B, T, E)", GQA, "grad.none"),
    Mutant("the module applies RoPE to the whole embedding, then splits the heads", (
        ("        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)\n"
         "        k = self.k_proj(x).view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)\n",
         "        q, k = self.q_proj(x), self.k_proj(x)  # (B, T, E), (B, T, Hkv*D)\n"
         "        if self.rope_base is not None:\n"
         "            positions = torch.arange(start, start + T, device=x.device)  # (T,)\n"
         "            q, k = apply_rope(q, positions, self.rope_base), apply_rope(\n"
         "                k, positions, self.rope_base)\n"
         "        q = q.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)\n"
         "        k = k.view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)\n"),
        (_ROPE_QK, "")), GQA, frozenset({"gqa_rope_before_split"})),
    _one("the module groups the query heads (r g)",
         "q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)",
         "q = self.q_proj(x).view(B, T, H // Hkv, Hkv, D).transpose(2, 3)"
         ".reshape(B, T, H, D).transpose(1, 2)  # (B, H, T, D), heads (r g)", GQA,
         "gqa_groups_transposed"),
    _one("the module sums the query heads of a group", _GROUPED,
         "        L = k.shape[2]\n"
         '        scores = torch.einsum("bgrtd,bgsd->bgts", q.view(B, Hkv, n_rep, T, D), k)'
         " / math.sqrt(self.head_dim)  # (B, Hkv, T, L)", GQA, "gqa_group_summed"),
    _one("the module fills its mask in a float32 tensor", _MASKED,
         "bias = torch.zeros(T, L, device=x.device).masked_fill(blocked, "
         "torch.finfo(x.dtype).min)  # (T, L)\n"
         "        weights = (scores + bias).softmax(dim=-1)  # (B, H, T, L)", GQA,
         "runner.float32_overflow"),
    # the KV cache
    _one("decoding restarts the positions at 0",
         "positions = torch.arange(start, start + T, device=x.device)  # (T,)",
         "positions = torch.arange(T, device=x.device)  # (T,)", CACHE,
         "cache_positions_restart"),
    _one("decoding aligns the mask top-left",
         "query_pos = torch.arange(start, start + T, device=x.device)[:, None]",
         "query_pos = torch.arange(T, device=x.device)[:, None]", CACHE, "cache_mask_top_left"),
    _one("decoding attends before the cache is updated",
         "            k, v = cache.update(k, v)  # (B, Hkv, L, D)",
         """            new_k, new_v = k, v
            if len(cache):
                k, v = cache.k, cache.v  # (B, Hkv, L, D): the past only
            cache.update(new_k, new_v)""", CACHE, "cache_attend_before_update"),
    _one("decoding masks nothing within a call", _MASKED,
         'weights = (scores if cache is not None else scores.masked_fill(blocked, '
         'float("-inf"))).softmax(dim=-1)', CACHE, "cache_chunk_not_causal"),
    _one("decoding reads the cache before updating it, the prefill included",
         "            k, v = cache.update(k, v)  # (B, Hkv, L, D)",
         """            new_k, new_v = k, v
            k, v = (cache.k, cache.v) if len(cache) else (k[:, :, :0], v[:, :, :0])
            cache.update(new_k, new_v)""", CACHE, "cache_attend_before_update"),
    _one("decoding caches the keys before RoPE", _ROPE_QK + _CACHED, _CACHED + _ROPE_QK, CACHE,
         "cache_keys_rotated_after"),
    _one("decoding masks only calls of several tokens, top-left (is_causal=T > 1)", _MASKED,
         "weights = (scores.masked_fill(torch.ones(T, L, dtype=torch.bool, device=x.device)"
         '.triu(1), float("-inf")) if T > 1 else scores).softmax(dim=-1)', CACHE,
         "cache_causal_only_several"),
    Mutant("the cache stores every call twice", tuple(
        (f"self.{t} = {t} if self.{t} is None else torch.cat([self.{t}, {t}], dim=2)",
         f"self.{t} = torch.cat([{t}, {t}], dim=2) if self.{t} is None "
         f"else torch.cat([self.{t}, {t}, {t}], dim=2)") for t in "kv"),
        CACHE, frozenset({"llm.cache_length"})),
    _one("the module keeps its own cache between calls",
         "        start = 0 if cache is None else len(cache)",
         """        if cache is None:
            cache = self.__dict__.setdefault("own_cache", KVCache())
        start = len(cache)""", CACHE, "llm.keeps_state"),
    # the sliding window
    _one("the window holds window + 1 keys", _WINDOW, "return (j <= i) & (j >= i - window)",
         WINDOW, "window_one_too_many"),
    _one("the window holds window - 1 keys", _WINDOW,
         "return (j <= i) & (j > i - window + 1)", WINDOW, "window_one_too_few"),
    _one("the window looks both ways", _WINDOW, "return (i - j).abs() < window", WINDOW,
         "window_two_sided"),
    _one("the window mask is inverted", _WINDOW, "return ~((j <= i) & (j > i - window))",
         WINDOW, "window_inverted"),
    _one("the window sees the future", _WINDOW, "return j > i - window", WINDOW,
         "window_not_causal"),
    # FlashAttention
    _one("the accumulator is not rescaled", "acc = acc * correction + p @ vb",
         "acc = acc + p @ vb", FLASH, "flash_acc_not_rescaled"),
    _one("the running sum is not rescaled", "row_sum = row_sum * correction + p.sum(",
         "row_sum = row_sum + p.sum(", FLASH, "flash_sum_not_rescaled"),
    Mutant("neither the running sum nor the accumulator is rescaled", (
        ("acc = acc * correction + p @ vb", "acc = acc + p @ vb"),
        ("row_sum = row_sum * correction + p.sum(", "row_sum = row_sum + p.sum(")),
        FLASH, frozenset({"flash_nothing_rescaled"})),
    _one("FlashAttention ignores is_causal",
         "        if is_causal:\n            key_pos = torch.arange(start, start + kb.shape[2], "
         "device=q.device)[None, :]  # (1, b)\n            " + _FLASH_MASK + "\n", "", FLASH,
         "flash_causal_ignored"),
    _one("the causal key range ends one key early",
         "    for start in range(0, Tk, block_size):\n        end = start + block_size",
         "    stop = Tk - 1 if is_causal else Tk\n"
         "    for start in range(0, stop, block_size):\n"
         "        end = min(start + block_size, stop)", FLASH, "flash_causal_keys_cut"),
    Mutant("each block's softmax averaged", (
        ("acc = acc * correction + p @ vb",
         "acc = acc + torch.softmax(scores, dim=-1).nan_to_num() @ vb"),
        ("out = acc / row_sum  # (B, H, Tq, D)",
         "out = acc / math.ceil(Tk / block_size)  # (B, H, Tq, D)")),
        FLASH, frozenset({"flash_softmax_per_block_averaged"})),
    Mutant("a softmax per block", (
        ("acc = acc * correction + p @ vb",
         "acc = acc + torch.softmax(scores, dim=-1).nan_to_num() @ vb"),
        ("out = acc / row_sum  # (B, H, Tq, D)", "out = acc  # (B, H, Tq, D)")),
        FLASH, frozenset({"flash_softmax_per_block"})),
    _one("no running maximum",
         "new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))",
         "new_max = torch.zeros_like(row_max)", frozenset({"llm_flash_forward"}),
         "flash_no_running_max"),
    _one("the logsumexp without the maximum",
         "logsumexp = (row_max + torch.log(row_sum)).squeeze(-1)",
         "logsumexp = torch.log(row_sum).squeeze(-1)", FLASH, "flash_logsumexp_without_max"),
    _one("the causal diagonal blocked", _FLASH_MASK, _FLASH_MASK.replace(">", ">="), FLASH,
         "flash_causal_off_by_one"),
    _one("the causal mask aligned top-left",
         "acc = q.new_zeros((B, H, Tq, D))  # (B, H, Tq, D)\n"
         "    query_pos = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)",
         "acc = q.new_zeros((B, H, Tq, D))  # (B, H, Tq, D)\n"
         "    query_pos = torch.arange(Tq, device=q.device)[:, None]", FLASH,
         "flash_causal_top_left"),
    _one("FlashAttention makes its positions on the CPU",
         "acc = q.new_zeros((B, H, Tq, D))  # (B, H, Tq, D)\n"
         "    query_pos = torch.arange(Tq, device=q.device)[:, None]",
         "acc = q.new_zeros((B, H, Tq, D))  # (B, H, Tq, D)\n"
         "    query_pos = torch.arange(Tq)[:, None]", FLASH | MEMORY, "device.cpu_tensor"),
    # memory: right values, the wrong cost
    _one("the full score matrix, once, for the maximum",
         'row_max = q.new_full((B, H, Tq, 1), float("-inf"))',
         "row_max = (q @ k.transpose(-2, -1) * scale).amax(dim=-1, keepdim=True)",
         # with a causal mask, a maximum over blocked keys too underflows every allowed one
         # on large scores: its values are wrong there as well
         FLASH | MEMORY, "llm.full_matrix_forward"),
    _one("a full causal mask, sliced per block",
         "    for start in range(0, Tk, block_size):\n        end = start + block_size",
         "    allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)\n"
         "    for start in range(0, Tk, block_size):\n        end = start + block_size",
         MEMORY, "llm.full_matrix_forward"),
    Mutant("every block's probabilities kept in a list", (
        ("    for start in range(0, Tk, block_size):\n",
         "    kept = []\n    for start in range(0, Tk, block_size):\n"),
        ("        p = torch.exp(scores - safe_max)  # (B, H, Tq, b)",
         "        p = torch.exp(scores - safe_max)  # (B, H, Tq, b)\n        kept.append(p)")),
        MEMORY, frozenset({"llm.blocks_kept"})),
    _one("a block count read from a tensor", "for start in range(0, Tk, block_size):\n"
         "        end = start + block_size",
         "for start in range(0, int(k.new_tensor(Tk)), block_size):\n"
         "        end = start + block_size",
         MEMORY, "llm.reads_values"),
    _one("autograd through the block loop", _AUTOGRAD,
         "return flash_attention(q, k, v, is_causal=is_causal, block_size=block_size)[0]",
         BACKWARD, "llm.saves_too_much"),
    _one("the Function keeps every block's probabilities on ctx",
         "        ctx.is_causal, ctx.block_size = is_causal, block_size\n",
         "        ctx.is_causal, ctx.block_size = is_causal, block_size\n"
         "        ctx.probabilities = [torch.softmax(q @ k[:, :, s:s + block_size]"
         ".transpose(-2, -1), dim=-1) for s in range(0, k.shape[2], block_size)]\n", BACKWARD,
         "llm.keeps_in_ctx"),
    _one("the Function saves every block's scores",
         "        ctx.save_for_backward(q, k, v, out, logsumexp)",
         "        ctx.save_for_backward(q, k, v, out, logsumexp, *(q @ k[:, :, s:s + block_size]"
         ".transpose(-2, -1) for s in range(0, k.shape[2], block_size)))", BACKWARD,
         "llm.function_saves_too_much"),
    _one("a backward without the softmax scale", _GRAD_S,
         "grad_s = p * (grad_p - delta)  # (B, H, Tq, b)", BACKWARD, "flash_backward_unscaled"),
    Mutant("dK without the softmax scale", (
        (_GRAD_S, "grad_s = p * (grad_p - delta)  # (B, H, Tq, b)"),
        ("grad_q = grad_q + grad_s @ kb", "grad_q = grad_q + grad_s @ kb * scale")),
        BACKWARD, frozenset({"flash_backward_unscaled"})),
    _one("a backward without delta", _GRAD_S, "grad_s = p * grad_p * scale  # (B, H, Tq, b)",
         BACKWARD, "flash_backward_no_delta"),
    Mutant("the Function's own forward, the wrong scale as flash_attention's", (
        ("    scale = 1 / math.sqrt(D)\n    row_max", "    scale = 1 / D\n    row_max"),
        ("out, logsumexp = flash_attention(q, k, v, is_causal=is_causal, block_size=block_size)",
         "out, logsumexp = _forward(q, k, v, is_causal=is_causal, block_size=block_size)"),
        ("class FlashAttentionFunction(torch.autograd.Function):",
         "_forward = flash_attention  # the Function's own name for it\n\n\n"
         "class FlashAttentionFunction(torch.autograd.Function):")),
        FLASH | BACKWARD, frozenset({"flash_forward_failing"})),
    _one("a backward that rebuilds the full matrix",
         "        delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (B, H, Tq, 1)",
         "        delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (B, H, Tq, 1)\n"
         "        full = q @ k.transpose(-2, -1)  # (B, H, Tq, Tk)", BACKWARD,
         "llm.full_matrix_backward"),
    # issue 42: the mistakes an independent test set met
    _one("the scores scaled by 1/√E",
         "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)",
         "scores = q @ k.transpose(-2, -1) / math.sqrt(E)", GQA, "gqa_scale_by_embed_dim"),
    _one("FlashAttention never keeps its new maximum", "        row_max = new_max\n", "",
         FLASH, "flash_max_not_kept"),
    _one("FlashAttention returns float32",
         "    return out, logsumexp\n\n\nclass FlashAttentionFunction",
         "    return out.float(), logsumexp.float()\n\n\nclass FlashAttentionFunction",
         FLASH, "flash_output_float32"),
    _one("FlashAttention numbers each block's keys from 0 in the causal mask",
         "key_pos = torch.arange(start, start + kb.shape[2], device=q.device)[None, :]  # (1",
         "key_pos = torch.arange(kb.shape[2], device=q.device)[None, :]  # (1", FLASH,
         "flash_causal_keys_from_zero"),
    _one("the scores divided by D, not √D",
         "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)",
         "scores = q @ k.transpose(-2, -1) / self.head_dim", GQA, "gqa_scale_unrooted"),
    _one("the blocked scores filled with 0",
         'weights = scores.masked_fill(blocked, float("-inf")).softmax(dim=-1)',
         "weights = scores.masked_fill(blocked, 0.0).softmax(dim=-1)", GQA,
         "gqa_mask_filled_zero"),
    Mutant("the heads split by a view without the transpose", tuple(
        (f"= self.{name}_proj(x).view(B, T, {heads}, D).transpose(1, 2)",
         f"= self.{name}_proj(x).view(B, {heads}, T, D)")
        for name, heads in (("q", "H"), ("k", "Hkv"), ("v", "Hkv"))), GQA,
        frozenset({"gqa_split_no_transpose"})),
    _one("the heads merged without the transpose",
         "out = (weights @ v).transpose(1, 2).reshape(B, T, E)",
         "out = (weights @ v).reshape(B, T, E)", GQA, "gqa_merge_no_transpose"),
    _one("the softmax over the queries", _MASKED, _MASKED.replace("dim=-1", "dim=-2"), GQA,
         "gqa_softmax_over_queries"),
    Mutant("apply_rope called with its default base", tuple(
        (f"{t} = apply_rope({t}, positions, self.rope_base)",
         f"{t} = apply_rope({t}, positions)") for t in "qk"), GQA,
        frozenset({"gqa_rope_default_base"})),
    _one("RoPE on the queries only",
         "            k = apply_rope(k, positions, self.rope_base)  # (B, Hkv, T, D)\n", "",
         GQA, "gqa_rope_queries_only"),
    _one("the causal mask blocks the diagonal too",
         "blocked = torch.arange(L, device=x.device)[None, :] > query_pos",
         "blocked = torch.arange(L, device=x.device)[None, :] >= query_pos", GQA,
         "gqa_diagonal_blocked"),
    _one("repeat_kv by the number of key/value heads",
         "n_rep = self.num_heads // self.num_kv_heads", "n_rep = self.num_kv_heads", GQA,
         "gqa_n_rep_kv_heads"),
    _one("repeat_kv along the tokens", "x.repeat_interleave(n_rep, dim=1)",
         "x.repeat_interleave(n_rep, dim=2)", frozenset({"llm_repeat_kv"}), "kv_repeat_tokens"),
    _one("repeat_kv along the batch", "x.repeat_interleave(n_rep, dim=1)",
         "x.repeat_interleave(n_rep, dim=0)", frozenset({"llm_repeat_kv"}), "kv_repeat_batch"),
    Mutant("the cache appends along the heads", tuple(
        (f"torch.cat([self.{t}, {t}], dim=2)", f"torch.cat([self.{t}, {t}], dim=1)")
        for t in "kv"), CACHE, frozenset({"cache_cat_heads"})),
    _one("the cache returns only what it was given", "        return self.k, self.v\n",
         "        return k, v\n", CACHE, "cache_returns_new_only"),
    Mutant("the cache keeps its tensors in class attributes", (
        ("    def __init__(self):\n        self.k = None\n        self.v = None\n",
         "    keys, values = [], []  # class attributes: one list for every cache\n"),
        ("        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)",
         "        self.keys.append(k)"),
        ("        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)",
         "        self.values.append(v)"),
        ("        return self.k, self.v\n",
         "        return torch.cat(self.keys, dim=2), torch.cat(self.values, dim=2)\n"),
        ("        return 0 if self.k is None else self.k.shape[2]",
         "        return sum(k.shape[2] for k in self.keys)")),
        CACHE, frozenset({"llm.cache_shared"})),
    _one("a square causal mask while decoding",
         "blocked = torch.arange(L, device=x.device)[None, :] > query_pos  # (T, L)",
         "blocked = torch.ones(L, L, dtype=torch.bool, device=x.device).triu(1)  # (L, L)",
         CACHE, "cache_square_mask"),
    _one("the cache holds the keys after repeat_kv",
         "        if cache is not None:\n            k, v = cache.update(k, v)  # (B, Hkv, L, D)\n"
         "        n_rep = self.num_heads // self.num_kv_heads\n"
         "        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, L, D)\n",
         "        n_rep = self.num_heads // self.num_kv_heads\n"
         "        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, T, D)\n"
         "        if cache is not None:\n            k, v = cache.update(k, v)  # (B, H, L, D)\n",
         CACHE, "llm.cache_heads"),
    _one("the window leaves the token itself out", _WINDOW,
         "return (j < i) & (j >= i - window)", WINDOW, "window_self_excluded"),
    _one("the window as an additive float mask", _WINDOW,
         'return torch.zeros(T, T).masked_fill(~((j <= i) & (j > i - window)), float("-inf"))',
         WINDOW, "llm.window_float"),
    _one("FlashAttention without the 1/√D scale",
         "    scale = 1 / math.sqrt(D)\n    row_max", "    scale = 1.0\n    row_max", FLASH,
         "flash_not_scaled"),
    _one("FlashAttention skips the last, shorter block",
         "    for start in range(0, Tk, block_size):\n        end = start + block_size",
         "    for start in range(0, Tk - block_size + 1, block_size):\n"
         "        end = start + block_size", FLASH, "flash_last_block_skipped"),
    Mutant("FlashAttention's running values in the default dtype, on the CPU", (
        ('row_max = q.new_full((B, H, Tq, 1), float("-inf"))',
         'row_max = torch.full((B, H, Tq, 1), float("-inf"))'),
        ("row_sum = q.new_zeros((B, H, Tq, 1))", "row_sum = torch.zeros((B, H, Tq, 1))"),
        ("acc = q.new_zeros((B, H, Tq, D))", "acc = torch.zeros((B, H, Tq, D))")),
        FLASH | MEMORY, frozenset({"flash_default_dtype"})),
    _one("the running maximum starts at 0",
         'row_max = q.new_full((B, H, Tq, 1), float("-inf"))',
         "row_max = q.new_zeros((B, H, Tq, 1))", FLASH, "flash_max_from_zero"),
    _one("a backward with dV = Pᵀ·out", "grad_v.append(p.transpose(-2, -1) @ grad_out)",
         "grad_v.append(p.transpose(-2, -1) @ out)", BACKWARD, "flash_dv_from_output"),
    _one("a backward without the causal mask", "            if ctx.is_causal:\n",
         "            if False:  # the causal mask forgotten\n", BACKWARD,
         "flash_backward_not_causal"),
    _one("a backward with δ of one block",
         "grad_s = p * (grad_p - delta) * scale  # (B, H, Tq, b)",
         "grad_s = p * (grad_p - (p * grad_p).sum(dim=-1, keepdim=True)) * scale",
         BACKWARD, "flash_delta_per_block"),
    _one("a backward with a softmax per block",
         "p = torch.exp(scores - logsumexp[..., None])  # (B, H, Tq, b)",
         "p = torch.softmax(scores, dim=-1)  # (B, H, Tq, b)", BACKWARD,
         "flash_p_softmax_per_block"),
    _one("a backward with dK = dS·q", "grad_k.append(grad_s.transpose(-2, -1) @ q)",
         "grad_k.append(grad_s @ q)", BACKWARD, "flash_dk_not_transposed"),
    # issue 42: a second independent test set
    _one("RoPE frequencies base^(+2i/D)", "inv_freq = base ** (-torch.arange(",
         "inv_freq = base ** (torch.arange(", ROPE, "rope_exponent_positive"),
    _one("RoPE concatenates its halves the other way round",
         "x1 * cos - x2 * sin, x1 * sin + x2 * cos", "x1 * sin + x2 * cos, x1 * cos - x2 * sin",
         ROPE, "rope_halves_swapped"),
    _one("RoPE leaves cos and sin in float64",
         "cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)",
         "cos, sin = angles.cos(), angles.sin()", ROPE, "rope_float64_angles"),
    Mutant("RoPE makes its angles in x's dtype (bfloat16 at late positions)",
           (("dtype=torch.float64) / D)", "dtype=x.dtype) / D)"),
            ("angles = positions.to(torch.float64)[:, None]",
             "angles = positions.to(x.dtype)[:, None]")),
           ROPE, frozenset({"rope_angles_in_dtype"})),
    _one("repeat_kv merges an expanded axis by .view",
         "    return x.repeat_interleave(n_rep, dim=1)",
         "    B, Hkv, T, D = x.shape\n"
         "    return x[:, :, None].expand(B, Hkv, n_rep, T, D).view(B, Hkv * n_rep, T, D)",
         frozenset({"llm_repeat_kv"}), "kv_view_after_expand"),
    _one("repeat_kv puts the new axis after the tokens",
         "    return x.repeat_interleave(n_rep, dim=1)",
         "    B, Hkv, T, D = x.shape\n"
         "    return x[:, :, :, None].expand(B, Hkv, T, n_rep, D).reshape(B, Hkv * n_rep, T, D)",
         frozenset({"llm_repeat_kv"}), "kv_repeat_axis_after_tokens"),
    _one("the queries split by a view without the transpose",
         "q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)",
         "q = self.q_proj(x).view(B, H, T, D)", GQA, "gqa_split_no_transpose"),
    _one("the queries split as (B, T, D, H)",
         "q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)",
         "q = self.q_proj(x).view(B, T, D, H).permute(0, 3, 1, 2)", GQA,
         "gqa_split_interleaved"),
    _one("the module forgets out_proj", "return self.out_proj(out)  # (B, T, E)",
         "return out  # (B, T, E)", GQA, "gqa_no_out_proj"),
    _one("the window with i and j swapped", _WINDOW, "return (i <= j) & (i > j - window)",
         WINDOW, "window_transposed"),
    _one("the logsumexp keeps its trailing dim",
         "logsumexp = (row_max + torch.log(row_sum)).squeeze(-1)",
         "logsumexp = row_max + torch.log(row_sum)", FLASH, "flash_lse_keepdim"),
    _one("the correction inverted", "correction = torch.exp(row_max - safe_max)",
         "correction = torch.exp(safe_max - row_max)", FLASH, "flash_correction_inverted"),
    _one("the accumulator made by torch.zeros without dtype", "acc = q.new_zeros((B, H, Tq, D))",
         "acc = torch.zeros(B, H, Tq, D, device=q.device)", FLASH, "flash_default_dtype"),
    _one("a backward that overwrites dQ in each block", "grad_q = grad_q + grad_s @ kb",
         "grad_q = grad_s @ kb", BACKWARD, "flash_dq_overwritten"),
    _one("a backward that returns three gradients",
         "return grad_q, torch.cat(grad_k, dim=2), torch.cat(grad_v, dim=2), None, None",
         "return grad_q, torch.cat(grad_k, dim=2), torch.cat(grad_v, dim=2)", BACKWARD,
         "grad.gradient_count"),
    _one("a backward that subtracts the logsumexp without a trailing dim",
         "p = torch.exp(scores - logsumexp[..., None])", "p = torch.exp(scores - logsumexp)",
         BACKWARD, "flash_backward_lse_broadcast"),
    _one("a backward with dP = dO·kᵀ", "grad_p = grad_out @ vb.transpose(-2, -1)",
         "grad_p = grad_out @ kb.transpose(-2, -1)", BACKWARD, "flash_dp_from_keys"),
    _one("a backward that returns dK before dQ",
         "return grad_q, torch.cat(grad_k, dim=2), torch.cat(grad_v, dim=2), None, None",
         "return torch.cat(grad_k, dim=2), grad_q, torch.cat(grad_v, dim=2), None, None",
         BACKWARD, "flash_dq_dk_swapped"),
    # issue 42: the kinds of mistake that got a bare shape, length, order or error
    Mutant("k_proj and v_proj sized embed_dim -> embed_dim", tuple(
        (f"self.{t}_proj = nn.Linear(embed_dim, num_kv_heads * self.head_dim, bias=False)",
         f"self.{t}_proj = nn.Linear(embed_dim, embed_dim, bias=False)") for t in "kv"),
        GQA, frozenset({"gqa_kv_proj_width"})),
    Mutant("head_dim from the key/value heads, q_proj sized by it", (
        ("self.head_dim = embed_dim // num_heads", "self.head_dim = embed_dim // num_kv_heads"),
        ("self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)",
         "self.q_proj = nn.Linear(embed_dim, num_heads * self.head_dim, bias=False)")),
        GQA, frozenset({"gqa_q_proj_width"})),
    _one("len(cache) is len() of the keys, the batch",
         "return 0 if self.k is None else self.k.shape[2]",
         "return 0 if self.k is None else len(self.k)", CACHE, "cache_len_wrong_dim"),
    Mutant("the cache keeps only the last call's keys and values", tuple(
        (f"self.{t} = {t} if self.{t} is None else torch.cat([self.{t}, {t}], dim=2)",
         f"self.{t} = {t}") for t in "kv"), CACHE, frozenset({"cache_update_replaces"})),
    Mutant("len(cache) counts the calls to update", (
        ("    def __init__(self):\n        self.k = None\n        self.v = None\n",
         "    def __init__(self):\n        self.k = None\n        self.v = None\n"
         "        self.chunks = []  # the keys of each call\n"),
        ("        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)",
         "        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)\n"
         "        self.chunks.append(k)"),
        ("return 0 if self.k is None else self.k.shape[2]", "return len(self.chunks)")),
        CACHE, frozenset({"cache_len_counts_calls"})),
    Mutant("the cache puts each call's keys before the old ones", tuple(
        (f"torch.cat([self.{t}, {t}], dim=2)", f"torch.cat([{t}, self.{t}], dim=2)")
        for t in "kv"), CACHE, frozenset({"cache_prepends"})),
    _one("the mask's offset read from len(cache) after the update", _CACHED,
         _CACHED + "            start = len(cache)  # read again: now it counts this call\n",
         CACHE, "cache_chunk_not_causal"),
    _one("FlashAttention's running sum without keepdim", "p.sum(dim=-1, keepdim=True)",
         "p.sum(dim=-1)", FLASH | MEMORY, "flash_size_mismatch"),
    _one("a backward with δ summed over the queries",
         "delta = (grad_out * out).sum(dim=-1, keepdim=True)",
         "delta = (grad_out * out).sum(dim=-2, keepdim=True)", BACKWARD,
         "flash_backward_size_mismatch"),
    # RoPE's angle table, the projections, the cache's store, hints after torch's errors
    # (issue 42)
    _one("RoPE swaps cos and sin", "cos, sin = angles.cos().to(x.dtype), angles.sin()"
         ".to(x.dtype)", "sin, cos = angles.cos().to(x.dtype), angles.sin().to(x.dtype)", ROPE,
         "rope_cos_sin_swapped"),
    _one("RoPE builds its angle table (D/2, T)",
         "angles = positions.to(torch.float64)[:, None] * inv_freq  # (T, D/2)",
         "angles = inv_freq[:, None] * positions.to(torch.float64)[None, :]  # (D/2, T)", ROPE,
         "rope_angles_transposed"),
    _one("RoPE multiplies positions by frequencies without the outer product",
         "angles = positions.to(torch.float64)[:, None] * inv_freq  # (T, D/2)",
         "angles = positions.to(torch.float64) * inv_freq  # (T,) * (D/2,)", ROPE,
         "rope_angles_not_outer"),
    _one("RoPE casts its angles to x's dtype before cos and sin",
         "cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)",
         "angles = angles.to(x.dtype)  # (T, D/2)\n"
         "    cos, sin = angles.cos(), angles.sin()", ROPE, "rope_angles_in_dtype"),
    _one("the module leaves its scores unscaled", "q @ k.transpose(-2, -1) / math.sqrt("
         "self.head_dim)", "q @ k.transpose(-2, -1)", GQA, "no_scaling"),
    _one("the module masks after the softmax", _MASKED,
         "weights = scores.softmax(dim=-1).masked_fill(blocked, 0.0)  # (B, H, T, L)", GQA,
         "mask_after_softmax"),
    _one("the module makes its values with k_proj", "v = self.v_proj(x).view(",
         "v = self.k_proj(x).view(", GQA, "gqa_v_from_k_proj"),
    _one("the module makes its keys with q_proj", "k = self.k_proj(x).view(",
         "k = self.q_proj(x).view(", GQA, "gqa_k_from_q_proj"),
    _one("the module merges its heads by .view after the transpose",
         "out = (weights @ v).transpose(1, 2).reshape(B, T, E)",
         "out = (weights @ v).transpose(1, 2).view(B, T, E)", GQA, "runner.view_not_contiguous"),
    _one("the module skips RoPE when given a cache", "if self.rope_base is not None:",
         "if self.rope_base is not None and cache is None:", CACHE, "cache_rope_skipped"),
    _one("decoding starts every call at position 0, for RoPE and the mask",
         "start = 0 if cache is None else len(cache)", "start = 0", CACHE,
         "cache_positions_restart"),
    _one("the cache appends the keys to the values", "torch.cat([self.v, v], dim=2)",
         "torch.cat([self.v, k], dim=2)", CACHE, "cache_values_get_keys"),
    _one("the backward makes dQ on the CPU", "grad_q = torch.zeros_like(q)",
         "grad_q = torch.zeros(q.shape, dtype=q.dtype)", BACKWARD, "runner.device_mix"),
    _one("RoPE divides its exponent by the number of pairs",
         "torch.arange(0, D, 2, device=x.device, dtype=torch.float64) / D)",
         "torch.arange(0, D, 2, device=x.device, dtype=torch.float64) / (D // 2))", ROPE,
         "rope_exponent_doubled"),
    _one("RoPE rounds -2i/D by integer division",
         "torch.arange(0, D, 2, device=x.device, dtype=torch.float64) / D)",
         "torch.arange(0, D, 2, device=x.device) // D)", ROPE, "rope_exponent_floored"),
    _one("RoPE rounds 2i/D by integer division",
         "-torch.arange(0, D, 2, device=x.device, dtype=torch.float64) / D)",
         "-(torch.arange(0, D, 2, device=x.device) // D))", ROPE, "rope_exponent_floored"),
    _one("repeat_kv expands the heads axis itself", "    return x.repeat_interleave(",
         "    return x.expand(x.shape[0], x.shape[1] * n_rep, *x.shape[2:])\n"
         "    return x.repeat_interleave(", frozenset({"llm_repeat_kv"}), "kv_expand_heads"),
    Mutant("the module splits its keys and values into num_heads heads", tuple(
        (f"{t} = self.{t}_proj(x).view(B, T, Hkv, D)", f"{t} = self.{t}_proj(x).view(B, T, H, D)")
        for t in "kv"), GQA, frozenset({"gqa_kv_split_num_heads"})),
    _one("the module leaves out repeat_kv",
         "        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, L, D)\n", "", GQA,
         "gqa_kv_not_repeated"),
    _one("the module makes its keys with v_proj and its values with k_proj",
         "k = self.k_proj(x).view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)\n"
         "        v = self.v_proj(x).view(",
         "k = self.v_proj(x).view(B, T, Hkv, D).transpose(1, 2)  # (B, Hkv, T, D)\n"
         "        v = self.k_proj(x).view(", GQA, "gqa_kv_swapped"),
    Mutant("the cache appends along torch.cat's default dim", tuple(
        (f"torch.cat([self.{t}, {t}], dim=2)", f"torch.cat([self.{t}, {t}])") for t in "kv"),
        CACHE, frozenset({"cache_cat_wrong_dim"})),
    # issue 42: FlashAttention's further mistakes, forward and backward
    _one("FlashAttention takes each block's own maximum as the running one",
         "new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))",
         "new_max = scores.amax(dim=-1, keepdim=True)", FLASH, "flash_block_max_only"),
    _one("FlashAttention slices each block of keys one short",
         "kb, vb = k[:, :, start:end], v[:, :, start:end]",
         "kb, vb = k[:, :, start:end - 1], v[:, :, start:end - 1]", FLASH, "flash_keys_short"),
    _one("FlashAttention normalises each block's p on its own",
         "        p = torch.exp(scores - safe_max)  # (B, H, Tq, b)\n",
         "        p = torch.exp(scores - safe_max)  # (B, H, Tq, b)\n"
         "        p = p / p.sum(dim=-1, keepdim=True)\n", FLASH, "flash_p_normalised"),
    _one("FlashAttention scales the scores by 1/D",
         "    scale = 1 / math.sqrt(D)\n    row_max", "    scale = 1 / D\n    row_max", FLASH,
         "scale_by_d"),
    _one("a backward that scales dK twice", "grad_k.append(grad_s.transpose(-2, -1) @ q)",
         "grad_k.append(grad_s.transpose(-2, -1) @ q * scale)", BACKWARD,
         "flash_backward_scaled_twice"),
    _one("a backward that returns dV before dK",
         "return grad_q, torch.cat(grad_k, dim=2), torch.cat(grad_v, dim=2), None, None",
         "return grad_q, torch.cat(grad_v, dim=2), torch.cat(grad_k, dim=2), None, None",
         BACKWARD, "flash_gradients_misordered"),
    _one("a backward with dV = dOᵀ·P", "grad_v.append(p.transpose(-2, -1) @ grad_out)",
         "grad_v.append(grad_out.transpose(-2, -1) @ p)", BACKWARD, "flash_dv_transposed"),
    _one("a backward with δ summed without keepdim",
         "delta = (grad_out * out).sum(dim=-1, keepdim=True)",
         "delta = (grad_out * out).sum(dim=-1)", BACKWARD, "flash_backward_lse_broadcast"),
    _one("FlashAttention returns the accumulator undivided", "out = acc / row_sum  # (B",
         "out = acc  # (B", FLASH, "flash_not_normalised"),
    Mutant("FlashAttention takes each block's maximum before the causal mask", (
        ("        scores = q @ kb.transpose(-2, -1) * scale  # (B, H, Tq, b)\n        if",
         "        scores = q @ kb.transpose(-2, -1) * scale  # (B, H, Tq, b)\n"
         "        block_max = scores.amax(dim=-1, keepdim=True)  # (B, H, Tq, 1)\n        if"),
        ("new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))",
         "new_max = torch.maximum(row_max, block_max)")),
        FLASH, frozenset({"flash_max_before_mask"})),
    _one("a backward that recomputes the scores without the scale",
         "            scores = q @ kb.transpose(-2, -1) * scale  # (B, H, Tq, b)",
         "            scores = q @ kb.transpose(-2, -1)  # (B, H, Tq, b)", BACKWARD,
         "flash_backward_p_unscaled"),
    _one("a backward that also masks the diagonal",
         'scores.masked_fill(key_pos > query_pos, float("-inf"))\n',
         'scores.masked_fill(key_pos >= query_pos, float("-inf"))\n', BACKWARD,
         "flash_causal_off_by_one"),
    _one("FlashAttention takes p against the maximum before the block",
         "p = torch.exp(scores - safe_max)  # (B", "p = torch.exp(scores - row_max)  # (B", FLASH,
         "flash_p_old_max"),
    _one("a backward whose causal mask is aligned top-left",
         "query_pos = torch.arange(Tq, device=q.device)[:, None] + (Tk - Tq)  # (Tq, 1)\n"
         "        grad_q", "query_pos = torch.arange(Tq, device=q.device)[:, None]  # (Tq, 1)\n"
         "        grad_q", BACKWARD, "flash_causal_top_left"),
    _one("FlashAttention returns its logsumexp in base 2",
         "logsumexp = (row_max + torch.log(row_sum)).squeeze(-1)",
         "logsumexp = (row_max / math.log(2) + torch.log2(row_sum)).squeeze(-1)", FLASH,
         "flash_lse_base2"),
    _one("FlashAttention's causal key loop stops at Tq",
         "    for start in range(0, Tk, block_size):\n        end = start + block_size",
         "    for start in range(0, Tq if is_causal else Tk, block_size):\n"
         "        end = start + block_size", FLASH, "flash_causal_keys_cut"),
    # issue 42: RoPE's pair layouts, repeat_kv's axis, the cache's store, GQA's mask and dtypes
    _one("RoPE turns adjacent pairs and concatenates them as halves", _PAIRS,
         """    x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, D/2)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., T, D)""",
         ROPE, "rope_pairs_relaid"),
    _one("RoPE turns the halves and interleaves them",
         "return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., T, D)",
         "return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)",
         ROPE, "rope_pairs_relaid"),
    _one("repeat_kv repeats along the features", "x.repeat_interleave(n_rep, dim=1)",
         "x.repeat_interleave(n_rep, dim=-1)", frozenset({"llm_repeat_kv"}), "kv_repeat_features"),
    _one("repeat_kv tiles the features", "x.repeat_interleave(n_rep, dim=1)",
         "x.repeat(1, 1, 1, n_rep)", frozenset({"llm_repeat_kv"}), "kv_repeat_features"),
    Mutant("the cache returns the concatenation without storing it", (
        *((f"self.{t} = {t} if self.{t} is None", f"{t} = {t} if self.{t} is None") for t in "kv"),
        ("        return self.k, self.v",
         "        if self.k is None:\n            self.k, self.v = k, v\n        return k, v")),
        CACHE, frozenset({"cache_update_not_stored"})),
    _one("the module blocks the past (j < i)", "[None, :] > query_pos  # (T, L)",
         "[None, :] < query_pos  # (T, L)", GQA, "gqa_mask_anticausal"),
    _one("the module blocks the past and the diagonal (j <= i)", "[None, :] > query_pos  # (T, L)",
         "[None, :] <= query_pos  # (T, L)", GQA, "gqa_mask_anticausal"),
    _one("the window leaves out the query's own key (j < i)", _WINDOW,
         "return (j < i) & (j > i - window)  # (T, T)", WINDOW, "window_self_excluded"),
    _one("the module takes the softmax in float32 and never casts it back", _MASKED,
         _MASKED.replace(".softmax(dim=-1)", ".softmax(dim=-1, dtype=torch.float32)"), GQA,
         "runner.float32_meets_float64"),
    _one("the module rounds the scores to float16 before the softmax", _MASKED,
         _MASKED.replace("scores.masked_fill", "scores.half().masked_fill").replace(
             ".softmax(dim=-1)", ".softmax(dim=-1).to(q.dtype)"), GQA, "gqa_scores_low_precision"),
    _one("the module rounds the scores to bfloat16 before the softmax", _MASKED,
         _MASKED.replace("scores.masked_fill", "scores.bfloat16().masked_fill").replace(
             ".softmax(dim=-1)", ".softmax(dim=-1).to(q.dtype)"), GQA, "gqa_scores_low_precision"),
    Mutant("the module scales the weights after the softmax instead of the scores", (
        (_GROUPED, _GROUPED.replace(" / math.sqrt(self.head_dim)", "")),
        (_MASKED, _MASKED.replace(".softmax(dim=-1)", ".softmax(dim=-1) / math.sqrt(D)"))),
        GQA, frozenset({"gqa_weights_scaled"})),
    _one("the module counts RoPE's positions from 1",
         "positions = torch.arange(start, start + T, device=x.device)  # (T,)",
         "positions = torch.arange(start + 1, start + T + 1, device=x.device)  # (T,)", CACHE,
         "rope_positions_from_one"),
    # issue 42: FlashAttention's mask fill, logsumexp, δ, dP and dS
    _one("FlashAttention fills the blocked scores with 0", _FLASH_MASK,
         "scores = scores.masked_fill(key_pos > query_pos, 0.0)  # (B, H, Tq, b)", FLASH,
         "flash_causal_filled_zero"),
    _one("a backward that fills the blocked scores with 0",
         'scores.masked_fill(key_pos > query_pos, float("-inf"))\n',
         "scores.masked_fill(key_pos > query_pos, 0.0)\n", BACKWARD, "flash_causal_filled_zero"),
    _one("FlashAttention's logsumexp without the log",
         "logsumexp = (row_max + torch.log(row_sum)).squeeze(-1)",
         "logsumexp = (row_max + row_sum).squeeze(-1)", FLASH, "flash_lse_without_log"),
    _one("FlashAttention takes the log of the running sum in float32", "torch.log(row_sum))",
         "torch.log(row_sum.float()))", FLASH, "flash_lse_float32"),
    _one("a backward with δ = rowsum(dO)", "delta = (grad_out * out).sum(dim=-1, keepdim=True)",
         "delta = grad_out.sum(dim=-1, keepdim=True)", BACKWARD, "flash_delta_without_output"),
    _one("a backward with dP = dO·v_block", "grad_p = grad_out @ vb.transpose(-2, -1)",
         "grad_p = grad_out @ vb", BACKWARD, "flash_dp_not_transposed"),
    _one("a backward that adds δ", _GRAD_S,
         "grad_s = p * (grad_p + delta) * scale  # (B, H, Tq, b)", BACKWARD,
         "flash_delta_sign_flipped"),
    _one("a backward with dS = dP - δ", _GRAD_S,
         "grad_s = (grad_p - delta) * scale  # (B, H, Tq, b)", BACKWARD, "flash_ds_without_p"),
    _one("a backward that numbers each block's keys from 0",
         "key_pos = torch.arange(start, start + kb.shape[2], device=q.device)[None, :]\n",
         "key_pos = torch.arange(kb.shape[2], device=q.device)[None, :]\n", BACKWARD,
         "flash_causal_keys_from_zero"),
    _one("a backward with dK = dSᵀ·k_block", "grad_k.append(grad_s.transpose(-2, -1) @ q)",
         "grad_k.append(grad_s.transpose(-2, -1) @ kb)", BACKWARD,
         "flash_backward_matmul_mismatch"),
    _one("FlashAttention multiplies the scores by √D",
         "    scale = 1 / math.sqrt(D)\n    row_max", "    scale = math.sqrt(D)\n    row_max",
         FLASH, "flash_scale_inverted"),
    _one("FlashAttention blocks the keys before the diagonal", _FLASH_MASK,
         'scores = scores.masked_fill(key_pos < query_pos, float("-inf"))  # (B, H, Tq, b)',
         FLASH, "flash_causal_inverted"),
    _one("a backward that blocks the keys before the diagonal",
         'scores.masked_fill(key_pos > query_pos, float("-inf"))\n',
         'scores.masked_fill(key_pos < query_pos, float("-inf"))\n', BACKWARD,
         "flash_causal_inverted"),
    _one("a backward with dS = P ∘ (δ - dP)", _GRAD_S,
         "grad_s = p * (delta - grad_p) * scale  # (B, H, Tq, b)", BACKWARD, "flash_ds_negated"),
    _one("a cache whose length reads its keys while it is empty",
         "return 0 if self.k is None else self.k.shape[2]", "return self.k.shape[2]", CACHE,
         "cache_read_while_empty"),
    _one("RoPE casts cos and sin to float32",
         "cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)",
         "cos, sin = angles.cos().float(), angles.sin().float()", ROPE, "rope_output_float32"),
    _one("GQA transposes the keys' heads and tokens",
         "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)",
         "scores = q @ k.transpose(1, 2) / math.sqrt(self.head_dim)", GQA,
         "gqa_keys_transposed_wrong_dims"),
)
