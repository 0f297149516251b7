"""The sentences of this assignment's checks, by id, in English and Chinese (see
`mha_kit.messages`)."""

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "case.contiguous_x": "contiguous x",
        "case.transposed_x": "x a transpose of (B, T, H, D)",
        "shapes.copy": "split_heads_view returned a copy: view and transpose never copy, so the "
                       "result should share x's memory (avoid contiguous(), clone() and "
                       "torch.stack here)",
        "shapes.quiz_form": "view_quiz() should return {count} answers, True or False, one per "
                            "expression of VIEW_QUIZ in order; got {answers}",
        "shapes.quiz_score": "{right} of {count} right: test each one with "
                             "x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()",
        "shapes.roundtrip": "merge_heads_transpose(split_heads_view(x, H)) should give x back "
                            "exactly: splitting and merging only move numbers",
    },
    "zh": {
        "case.contiguous_x": "连续的 x",
        "case.transposed_x": "x 由 (B, T, H, D) 转置而来",
        "shapes.copy": "split_heads_view 返回的是副本：view 和 transpose 从不复制，"
                       "结果应与 x 共享内存（这里不要用 contiguous()、clone() 或 torch.stack）",
        "shapes.quiz_form": "view_quiz() 应当按 VIEW_QUIZ 的顺序，对每个表达式给出一个 True 或 "
                            "False，共 {count} 个答案；实际得到 {answers}",
        "shapes.quiz_score": "答对 {right}/{count} 题：逐个用这个式子验证 "
                             "x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()",
        "shapes.roundtrip": "merge_heads_transpose(split_heads_view(x, H)) 应当原样还原 x："
                            "拆分与合并只是移动数字",
    },
}
