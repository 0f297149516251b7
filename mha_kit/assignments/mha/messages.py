"""The sentences of this assignment's checks, by id, in English and Chinese (see
`mha_kit.messages`)."""

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
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
