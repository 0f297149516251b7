"""The sentences of this assignment's checks, by id, in English and Chinese (see
`mha_kit.messages`)."""

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        # the speed check: the fused module against the kit's looped one (speed.py)
        "speed.loops": "part of the attention loops over heads: `{op}` runs once per head "
                       "({count} calls in one forward with {heads} heads, {half_count} with "
                       "{half}). That earns no speed points, however fast; {measured}. To change: "
                       "call it once for all heads, on tensors shaped (B, H, ...)",
        "speed.malformed_ops": "the timing run sent malformed operation counts",
        "speed.measured": "measured: {speedup:.1f}× faster than the kit's looped version{runs} "
                          "(per call: yours {student:.2f} ms, looped {looped:.2f} ms, the kit's "
                          "fused {fused:.2f} ms; on {device}{config})",
        "speed.output_changed": "the output of call {call} in timing round {round} is not the one "
                                "the run committed to (by its digest) before the grader chose "
                                "which outputs to check",
        "speed.passed": "{measured}; needed: at least {needed:g}×",
        "speed.per_head": "{result}. Per-head Python work: `{op}` runs {count} times in one "
                          "forward with {heads} heads. It only moves data, so it is allowed, and "
                          "it earns the points while the module stays at least {needed:g}× faster "
                          "than the looped version; `view` and `transpose` split and merge heads "
                          "without a loop",
        "speed.too_slow": "{measured}; needed: at least {needed:g}× for the speed points, which "
                          "are all or nothing. To change: do each step once for all heads, and "
                          "look for Python work repeated per head (slicing heads in a "
                          "comprehension adds up; `view` and `transpose` split and merge all "
                          "heads in one call each)",
        "speed.wrong_counted": "the forward whose torch calls were counted ({heads} heads) did "
                               "not return the right answer: the calls counted must be those of a "
                               "right answer (is forward doing something else while it is "
                               "counted?)",
        "what.weights": "{name} weights",
        "what.out": "{name} out",
        "what.without_device": "{call} without device",
        "case.three_d": "3-d inputs (B, T, D) with Tq=4, Tk=7",
        "case.default_device": "device=None means the default device",
        "case.query_alone": "forward(query) alone: key and value default to query",
        "case.attn_mask_only": "attn_mask only",
        "case.is_causal_only": "is_causal=True only",
        "case.both_masks": "attn_mask and is_causal=True: blocked if either blocks",
        "case.longest_timed": "is_causal=True at T={T}, the length the speed check times on a GPU: "
                              "forward must take any length, as nn.MultiheadAttention does; a mask "
                              "buffer made for fewer tokens fails here",
        "case.training": "dropout={p:g}, training",
        "why.heads_divide": "{dim} is not divisible by {heads} heads",
        "mask.blocked_pair": "{call}: True marks a *blocked* pair, query i may not look at key "
                             "j > i; {wrong}",
        "modules.need_weights": "with need_weights=False, forward should return (out, None)",
    },
    "zh": {
        # 速度检查（speed.py）
        "speed.loops": "注意力的一部分在逐头循环：`{op}` 每个头调用一次（{heads} 个头时一次 forwar"
                       "d 调用 {count} 次，{half} 个头时 {half_count} 次）。无论多快，这都不得速度"
                       "分；{measured}。怎么改：对所有的头只调用一次，作用在形状为 (B, H, ...) 的"
                       "张量上",
        "speed.malformed_ops": "计时运行发回的运算次数格式不对",
        "speed.measured": "实测：速度是本套件逐头循环实现的 {speedup:.1f} 倍{runs}（每次调用：你的"
                          " {student:.2f} ms，逐头循环 {looped:.2f} ms，本套件的融合实现 {fused:.2"
                          "f} ms；设备：{device}{config}）",
        "speed.output_changed": "第 {round} 轮计时中第 {call} 次调用的输出，与评分程序选定要检查哪"
                                "些输出之前计时运行（以摘要）承诺的输出不同",
        "speed.passed": "{measured}；要求：至少 {needed:g} 倍",
        "speed.per_head": "{result}。逐头的 Python 操作：{heads} 个头时一次 forward 调用了 {count}"
                          " 次 `{op}`。它只搬移数据，所以是允许的：只要整个模块的速度仍至少是逐头"
                          "循环的 {needed:g} 倍，就能得分；用 `view` 和 `transpose` 拆分、合并各头"
                          "则不需要循环",
        "speed.too_slow": "{measured}；要求：至少 {needed:g} 倍才能得到速度分，速度分全有或全无。"
                          "怎么改：每一步对所有的头只做一次，并找出逐头重复的 Python 操作（在推导"
                          "式里逐头切片会累积起来；`view` 和 `transpose` 各调用一次就能拆分、合并"
                          "所有的头）",
        "speed.wrong_counted": "统计 torch 调用次数的那次 forward（{heads} 个头）没有返回正确答案"
                               "：统计的必须是算出正确答案的调用（forward 在被统计时是不是做了别的"
                               "事？）",
        "what.weights": "{name} 的权重",
        "what.out": "{name} 的 out",
        "what.without_device": "不传 device 的 {call}",
        "case.three_d": "三维输入 (B, T, D)，Tq=4，Tk=7",
        "case.default_device": "device=None 表示默认设备",
        "case.query_alone": "只传 forward(query)：key 和 value 默认等于 query",
        "case.attn_mask_only": "只有 attn_mask",
        "case.is_causal_only": "只有 is_causal=True",
        "case.both_masks": "attn_mask 加 is_causal=True：任一掩码屏蔽即屏蔽",
        "case.longest_timed": "is_causal=True，T={T}，即 GPU 上速度检查计时的长度：forward 必须接受"
                              "任意长度，和 nn.MultiheadAttention 一样；为更少 token 建的掩码缓冲区"
                              "会在这里出错",
        "case.training": "dropout={p:g}，训练模式",
        "why.heads_divide": "{dim} 不能被 {heads} 个头整除",
        "mask.blocked_pair": "{call}：True 表示这一对被*屏蔽*，查询 i 不能看键 j > i；{wrong}",
        "modules.need_weights": "need_weights=False 时，forward 应当返回 (out, None)",
    },
}
