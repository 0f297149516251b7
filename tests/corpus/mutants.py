"""Single-mistake submissions: each one exact text edit of template.py, labelled with its mistake.

`mistake` is the id in `mha_kit.diagnosis.CATALOGUE` the grader should name, and `fails`
the exact set of checks the edit must fail (the speed check aside). A step function's mistake
fails its own check only: the modules that call it are graded with the kit's version
(`CheckSpec.stand_ins`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TEMPLATE = Path(__file__).with_name("template.py")

FUSED = frozenset({"fused_mha", "fused_mha_masks", "fused_mha_contract"})
HEAD = frozenset({"attention_head"})  # the looped module is graded with the kit's head
PROJECTION = frozenset({"output_projection"})
MASK = frozenset({"causal_mask"})
BOTH_MASKS = frozenset({"fused_mha_masks", "looped_mha"})  # _combined_mask, which both use


@dataclass(frozen=True)
class Mutant:
    label: str
    mistake: str
    old: str
    new: str
    fails: frozenset[str]

    def source(self) -> str:
        """template.py with the edit applied; the old text must occur exactly once."""
        text = TEMPLATE.read_text()
        count = text.count(self.old)
        assert count == 1, f"{self.label}: the old text occurs {count} times in template.py"
        return text.replace(self.old, self.new)


_SPLIT = "x.reshape(b, t, num_heads, e // num_heads).permute(0, 2, 1, 3)"
_MERGE = "x.permute(0, 2, 1, 3).reshape(b, t, h * d)"
_SCORES = "torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])"
_CAUSAL = "torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device), diagonal=1)"
_ATTEND_MASK = """    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)"""
_FUSED_MASK = """        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = self.dropout"""
_FUSED_OUT = "self.out_proj(merge_heads(torch.matmul(weights, v)))"

MUTANTS: tuple[Mutant, ...] = (
    # splitting and merging heads
    Mutant("split_heads reshapes straight to (B, H, T, D)", "split_no_transpose",
           _SPLIT, "x.reshape(b, num_heads, t, e // num_heads)", frozenset({"split_heads"})),
    Mutant("split_heads views (B, T, H, D) and stops there", "split_no_transpose",
           _SPLIT, "x.reshape(b, t, num_heads, e // num_heads)", frozenset({"split_heads"})),
    Mutant("split_heads interleaves the heads", "split_interleaved",
           _SPLIT, "x.reshape(b, t, e // num_heads, num_heads).permute(0, 3, 1, 2)",
           frozenset({"split_heads"})),
    Mutant("merge_heads reshapes without the transpose", "merge_no_transpose",
           _MERGE, "x.reshape(b, t, h * d)", frozenset({"merge_heads"})),
    Mutant("merge_heads interleaves the heads", "merge_interleaved",
           _MERGE, "x.permute(0, 2, 3, 1).reshape(b, t, h * d)", frozenset({"merge_heads"})),
    # scores
    Mutant("scaled_scores forgets the scale", "no_scaling",
           _SCORES, "torch.matmul(q, k.transpose(-2, -1))",
           frozenset({"scaled_scores"})),
    Mutant("scaled_scores divides by d", "scale_by_d",
           _SCORES, "torch.matmul(q, k.transpose(-2, -1)) / q.shape[-1]",
           frozenset({"scaled_scores"})),
    Mutant("scaled_scores takes the size of dim 1", "scale_by_wrong_dim",
           _SCORES, "torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[1])",
           frozenset({"scaled_scores"})),
    Mutant("scaled_scores computes k q^T", "qk_swapped",
           _SCORES, "torch.matmul(k, q.transpose(-2, -1)) / math.sqrt(q.shape[-1])",
           frozenset({"scaled_scores"})),
    Mutant("scaled_scores transposes dims 2 and 3", "dims_from_the_front",
           _SCORES, "torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.shape[-1])",
           frozenset({"scaled_scores"})),
    Mutant("the fused module scales by sqrt(embed_dim)", "scale_by_embed_dim",
           "scores = scaled_scores(q, k)",
           "scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(query.shape[-1])",
           FUSED),
    Mutant("AttentionHead scales by sqrt(embed_dim)", "scale_by_embed_dim",
           "return attend(scaled_scores(q, k), v, attn_mask)",
           "return attend(q @ k.transpose(-2, -1) / math.sqrt(query.shape[-1]), v, attn_mask)",
           HEAD),
    # softmax
    Mutant("attend normalises over the queries", "softmax_wrong_dim",
           "weights = F.softmax(scores, dim=-1)", "weights = F.softmax(scores, dim=-2)",
           frozenset({"attend"})),
    Mutant("the fused module normalises over the heads", "softmax_wrong_dim",
           "self.dropout(F.softmax(scores, dim=-1))", "self.dropout(F.softmax(scores, dim=1))",
           FUSED),
    Mutant("attend computes softmax by hand", "unstable_softmax",
           "weights = F.softmax(scores, dim=-1)",
           "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)",
           frozenset({"attend"})),
    Mutant("attend keeps the softmax in float32", "float32_cast",
           "weights = F.softmax(scores, dim=-1)",
           "weights = F.softmax(scores, dim=-1, dtype=torch.float32)",
           frozenset({"attend"})),
    # masks
    Mutant("attend fills the allowed positions", "mask_inverted",
           _ATTEND_MASK, _ATTEND_MASK.replace("masked_fill(mask,", "masked_fill(~mask,"),
           frozenset({"attend"})),
    Mutant("the fused module blocks where mask == 0", "mask_inverted",
           _FUSED_MASK, _FUSED_MASK.replace("masked_fill(mask,", "masked_fill(mask == 0,"),
           FUSED),
    Mutant("causal_mask marks the allowed pairs", "mask_inverted",
           _CAUSAL, _CAUSAL.replace("triu(", "tril(").replace("diagonal=1", "diagonal=0"), MASK),
    Mutant("causal_mask blocks the diagonal too", "mask_shifted",
           _CAUSAL, _CAUSAL.replace("diagonal=1", "diagonal=0"), MASK),
    Mutant("causal_mask blocks the past", "mask_transposed",
           _CAUSAL, _CAUSAL.replace("triu(", "tril(").replace("diagonal=1", "diagonal=-1"), MASK),
    Mutant("attend masks after the softmax", "mask_after_softmax",
           _ATTEND_MASK, """    weights = F.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(mask, 0.0)""", frozenset({"attend"})),
    Mutant("attend never assigns the result of masked_fill", "mask_ignored",
           _ATTEND_MASK, _ATTEND_MASK.replace("scores = scores.masked_fill", "scores.masked_fill"),
           frozenset({"attend"})),
    Mutant("the fused module never assigns the result of masked_fill", "mask_ignored",
           _FUSED_MASK, _FUSED_MASK.replace("scores = scores.masked_fill", "scores.masked_fill"),
           FUSED),
    Mutant("attend fills blocked scores with 0", "mask_fill_zero",
           _ATTEND_MASK, _ATTEND_MASK.replace('float("-inf")', "0.0"),
           frozenset({"attend"})),
    Mutant("the fused module fills blocked scores with 0", "mask_fill_zero",
           _FUSED_MASK, _FUSED_MASK.replace('float("-inf")', "0.0"), FUSED),
    Mutant("is_causal is ignored", "is_causal_ignored",
           "mask = _combined_mask(attn_mask, is_causal, query.shape[1], query.device)\n"
           "        scores", "mask = attn_mask\n        scores", frozenset({"fused_mha_masks"})),
    Mutant("attn_mask is dropped when is_causal", "attn_mask_ignored",
           "return causal if attn_mask is None else attn_mask | causal", "return causal",
           BOTH_MASKS),
    Mutant("attn_mask and is_causal combined with &", "masks_and",
           "attn_mask | causal", "attn_mask & causal", BOTH_MASKS),
    # projections
    Mutant("output_projection forgets the bias", "bias_ignored",
           "    if bias is not None:\n        out = out + bias\n", "", PROJECTION),
    Mutant("output_projection multiplies by the untransposed weight", "weight_not_transposed",
           "torch.matmul(x, weight.t())", "torch.matmul(x, weight)", PROJECTION),
    Mutant("the fused module projects the output with x @ W", "weight_not_transposed",
           _FUSED_OUT,
           "merge_heads(torch.matmul(weights, v)) @ self.out_proj.weight + self.out_proj.bias",
           FUSED),
    Mutant("the fused module drops the query bias", "bias_ignored",
           "q = split_heads(self.q_proj(query), self.num_heads)",
           "q = split_heads(query @ self.q_proj.weight.t(), self.num_heads)", FUSED),
    Mutant("the fused module drops out_proj's bias", "bias_ignored",
           _FUSED_OUT, "merge_heads(torch.matmul(weights, v)) @ self.out_proj.weight.t()", FUSED),
    Mutant("the fused module drops the value bias", "bias_ignored",
           "v = split_heads(self.v_proj(value), self.num_heads)",
           "v = split_heads(value @ self.v_proj.weight.t(), self.num_heads)", FUSED),
    Mutant("the fused module projects the value with k_proj", "k_proj_on_value",
           "v = split_heads(self.v_proj(value), self.num_heads)",
           "v = split_heads(self.k_proj(value), self.num_heads)", FUSED),
    Mutant("AttentionHead projects the key with q_proj", "q_proj_on_key",
           "self.q_proj(query), self.k_proj(key)", "self.q_proj(query), self.q_proj(key)",
           HEAD),
    Mutant("the fused module swaps k_proj and v_proj", "kv_swapped",
           "k = split_heads(self.k_proj(key), self.num_heads)\n"
           "        v = split_heads(self.v_proj(value), self.num_heads)",
           "k = split_heads(self.v_proj(key), self.num_heads)\n"
           "        v = split_heads(self.k_proj(value), self.num_heads)", FUSED),
    Mutant("the fused module projects the key as the value", "value_from_key",
           "v = split_heads(self.v_proj(value), self.num_heads)",
           "v = split_heads(self.v_proj(key), self.num_heads)", frozenset({"fused_mha"})),
    # the looped module's own options (real public code leaves is_causal unused there)
    Mutant("the looped module passes attn_mask on and ignores is_causal", "is_causal_ignored",
           "        mask = _combined_mask(attn_mask, is_causal, query.shape[1], query.device)\n"
           "        outs, weights",
           "        mask = attn_mask\n        outs, weights", frozenset({"looped_mha"})),
    # what forward returns
    Mutant("the fused module averages the weights over heads", "weights_averaged",
           "return out, weights if need_weights else None",
           "return out, weights.mean(dim=1) if need_weights else None", FUSED),
)
