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
    (r"the classic bug\. ", "典型错误。"),
    (r"returned a copy", "返回的是副本"),
    (r"dropped no attention weight", "一个注意力权重也没有丢弃"),
    (r"^(\d+) of (\d+) right: test each one with ", r"答对 \1/\2 题：逐个用这个式子验证 "),
)

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
    for pattern, replacement in _ZH:
        message = re.sub(pattern, replacement, message)
    return message


def label(word: str, lang: str | None = None) -> str:
    """A word of the score table in `lang`."""
    return _LABELS_ZH.get(word, word) if (lang or language()) == "zh" else word
