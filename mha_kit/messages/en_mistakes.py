"""English sentences of the known mistakes (`checks.diagnosis.CATALOGUE`), by `mistake.<id>`:
"This matches <the mistake>: <what to do>." Every language has the same ids."""

TEMPLATES: dict[str, str] = {
    "mistake.split_no_transpose": (
        "This matches splitting with view or reshape but without transpose(1, 2): view the "
        "features as (B, T, H, D), then .transpose(1, 2) to put the heads before the tokens."
    ),
    "mistake.split_interleaved": (
        "This matches heads interleaved, the features split as (..., D, H): head h owns the h-th "
        "block of D consecutive features: view as (B, T, H, D), not (B, T, D, H)."
    ),
    "mistake.merge_no_transpose": (
        "This matches merging with view or reshape but without transpose(1, 2): bring the tokens "
        "back first: x.transpose(1, 2).reshape(B, T, H * D)."
    ),
    "mistake.merge_interleaved": (
        "This matches heads interleaved when merging, the features laid out as (D, H): concatenate "
        "whole heads: transpose to (B, T, H, D), then flatten the last two dims."
    ),
    "mistake.no_scaling": (
        "This matches scores without the 1/√d scaling: divide q @ k^T by math.sqrt(d), with d = "
        "q.size(-1) the size of one head."
    ),
    "mistake.scale_read": (
        "This matches scores divided by {divisor:.4g}{named} instead of √d = √{d} = "
        "{expected:.4g}, with d = q.size(-1) the size of one head.{hint}"
    ),
    "mistake.scale_named": " (= {expression})",
    "mistake.scale_dims": " `k.dim()` is the number of dimensions, `k.size(-1)` the size of the "
                          "last one.",
    "mistake.scale_by_d": (
        "This matches scaling by d instead of √d: divide by math.sqrt(d), not by d."
    ),
    "mistake.scale_by_embed_dim": (
        "This matches scaling by √embed_dim instead of √d_head: the scale uses the size of one "
        "head, embed_dim // num_heads."
    ),
    "mistake.scale_by_wrong_dim": (
        "This matches scaling by the square root of the wrong size (tokens or heads instead of "
        "features): use the last dim: math.sqrt(q.size(-1))."
    ),
    "mistake.qk_swapped": (
        "This matches q and k swapped (k @ q^T): scores[..., i, j] compares query i with key j: q "
        "@ k.transpose(-2, -1)."
    ),
    "mistake.dims_from_the_front": (
        "This matches a dim counted from the front, as in k.transpose(2, 3) or q.size(3): dims 2 "
        "and 3 are the last two only of a 4-d (B, H, T, D) tensor, and scaled_scores also gets "
        "a head's 3-d (B, T, D) ones: count from the end: k.transpose(-2, -1), q.size(-1)."
    ),
    "mistake.softmax_wrong_dim": (
        "This matches a softmax over the wrong dim: normalise over the keys, softmax(scores, "
        "dim=-1), so each query's weights sum to 1."
    ),
    "mistake.unstable_softmax": (
        "This matches a softmax written as exp(s) / exp(s).sum(): exp overflows to inf for large "
        "logits and inf / inf is NaN; use torch.softmax, which subtracts the row maximum first."
    ),
    "mistake.float32_cast": (
        "This matches a float32 tensor meeting float64 ones (float32 weights times v, say): the "
        "grader's inputs are float64, and something made a tensor float32 (softmax(..., "
        "dtype=torch.float32), .float()); keep the inputs' dtype, or cast back with "
        ".to(scores.dtype)."
    ),
    "mistake.mask_inverted": (
        "This matches the mask inverted, True taken as allowed: True means blocked: "
        "masked_fill(mask, float('-inf')), not ~mask or mask == 0."
    ),
    "mistake.mask_inverted_causal_mask": (
        "This matches the mask inverted, True taken as allowed: in causal_mask True marks a "
        "*blocked* pair (key j > query i): torch.triu(torch.ones(T, T, dtype=torch.bool), "
        "diagonal=1), not torch.tril."
    ),
    "mistake.mask_shifted": (
        "This matches a causal mask shifted by one diagonal: block key j > query i only, "
        "torch.triu(..., diagonal=1): each token sees itself."
    ),
    "mistake.mask_transposed": (
        "This matches a causal mask that blocks the past instead of the future: use torch.triu "
        "(above the diagonal), not torch.tril."
    ),
    "mistake.mask_after_softmax": (
        "This matches the mask applied after the softmax: fill blocked scores with -inf before the "
        "softmax, so the allowed weights still sum to 1."
    ),
    "mistake.mask_fill_zero": (
        "This matches blocked positions filled with 0 instead of -inf: a score of 0 still gets "
        "weight exp(0) > 0; fill with float('-inf')."
    ),
    "mistake.mask_ignored": (
        "This matches the mask ignored (the result of masked_fill is never assigned): "
        "masked_fill returns a new tensor and leaves scores as they were: write scores = "
        "scores.masked_fill(mask, float('-inf'))."
    ),
    "mistake.is_causal_ignored": (
        "This matches is_causal ignored: when is_causal=True, also block every key j > query i."
    ),
    "mistake.attn_mask_ignored": (
        "This matches attn_mask ignored when is_causal=True: use both masks: a position is blocked "
        "if either blocks it."
    ),
    "mistake.masks_and": (
        "This matches attn_mask and the causal mask combined with & (both must block): a position "
        "is blocked if either blocks it: attn_mask | causal."
    ),
    "mistake.bias_ignored": (
        "This matches a projection without its bias: add the bias, x @ weight.T + bias (nn.Linear "
        "adds it for you)."
    ),
    "mistake.bias_ignored_qkvo": (
        "This matches every projection without its bias (q_proj, k_proj, v_proj and out_proj): "
        "add each bias, x @ weight.T + bias (nn.Linear adds it for you)."
    ),
    "mistake.bias_ignored_qkv": (
        "This matches the input projections (q_proj, k_proj and v_proj) without their bias: add "
        "each bias, x @ weight.T + bias (nn.Linear adds it for you)."
    ),
    "mistake.bias_ignored_q": (
        "This matches q_proj without its bias: q = query @ q_proj.weight.T + q_proj.bias, or "
        "simply q_proj(query)."
    ),
    "mistake.bias_ignored_v": (
        "This matches v_proj without its bias: v = value @ v_proj.weight.T + v_proj.bias, or "
        "simply v_proj(value)."
    ),
    "mistake.bias_ignored_o": (
        "This matches out_proj without its bias: out = x @ out_proj.weight.T + out_proj.bias, or "
        "simply out_proj(x)."
    ),
    "mistake.weight_not_transposed": (
        "This matches the weight used without its transpose (x @ weight): a weight is stored as "
        "(out_features, in_features): x @ weight.T."
    ),
    "mistake.k_proj_on_value": "This matches k_proj applied to the value: v = v_proj(value).",
    "mistake.q_proj_on_key": "This matches q_proj applied to the key: k = k_proj(key).",
    "mistake.kv_swapped": (
        "This matches k_proj and v_proj swapped, keys from v_proj and values from k_proj: k = "
        "k_proj(key), v = v_proj(value) (check the order where q, k, v are unpacked)."
    ),
    "mistake.value_from_key": (
        "This matches v_proj applied to the key instead of the value: v = v_proj(value): with "
        "cross-attention key and value differ."
    ),
    "mistake.weights_averaged": (
        "This matches the attention weights averaged over the heads: return the weights of every "
        "head, shape (B, H, Tq, Tk)."
    ),
}
