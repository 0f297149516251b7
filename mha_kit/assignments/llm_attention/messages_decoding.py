"""More sentences of llm_attention's mistakes, in RoPE, grouped-query attention and the KV
cache, in English and Chinese: `messages.TEMPLATES` adds them to its own (kept apart so
that each file stays within the kit's 500 lines)."""

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "mistake.rope_cos_sin_swapped": (
            "This matches cos and sin swapped: pair i becomes (x_i cos θ - x_(i+D/2) sin θ, "
            "x_i sin θ + x_(i+D/2) cos θ), the cosine on x_i in the first half."),
        "mistake.rope_angles_transposed": (
            "This matches the angle table built the wrong way round, (D/2, T): the angles are "
            "positions[:, None] * frequencies[None, :], (T, D/2), one row per token."),
        "mistake.rope_angles_not_outer": (
            "This matches positions times frequencies without the outer product, (T,) * "
            "(D/2,): each token needs an angle per pair, positions[:, None] * "
            "frequencies[None, :], (T, D/2)."),
        "mistake.gqa_v_from_k_proj": (
            "This matches the values made by k_proj: v = self.v_proj(x)."),
        "mistake.gqa_k_from_q_proj": (
            "This matches the keys made by q_proj: k = self.k_proj(x), num_kv_heads · "
            "head_dim features."),
        "mistake.cache_rope_skipped": (
            "This matches RoPE left out of the calls with a cache: rotate q and k in every "
            "call, at positions len(cache) .. len(cache) + T - 1 (0 .. T - 1 without a "
            "cache)."),
        "mistake.cache_values_get_keys": (
            "This matches the new keys appended to the stored values: update appends k to "
            "self.k and v to self.v, torch.cat([self.v, v], dim=2)."),
        "mistake.rope_exponent_doubled": (
            "This matches the frequencies base^(-2i/(D/2)), the exponent divided by the number "
            "of pairs: it is divided by D, the head dim, θ_i = base^(-2i/D)."),
        "mistake.rope_exponent_floored": (
            "This matches the exponent 2i/D rounded to an integer by floor division (//): "
            "every frequency is then 1 (or 1/base), not base^(-2i/D). Divide in floating "
            "point: torch.arange(0, D, 2, dtype=torch.float64) / D."),
        "mistake.kv_expand_heads": (
            "This matches x.expand to Hkv·n_rep heads: .expand only repeats an axis of size 1, "
            "so it works for one key/value head alone. Each head needs n_rep copies in a row "
            "along dim 1."),
        "mistake.gqa_kv_split_num_heads": (
            "This matches the keys or values split into num_heads heads: k_proj and v_proj "
            "give num_kv_heads · head_dim features, so view them as (B, T, num_kv_heads, "
            "head_dim)."),
        "mistake.gqa_kv_not_repeated": (
            "This matches the key/value heads not repeated for their query heads (repeat_kv "
            "left out, or n_rep = num_kv_heads // num_heads, 0): each is shared by n_rep = "
            "num_heads // num_kv_heads query heads, repeat_kv(k, n_rep)."),
        "mistake.gqa_kv_swapped": (
            "This matches the keys made by v_proj and the values by k_proj: k = "
            "self.k_proj(x), v = self.v_proj(x)."),
        "mistake.cache_cat_wrong_dim": (
            "This matches the keys appended along another dim than the tokens: torch.cat's "
            "default dim=0, the batch, or the last, the features. The cache is (B, Hkv, L, D): "
            "torch.cat([self.k, k], dim=2)."),
        "mistake.rope_pairs_relaid": (
            "This matches the pairs read in one layout and written back in another: adjacent "
            "features (x[..., 0::2], x[..., 1::2]) turned and concatenated as halves, the "
            "halves turned and interleaved (torch.stack(..., dim=-1).flatten(-2)), or the "
            "table torch.cat([angles, angles]) on adjacent pairs. This kit pairs feature i "
            "with i + D/2 on the way in and out: x1 = x[..., :D/2], x2 = x[..., D/2:], "
            "torch.cat([x1 cos - x2 sin, x1 sin + x2 cos], dim=-1)."),
        "mistake.kv_repeat_features": (
            "This matches the repeat along the features (dim=-1): D·n_rep features instead "
            "of Hkv·n_rep heads. The heads are dim 1 of (B, Hkv, T, D): "
            "x.repeat_interleave(n_rep, dim=1)."),
        "mistake.cache_update_not_stored": (
            "This matches an update that returns the concatenation without storing it: the "
            "cache keeps the first call's keys only, so len(cache) stays at the prefill's "
            "length. Assign it back: self.k = torch.cat([self.k, k], dim=2), and return "
            "self.k."),
        "mistake.gqa_mask_anticausal": (
            "This matches a causal mask the wrong way round: it blocks the past (j < i, "
            "triu and tril swapped, or > as <) where it must block the future: block j > i, "
            "the keys after the query's own position."),
        "mistake.gqa_scores_low_precision": (
            "This matches the scores rounded to float16 or bfloat16 before the softmax: "
            "their 3 or 2 significant digits give errors of about 1e-3, far above float64's. "
            "Keep the scores and the softmax in the inputs' dtype (or float32 and higher, "
            "cast back with .to(x.dtype))."),
        "mistake.gqa_weights_scaled": (
            "This matches the scale applied after the softmax: the weights divided by √D "
            "no longer sum to 1. Scale the scores before it: softmax(q kᵀ / √D) v."),
        "mistake.rope_positions_from_one": (
            "This matches RoPE's positions counted from 1: the outputs stay right, since "
            "attention sees only the distance between two positions, but every cached key is "
            "turned one position too far. The first token is at position 0: "
            "torch.arange(start, start + T), start = len(cache)."),
        "mistake.cache_read_while_empty": (
            "This matches the cache's keys read while it is still empty: a fresh KVCache holds "
            "no tensor yet (its k is None), so cache.k.shape[2] raises on the first call, in "
            "__len__ or in forward. An empty cache's length is 0: `0 if self.k is None else "
            "self.k.shape[2]`, and forward reads len(cache)."),
        "mistake.rope_output_float32": (
            "This matches RoPE's output promoted to float32 for low-precision inputs: cos and "
            "sin kept in float32 (.float()), or x cast to float32 and not cast back, make the "
            "product float32. Cast the table to the input's dtype, angles.cos().to(x.dtype), "
            "or return the result .to(x.dtype)."),
        "mistake.gqa_keys_transposed_wrong_dims": (
            "This matches the keys transposed on the wrong dims, k.transpose(1, 2): that swaps "
            "the heads and the keys of (B, H, L, D), so q @ k.transpose(1, 2) pairs heads with "
            "keys (torch's size error unless their sizes happen to fit). The scores need the "
            "last two dims swapped: q @ k.transpose(-2, -1), (B, H, T, L)."),
    },
    "zh": {
        "mistake.rope_cos_sin_swapped": (
            "这与“cos 和 sin 互换”的结果一致：第 i 对应变为 (x_i cos θ - x_(i+D/2) sin θ, "
            "x_i sin θ + x_(i+D/2) cos θ)，前一半里 x_i 乘的是余弦。"),
        "mistake.rope_angles_transposed": (
            "这与“角度表建反了，形状为 (D/2, T)”的结果一致：角度是 positions[:, None] * "
            "frequencies[None, :]，形状 (T, D/2)，每个词元一行。"),
        "mistake.rope_angles_not_outer": (
            "这与“位置直接乘频率而没有做外积，(T,) * (D/2,)”的结果一致：每个词元的每一对都需要"
            "一个角度，positions[:, None] * frequencies[None, :]，形状 (T, D/2)。"),
        "mistake.gqa_v_from_k_proj": (
            "这与“值由 k_proj 算出”的结果一致：v = self.v_proj(x)。"),
        "mistake.gqa_k_from_q_proj": (
            "这与“键由 q_proj 算出”的结果一致：k = self.k_proj(x)，共 num_kv_heads · head_dim "
            "个特征。"),
        "mistake.cache_rope_skipped": (
            "这与“带缓存的调用没有做 RoPE”的结果一致：每次调用都要旋转 q 和 k，位置为 len(cache) "
            ".. len(cache) + T - 1（不带缓存时为 0 .. T - 1）。"),
        "mistake.cache_values_get_keys": (
            "这与“新的键被追加到了存储的值后面”的结果一致：update 把 k 追加到 self.k、把 v 追加到 "
            "self.v，即 torch.cat([self.v, v], dim=2)。"),
        "mistake.rope_exponent_doubled": (
            "这与“频率为 base^(-2i/(D/2))”的结果一致：指数应除以头维度 D，而不是对数 D/2，"
            "θ_i = base^(-2i/D)。"),
        "mistake.rope_exponent_floored": (
            "这与“指数 2i/D 被整除 (//) 取成了整数”的结果一致：于是每个频率都是 1（或 1/base），"
            "而不是 base^(-2i/D)。请用浮点除法：torch.arange(0, D, 2, dtype=torch.float64) / D。"),
        "mistake.kv_expand_heads": (
            "这与“用 x.expand 扩展到 Hkv·n_rep 个头”的结果一致：.expand 只能重复大小为 1 的轴，"
            "所以只在只有一个键/值头时可行。每个头需要沿 dim 1 连续重复 n_rep 次。"),
        "mistake.gqa_kv_split_num_heads": (
            "这与“把键或值拆成 num_heads 个头”的结果一致：k_proj 和 v_proj 输出 num_kv_heads · "
            "head_dim 个特征，所以应 view 成 (B, T, num_kv_heads, head_dim)。"),
        "mistake.gqa_kv_not_repeated": (
            "这与“键/值头没有为各自的查询头重复（漏了 repeat_kv，或 n_rep = num_kv_heads // "
            "num_heads，即 0）”的结果一致：每个键/值头由 n_rep = num_heads // num_kv_heads 个"
            "查询头共享，repeat_kv(k, n_rep)。"),
        "mistake.gqa_kv_swapped": (
            "这与“键由 v_proj 算出、值由 k_proj 算出”的结果一致：k = self.k_proj(x)，v = "
            "self.v_proj(x)。"),
        "mistake.cache_cat_wrong_dim": (
            "这与“键沿词元以外的维度追加”的结果一致：torch.cat 默认的 dim=0 是批次，最后一维是"
            "特征。缓存形状为 (B, Hkv, L, D)：torch.cat([self.k, k], dim=2)。"),
        "mistake.rope_pairs_relaid": (
            "这与“按一种布局取出成对特征、却按另一种布局写回”的结果一致：相邻特征"
            "（x[..., 0::2]、x[..., 1::2]）旋转后按两半拼接，两半旋转后交错排列"
            "（torch.stack(..., dim=-1).flatten(-2)），或把 torch.cat([angles, angles]) 的表"
            "用在相邻的成对特征上。本套件在读入和写回时都把特征 i 与 i + D/2 配对："
            "x1 = x[..., :D/2]，x2 = x[..., D/2:]，"
            "torch.cat([x1 cos - x2 sin, x1 sin + x2 cos], dim=-1)。"),
        "mistake.kv_repeat_features": (
            "这与“沿特征维（dim=-1）重复”的结果一致：得到 D·n_rep 个特征，而不是 Hkv·n_rep "
            "个头。头是 (B, Hkv, T, D) 的第 1 维：x.repeat_interleave(n_rep, dim=1)。"),
        "mistake.cache_update_not_stored": (
            "这与“update 返回拼接结果却没有保存它”的结果一致：缓存只保留第一次调用的键，"
            "所以 len(cache) 一直等于预填充的长度。请把它赋回去："
            "self.k = torch.cat([self.k, k], dim=2)，再返回 self.k。"),
        "mistake.gqa_mask_anticausal": (
            "这与“因果掩码方向反了”的结果一致：它屏蔽了过去（j < i，triu 与 tril 互换，"
            "或把 > 写成 <），而应屏蔽未来：屏蔽 j > i，即查询自身位置之后的键。"),
        "mistake.gqa_scores_low_precision": (
            "这与“在 softmax 之前把分数舍入为 float16 或 bfloat16”的结果一致：它们只有 3 或 2 "
            "位有效数字，误差约为 1e-3，远大于 float64 的误差。请让分数和 softmax 保持输入的 "
            "dtype（或用 float32 及更高精度，再用 .to(x.dtype) 转换回来）。"),
        "mistake.gqa_weights_scaled": (
            "这与“在 softmax 之后才缩放”的结果一致：除以 √D 之后，权重之和不再是 1。请在 "
            "softmax 之前缩放分数：softmax(q kᵀ / √D) v。"),
        "mistake.rope_positions_from_one": (
            "这与“RoPE 的位置从 1 开始计数”的结果一致：输出仍然正确，因为注意力只看两个位置"
            "之间的距离，但缓存里的每个键都多转了一个位置。第一个词元的位置是 0："
            "torch.arange(start, start + T)，其中 start = len(cache)。"),
        "mistake.cache_read_while_empty": (
            "这与“缓存还为空时就读取它的键”的结果一致：新建的 KVCache 还没有张量（它的 k 是 "
            "None），所以第一次调用时 cache.k.shape[2] 会出错，无论是在 __len__ 中还是在 "
            "forward 中。空缓存的长度是 0：`0 if self.k is None else self.k.shape[2]`，"
            "forward 读取 len(cache)。"),
        "mistake.rope_output_float32": (
            "这与“低精度输入时 RoPE 的输出被提升为 float32”的结果一致：cos 和 sin 保持为 "
            "float32（.float()），或者 x 被转为 float32 后没有转回，都会使乘积变成 float32。"
            "请把表转为输入的 dtype，即 angles.cos().to(x.dtype)，或把结果 .to(x.dtype) 后"
            "返回。"),
        "mistake.gqa_keys_transposed_wrong_dims": (
            "这与“键在错误的维度上转置，k.transpose(1, 2)”的结果一致：它交换了 (B, H, L, D) "
            "的头和键，所以 q @ k.transpose(1, 2) 把头与键配对（除非尺寸恰好相符，否则 torch "
            "会报尺寸错误）。分数需要交换最后两个维度：q @ k.transpose(-2, -1)，形状 "
            "(B, H, T, L)。"),
    },
}
