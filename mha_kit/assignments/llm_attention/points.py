"""The points table of llm_attention: 100 points over nine checks."""

from ...checks.spec import CheckSpec
from . import decode_speed, flash, gqa, pieces

_MODULE = ("GroupedQueryAttention",)
# What the module may call: a piece that fails its own check is replaced by the kit's here.
_PIECES = ("apply_rope", "repeat_kv")
CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("llm_rope", 15, ("apply_rope",), pieces.check_rope),
    CheckSpec("llm_repeat_kv", 5, ("repeat_kv",), pieces.check_repeat_kv),
    CheckSpec("llm_gqa", 15, _MODULE, gqa.check_gqa, stand_ins=_PIECES),
    CheckSpec("llm_kv_cache", 15, (*_MODULE, "KVCache"), gqa.check_kv_cache,
              needs=("llm_gqa",), waiting="waiting.llm_gqa", stand_ins=_PIECES),
    # The count decodes through the cache: its outputs must be right first, or a wrong one
    # would read as work saved.
    CheckSpec(decode_speed.DECODE_SPEED_CHECK, 10, (*_MODULE, "KVCache"),
              decode_speed.check_decode_speed, needs=("llm_kv_cache",),
              waiting="waiting.llm_kv_cache", stand_ins=_PIECES, timed=True),
    CheckSpec("llm_sliding_window", 5, ("sliding_window_mask",), pieces.check_sliding_window),
    CheckSpec("llm_flash_forward", 15, ("flash_attention",), flash.check_flash_forward),
    # Compares with the oracle where flash_attention passes its check, else with its own output.
    CheckSpec("llm_flash_memory", 10, ("flash_attention",), flash.check_flash_memory,
              consults=("llm_flash_forward",)),
    # Its Function's forward may call flash_attention: graded with the kit's where that fails.
    CheckSpec("llm_flash_backward", 10, ("flash_attention_autograd",),
              flash.check_flash_backward, stand_ins=("flash_attention",)),
)
