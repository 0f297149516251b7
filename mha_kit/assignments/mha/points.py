"""The points table of multi-head attention: 100 points over twelve checks."""

from ...checks.spec import CheckSpec
from . import modules, steps
from .speed import SPEED_CHECK, check_speed

_FUSED = ("MultiHeadAttention",)
# The six steps, which the modules may call: a step that fails its own check is replaced by
# the kit's version while a module is graded, so that one mistake costs one check.
_STEPS = ("split_heads", "scaled_scores", "causal_mask", "attend", "merge_heads",
          "output_projection")
CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("split_heads", 7, ("split_heads",), steps.check_split_heads),
    CheckSpec("scaled_scores", 7, ("scaled_scores",), steps.check_scaled_scores),
    CheckSpec("causal_mask", 6, ("causal_mask",), steps.check_causal_mask),
    CheckSpec("attend", 10, ("attend",), steps.check_attend),
    CheckSpec("merge_heads", 7, ("merge_heads",), steps.check_merge_heads),
    CheckSpec("output_projection", 6, ("output_projection",), steps.check_output_projection),
    CheckSpec("attention_head", 8, ("AttentionHead",), modules.check_attention_head,
              stand_ins=_STEPS),
    CheckSpec("looped_mha", 12, ("LoopedMultiHeadAttention",), modules.check_looped_mha,
              stand_ins=(*_STEPS, "AttentionHead")),
    CheckSpec("fused_mha", 15, _FUSED, modules.check_fused_mha, stand_ins=_STEPS),
    CheckSpec("fused_mha_masks", 6, _FUSED, modules.check_fused_mha_masks, stand_ins=_STEPS),
    CheckSpec("fused_mha_contract", 6, _FUSED, modules.check_fused_mha_contract,
              stand_ins=_STEPS),
    # The timing calls forward(x, is_causal=True, need_weights=False): its values must be
    # right first, or a wrong output would read as a timing that skips work. A module cannot
    # stand in for itself: this one waits.
    CheckSpec(SPEED_CHECK, 10, _FUSED, check_speed, needs=("fused_mha", "fused_mha_masks"),
              waiting="waiting.speed", stand_ins=_STEPS, timed=True),
)
