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
    # issue 42: the causal mask's fill, the logsumexp's log and dtype, δ, dP and dS
    "mistake.flash_causal_filled_zero": (
        "This matches the blocked scores filled with 0 instead of -inf: a score of 0 still "
        "weighs exp(0 - max) > 0, so future keys keep a weight (in the backward, P = "
        "exp(0 - logsumexp) there). Fill them with float(\"-inf\"), which exp turns into 0."),
    "mistake.flash_lse_without_log": (
        "This matches the logsumexp returned as max + sum, without the log of the running "
        "sum: logsumexp = row_max + torch.log(row_sum)."),
    "mistake.flash_lse_float32": (
        "This matches the logsumexp computed in float32 while the output keeps q's dtype: a "
        "float32 term, torch.log(row_sum.float()) or a float32 running maximum or sum, "
        "promotes the whole sum. Keep its terms in q's dtype, or return logsumexp.to(q.dtype)."),
    "mistake.flash_delta_without_output": (
        "This matches δ = rowsum(dO), without the output: δ_i = Σ_j P_ij dP_ij = Σ_d dO_id "
        "O_id, so δ = (grad_out * out).sum(dim=-1, keepdim=True)."),
    "mistake.flash_dp_not_transposed": (
        "This matches dP = dO · v_block without the transpose: dP holds one value per query "
        "and key, (B, H, Tq, b) = dO (Tq, D) · v_blockᵀ (D, b), grad_out @ vb.transpose(-2, "
        "-1)."),
    "mistake.flash_delta_sign_flipped": (
        "This matches dS = P ∘ (dP + δ), δ added rather than subtracted: the softmax's "
        "gradient is dS = P ∘ (dP - δ), with δ = rowsum(dO ∘ O)."),
    "mistake.flash_ds_without_p": (
        "This matches dS = dP - δ without the factor P: the softmax's gradient is dS = P ∘ "
        "(dP - δ), elementwise with P."),
    "mistake.flash_backward_matmul_mismatch": (
        "This matches one of the likely causes of a product whose sizes do not fit in the "
        "backward: dP = dO · v_blockᵀ, (B, H, Tq, b), with the values transposed "
        "(grad_out @ vb.transpose(-2, -1)); dV = Pᵀ · dO, (B, H, b, D), not dOᵀ · P; dQ += "
        "dS · k_block and dK = dSᵀ · q."),
    "mistake.flash_ds_negated": (
        "This matches dS = P ∘ (δ - dP), the subtraction reversed, so that dQ and dK come "
        "out negated: the softmax's gradient is dS = P ∘ (dP - δ), with dP = dO · v_blockᵀ "
        "and δ = rowsum(dO ∘ O)."),
    "mistake.flash_scale_inverted": (
        "This matches the scores multiplied by √D instead of divided by it: the scale is 1 / "
        "math.sqrt(D), D = q.shape[-1]."),
    "mistake.flash_causal_inverted": (
        "This matches the causal mask's comparison inverted, the keys before the query "
        "blocked and those after it kept: block key j for query i where j > i + (Tk - Tq), "
        "masked_fill(key_pos > query_pos, float(\"-inf\"))."),
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
    # issue 42: the causal mask's fill, the logsumexp's log and dtype, δ, dP and dS
    "mistake.flash_causal_filled_zero": (
        "这与“被屏蔽的分数填 0 而不是 -inf”的结果一致：分数 0 仍有权重 exp(0 - max) > 0，"
        "未来的键仍被计入（反向中那里的 P = exp(0 - logsumexp)）。请填 float(\"-inf\")，"
        "exp 会把它变成 0。"),
    "mistake.flash_lse_without_log": (
        "这与“logsumexp 返回 max + sum，运行和没有取对数”的结果一致：logsumexp = row_max + "
        "torch.log(row_sum)。"),
    "mistake.flash_lse_float32": (
        "这与“输出保持 q 的 dtype，而 logsumexp 在 float32 中计算”的结果一致：一个 float32 "
        "的项，如 torch.log(row_sum.float())，或 float32 的运行最大值或运行和，会把整个和提升为 "
        "float32。请让各项保持 q 的 dtype，或返回 logsumexp.to(q.dtype)。"),
    "mistake.flash_delta_without_output": (
        "这与“δ = rowsum(dO)，没有乘输出”的结果一致：δ_i = Σ_j P_ij dP_ij = Σ_d dO_id "
        "O_id，所以 δ = (grad_out * out).sum(dim=-1, keepdim=True)。"),
    "mistake.flash_dp_not_transposed": (
        "这与“dP = dO · v_block，没有转置”的结果一致：dP 对每个查询和键各有一个值，"
        "(B, H, Tq, b) = dO (Tq, D) · v_blockᵀ (D, b)，即 grad_out @ vb.transpose(-2, -1)。"),
    "mistake.flash_delta_sign_flipped": (
        "这与“dS = P ∘ (dP + δ)，δ 被加上而不是减去”的结果一致：softmax 的梯度是 dS = P ∘ "
        "(dP - δ)，其中 δ = rowsum(dO ∘ O)。"),
    "mistake.flash_ds_without_p": (
        "这与“dS = dP - δ，缺少因子 P”的结果一致：softmax 的梯度是 dS = P ∘ (dP - δ)，"
        "逐元素乘 P。"),
    "mistake.flash_backward_matmul_mismatch": (
        "这与“反向传播中乘积尺寸不匹配的常见原因”之一一致：dP = dO · v_blockᵀ，形状 (B, H, "
        "Tq, b)，值要转置（grad_out @ vb.transpose(-2, -1)）；dV = Pᵀ · dO，形状 (B, H, b, "
        "D)，不是 dOᵀ · P；dQ += dS · k_block，dK = dSᵀ · q。"),
    "mistake.flash_ds_negated": (
        "这与“dS = P ∘ (δ - dP)，减法顺序反了，使 dQ 和 dK 的符号相反”的结果一致：softmax "
        "的梯度是 dS = P ∘ (dP - δ)，其中 dP = dO · v_blockᵀ，δ = rowsum(dO ∘ O)。"),
    "mistake.flash_scale_inverted": (
        "这与“分数乘以 √D 而不是除以 √D”的结果一致：缩放因子是 1 / math.sqrt(D)，其中 D = "
        "q.shape[-1]。"),
    "mistake.flash_causal_inverted": (
        "这与“因果掩码的比较方向反了，屏蔽了查询之前的键而保留了之后的键”的结果一致：对查询 i，"
        "屏蔽 j > i + (Tk - Tq) 的键 j，即 masked_fill(key_pos > query_pos, "
        "float(\"-inf\"))。"),
}

TEMPLATES: dict[str, dict[str, str]] = {"en": EN, "zh": ZH}
