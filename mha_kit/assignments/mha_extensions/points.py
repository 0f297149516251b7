"""The points table of the extension track: 100 points over six checks."""

from ...checks.spec import CheckSpec
from . import checks

_GENERAL = ("GeneralMultiHeadAttention",)
CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("ext_self_attention", 20, _GENERAL, checks.check_self_attention),
    CheckSpec("ext_cross_dims", 20, _GENERAL, checks.check_cross_dims),
    CheckSpec("ext_qk_v_head_dims", 20, _GENERAL, checks.check_qk_v_head_dims),
    CheckSpec("ext_causal_buffer", 20, _GENERAL, checks.check_causal_buffer),
    CheckSpec("ext_dropout", 10, _GENERAL, checks.check_dropout),
    CheckSpec("ext_size_errors", 10, _GENERAL, checks.check_size_errors),
)
