"""The single points table. The CLI, the Gradescope JSON, pytest and the notebooks read it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckSpec:
    """A graded check: its stable id, its points and the contract names it exercises."""

    id: str
    points: int
    uses: tuple[str, ...]
    title: str


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("split_heads", 7, ("split_heads",), "split (B, T, H*D) into (B, H, T, D)"),
    CheckSpec("scaled_scores", 7, ("scaled_scores",), "q k^T / sqrt(d_k)"),
    CheckSpec("causal_mask", 6, ("causal_mask",), "boolean causal mask"),
    CheckSpec("attend", 10, ("attend",), "masked softmax and weighted sum"),
    CheckSpec("merge_heads", 7, ("merge_heads",), "merge (B, H, T, D) into (B, T, H*D)"),
    CheckSpec("output_projection", 6, ("output_projection",), "x W^T + b"),
    CheckSpec("attention_head", 8, ("AttentionHead",), "one attention head"),
    CheckSpec(
        "looped_mha", 12, ("LoopedMultiHeadAttention",), "looped heads vs nn.MultiheadAttention"
    ),
    CheckSpec("fused_mha", 15, ("MultiHeadAttention",), "fused module vs nn.MultiheadAttention"),
    CheckSpec("fused_mha_masks", 6, ("MultiHeadAttention",), "attn_mask and is_causal"),
    CheckSpec(
        "fused_mha_contract", 6, ("MultiHeadAttention",), "ValueError, dropout, need_weights"
    ),
    CheckSpec(
        "speed_fused_vs_looped", 10, ("MultiHeadAttention",), "fused beats the looped baseline"
    ),
)

_GENERAL = ("GeneralMultiHeadAttention",)
EXTENSION_CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("ext_self_attention", 20, _GENERAL, "defaults: self-attention, E/H per head"),
    CheckSpec("ext_cross_dims", 20, _GENERAL, "query_dim, key_dim, value_dim; no divisibility"),
    CheckSpec("ext_qk_v_head_dims", 20, _GENERAL, "qk_head_dim != v_head_dim, out_dim"),
    CheckSpec("ext_causal_buffer", 20, _GENERAL, "causal mask buffer sliced to the length"),
    CheckSpec("ext_dropout", 10, _GENERAL, "dropout on the weights, training mode only"),
    CheckSpec("ext_size_errors", 10, _GENERAL, "ValueError when the sizes don't divide"),
)

SHAPES_CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("shapes_split_view", 20, ("split_heads_view",), "view + transpose, no copy"),
    CheckSpec("shapes_merge", 20, ("merge_heads_transpose",), "transpose + reshape"),
    CheckSpec("shapes_rearrange", 20, ("split_heads_rearrange", "merge_heads_rearrange"),
              "einops rearrange, both ways"),
    CheckSpec("shapes_view_quiz", 20, ("view_quiz",), "is this a view?"),
    CheckSpec("shapes_roundtrip", 20, ("split_heads_view", "merge_heads_transpose"),
              "merge(split(x)) == x, bit for bit"),
)

# One table per assignment (the folder name under solutions/ and assignments/).
ASSIGNMENTS: dict[str, tuple[CheckSpec, ...]] = {
    "mha": CHECKS,
    "mha_extensions": EXTENSION_CHECKS,
    "shapes": SHAPES_CHECKS,
}

SPECS: dict[str, CheckSpec] = {c.id: c for table in ASSIGNMENTS.values() for c in table}
POINTS: dict[str, int] = {check_id: spec.points for check_id, spec in SPECS.items()}

assert len(SPECS) == sum(map(len, ASSIGNMENTS.values())), "check ids are unique across tables"
for _name, _table in ASSIGNMENTS.items():
    _total = sum(c.points for c in _table)
    assert _total == 100, f"the points table of {_name!r} must total 100, not {_total}"
