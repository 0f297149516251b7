"""The sentences of FlashAttention's further mistakes, forward and backward, by id, in English
and Chinese (issue 42); `messages.TEMPLATES` adds them to its own."""

EN: dict[str, str] = {
    "mistake.flash_block_max_only": (
        "This matches each block's own maximum used as the running one: the maximum so far is "
        "torch.maximum(old_max, block_max). With the block's own, a block whose keys are all "
        "masked (maximum -inf) wipes out what came before, 0 / 0 = NaN, and a block far below "
        "the earlier ones overflows exp(old_max - new_max)."),
    "mistake.flash_keys_short": (
        "This matches each block of keys sliced one short, k[:, :, start:start + block_size - "
        "1]: a key is lost in every block. A slice's end is left out already, so take "
        "k[:, :, start:start + block_size]."),
    "mistake.flash_p_normalised": (
        "This matches each block's p divided by its own sum before it is added: every block "
        "then weighs as much as a whole softmax row. Keep p = exp(scores - new_max) as it is, "
        "add its sum to the running sum, and divide the accumulator by that sum once, after "
        "the loop."),
    "mistake.flash_backward_scaled_twice": (
        "This matches dQ or dK scaled twice by 1/√D (once in dS, once more on the product): "
        "S = Q Kᵀ / √D puts one 1/√D in dQ = dS K / √D and in dK = dSᵀ Q / √D, and none in "
        "dV."),
    "mistake.flash_gradients_misordered": (
        "This matches the gradients returned in another order than forward's arguments: "
        "backward returns one gradient per input of forward, in its order, (dq, dk, dv, None, "
        "None) for (q, k, v, is_causal, block_size)."),
    "mistake.flash_dv_transposed": (
        "This matches dV = dOᵀ · P, (D, b) for each block: the values' gradient is Pᵀ · dO, "
        "(b, D), shaped as the block of values."),
    "mistake.flash_not_normalised": (
        "This matches the output returned without dividing by the running sum: the "
        "accumulator holds Σ exp(score - max) · v, so out = acc / row_sum, once, after the "
        "loop."),
    "mistake.flash_max_before_mask": (
        "This matches each block's maximum taken before the causal mask: blocked keys then "
        "count in the maximum, and on large scores every allowed key can underflow to 0 under "
        "it (0 / 0 = NaN). Mask the scores with -inf first, then take the maximum."),
    "mistake.flash_backward_p_unscaled": (
        "This matches P recomputed from unscaled scores, exp(q · kᵀ - logsumexp): the "
        "logsumexp is of the scaled scores, so recompute S = q · kᵀ / √D, mask it as the "
        "forward does, then P = exp(S - logsumexp)."),
    "mistake.flash_p_old_max": (
        "This matches p = exp(scores - old_max), against the maximum before this block: at the "
        "first block that is -inf, so p is inf and the sums NaN. Take new_max = "
        "torch.maximum(old_max, block_max) first, then p = exp(scores - new_max)."),
    "mistake.flash_lse_base2": (
        "This matches the logsumexp in base 2, log2 Σ 2^(score · log2 e), as Triton's tutorial "
        "keeps it for exp2: return the natural one, max + log(sum), or divide a base-2 one by "
        "log2(e) (math.log2(math.e))."),
}

ZH: dict[str, str] = {
    "mistake.flash_block_max_only": (
        "这与“把每块自己的最大值当作运行最大值”的结果一致：至今的最大值是 "
        "torch.maximum(old_max, block_max)。只用本块的最大值时，所有键都被掩码的块（最大值为 "
        "-inf）会把之前的结果清零，得到 0 / 0 = NaN；比之前低得多的块则会让 exp(old_max - "
        "new_max) 溢出。"),
    "mistake.flash_keys_short": (
        "这与“每块键的切片少了一个，k[:, :, start:start + block_size - 1]”的结果一致：每块都"
        "丢掉一个键。切片本来就不含终点，请取 k[:, :, start:start + block_size]。"),
    "mistake.flash_p_normalised": (
        "这与“每块的 p 先除以它自己的和再累加”的结果一致：这样每块都和一整行 softmax 分量相同。"
        "p = exp(scores - new_max) 保持原样，把它的和加到运行和里，循环结束后再用这个和除一次"
        "累加器。"),
    "mistake.flash_backward_scaled_twice": (
        "这与“dQ 或 dK 乘了两次 1/√D（dS 里一次，乘积上又一次）”的结果一致：S = Q Kᵀ / √D "
        "只在 dQ = dS K / √D 和 dK = dSᵀ Q / √D 中各带来一个 1/√D，dV 中没有。"),
    "mistake.flash_gradients_misordered": (
        "这与“梯度没有按 forward 参数的顺序返回”的结果一致：backward 按 forward 的输入顺序，"
        "为每个输入返回一个梯度，对 (q, k, v, is_causal, block_size) 即 (dq, dk, dv, None, "
        "None)。"),
    "mistake.flash_dv_transposed": (
        "这与“dV = dOᵀ · P，每块为 (D, b)”的结果一致：值的梯度是 Pᵀ · dO，形状 (b, D)，与值的"
        "块相同。"),
    "mistake.flash_not_normalised": (
        "这与“输出没有除以运行和就返回”的结果一致：累加器存的是 Σ exp(score - max) · v，"
        "所以循环结束后要做一次 out = acc / row_sum。"),
    "mistake.flash_max_before_mask": (
        "这与“在因果掩码之前取每块的最大值”的结果一致：被屏蔽的键也算进了最大值，分数很大时，"
        "允许的键可能全部下溢为 0（0 / 0 = NaN）。请先用 -inf 屏蔽分数，再取最大值。"),
    "mistake.flash_backward_p_unscaled": (
        "这与“用未缩放的分数重算 P，即 exp(q · kᵀ - logsumexp)”的结果一致：logsumexp 是缩放后"
        "分数的，所以要重算 S = q · kᵀ / √D，像前向那样加掩码，再算 P = exp(S - logsumexp)。"),
    "mistake.flash_p_old_max": (
        "这与“p = exp(scores - old_max)，即相对本块之前的最大值”的结果一致：第一块时它是 "
        "-inf，于是 p 为 inf，求和得到 NaN。请先算 new_max = torch.maximum(old_max, "
        "block_max)，再算 p = exp(scores - new_max)。"),
    "mistake.flash_lse_base2": (
        "这与“以 2 为底的 logsumexp，即 log2 Σ 2^(score · log2 e)”的结果一致，Triton 教程为 "
        "exp2 就是这样保存的：请返回自然对数的 max + log(sum)，或者把以 2 为底的值除以 "
        "log2(e)（math.log2(math.e)）。"),
}

TEMPLATES: dict[str, dict[str, str]] = {"en": EN, "zh": ZH}
