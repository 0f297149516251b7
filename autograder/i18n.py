"""Grader messages in Simplified Chinese, translated when they are shown.

The checks write their messages in English. `translate` rewrites the known phrases of a
message, fragment by fragment; code names, shapes and the test case in parentheses stay as
they are. The language comes from `MHA_KIT_LANG` (set it to `zh`, or pass
`mha-kit check --lang zh`); notebooks and the CLI read the same variable.
"""

from __future__ import annotations

import os
import re
from typing import Callable

LANG_VARIABLE = "MHA_KIT_LANG"
LANGUAGES = ("en", "zh")

# (English pattern, Chinese replacement), tried in order on every message.
_ZH: tuple[tuple[str, str | Callable[[re.Match], str]], ...] = (
    (r"^ok$", "通过"),
    (r"`([^`]+)` is not implemented yet", r"`\1` 还没有实现"),
    (r"`([^`]+)` is not defined: expected ", r"`\1` 没有定义，应当是 "),
    (r" \(and your file had problems loading: see below\)", "（加载文件时出了问题，见下文）"),
    (r"`([^`]+)` timed out after (\d+) s \(an infinite loop\?\)",
     r"`\1` 运行超过 \2 秒被中止（是不是死循环？）"),
    (r"`([^`]+)` ended the grading process", r"`\1` 让评分进程退出了"),
    (r"`([^`]+)` was stopped: the check (\w+) reached its limit of (\S+) s "
     r"\(is your code very slow\?\)",
     r"`\1` 被中止：检查项 \2 用时达到上限 \3 秒（代码是不是太慢了？）"),
    (r"`([^`]+)` raised (\w+), line (\d+)", r"`\1` 抛出了 \2（第 \3 行）"),
    (r"`([^`]+)` raised (\w+)", r"`\1` 抛出了 \2"),
    # shapes
    (r"got shape (\([^)]*\)), expected (\([^)]*\))", r"得到的形状是 \1，应当是 \2"),
    (r"that looks like (\([^)]*\)): did you forget to transpose (.+?) and (.+?)\?",
     r"看起来是 \1：是不是忘了交换 \2 和 \3？"),
    (r"that looks like (\([^)]*\)): check the order in your permute",
     r"看起来是 \1：请检查 permute 的维度顺序"),
    (r"(\S+) and (\S+) are flattened into one dim", r"\1 和 \2 被合成了一维"),
    (r"(\S+) is split into two dims \(", r"\1 被拆成了两维 ("),
    (r"the (\S+) dim is missing", r"缺少 \1 这一维"),
    (r"(\S+) is (\d+) instead of (\d+)", r"\1 是 \2，应当是 \3"),
    (r"(\d+) dims instead of (\d+)", r"有 \1 个维度，应当是 \2 个"),
    (r"the smallest failing case of a shape search", "形状搜索找到的最小出错用例"),
    (r"should be a tensor of shape (\([^)]*\)), got (\w+)",
     r"应当是形状为 \1 的张量，实际得到 \2"),
    # values
    (r"wrong values: at index (\([^)]*\)) expected (\S+), got (\S+) \(max abs error ([^;)]+)"
     r"(?:; heads (\[[^\]]*\]) of (\d+) differ)?\)",
     lambda m: f"数值不对：在下标 {m[1]} 处应当是 {m[2]}，实际是 {m[3]}（最大绝对误差 {m[4]}"
               + (f"；{m[6]} 个头中 {m[5]} 不对）" if m[5] else "）")),
    (r"^NaN in your result \(first at (\([^)]*\))\)", r"结果里有 NaN（第一个在 \1）"),
    (r"^inf in your result \(first at (\([^)]*\))\) where the expected values are finite",
     r"结果里有 inf（第一个在 \1），而期望的值都是有限的"),
    (r"has dtype (\S+) for (\S+) inputs: keep the input's dtype "
     r"\(avoid torch.tensor\(\.\.\.\) constants that force float32\)",
     r"的 dtype 是 \1，但输入是 \2：请保持输入的 dtype（不要用会强制成 float32 的 "
     r"torch.tensor(...) 常量）"),
    (r"modified its input in place: use out-of-place ops",
     "原地修改了输入：请用非原地的运算"),
    (r"should return a pair \(out, weights\), got (\w+)",
     r"应当返回 (out, weights) 二元组，实际得到 \1"),
    (r"should raise ValueError", "应当抛出 ValueError"),
    # the speed line
    (r"your fused: (\S+) ms, looped baseline: (\S+) ms → (\S+)× faster "
     r"\(needed ≥ (\S+)×; the kit's fused: (\S+) ms, on (\w+)\)",
     r"你的融合实现：\1 ms，逐头循环的基线：\2 ms → 快 \3 倍（满分需要 ≥ \4 倍；"
     r"本套件的融合实现：\5 ms，设备：\6）"),
    (r"\. No faster than looping over heads: do all heads in one batched matmul",
     "。并不比逐头循环快：请用一次批量矩阵乘法算完所有的头"),
    (r"\. (\S+)× the kit's fused time: look for per-head Python work",
     r"。用时是本套件融合实现的 \1 倍：找找还有没有逐头的 Python 循环"),
    (r"^speed not scored: ", "速度未计分："),
    (r"timed only once MultiHeadAttention matches nn.MultiheadAttention \(see fused_mha\)",
     "MultiHeadAttention 的结果与 nn.MultiheadAttention 一致（见 fused_mha）之后才计时"),
    # the extension track and the warm-up
    (r"split_heads_view returned a copy: view and transpose never copy, so the result should "
     r"share x's memory \(avoid contiguous\(\), clone\(\) and torch.stack here\)",
     "split_heads_view 返回的是副本：view 和 transpose 从不复制，结果应与 x 共享内存"
     "（这里不要用 contiguous()、clone() 或 torch.stack）"),
    (r"dropout=(\S+) in training mode dropped no attention weight: apply nn.Dropout to the "
     r"weights \(it is active only in train\(\)\)",
     r"dropout=\1 在训练模式下一个注意力权重也没有丢弃："
     r"请对权重使用 nn.Dropout（它只在 train() 模式下起作用）"),
    (r"dropout in training mode: the weights you return should be the ones you used, each "
     r"either 0 or softmax / \(1 - p\)",
     "训练模式下的 dropout：返回的权重应当就是你实际使用的权重，"
     "每个要么是 0，要么是 softmax / (1 - p)"),
    (r"^(\d+) of (\d+) right: test each one with ", r"答对 \1/\2 题：逐个用这个式子验证 "),
)

# The sentence of each known mistake (autograder.diagnosis.CATALOGUE), by its id.
_MISTAKES_ZH = {
    "split_no_transpose": (
        "这与“用 view 拆分却没有 transpose(1, 2)”的结果一致：先把特征 view 成 (B, T, H, D)，再用 "
        ".transpose(1, 2) 把头的维度放到词元前面。"
    ),
    "split_interleaved": (
        "这与“各头交错、把特征拆成 (..., D, H)”的结果一致：第 h 个头拥有第 h 段连续的 D 个特征，应 "
        "view 成 (B, T, H, D)，而不是 (B, T, D, H)。"
    ),
    "merge_no_transpose": (
        "这与“用 view 合并却没有 transpose(1, 2)”的结果一致：先把词元换回前面：x.transpose(1, "
        "2).reshape(B, T, H * D)。"
    ),
    "merge_interleaved": (
        "这与“合并时各头交错、特征排成 (D, H)”的结果一致：应整头拼接，先换成 (B, T, H, D)，"
        "再把最后两维展平。"
    ),
    "no_scaling": (
        "这与“分数没有乘 1/√d”的结果一致：q @ k^T 要除以 math.sqrt(d)，d = q.size(-1) "
        "是一个头的维度。"
    ),
    "scale_by_d": "这与“除以 d 而不是 √d”的结果一致：应除以 math.sqrt(d)，而不是 d。",
    "scale_by_embed_dim": (
        "这与“除以 √embed_dim 而不是 √d_head”的结果一致：缩放用的是一个头的维度，即 embed_dim // "
        "num_heads。"
    ),
    "scale_by_wrong_dim": (
        "这与“除以错误维度（词元数或头数）的平方根”的结果一致：应使用最后一维："
        "math.sqrt(q.size(-1))。"
    ),
    "qk_swapped": (
        "这与“q 和 k 互换（k @ q^T）”的结果一致：scores[..., i, j] 比较的是查询 i 与键 j：q @ "
        "k.transpose(-2, -1)。"
    ),
    "softmax_wrong_dim": (
        "这与“在错误的维度上做 softmax”的结果一致：应在键的维度上归一化，softmax(scores, dim=-1)，"
        "使每个查询的权重之和为 1。"
    ),
    "unstable_softmax": (
        "这与“把 softmax 写成 exp(s) / exp(s).sum()”的结果一致：logit 很大时 exp 溢出为 inf，inf / "
        "inf 得到 NaN；请用 torch.softmax，它会先减去每行的最大值。"
    ),
    "mask_inverted": (
        "这与“掩码取反、把 True 当成允许”的结果一致：True 表示屏蔽：masked_fill(mask, "
        "float('-inf'))，不要用 ~mask 或 mask == 0。"
    ),
    "mask_shifted": (
        "这与“因果掩码错开了一条对角线”的结果一致：只屏蔽键 j > 查询 i，torch.triu(..., "
        "diagonal=1)：每个词元都能看到自己。"
    ),
    "mask_transposed": (
        "这与“因果掩码屏蔽了过去而不是未来”的结果一致：请用 torch.triu（对角线上方），不要用 "
        "torch.tril。"
    ),
    "mask_after_softmax": (
        "这与“在 softmax 之后才加掩码”的结果一致：应在 softmax 之前把被屏蔽的分数填成 -inf，"
        "这样允许的权重之和仍为 1。"
    ),
    "mask_fill_zero": (
        "这与“被屏蔽的位置填 0 而不是 -inf”的结果一致：分数为 0 的权重仍是 exp(0) > 0；请填 "
        "float('-inf')。"
    ),
    "is_causal_ignored": (
        "这与“忽略了 is_causal”的结果一致：is_causal=True 时，还要屏蔽所有键 j > 查询 i。"
    ),
    "attn_mask_ignored": (
        "这与“is_causal=True 时忽略了 attn_mask”的结果一致：两个掩码都要用："
        "任一掩码屏蔽的位置都要屏蔽。"
    ),
    "masks_and": (
        "这与“用 & 合并 attn_mask 和因果掩码（两者都屏蔽才屏蔽）”的结果一致："
        "任一掩码屏蔽的位置都要屏蔽：attn_mask | causal。"
    ),
    "bias_ignored": (
        "这与“投影漏掉了偏置”的结果一致：要加上偏置，x @ weight.T + bias（nn.Linear 会替你加）。"
    ),
    "weight_not_transposed": (
        "这与“权重没有转置（x @ weight）”的结果一致：权重的形状是 (out_features, in_features)：x @ "
        "weight.T。"
    ),
    "k_proj_on_value": "这与“把 k_proj 用在了 value 上”的结果一致：v = v_proj(value)。",
    "q_proj_on_key": "这与“把 q_proj 用在了 key 上”的结果一致：k = k_proj(key)。",
    "value_from_key": (
        "这与“v_proj 作用在 key 而不是 value 上”的结果一致：v = v_proj(value)：交叉注意力中 key 和 "
        "value 不同。"
    ),
    "weights_averaged": (
        "这与“把注意力权重在各头之间取了平均”的结果一致：要返回每个头的权重，形状为 (B, H, Tq, "
        "Tk)。"
    ),
}

# Words of the score table.
_LABELS_ZH = {
    "check": "检查项",
    "points": "得分",
    "message": "说明",
    "total": "总分",
    "While loading your file:": "加载文件时：",
    "your code printed:": "你的代码打印了：",
}


def language() -> str:
    """The language of messages: MHA_KIT_LANG when it names one we have, else English."""
    lang = os.environ.get(LANG_VARIABLE, "en").strip().lower()
    return lang if lang in LANGUAGES else "en"


def translate(message: str, lang: str | None = None) -> str:
    """A grader message in `lang` (default: `language()`)."""
    if (lang or language()) != "zh":
        return message
    from .checks.diagnosis import CATALOGUE  # torch: not imported for the CLI parser

    for mistake in CATALOGUE:
        message = message.replace(mistake.sentence(), _MISTAKES_ZH[mistake.id])
    for pattern, replacement in _ZH:
        message = re.sub(pattern, replacement, message)
    return message


def label(word: str) -> str:
    """A word of the score table in the language of messages."""
    return _LABELS_ZH.get(word, word) if language() == "zh" else word
