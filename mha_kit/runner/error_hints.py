"""Torch errors whose text tells their likely cause, and the message that says it."""

from __future__ import annotations

from .devices import is_device_mix

# A float64 value written into a float32 tensor (a float32 constant or cast meeting the
# grader's float64 inputs: torch.finfo(x.dtype).min filling a tensor made without dtype=).
FLOAT32_OVERFLOW = "cannot be converted to type float without overflow"
# .view of a tensor whose strides cannot give that shape: made by .transpose, .permute or
# .expand (heads merged by .view after the transpose, say).
VIEW_NOT_CONTIGUOUS = "view size is not compatible with input tensor's size and stride"
# A float32 tensor meeting a float64 one in a product (matmul, linear, einsum): a softmax
# taken with dtype=torch.float32, or a .float() cast, never cast back to the inputs' dtype.
FLOAT32_MEETS_FLOAT64 = ("expected scalar type Float but found Double",
                         "expected scalar type Double but found Float",
                         "same dtype, but got: float != double",
                         "same dtype, but got: double != float")


def hint_after(text: str) -> str | None:
    """The id of the message that follows an error with this text with its likely cause."""
    if FLOAT32_OVERFLOW in text:  # only float64 values overflow float32: say where they met
        return "runner.float32_overflow"
    if any(words in text for words in FLOAT32_MEETS_FLOAT64):
        return "runner.float32_meets_float64"
    if VIEW_NOT_CONTIGUOUS in text:
        return "runner.view_not_contiguous"
    if is_device_mix(text):  # where no DeviceWatch ran: a backward, a job on meta
        return "runner.device_mix"
    return None
