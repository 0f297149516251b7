"""Chinese templates of the checks (see en_checks.py, which has the same ids and fields)."""

TEMPLATES: dict[str, str] = {
    # How a verdict is put together
    "check.mistake": "{mistake}{text}",
    "check.case": "{text}（{case}）",
    "check.drawing": "{text}\n{drawing}",
    "check.warned": "{warned}。{text}",
    "check.what": "{what}：{detail}",

    # What is compared
    "what.attention_weights": "{name} 的注意力权重",
    "what.output": "{name} 的输出",

    # Case labels
    "case.non_contiguous_input": "非连续的输入",
    "case.non_contiguous_inputs": "非连续的输入",
    "case.non_contiguous_x": "非连续的 x",
    "case.no_mask": "无掩码",
    "case.causal_mask": "因果掩码 (T, T)",
    "case.random_mask": "随机掩码 (Tq, Tk)",
    "case.padding_mask": "填充掩码 (B, 1, 1, Tk)",
    "case.causal_kind": "因果",
    "case.random_kind": "随机",
    "case.attn_mask_kind": "{kind} attn_mask",
    "case.large_logits": "logit 约为 1e3",
    "case.without_bias": "无偏置",
    "case.searched": "{case}；形状搜索找到的最小出错用例",
    "case.eval_dropout": "dropout={p:g}，评估模式",
    "case.dropped_out": "{case}：out 必须使用经过 dropout 的权重",

    # Several causes in one check (checks.causes)
    "cause.several": "{count} 个不同的问题：{causes}",
    "cause.item": "（{n}）{text}",
    "cause.item_on": "（{n}）{where}时：{text}",
    "cause.on": "{where}时：{text}",
    "cause.then": "{first}{second}",
    "cause.not_implemented": "{raised}",
    "cause.not_implemented_in_check": "{raised}（它在其他检查中能运行，在本检查中不能）",
    "cause.not_implemented_here": "{raised}（本检查的每个用例：{cases}；它在其他检查中能运行）",
    "trait.cross": "交叉注意力（键和值不是查询）",
    "trait.self": "自注意力（键 = 值 = 查询）",
    "trait.attn_mask": "传入 `attn_mask` 参数",
    "trait.no_attn_mask": "以 `attn_mask=None` 调用",
    "trait.is_causal": "以 `is_causal=True` 调用",
    "trait.not_causal": "以 `is_causal=False` 调用",
    "trait.masked": "有掩码（`attn_mask` 或 `is_causal=True`）",
    "trait.bias": "有偏置",
    "trait.no_bias": "用 `bias=False` 构建",
    "trait.bias_none": "以 `bias=None` 调用",
    "trait.square": "方形权重（输入 = 输出特征数）",
    "trait.not_square": "非方形权重（输入 ≠ 输出特征数）",
    "trait.contiguous": "连续的输入",
    "trait.usual_logits": "常规大小的 logit",
    "trait.dtype": "{dtype} 输入",

    # Type, dtype and device
    "tensor.not_tensor": "应当是形状为 {shape} 的张量，实际得到 {type}",
    "tensor.bool_dtype": "的 dtype 是 {dtype}，应当是 torch.bool（True = 屏蔽）：创建时用 "
                         "dtype=torch.bool，或最后调用 .bool()",
    "tensor.dtype": "的 dtype 是 {dtype}，但输入是 {expected}：请保持输入的 dtype（不要用会强制成 "
                    "float32 的 torch.tensor(...) 常量）",
    "tensor.device": "在 {device} 上，但输入在 {expected} 上：新建张量时请用 device=x.device",
    "check.in_place": "`{name}` 原地修改了输入 `{input}`：请用非原地的运算（用 masked_fill "
                      "而不是 masked_fill_，用 x = x * s 而不是 x *= s，用 m = m | c 而不是 "
                      "m |= c，用 torch.where 而不是 x[index] = value）",
    "check.not_pair": "`{name}` 应当返回 (out, weights) 二元组，实际得到 {type}",
    "check.no_value_error": "{call} 应当抛出 ValueError：{why}",
    "check.other_error": "{call} 应当抛出 ValueError（{why}），但实际：{error}",

    # Shapes
    "shape.wrong": "得到的形状是 {got}，应当是 {expected}：{cause}",
    "shape.wrong_named": "得到的形状是 {got}，应当是 {expected} = {dims}：{cause}",
    "shape.dim": "第 {i} 维",
    "shape.dims": "({dims})",
    "shape.transposed": "看起来是 {yours}：是不是忘了交换 {a} 和 {b}？",
    "shape.permuted": "看起来是 {yours}：请检查 permute 的维度顺序",
    "shape.size": "{dim} 是 {got}，应当是 {expected}",
    "shape.flattened": "{a} 和 {b} 被合成了一维",
    "shape.split": "{dim} 被拆成了两维 ({a}, {b})",
    "shape.missing": "缺少 {dim} 这一维",
    "shape.missing_index": "缺少{dim}",
    "shape.wrong_bare": "得到的形状是 {got}，应当是 {expected}",
    "shape.wrong_named_bare": "得到的形状是 {got}，应当是 {expected} = {dims}",
    "shape.ndim": "有 {got} 个维度，应当是 {expected} 个",

    # Values
    "values.wrong": "数值不对：在下标 {index} 处应当是 {expected:.6g}，实际是 {got:.6g}"
                    "（最大绝对误差 {error:.3g}）",
    "values.wrong_heads": "数值不对：在下标 {index} 处应当是 {expected:.6g}，实际是 {got:.6g}"
                          "（最大绝对误差 {error:.3g}；{count} 个头中 {heads} 不对）",
    "nonfinite.nan_rows": "结果里有整行的 NaN（第一个在 {first}）：softmax 的一行全是 NaN，"
                          "要么是 0 除以 0（所有键都被屏蔽；这里每个查询至少留有一个键，"
                          "请检查掩码是否取反或错位；或者在屏蔽之后重新归一化，而 logit 很大时"
                          "允许的键全都下溢为 0：请在 softmax 之前屏蔽），要么是 inf 除以 inf"
                          "（logit 很大时 exp 溢出：请用 torch.softmax）",
    "nonfinite.nan": "结果里有 NaN（第一个在 {first}），而期望的值都是有限的：要么是 0 * inf（把 "
                     "-inf 分数乘以 0/1 掩码；请用 masked_fill），要么是手写 softmax 时 exp 溢出"
                     "（请用 torch.softmax）",
    "nonfinite.inf": "结果里有 inf（第一个在 {first}），而期望的值都是有限的：float64 下 exp "
                     "超过约 709 就会溢出（float32 下约 88），-inf 只能在 softmax 之前用来填充"
                     "分数，绝不能出现在权重或输出里",

    # Masks
    "mask.yours": "你的",
    "mask.expected": "应当是",
    "mask.header": "{yours:<{width}}   {expected:<{width}}   （x = 屏蔽，. = 允许；"
                   "第 i 行 = 查询 i）",
    "mask.drawing": "    {header}\n{rows}",  # rows: the drawn masks, as they are
    "mask.drawing_corner": "    {header}\n{rows}\n    {corner}",
    "mask.corner": "（{shape} 左上角的 {n}x{n} 部分）",
    "mask.wrong_entries": "{total} 个元素中有 {wrong} 个不对，第一个在 {first}",
    "attend.blocked_nonzero": ("{what}：被屏蔽的位置必须恰好为 0：在 softmax 之前把被屏蔽的"
                               "分数填成 float('-inf')（-15 这样的有限值仍会留给它们一点权重）"),

    # Dropout (checks.expect)
    "dropout.none_dropped": "dropout={p:g} 在训练模式下一个注意力权重也没有丢弃：请对权重使用 "
                            "nn.Dropout（它只在 train() 模式下起作用）",
    "dropout.not_used": "训练模式下的 dropout：返回的权重应当就是你实际使用的权重，每个要么是 0，"
                        "要么是 softmax / (1 - p)",
    "dropout.weights_not_returned": "dropout={p:g} 在训练模式下改变了输出，但不是通过你返回的"
                                    "权重（其中一个也没有丢弃）：请在 softmax 之后对注意力权重做 "
                                    "dropout，用它们乘以 v，并返回它们",
    "dropout.in_eval": "`{name}` 在 eval 模式下也丢弃了注意力权重（dropout={p:g}）：dropout 只在"
                       "训练模式下生效：请用 nn.Dropout，或给 F.dropout 传入 "
                       "training=self.training（不传时它总是丢弃）",
    "dropout.on_output": "dropout={p:g} 在训练模式下丢弃了输出中的元素：nn.MultiheadAttention "
                         "只对注意力权重做 dropout，out_proj 之后从不做",
}
