"""The sentences of triton_attention's checks and mistakes, by id, in English and Chinese
(see `mha_kit.messages`). A mistake's sentence begins "This matches " in English and "这与“"
in Chinese: the feedback shows it after what went wrong."""

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "case.triton_rows": "x of shape ({rows}, {cols}), rows {stride} elements apart (0: "
                            "contiguous), values times {spread}",
        "case.triton_transposed": "q, k and v laid out (B, T, H, D) in memory (views made by "
                                  "transpose(1, 2))",
        "triton.softmax_out": "{name} output",
        "triton.flash_pair": "{name} must return a pair (out, logsumexp), not a {type}",
        "triton.flash_out": "{name} output",
        "triton.flash_lse": "{name} logsumexp (float32)",
        "triton.counting": "{name} (its tl.dot work counted in Triton's interpreter)",
        "triton.watching": "{name} (watched for softmax computed by PyTorch)",
        "triton.filling": "{name} (run with uninitialised tensors filled with NaN)",
        "triton.bad_reply": "the run of {name} beside the grader gave back something other "
                            "than its report",
        "triton.causal_work": "{name} with is_causal=True ran {work} multiply-adds in tl.dot, "
                              "where the key blocks up to the diagonal need {needed} (every "
                              "block: {full}): end the loop over key blocks at min(Tk, "
                              "(start_m + 1) * BLOCK_M + Tk - Tq), so that no block wholly "
                              "above the diagonal is loaded",
        "triton.torch_computes": "{name} had PyTorch compute `{op}`: the softmax belongs in your "
                                 "Triton kernels; the Python side only allocates, computes the "
                                 "grid and the strides, and launches",
        "triton.full_matrix": "{name} had PyTorch make a tensor of {elements} elements (by "
                              "{op}), as many as the (Tq, Tk) scores of one head ({limit}): the "
                              "kernels work block by block, and the Python side allocates only "
                              "the outputs, the logsumexp and δ",
        "triton.no_graph": "the output of {name} is not connected to q, k and v: return "
                           "YourFunction.apply(q, k, v, is_causal, block_m, block_n)",
        "triton.saves_too_much": "the autograd graph of {name} keeps {elements} elements for "
                                 "backward, more than q, k, v, the output and the logsumexp "
                                 "({allowed}): save those only (ctx.save_for_backward) and "
                                 "recompute the probabilities block by block in the backward "
                                 "kernels",
        "waiting.triton_flash_backward": "timed only once flash_attention_triton passes its "
                                         "check",
        "triton.speed_not_scored": "speed not scored, no points lost: {reason}",
        "triton.speed_interpreted": "on {device} the kernels run in Triton's interpreter "
                                    "(TRITON_INTERPRET=1), whose time says nothing of a kernel's "
                                    "speed on a GPU",
        "triton.speed_uncalibrated": "no speed threshold is calibrated yet for Triton kernels "
                                     "on {device} (docs/speed.md)",
        "triton.speed_measured": "measured: {share:.2f} of SDPA's speed{runs} (forward and "
                                 "backward per call: yours {student:.2f} ms, SDPA "
                                 "{sdpa:.2f} ms, the kit's FlashAttention in PyTorch "
                                 "{pytorch:.2f} ms; on {device}{config})",
        "triton.speed_passed": "{measured}; needed: at least {needed:g}",
        "triton.speed_too_slow": "{measured}; needed: at least {needed:g} of SDPA's speed for "
                                 "the speed points, which are all or nothing. To change: end "
                                 "the causal loops at the diagonal, launch one grid over every "
                                 "batch element and head (no loop in Python), and try larger "
                                 "blocks (64 or 128)",
        "mistake.triton_softmax_other_zero": (
            "This matches the lanes past the end of the row loaded as 0 and counted in the sum: "
            "load them with other=-float(\"inf\"), so that exp gives 0 there."),
        "mistake.triton_softmax_no_max": (
            "This matches exp taken without subtracting the row's maximum first: with large "
            "values exp overflows to inf. Subtract tl.max(x, axis=0) before tl.exp."),
        "mistake.triton_acc_not_rescaled": (
            "This matches the output accumulator not rescaled when the maximum grows: multiply "
            "acc by alpha = exp(m_old - m_new) before adding the block's tl.dot(p, v)."),
        "mistake.triton_sum_not_rescaled": (
            "This matches the running sum not rescaled when the maximum grows: l_i = l_i * "
            "alpha + tl.sum(p, axis=1), with alpha = exp(m_old - m_new)."),
        "mistake.triton_boundary_other_zero": (
            "This matches the keys past Tk in the last block scored 0 instead of -inf: k loaded "
            "with other=0 gives scores of 0, which the softmax counts. Set the scores of columns "
            ">= Tk to -inf with tl.where before the maximum and exp."),
        "mistake.triton_scale_missing": (
            "This matches the scores without 1/sqrt(D): multiply q kᵀ by the scale before the "
            "softmax."),
        "mistake.triton_lse_not_stored": (
            "This matches the logsumexp never stored: tl.store m_i + tl.log(l_i) for the "
            "block's rows, masked to rows < Tq."),
        "mistake.triton_lse_without_max": (
            "This matches the logsumexp stored without the maximum: it is m_i + log(l_i), l_i "
            "being the sum of exp(s - m_i)."),
        "mistake.triton_strides_contiguous": (
            "This matches strides assumed contiguous: pass x.stride(i) of every tensor to the "
            "kernel and use them in the offsets; a view (transpose, slice) is not laid out as "
            "its shape says."),
        "mistake.triton_causal_bound_short": (
            "This matches the causal loop over key blocks ending one block short: query block "
            "start_m needs the keys up to min(Tk, (start_m + 1) * BLOCK_M + Tk - Tq), the "
            "diagonal block included."),
        "mistake.triton_causal_bound_long": (
            "This matches the causal loop bound one block long: the extra block is wholly above "
            "the diagonal, masked out, and only costs time."),
        "mistake.triton_causal_not_skipped": (
            "This matches a causal loop over every key block: the mask gives the right values, "
            "but half the work is spent on blocks above the diagonal."),
        "mistake.triton_delta_missing": (
            "This matches dS = P * dP without δ: dS = P * (dP - δ), δ = rowsum(dO * O) computed "
            "in the pre-pass, one value per query row."),
    },
    "zh": {
        "case.triton_rows": "形状为 ({rows}, {cols}) 的 x，相邻两行相隔 {stride} 个元素（0：连续）"
                            "，"
                            "数值乘以 {spread}",
        "case.triton_transposed": "q、k、v 在内存中按 (B, T, H, D) 排布（由 transpose(1, 2) "
                                  "得到的视图）",
        "triton.softmax_out": "{name} 的输出",
        "triton.flash_pair": "{name} 应返回一对 (out, logsumexp)，而不是 {type}",
        "triton.flash_out": "{name} 的输出",
        "triton.flash_lse": "{name} 的 logsumexp（float32）",
        "triton.counting": "{name}（在 Triton 解释器中统计其 tl.dot 计算量）",
        "triton.watching": "{name}（检查是否由 PyTorch 计算 softmax）",
        "triton.filling": "{name}（未初始化的张量以 NaN 填充后运行）",
        "triton.bad_reply": "在评分程序旁运行 {name} 时，返回的不是它的报告",
        "triton.causal_work": "{name} 在 is_causal=True 时用 tl.dot 做了 {work} 次乘加，而到对角线"
                              "为止"
                              "的键块只需要 {needed} 次（全部块：{full} 次）：让键块循环在 min(Tk, "
                              "(start_m + 1) * BLOCK_M + Tk - Tq) 处结束，不要加载完全位于对角线"
                              "上方的块",
        "triton.torch_computes": "{name} 让 PyTorch 计算了 `{op}`：softmax 应在你的 Triton 内核里完"
                                 "成；"
                                 "Python 部分只负责分配内存、计算网格和步长并启动内核",
        "triton.full_matrix": "{name} 让 PyTorch 创建了一个有 {elements} 个元素的张量（由 {op}），"
                              "和一个头的 (Tq, Tk) 得分一样多（{limit}）：内核逐块计算，Python "
                              "部分只分配输出、logsumexp 和 δ",
        "triton.no_graph": "{name} 的输出与 q、k、v 没有连接：请返回 YourFunction.apply(q, k, v, "
                           "is_causal, block_m, block_n)",
        "triton.saves_too_much": "{name} 的自动求导图为反向传播保存了 {elements} 个元素，多于 q、k"
                                 "、v、"
                                 "输出和 logsumexp（{allowed}）：只保存这些（ctx.save_for_backward"
                                 "），"
                                 "在反向内核中逐块重新计算概率",
        "waiting.triton_flash_backward": "flash_attention_triton 通过检查后才计时",
        "triton.speed_not_scored": "速度未评分，不扣分：{reason}",
        "triton.speed_interpreted": "在 {device} 上内核由 Triton 解释器运行（TRITON_INTERPRET=1），"
                                    "它的耗时不能说明内核在 GPU 上的速度",
        "triton.speed_uncalibrated": "{device} 上的 Triton 内核还没有校准过的速度阈值"
                                     "（docs/speed.md）",
        "triton.speed_measured": "实测：速度是 SDPA 的 {share:.2f} 倍{runs}（每次调用的前向加反向："
                                 "你的 {student:.2f} ms，SDPA {sdpa:.2f} ms，本套件的 PyTorch "
                                 "FlashAttention {pytorch:.2f} ms；设备：{device}{config}）",
        "triton.speed_passed": "{measured}；要求：至少 {needed:g} 倍",
        "triton.speed_too_slow": "{measured}；要求：至少达到 SDPA 速度的 {needed:g} 倍才能得到"
                                 "速度分，速度分全有或全无。怎么改：让因果循环在对角线处结束，"
                                 "用一个网格覆盖所有批次元素和所有头（不要在 Python 里循环），"
                                 "并试试更大的块（64 或 128）",
        "mistake.triton_softmax_other_zero": (
            "这与“行末之外的通道按 0 加载并计入求和”的结果一致：用 other=-float(\"inf\") 加载它们，"
            "这样 exp 在那里得到 0。"),
        "mistake.triton_softmax_no_max": (
            "这与“取 exp 前没有先减去该行最大值”的结果一致：数值较大时 exp 溢出为 inf。在 tl.exp "
            "之前减去 tl.max(x, axis=0)。"),
        "mistake.triton_acc_not_rescaled": (
            "这与“最大值增大时没有重新缩放输出累加器”的结果一致：加上该块的 tl.dot(p, v) 之前，先把"
            " "
            "acc 乘以 alpha = exp(m_old - m_new)。"),
        "mistake.triton_sum_not_rescaled": (
            "这与“最大值增大时没有重新缩放累计和”的结果一致：l_i = l_i * alpha + tl.sum(p, axis=1)"
            "，"
            "其中 alpha = exp(m_old - m_new)。"),
        "mistake.triton_boundary_other_zero": (
            "这与“最后一块中超出 Tk 的键得分为 0 而不是 -inf”的结果一致：用 other=0 加载 k 会得到 0"
            " "
            "分，softmax 会把它们算进去。在取最大值和 exp 之前，用 tl.where 把 >= Tk 的列设为 -inf"
            "。"),
        "mistake.triton_scale_missing": (
            "这与“得分没有乘以 1/sqrt(D)”的结果一致：在 softmax 之前把 q kᵀ 乘以缩放因子。"),
        "mistake.triton_lse_not_stored": (
            "这与“从未存储 logsumexp”的结果一致：用 tl.store 存储该块各行的 m_i + tl.log(l_i)，"
            "掩码为 rows < Tq。"),
        "mistake.triton_lse_without_max": (
            "这与“存储的 logsumexp 漏掉了最大值”的结果一致：它等于 m_i + log(l_i)，其中 l_i 是 "
            "exp(s - m_i) 的和。"),
        "mistake.triton_strides_contiguous": (
            "这与“假定步长是连续的”的结果一致：把每个张量的 x.stride(i) 传给内核并用于偏移计算；"
            "视图（transpose、切片）在内存中的排布与形状所示不同。"),
        "mistake.triton_causal_bound_short": (
            "这与“因果键块循环少了一块”的结果一致：查询块 start_m 需要直到 min(Tk, (start_m + 1) * "
            "BLOCK_M + Tk - Tq) 的键，包括对角线所在的块。"),
        "mistake.triton_causal_bound_long": (
            "这与“因果循环上界多了一块”的结果一致：多出的块完全位于对角线上方，被掩码屏蔽，只会浪费"
            "时间。"),
        "mistake.triton_causal_not_skipped": (
            "这与“因果情况下遍历所有键块”的结果一致：掩码让数值正确，但一半的计算花在了对角线上方的"
            "块上。"),
        "mistake.triton_delta_missing": (
            "这与“dS = P * dP 漏掉了 δ”的结果一致：dS = P * (dP - δ)，δ = rowsum(dO * O) 在预处理"
            "中计算，每个查询行一个值。"),
    },
}
