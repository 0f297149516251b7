"""Chinese sentences of the known mistakes (`checks.diagnosis.CATALOGUE`), by `mistake.<id>`."""

TEMPLATES: dict[str, str] = {
    "mistake.split_no_transpose": (
        "这与“用 view 或 reshape 拆分却没有 transpose(1, 2)”的结果一致：先把特征 view 成 "
        "(B, T, H, D)，再用 .transpose(1, 2) 把头的维度放到词元前面。"
    ),
    "mistake.split_interleaved": (
        "这与“各头交错、把特征拆成 (..., D, H)”的结果一致：第 h 个头拥有第 h 段连续的 D 个特征，应 "
        "view 成 (B, T, H, D)，而不是 (B, T, D, H)。"
    ),
    "mistake.merge_no_transpose": (
        "这与“用 view 或 reshape 合并却没有 transpose(1, 2)”的结果一致：先把词元换回前面："
        "x.transpose(1, 2).reshape(B, T, H * D)。"
    ),
    "mistake.merge_interleaved": (
        "这与“合并时各头交错、特征排成 (D, H)”的结果一致：应整头拼接，先换成 (B, T, H, D)，"
        "再把最后两维展平。"
    ),
    "mistake.no_scaling": (
        "这与“分数没有乘 1/√d”的结果一致：q @ k^T 要除以 math.sqrt(d)，d = q.size(-1) "
        "是一个头的维度。"
    ),
    "mistake.scale_read": (
        "这与“分数除以 {divisor:.4g}{named}，而不是 √d = √{d} = {expected:.4g}”的结果一致，"
        "d = q.size(-1) 是一个头的维度。{hint}"
    ),
    "mistake.scale_named": "（= {expression}）",
    "mistake.scale_dims": "`k.dim()` 是维数，`k.size(-1)` 才是最后一维的大小。",
    "mistake.scale_by_d": "这与“除以 d 而不是 √d”的结果一致：应除以 math.sqrt(d)，而不是 d。",
    "mistake.scale_by_embed_dim": (
        "这与“除以 √embed_dim 而不是 √d_head”的结果一致：缩放用的是一个头的维度，即 embed_dim // "
        "num_heads。"
    ),
    "mistake.scale_by_wrong_dim": (
        "这与“除以错误维度（词元数或头数）的平方根”的结果一致：应使用最后一维："
        "math.sqrt(q.size(-1))。"
    ),
    "mistake.qk_swapped": (
        "这与“q 和 k 互换（k @ q^T）”的结果一致：scores[..., i, j] 比较的是查询 i 与键 j：q @ "
        "k.transpose(-2, -1)。"
    ),
    "mistake.dims_from_the_front": (
        "这与“从前往后数维度”（如 k.transpose(2, 3) 或 q.size(3)）的结果一致：只有 4 维 "
        "(B, H, T, D) 张量的最后两维才是第 2、3 维，而 scaled_scores 也会收到单个头的 3 维 "
        "(B, T, D) 输入：请从后往前数：k.transpose(-2, -1)、q.size(-1)。"
    ),
    "mistake.softmax_wrong_dim": (
        "这与“在错误的维度上做 softmax”的结果一致：应在键的维度上归一化，softmax(scores, dim=-1)，"
        "使每个查询的权重之和为 1。"
    ),
    "mistake.unstable_softmax": (
        "这与“把 softmax 写成 exp(s) / exp(s).sum()”的结果一致：logit 很大时 exp 溢出为 inf，inf / "
        "inf 得到 NaN；请用 torch.softmax，它会先减去每行的最大值。"
    ),
    "mistake.float32_cast": (
        "这与“float32 的张量遇上 float64 的张量”（比如 float32 的权重乘以 v）的结果一致："
        "评分程序的输入是 float64，而某处把张量变成了 float32（softmax(..., "
        "dtype=torch.float32)、.float()）；请保持输入的 dtype，或用 .to(scores.dtype) 转回去。"
    ),
    "mistake.mask_inverted": (
        "这与“掩码取反、把 True 当成允许”的结果一致：True 表示屏蔽：masked_fill(mask, "
        "float('-inf'))，不要用 ~mask 或 mask == 0。"
    ),
    "mistake.mask_inverted_causal_mask": (
        "这与“掩码取反、把 True 当成允许”的结果一致：在 causal_mask 中 True 表示屏蔽"
        "（键 j > 查询 i）：torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)，"
        "而不是 torch.tril。"
    ),
    "mistake.mask_shifted": (
        "这与“因果掩码错开了一条对角线”的结果一致：只屏蔽键 j > 查询 i，torch.triu(..., "
        "diagonal=1)：每个词元都能看到自己。"
    ),
    "mistake.mask_transposed": (
        "这与“因果掩码屏蔽了过去而不是未来”的结果一致：请用 torch.triu（对角线上方），不要用 "
        "torch.tril。"
    ),
    "mistake.mask_after_softmax": (
        "这与“在 softmax 之后才加掩码”的结果一致：应在 softmax 之前把被屏蔽的分数填成 -inf，"
        "这样允许的权重之和仍为 1。"
    ),
    "mistake.mask_fill_zero": (
        "这与“被屏蔽的位置填 0 而不是 -inf”的结果一致：分数为 0 的权重仍是 exp(0) > 0；请填 "
        "float('-inf')。"
    ),
    "mistake.mask_ignored": (
        "这与“掩码被忽略（masked_fill 的结果从未赋值）”的结果一致：masked_fill 返回一个新张量，"
        "scores 本身不变：应写 scores = scores.masked_fill(mask, float('-inf'))。"
    ),
    "mistake.is_causal_ignored": (
        "这与“忽略了 is_causal”的结果一致：is_causal=True 时，还要屏蔽所有键 j > 查询 i。"
    ),
    "mistake.attn_mask_ignored": (
        "这与“is_causal=True 时忽略了 attn_mask”的结果一致：两个掩码都要用："
        "任一掩码屏蔽的位置都要屏蔽。"
    ),
    "mistake.masks_and": (
        "这与“用 & 合并 attn_mask 和因果掩码（两者都屏蔽才屏蔽）”的结果一致："
        "任一掩码屏蔽的位置都要屏蔽：attn_mask | causal。"
    ),
    "mistake.bias_ignored": (
        "这与“投影漏掉了偏置”的结果一致：要加上偏置，x @ weight.T + bias（nn.Linear 会替你加）。"
    ),
    "mistake.bias_ignored_qkvo": (
        "这与“所有投影（q_proj、k_proj、v_proj 和 out_proj）都漏掉了偏置”的结果一致："
        "每个都要加上偏置，x @ weight.T + bias（nn.Linear 会替你加）。"
    ),
    "mistake.bias_ignored_qkv": (
        "这与“输入投影（q_proj、k_proj 和 v_proj）漏掉了偏置”的结果一致：每个都要加上偏置，"
        "x @ weight.T + bias（nn.Linear 会替你加）。"
    ),
    "mistake.bias_ignored_q": (
        "这与“q_proj 漏掉了偏置”的结果一致：q = query @ q_proj.weight.T + q_proj.bias，"
        "或直接用 q_proj(query)。"
    ),
    "mistake.bias_ignored_v": (
        "这与“v_proj 漏掉了偏置”的结果一致：v = value @ v_proj.weight.T + v_proj.bias，"
        "或直接用 v_proj(value)。"
    ),
    "mistake.bias_ignored_o": (
        "这与“out_proj 漏掉了偏置”的结果一致：out = x @ out_proj.weight.T + out_proj.bias，"
        "或直接用 out_proj(x)。"
    ),
    "mistake.weight_not_transposed": (
        "这与“权重没有转置（x @ weight）”的结果一致：权重的形状是 (out_features, in_features)：x @ "
        "weight.T。"
    ),
    "mistake.k_proj_on_value": "这与“把 k_proj 用在了 value 上”的结果一致：v = v_proj(value)。",
    "mistake.q_proj_on_key": "这与“把 q_proj 用在了 key 上”的结果一致：k = k_proj(key)。",
    "mistake.kv_swapped": (
        "这与“k_proj 和 v_proj 互换，键来自 v_proj、值来自 k_proj”的结果一致：k = k_proj(key)，"
        "v = v_proj(value)（检查解包 q, k, v 时的顺序）。"
    ),
    "mistake.value_from_key": (
        "这与“v_proj 作用在 key 而不是 value 上”的结果一致：v = v_proj(value)：交叉注意力中 key 和 "
        "value 不同。"
    ),
    "mistake.weights_averaged": (
        "这与“把注意力权重在各头之间取了平均”的结果一致：要返回每个头的权重，形状为 (B, H, Tq, "
        "Tk)。"
    ),
}
