"""The Chinese sentences of llm_attention's checks and mistakes, by id (`messages.TEMPLATES`)."""

ZH: dict[str, str] = {
    "llm.rope_norm": "apply_rope 改变了特征向量的长度（‖out‖ = {got}，‖x‖ = {expected}）："
                     "旋转不改变长度。每一对 (x_i, x_(i+D/2)) 应变为 (x_i cos θ - x_(i+D/2) "
                     "sin θ, x_i sin θ + x_(i+D/2) cos θ)，两项用同一个角度 θ",
    "llm.rope_relative": "所有位置同时移动 {shift} 后，分数 R(m)q · R(n)k 变了：使用 RoPE "
                         "时它只取决于 m - n。请检查角度是否为“位置 × 频率”，并且用的是传入的"
                         "位置",
    "case.llm_decoding": "{module}；先预填 {prefill} 个词元，再每次 {steps} 个，经同一个 "
                         "KVCache",
    "llm.decoding": "{name}（用 KVCache 解码）",
    "llm.keeps_state": "{name} 不带缓存、对同一个 x 第二次运行时输出不同：forward(x) 在两次"
                       "调用之间不应保留任何东西（缓存应放在传入的 KVCache 里）",
    "llm.cache_length": "每次调用后 len(cache) 依次为 {got}，而不是 {expected}：缓存每次应"
                        "恰好增加本次调用的词元数",
    "llm.step_output": "{name} 带缓存的第 {step} 次调用的输出",
    "llm.cached_output": "{name} 带缓存的各次调用依次拼接的输出（每一步都应等于对整个序列做"
                         "注意力时对应的那几行）",
    "llm.bad_decoding_reply": "用 {name} 和 KVCache 解码时返回的不是输出和长度",
    "llm.cache_not_updated": "{name} 没有调用 cache.update(k, v) 就解码出了正确的值：只有输出"
                             "正确还不是缓存。请把已处理词元的键（已用 RoPE 旋转）和值保存在 "
                             "KVCache 里：每次调用只为新词元计算它们，cache.update 返回到目前"
                             "为止所有词元的键和值",
    "llm.cache_update_reply": "cache.update(k, v) 返回的是 {type}，而不是到目前为止所有词元"
                              "的 (键, 值) 对（各为 (B, Hkv, L, D)）：缓存应保存键和值，而不是"
                              "用来计算它们的东西",
    "llm.cache_keys": "最后一次 cache.update(k, v) 返回的键（到目前为止每个词元的键，各自按"
                      "其位置用 RoPE 旋转）",
    "llm.cache_values": "最后一次 cache.update(k, v) 返回的值（到目前为止每个词元的值）",
    "case.llm_large_scores": "分数达到数百",
    "case.llm_extreme_rows": "查询 0 的每个分数都在 -10000 左右，查询 1 的都在 "
                             "+1000 左右",
    "llm.flash_pair": "{name} 应返回一对 (out, logsumexp)，而不是 {type}",
    "llm.flash_out": "{name} 的输出",
    "llm.flash_lse": "{name} 的 logsumexp",
    "case.llm_memory": "在 meta 设备上，B={B}，H={H}，Tq=Tk={T}，D={D}，block_size={block}，"
                       "is_causal={causal}",
    "case.llm_memory_real": "在 CPU 上，float32，B={B}，H={H}，Tq=Tk={T}，D={D}，"
                            "block_size={block}，is_causal={causal}",
    "llm.measuring": "{name}（内存监测）",
    "llm.reads_values": "{name} 把张量的值读进了 Python（.item()、int(t)、float(t)，或对张量"
                        "用 if）：内存检查在 meta 设备上运行它，那里的张量只有形状没有值。"
                        "请用形状计算分块边界（q.shape、range(0, Tk, block_size)），算术"
                        "留在张量里",
    "llm.memory_too_slow": "{name} 在 meta 设备上、T={T} 时没有在时限内完成：内存检查以 "
                           "block_size={block} 调用它，按这个大小分块只需 {blocks} 步。请用传入"
                           "的 block_size 作为块的大小",
    "llm.blocks_kept": "{name} 创建的张量同时占有 {elements} 个元素，和所有头的分数 H × Tq × Tk"
                       "（{limit}）一样多：保留下来的块（比如存在列表里）加起来就是整个矩阵。"
                       "每个块只在用到时保留",
    "llm.bad_memory_reply": "{name} 的内存监测没有返回大小",
    "llm.full_matrix_forward": "{name} 创建了一个 {elements} 个元素的张量（形状 {shape}，"
                               "由 {op} 产生）：一个头完整的 (Tq, Tk) 矩阵有 {limit} 个元素。"
                               "FlashAttention 从不构造它：按块遍历键，维护运行最大值、运行"
                               "和以及重新缩放的输出",
    "llm.full_matrix_backward": "{name} 的反向传播创建了一个 {elements} 个元素的张量（形状 "
                                "{shape}，由 {op} 产生）：一个头完整的 (Tq, Tk) 矩阵有 "
                                "{limit} 个元素。请用 q、k 和保存的 logsumexp 逐块重新计算"
                                "分数",
    "llm.no_graph": "{name} 的输出与 q、k、v 没有连接：请返回 "
                    "YourFunction.apply(q, k, v, is_causal, block_size)",
    "llm.saves_too_much": "{name} 的 autograd 计算图为反向传播保留了 {elements} 个元素，和一个"
                          "头完整的 (Tq, Tk) 矩阵（{limit}）一样多：对分块循环直接求导会保存"
                          "每一块的分数。请写一个 autograd.Function，只保存 q、k、v、out 和 "
                          "logsumexp",
    "llm.function_saves_too_much": "{name} 的 autograd.Function 用 save_for_backward 为反向"
                                   "传播保存了 {elements} 个元素，和一个头完整的 (Tq, Tk) 矩阵"
                                   "（{limit}）一样多：只保存 q、k、v、out 和 logsumexp，在反向"
                                   "传播中逐块重新计算分数",
    "llm.keeps_in_ctx": "{name} 的 autograd 计算图为反向传播保留了 {elements} 个元素，和一个头"
                        "完整的 (Tq, Tk) 矩阵（{limit}）一样多，其中大部分在 `{where}`（形状 "
                        "{shape}），这是 Function 的 ctx 的一个属性：放在那里的张量和保存的"
                        "张量一样一直占着内存。只保留 q、k、v、out 和 logsumexp"
                        "（ctx.save_for_backward），在反向传播中逐块重新计算分数",
    "llm.counting_decoding": "{name}（经 KVCache 解码，并统计计算量）",
    "llm.speed_malformed": "计数运行返回的不是计数结果",
    "llm.speed_spot": "{name} 在计数时解码出的值与标准答案不同",
    "llm.speed_measured": "预填 {P} 个词元后，每解码一个词元的计算量（计数方法：矩阵乘法的"
                          "浮点运算次数，其他 torch 运算读写的元素个数）：经你的 KVCache "
                          "{cached:.1f} M，重算整个前缀 {recomputed:.0f} M（本套件的计数），"
                          "少 {ratio:.1f} 倍；耗时（不计分）：每个词元 CPU 时间 {cpu:.2f} ms，"
                          "实际时间 {wall:.2f} ms（在 {device} 上{config}）",
    "llm.speed_passed": "{measured}；要求：至少少 {needed:g} 倍",
    "llm.speed_too_slow": "{measured}；在这里缓存的计算量至少应少 {needed:g} 倍。请把过去词元"
                          "的键和值保存在 KVCache 里，只为新词元计算，再对缓存中已有的词元做"
                          "注意力：对预先分配的整个缓冲区做注意力，每一步都要付出整个缓冲区"
                          "长度的代价",
    "llm.speed_reads": "{name} 在经 KVCache 解码时把张量的值读进了 Python（{how}）：这项检查"
                       "统计的是 torch 运算的计算量，对从张量中取出的值在 Python 或 NumPy 里"
                       "做的计算会逃过计数。请只用张量运算解码（位置就是 len(cache)，一个 "
                       "Python 整数）",
    "llm.speed_uncounted": "{name} 在经 KVCache 解码时调用了 {ops}：这项检查统计矩阵乘法、"
                           "逐元素运算、归约、复制和索引的计算量，无法统计这些运算，它们的"
                           "计算量可能远超所涉及的元素数。只用检查能统计的运算来解码，就能"
                           "得分",
    "llm.speed_unseen": "统计到的计算量为每个词元 {work:.2f} M，少于计算一个词元的键和值所需"
                        "（{least:.2f} M）：在计数器看不到的地方完成的计算（另一个线程、"
                        "PyTorch 之外的代码）不计分",
    "waiting.llm_kv_cache": "用 KVCache 解码的输出正确之后才计数",
    "waiting.llm_gqa": "GroupedQueryAttention 不带缓存通过检查后才运行：缓存是在它的 forward "
                       "里读写的，套件没有可以代替它的版本",
    "mistake.rope_interleaved": (
        "这与“交错配对”的结果一致：特征 (2i, 2i + 1) 一起旋转，即 Meta 原版 Llama 代码的配对"
        "方式。本套件把特征 i 与 i + D/2 配对（rotate-half，即 `transformers` 库中 Llama 的写"
        "法）：x1 = x[..., :D/2]，x2 = x[..., D/2:]。"),
    "mistake.rope_base_ignored": (
        "这与“无论传入什么 base 都用 10000”的结果一致：频率 base^(-2i/D) 中请使用参数 `base`"
        "。"),
    "mistake.rope_positions_ignored": (
        "这与“用 0, 1, ..., T-1 代替传入的位置”的结果一致：第 t 个词元的角度是 positions[t] ×"
        " θ_i。"),
    "mistake.rope_reversed": (
        "这与“旋转了 -θ”的结果一致：前一半应为 x1 cos θ - x2 sin θ，后一半为 x1 sin θ + x2 co"
        "s θ。"),
    "mistake.rope_exponent_halved": (
        "这与“频率取 base^(-i/D)（i = 0 .. D/2 - 1）”的结果一致：指数应为 2i/D，即 torch.aran"
        "ge(0, D, 2) / D。"),
    "mistake.rope_mixed_pairing": (
        "这与“两种约定混用”的结果一致：角度逐个重复（repeat_interleave，交错约定的写法），配"
        "对却是 rotate-half。在 rotate-half 中特征 i 与 i + D/2 共用角度 θ_i：torch.cat([angl"
        "es, angles], dim=-1)。"),
    "mistake.kv_heads_tiled": (
        "这与“把头整体平铺（x.repeat(1, n_rep, 1, 1)：头 0, 1, 0, 1）”的结果一致：应让每个头"
        "连续重复（0, 0, 1, 1）：torch.repeat_interleave(x, n_rep, dim=1)，或 x[:, :, None].e"
        "xpand(...).reshape(...)。"),
    "mistake.gqa_heads_tiled": (
        "这与“把键/值头整体平铺”的结果一致：查询头 h·n_rep .. (h+1)·n_rep - 1 共用键/值头 h，"
        "所以应让每个头连续重复（repeat_kv），而不是重复整组（repeat）。"),
    "mistake.gqa_rope_missing": (
        "这与“没有使用 RoPE 的注意力”的结果一致：除非 rope_base 为 None，请用 apply_rope 在各"
        "自的位置上旋转 q 和 k（不旋转 v）。"),
    "mistake.gqa_rope_on_values": (
        "这与“对值也做了 RoPE”的结果一致：只旋转 q 和 k；值携带内容，不携带位置。"),
    "mistake.gqa_not_causal": (
        "这与“没有因果掩码的注意力”的结果一致：词元 t 只能看到词元 0 .. t。"),
    "mistake.cache_positions_restart": (
        "这与“每次调用位置都从 0 重新开始（用于 RoPE，也可能用于因果掩码）”的结果一致：带缓存"
        "的调用应从位置 len(cache) 开始（在更新之前读取）。"),
    "mistake.cache_mask_top_left": (
        "这与“因果掩码左上对齐（查询比键少时 SDPA 的 is_causal=True 就是这样）”的结果一致：位"
        "置 p 上的新词元能看到全部键 0 .. p，所以一次调用中的第 i 个查询能看到 j <= len(cache"
        ") + i 的键。"),
    "mistake.cache_attend_before_update": (
        "这与“先做注意力、后更新缓存”的结果一致：新词元看不到自己。请先调用 cache.update(k, v"
        ")，再对它返回的键和值做注意力。"),
    "mistake.cache_chunk_not_causal": (
        "这与“一次调用多个词元时不加掩码，或掩码的偏移取自 cache.update 之后读出的 "
        "len(cache)（每个查询因此都后移了本次调用的词元数）”的结果一致：每个词元都看到了它"
        "后面的词元。请在 update 之前读出 start = len(cache)，对第 i 个查询屏蔽 j > start + i "
        "的键。"),
    "mistake.window_one_too_many": (
        "这与“窗口多了一个键”的结果一致：查询 i 看到满足 i - window < j <= i 的 j，即它自己和"
        "它之前的 window - 1 个键。"),
    "mistake.window_one_too_few": (
        "这与“窗口少了一个键”的结果一致：查询 i 看到满足 i - window < j <= i 的 j，即它自己和"
        "它之前的 window - 1 个键。"),
    "mistake.window_two_sided": (
        "这与“双向窗口”的结果一致：掩码同时也是因果的，j <= i。"),
    "mistake.window_inverted": (
        "这与“掩码取反”的结果一致：True 表示查询可以关注（SDPA 的约定），所以对角线及其下方、"
        "窗口之内为 True。"),
    "mistake.flash_acc_not_rescaled": (
        "这与“最大值增大时没有重新缩放输出累加器”的结果一致：加上新块的 p @ v 之前，先把它乘"
        "以 exp(old_max - new_max)。"),
    "mistake.flash_sum_not_rescaled": (
        "这与“最大值增大时没有重新缩放运行和”的结果一致：加上新块的和之前，先把它乘以 exp(old"
        "_max - new_max)。"),
    "mistake.flash_softmax_per_block": (
        "这与“在每个块内各做 softmax 再把各块相加”的结果一致：归一化项是所有键的和，所以要维"
        "护运行和，最后只除一次。"),
    "mistake.flash_no_running_max": (
        "这与“对原始分数直接取 exp()、没有减去运行最大值”的结果一致：大的分数会溢出为 inf。请"
        "维护该行到目前为止的最大值并减去它。"),
    "mistake.flash_logsumexp_without_max": (
        "这与“logsumexp 漏掉了最大值”的结果一致：它等于 max + log(sum)，其中 sum 是 exp(score"
        " - max) 的和。"),
    "mistake.flash_causal_off_by_one": (
        "这与“因果边界差一”的结果一致：Tq 个查询中的第 i 个看到 j <= i + Tk - Tq 的键，包括它"
        "自己。"),
    "mistake.flash_causal_top_left": (
        "这与“因果掩码左上对齐”的结果一致：查询比键少时，查询是最后 Tq 个词元，所以查询 i 看"
        "到 j <= i + Tk - Tq 的键。"),
    "mistake.gqa_rope_before_split": (
        "这与“在拆分成多个头之前对整个嵌入做 RoPE”的结果一致：每个头要单独旋转，把该头的特征 i "
        "与 i + D/2 配对（D = head_dim）。请先把 q 和 k 拆成多个头，再对 (B, H, T, D) 调用 "
        "apply_rope。"),
    "mistake.gqa_groups_transposed": (
        "这与“查询头按错误的顺序分组：(r g)，而应为 (g r)”的结果一致：查询头 g·n_rep .. "
        "(g+1)·n_rep - 1 共用键/值头 g，所以应按 '(g r d)' 拆分（q.view(B, T, Hkv, n_rep, D)"
        "），并按同样的顺序合并回去。"),
    "mistake.gqa_group_summed": (
        "这与“把一组内的查询头相加（einsum 写成 'b g r t d, b g s d -> b g t s'，输出中没有 r"
        "）”的结果一致：这样每个键/值头只剩一个头。请保留 r：'b g r t d, b g s d -> b g r t s'"
        "，每个查询头都有自己的分数。"),
    "mistake.cache_causal_only_several": (
        "这与“只在一次调用有多个词元时才用因果掩码，并且左上对齐（is_causal=T > 1，"
        "`transformers` 库曾这样写）”的结果一致：预填之后，一次调用中的第 i 个查询位于 "
        "len(cache) + i，能看到 j <= len(cache) + i 的键。"),
    "mistake.cache_keys_rotated_after": (
        "这与“先缓存未旋转的键，之后再按新词元的位置旋转”的结果一致：缓存中的每个键都被转了最新"
        "的角度。请在 cache.update(k, v) 之前按 k 自己的位置旋转它，让缓存保存旋转后的键。"),
    "mistake.window_not_causal": (
        "这与“窗口缺少因果部分”的结果一致：查询 i 还看到了它之后的所有键。两个边界都要保留："
        "(j <= i) & (j > i - window)。"),
    "mistake.flash_nothing_rescaled": (
        "这与“最大值增大时运行和与输出累加器都没有重新缩放”的结果一致：加上新块的和与它的 "
        "p @ v 之前，先把两者都乘以 exp(old_max - new_max)。"),
    "mistake.flash_causal_ignored": (
        "这与“忽略了 is_causal”的结果一致：is_causal=True 时，Tq 个查询中的第 i 个只看到 "
        "j <= i + Tk - Tq 的键。在取每个块的最大值之前，先用 -inf 屏蔽该块的分数。"),
    "mistake.flash_causal_keys_cut": (
        "这与“因果情形下键的范围提前结束：少一个键或一个块，或者止于 qe 而没有加上偏移 "
        "Tk - Tq”的结果一致：查询 [qs, qe) 需要 "
        "min(Tk, qe + Tk - Tq) 之前的所有键，包括它们对角线上的那个块；块内的掩码负责其余部分"
        "。"),
    "mistake.flash_softmax_per_block_averaged": (
        "这与“在每个块内各做 softmax 再对各块取平均”的结果一致：每个块的 softmax 有自己的归一化"
        "项，取平均无法把它们合并。请维护运行最大值和运行和，重新缩放，最后只除一次。"),
    "mistake.flash_backward_no_delta": (
        "这与“反向传播漏掉了 δ = rowsum(dO ∘ O)”的结果一致：softmax 的梯度是 "
        "dS = P ∘ (dP - δ)，其中 dP = dO Vᵀ，dQ 和 dK 都要用它。"),
    "mistake.flash_backward_unscaled": (
        "这与“dQ 或 dK 漏掉了 softmax 的缩放”的结果一致：分数是 S = Q Kᵀ / √D，所以 "
        "dQ = dS K / √D，dK = dSᵀ Q / √D。"),
    "mistake.flash_forward_failing": (
        "这与“你的 flash_attention 给出的输出”的结果一致，而它没有通过 llm_flash_forward："
        "这里的前向计算是同一个错误的前向计算。请先修正 flash_attention（它的检查会指出错在哪里"
        "），或在你的 Function 的 forward 中调用它：在你的版本通过之前，反向传播会用本套件的"
        "版本来评分。"),
    "llm.window_float": "sliding_window_mask(T, window) 的 dtype 是 {dtype}：它应返回 "
                        "torch.bool 掩码，True 表示查询 i 可以关注键 j（SDPA 布尔 attn_mask "
                        "的约定），而不是加性的 0/-inf 掩码",
    "llm.cache_shared": "用过另一个 KVCache 之后，新建的 KVCache 已经存有 {length} 个词元："
                        "它的键和值放在类属性里（比如类体中的列表），所有缓存共用。请在 "
                        "__init__ 中创建它们（self.k = None），让每个缓存从空开始",
    "llm.cache_heads": "{name} 传给 cache.update 的键有 {got} 个头，而不是 k_proj 给出的 "
                       "num_kv_heads = {Hkv} 个：缓存于是存的是 repeat_kv 之后的键和值，占用"
                       "所需内存的 {n_rep} 倍（GQA 的意义正在于缓存只存 Hkv 个头）。请先更新"
                       "缓存，再对它返回的结果做 repeat_kv",
    "mistake.flash_default_dtype": (
        "这与“用 torch.full 或 torch.zeros 创建运行最大值、运行和与累加器时没有写 dtype= "
        "和 device=”的结果一致：它们于是是 float32（PyTorch 的默认 dtype）并且在 CPU 上，"
        "不管 q 是什么（这里是 bfloat16，在 GPU 上评分时在 GPU 上）。请用 q.new_full / "
        "q.new_zeros 创建，或传入 dtype=q.dtype, device=q.device。"),
    "mistake.gqa_scale_by_embed_dim": (
        "这与“分数除以 √E（E 为嵌入维度）”的结果一致：每个头的分数应乘以 1/√D，D = E / "
        "num_heads 是头维度（q.shape[-1]）。"),
    "mistake.gqa_scale_unrooted": (
        "这与“分数除以 D 而不是 √D”的结果一致：缩放系数是 1/√D，即 "
        "1 / math.sqrt(head_dim)（D ** -0.5）。"),
    "mistake.gqa_mask_filled_zero": (
        "这与“被屏蔽的分数填成 0”的结果一致：分数为 0 的位置在 softmax 里仍有权重 e^0，"
        "于是看到了未来。请填成 float('-inf')。"),
    "mistake.gqa_split_no_transpose": (
        "这与“用 .view(B, H, T, D) 拆分头而不转置”的结果一致：投影的形状是 (B, T, H·D)，"
        "应先 view 成 (B, T, H, D)，再 .transpose(1, 2)。"),
    "mistake.gqa_merge_no_transpose": (
        "这与“把 (B, H, T, D) 直接 reshape 成 (B, T, E) 来合并头”的结果一致：先 "
        "transpose(1, 2) 回到 (B, T, H, D)，再 reshape。"),
    "mistake.gqa_softmax_over_queries": (
        "这与“在查询维度上做 softmax（dim=-2）”的结果一致：每个查询对各个键的权重之和为 1，"
        "应为 softmax(dim=-1)。"),
    "mistake.gqa_rope_default_base": (
        "这与“调用 apply_rope 时没有传入本层的 base，因而用了 10000”的结果一致：请传入 "
        "self.rope_base，即 apply_rope(q, positions, self.rope_base)。"),
    "mistake.gqa_rope_queries_only": (
        "这与“只对查询做 RoPE”的结果一致：键也要在各自的位置上旋转，否则分数不只取决于 "
        "m - n。"),
    "mistake.gqa_diagonal_blocked": (
        "这与“因果掩码把每个词元自身也屏蔽了（j >= i）”的结果一致：词元 t 能看到词元 "
        "0 .. t（包括自身），所以只屏蔽 j > i（triu(diagonal=1)）；第一个词元什么都看不到，"
        "于是得到 NaN。"),
    "mistake.gqa_n_rep_kv_heads": (
        "这与“repeat_kv(k, num_kv_heads)”的结果一致：n_rep 是每个键/值头对应的查询头数，"
        "即 num_heads // num_kv_heads，这样 Hkv 个头才变成 H 个。"),
    "mistake.kv_repeat_tokens": (
        "这与“沿词元维（dim 2）重复”的结果一致：头是 (B, Hkv, T, D) 的第 1 维，每个头应连续"
        "重复 n_rep 次。"),
    "mistake.kv_repeat_batch": (
        "这与“沿批维（dim 0）重复”的结果一致：头是 (B, Hkv, T, D) 的第 1 维，每个头应连续"
        "重复 n_rep 次。"),
    "mistake.cache_returns_new_only": (
        "这与“update 只返回传入的键和值”的结果一致：update 应把它们追加进缓存，并返回至今"
        "所有的键和值，形状 (B, Hkv, len(cache), D)。"),
    "mistake.cache_cat_heads": (
        "这与“沿第 1 维（头）追加键”的结果一致：缓存的形状是 (B, Hkv, L, D)，新词元应沿"
        "第 2 维追加：torch.cat([self.k, k], dim=2)。"),
    "mistake.cache_square_mask": (
        "这与“带缓存时仍用方形的 (T, T) 或 (L, L) 因果掩码”的结果一致：一次调用有 Tq = T "
        "个新查询（解码一步时 Tq = 1），对应 Tk = len(cache) 个键，所以掩码是 (Tq, Tk)："
        "当 j > start + i 时屏蔽查询 i 的键 j。"),
    "mistake.window_self_excluded": (
        "这与“窗口不含词元自身（用了 j < i 而不是 j <= i）”的结果一致：查询 i 看到满足 "
        "i - window < j <= i 的 j，即自身及之前的 window - 1 个键。"),
    "mistake.flash_not_scaled": (
        "这与“分数没有缩放”的结果一致：q @ kᵀ 应乘以 1/√D，D = q.shape[-1]。"),
    "mistake.flash_last_block_skipped": (
        "这与“漏掉了最后一个较短的键块”的结果一致：应遍历 range(0, Tk, block_size)，并切片 "
        "k[:, :, start:start + block_size]，末尾的块会短一些。"),
    "mistake.flash_max_from_zero": (
        "这与“运行最大值从 0 而不是 -inf 开始”的结果一致：某一行的分数若全都远小于 0，"
        "exp(score - 0) 之和就是 0，0 / 0 得到 NaN。请从 -inf 开始"
        "（q.new_full(..., float(\"-inf\"))）。"),
    "mistake.flash_dv_from_output": (
        "这与“dV = Pᵀ · out”的结果一致：值的梯度是 Pᵀ · dO，即输出的梯度（grad_out），"
        "而不是输出本身。"),
    "mistake.flash_delta_per_block": (
        "这与“δ 只在一个块的键上求和”的结果一致：δ_i = Σ_j P_ij dP_ij 要对所有键求和，"
        "它等于 rowsum(dO ∘ O)：在循环之前算一次即可。"),
    "mistake.flash_p_softmax_per_block": (
        "这与“在每个块内用 softmax 重新计算 P”的结果一致：P = exp(S - logsumexp)，"
        "logsumexp 由前向对所有键算出并保存。"),
    "mistake.flash_dk_not_transposed": (
        "这与“dK = dS · q”的结果一致：dS 的形状是 (Tq, b)，所以键的梯度是 dSᵀ · q，"
        "形状 (b, D)。"),
    "mistake.flash_backward_not_causal": (
        "这与“反向重算分数时没有加因果掩码”的结果一致：要像前向那样在那里加掩码，否则被屏蔽"
        "的键会得到权重 exp(S - logsumexp)。"),
    "mistake.rope_exponent_positive": (
        "这与“频率取 base^(+2i/D)，指数漏了负号”的结果一致：频率随 i 增大而不是减小。"
        "θ_i = base^(-2i/D)，第 0 对转得最快，最后一对最慢。"),
    "mistake.rope_halves_swapped": (
        "这与“两个旋转后的半边按错误的顺序拼接”的结果一致：输出的前一半是 x1·cos - x2·sin"
        "（特征 i），后一半是 x1·sin + x2·cos（特征 i + D/2）。"),
    "mistake.rope_float64_angles": (
        "这与“cos 和 sin 留在 float64（角度的 dtype）”的结果一致：x 乘以它们会被提升为 "
        "float64。在它们与 x 相乘之前转换成 x.dtype（.to(x.dtype)）。"),
    "mistake.rope_angles_in_dtype": (
        "这与“角度用 x 的 dtype 计算，或在求 cos 和 sin 之前转换成 x 的 dtype”的结果一致："
        "bfloat16 只保留一个数的 8 位，上千的位置或角度会差出整弧度。请用 float32 或 float64 "
        "计算角度，只把 cos 和 sin 转换成 x.dtype。"),
    "mistake.kv_view_after_expand": (
        "这与“用 .expand 造出 n_rep 的新轴，再用 .view 并入头维”的结果一致：扩展出的轴步长为 "
        "0，view 无法把它与头维合并。那里请用 .reshape（它会复制），或用沿 dim 1 重复的函数。"),
    "mistake.kv_repeat_axis_after_tokens": (
        "这与“n_rep 的新轴放在词元之后，(B, Hkv, T, n_rep, D)”的结果一致：把它 reshape 成 "
        "(B, Hkv·n_rep, T, D) 会把词元混进头里。一个头的副本要紧挨着它，所以新轴应紧跟在头维"
        "之后。"),
    "mistake.gqa_split_interleaved": (
        "这与“按 (B, T, D, H) 拆分头再 permute”的结果一致：第 h 个头于是取了每隔 H 个的特征。"
        "第 h 个头拥有特征 h·D .. (h+1)·D - 1：先 view 成 (B, T, H, D)，再 .transpose(1, 2)。"),
    "mistake.gqa_no_out_proj": (
        "这与“合并后的头不经 out_proj 直接返回”的结果一致：模块的输出是对合并后 (B, T, E) "
        "的头做 self.out_proj。"),
    "mistake.window_transposed": (
        "这与“i 和 j 互换”的结果一致：带状区域落在对角线上方，即查询之后的键。行是查询 i"
        "（torch.arange(T)[:, None]），列是键 j：查询 i 看到 i - window < j <= i。"),
    "mistake.flash_lse_keepdim": (
        "这与“返回的 logsumexp 带着运行和末尾大小为 1 的维度，(B, H, Tq, 1)”的结果一致：它是"
        "每个查询一个数，(B, H, Tq)，请对它 .squeeze(-1)。"),
    "mistake.flash_correction_inverted": (
        "这与“重新缩放的因子取反，exp(new_max - old_max)”的结果一致：第一个块时 old_max 为 "
        "-inf，因子是 inf，0 · inf 得 NaN。最大值增大时，旧的和与累加器要缩小："
        "exp(old_max - new_max)。"),
    "mistake.flash_max_not_kept": (
        "这与“从不保存新的最大值（漏了 row_max = new_max）”的结果一致：每个块都会把之前的结果"
        "乘以 exp(-inf) = 0，于是只有最后一个块起作用。每个块之后都要保存最大值。"),
    "mistake.flash_output_float32": (
        "这与“数值正确但以 float32 返回（.float()，或原样返回 float32 的累加器）”的结果一致："
        "请以 q 的 dtype 返回输出和 logsumexp，即 .to(q.dtype)。"),
    "mistake.flash_causal_keys_from_zero": (
        "这与“因果掩码里每个块的键都从 0 编号”的结果一致：从 `start` 开始的块中，第 j 个键是"
        "第 start + j 个词元，所以要拿查询的位置和 torch.arange(start, start + b) 比较。"),
    "mistake.flash_dq_overwritten": (
        "这与“每个键块都覆盖 dQ（dq = dS · k_block），而不是对它们求和”的结果一致：每个键块"
        "都要加到查询的梯度上（dq = dq + ...）。"),
    "mistake.flash_backward_lse_broadcast": (
        "这与“形状为 (B, H, Tq) 的逐查询量与 (B, H, Tq, b) 的块运算时没有补末尾维度，于是沿键广播"
        "而不是沿查询”的结果一致：可能是从分数中减去 logsumexp，也可能是求 δ = rowsum(dO ∘ O) "
        "时没有 keepdim=True。请保留末尾维度：logsumexp[..., None]、"
        "(dO * O).sum(-1, keepdim=True)。"),
    "mistake.flash_dp_from_keys": (
        "这与“dP = dO · kᵀ”的结果一致：P 乘的是值，所以它的梯度是 dO · vᵀ，用该块的值。"),
    "mistake.flash_dq_dk_swapped": (
        "这与“q 和 k 的梯度互换位置返回”的结果一致：backward 按 forward 参数的顺序返回它们，"
        "(dq, dk, dv, ...)。"),
    "mistake.gqa_kv_proj_width": (
        "这与“k_proj 和 v_proj 按多头注意力那样设为 embed_dim → embed_dim，或 head_dim 取 "
        "embed_dim // num_kv_heads”的结果一致：它们各输出 num_kv_heads · head_dim 个特征，"
        "其中 head_dim = embed_dim // num_heads，即一个查询头的大小。"),
    "mistake.gqa_q_proj_width": (
        "这与“q_proj 按错误的头数设定大小：head_dim 取 embed_dim // num_kv_heads，或像 "
        "k_proj 那样只有 num_kv_heads 个头”的结果一致：q_proj 输出 num_heads · head_dim = "
        "embed_dim 个特征，其中 head_dim = embed_dim // num_heads。"),
    "mistake.cache_prepends": (
        "这与“update 把新的键和值放在已缓存的之前，即 torch.cat([k, self.k], dim=2)”的结果"
        "一致：缓存按顺序保存词元，最早的在前，这样第 j 个键才是第 j 个词元，因果掩码才对得上。"
        "请追加在后面：torch.cat([self.k, k], dim=2)。"),
    "mistake.cache_len_wrong_dim": (
        "这与“__len__ 读取了缓存键 (B, Hkv, L, D) 中 L 以外的某一维”的结果一致：张量的 len() "
        "是它的第 0 维，即批大小，shape[1] 是头数。请返回 self.k.shape[2]，即至今的词元数"
        "（第一次 update 之前为 0）。"),
    "mistake.cache_update_replaces": (
        "这与“update 用新的键和值替换了已存的键和值”的结果一致：这样 len(cache) 只是最后一次"
        "调用的词元数。请沿词元维追加：self.k = torch.cat([self.k, k], dim=2)。"),
    "mistake.cache_len_counts_calls": (
        "这与“__len__ 统计的是 update 的调用次数（列表里存的块数），而不是词元数”的结果一致："
        "请把每块的词元数 k.shape[2] 加起来。"),
    "mistake.flash_size_mismatch": (
        "这与“沿错误的轴求最大值或求和，或者没有 keepdim=True”的结果一致，这是 "
        "flash_attention 循环中尺寸不匹配的常见原因：每块的最大值和求和都应沿键的维度，即 "
        "amax(dim=-1, keepdim=True) 与 sum(dim=-1, keepdim=True)，这样运行中的 m 和 ℓ 保持 "
        "(B, H, Tq, 1)，才能与分数 (B, H, Tq, b) 和累加器 (B, H, Tq, D) 广播。"),
    "mistake.flash_backward_size_mismatch": (
        "这与“反向传播中尺寸不匹配的常见原因”的结果一致：δ = rowsum(dO ∘ O) 应沿特征维求和"
        "并保留该维，形状 (B, H, Tq, 1)，即 sum(dim=-1, keepdim=True)；dV = Pᵀ · dO，形状 "
        "(B, H, b, D)，不是 dOᵀ · P，也不是与 v 相乘；dQ += dS · k_block、dK = dSᵀ · q，"
        "都由 dS 和另一个输入算出。"),
}
