"""The points table of triton_attention: 100 points over six checks."""

from ...checks.spec import CheckSpec
from . import backward, forward, speed

_FORWARD = ("flash_forward",)
CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("triton_softmax", 10, ("triton_softmax",), forward.check_softmax),
    CheckSpec("triton_flash_forward", 25, _FORWARD, forward.check_forward),
    CheckSpec("triton_flash_causal", 20, _FORWARD, forward.check_causal),
    CheckSpec("triton_flash_strides", 10, _FORWARD, forward.check_strides),
    # Its Function's forward calls flash_forward: graded with the kit's where that fails.
    CheckSpec("triton_flash_backward", 25, ("flash_attention_triton",),
              backward.check_backward, stand_ins=_FORWARD),
    # Not scored without a GPU (nor, until calibrated, on one), but only for code that works:
    # the stubs get 0.
    CheckSpec("triton_speed", 10, ("flash_attention_triton",), speed.check_speed,
              needs=("triton_flash_backward",), waiting="waiting.triton_flash_backward",
              timed=True),
)
