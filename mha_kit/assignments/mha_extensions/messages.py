"""The sentences of this assignment's checks, by id, in English and Chinese (see
`mha_kit.messages`)."""

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "what.weights_dims": "{name} weights {dims}",
        "what.output_dims": "{name} output {dims}",
        "case.value_defaults_to_key": "forward(query, key): value defaults to key",
        "case.grader_mask": "the grader's own pattern in the `mask` buffer: slice self.mask, don't "
                            "build a new mask in forward",
        "case.train_dropout": "dropout={p:g} in training mode",
        "why.features_split": "{dim} features do not split into {heads} heads",
        "why.qk_default": "qk_head_dim defaults to query_dim // num_heads, and {heads} does not "
                          "divide {dim}",
        "ext.should_work": "{call} should work: with the head sizes given, nothing needs to "
                           "divide. It failed: {error}",
    },
    "zh": {
        "what.weights_dims": "{name} 的权重 {dims}",
        "what.output_dims": "{name} 的输出 {dims}",
        "case.value_defaults_to_key": "forward(query, key)：value 默认等于 key",
        "case.grader_mask": "`mask` 缓冲区里是评分程序自己的模式：请切片 self.mask，不要在 forward "
                            "里新建掩码",
        "case.train_dropout": "dropout={p:g}，训练模式",
        "why.features_split": "{dim} 个特征不能平分给 {heads} 个头",
        "why.qk_default": "qk_head_dim 默认为 query_dim // num_heads，而 {heads} 不能整除 {dim}",
        "ext.should_work": "{call} 应当能正常创建：给定了各头的大小，就不需要整除。"
                           "实际失败：{error}",
    },
}
