"""The `expect_*` helpers: each compares one answer of the student's with the expected value
and raises `CheckFailed` with a message that says what is off, naming a known mistake when
one reproduces the answer.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .. import oracle
from ..runner.protocol import Call, StudentCodeError
from .core import TIGHT, CheckFailed, Picture
from .diagnosis import Candidate, Diagnosis
from .feedback import Dims, describe_mismatch, describe_shape

Tensor = torch.Tensor


def expect_tensor(what: str, got: Any, expected: Tensor, case: str, *, dims: Dims | None = None,
                  mistakes: list[Candidate] | None = None, tol: dict = TIGHT) -> Tensor:
    """Type, shape, dtype and device, each with its own message.

    `dims` names the expected dims for shape messages; `mistakes` are the known mistakes to
    try when the answer is wrong (see `diagnosis`).
    """

    def fail(detail: str) -> CheckFailed:
        found = Diagnosis(got, mistakes, tol) if mistakes else None
        return CheckFailed(f"{what}: {detail}", diagnosis=found, case=case)

    if not isinstance(got, Tensor):
        raise fail(f"should be a tensor of shape {tuple(expected.shape)}, got "
                   f"{type(got).__name__}")
    if got.shape != expected.shape:
        raise fail(describe_shape(tuple(got.shape), tuple(expected.shape), dims))
    if got.dtype != expected.dtype and expected.dtype == torch.bool:
        raise fail(f"has dtype {got.dtype}, expected torch.bool (True = blocked): build it with "
                   "dtype=torch.bool or finish with .bool()")
    if got.dtype != expected.dtype:
        raise fail(f"has dtype {got.dtype} for {expected.dtype} inputs: keep the input's dtype "
                   "(avoid torch.tensor(...) constants that force float32)")
    if got.device != expected.device:
        raise fail(f"is on {got.device} but the inputs are on {expected.device}: create new "
                   "tensors with device=x.device")
    return got


def expect_close(what: str, got: Any, expected: Tensor, case: str, tol: dict, *,
                 dims: Dims | None = None, mistakes: list[Candidate] | None = None,
                 part: int | None = None) -> None:
    """As `expect_tensor`, then the values within `tol`; a mismatch comes with a picture.

    `part` picks the element to compare of mistakes that give (out, weights) pairs.
    """
    if mistakes and part is not None:
        mistakes = [(m, _element(make, part)) for m, make in mistakes]
    got = expect_tensor(what, got, expected, case, dims=dims, mistakes=mistakes, tol=tol)
    expected_64, got_64 = expected.double(), got.double()
    close = torch.isclose(got_64, expected_64, equal_nan=True, **tol)
    if not bool(close.all()):
        raise CheckFailed(
            f"{what}: {describe_mismatch(got_64, expected_64, close, dims)}",
            Picture(f"{what} ({case})", expected, got),
            diagnosis=Diagnosis(got, mistakes, tol) if mistakes else None, case=case,
        )


def float64(params: dict[str, Tensor | None]) -> dict[str, Tensor | None]:
    """The same weights in float64 (None stays None: a missing bias), for the oracle."""
    return {k: None if v is None else v.double() for k, v in params.items()}


def _element(make: Callable[[], Any], index: int) -> Callable[[], Any]:
    return lambda: make()[index]


def attempt(action: Callable[[], Call], case: str,
            mistakes: list[Candidate] | None = None) -> Call:
    """Call into student code; an exception it raises is a failure of this case.

    A known mistake that raises the very same error is named (e.g. x @ weight with a
    non-square weight). Missing names, stubs, timeouts and crashes pass through unchanged.
    """
    try:
        return action()
    except StudentCodeError as err:
        if err.kind != "raised":
            raise
        raise CheckFailed(str(err), diagnosis=Diagnosis(err, mistakes, TIGHT) if mistakes
                          else None, case=case) from None


def expect_unchanged(name: str, call: Call, originals: tuple[Tensor, ...]) -> None:
    for before, after in zip(originals, call.inputs_after):
        if before.shape != after.shape or not torch.equal(before, after):
            raise CheckFailed(
                f"`{name}` modified its input in place: use out-of-place ops "
                "(masked_fill rather than masked_fill_, x = x * s rather than x *= s)"
            )


def expect_output_pair(name: str, call: Call) -> tuple[Any, Any]:
    if not isinstance(call.value, tuple) or len(call.value) != 2:
        raise CheckFailed(f"`{name}` should return a pair (out, weights), got "
                          f"{type(call.value).__name__}")
    return call.value



def expect_value_error(sub, class_name: str, args: tuple, kwargs: dict, why: str) -> None:
    """Building class_name(*args, **kwargs) raises ValueError, because `why`. Other failures
    of the student's code (missing, a stub, a timeout, a crash) are reported as they are."""
    call = f"{class_name}({', '.join([*map(str, args), *(f'{k}={v}' for k, v in kwargs.items())])})"
    try:
        sub.check_constructor(class_name, *args, **kwargs)
    except StudentCodeError as err:
        if err.kind != "raised":
            raise
        if err.exc_type != "ValueError":
            raise CheckFailed(f"{call} should raise ValueError ({why}), but: {err}") from None
    else:
        raise CheckFailed(f"{call} should raise ValueError: {why}")


def expect_dropout(name: str, out: Any, weights: Any, expected_weights: Tensor, v: Tensor,
                   params: dict[str, Tensor | None], p: float, case: str) -> None:
    """Dropout p in training mode, on the attention weights: each weight the softmax gives is
    either dropped (0) or scaled by 1 / (1 - p), some are dropped, and `out` mixes the values
    v (B, H, Tk, Dv) with the weights returned, then applies out_proj from `params`."""
    weights = expect_tensor(f"{name} attention weights", weights, expected_weights, case)
    kept = weights != 0
    if bool(kept[expected_weights != 0].all()):
        raise CheckFailed(f"dropout={p:g} in training mode dropped no attention weight: apply "
                          "nn.Dropout to the weights (it is active only in train())", case=case)
    if not torch.allclose(weights[kept], expected_weights[kept] / (1 - p), **TIGHT):
        raise CheckFailed("dropout in training mode: the weights you return should be the ones "
                          "you used, each either 0 or softmax / (1 - p)", case=case)
    mixed = oracle.output_projection(oracle.merge_heads(weights @ v), params["out_proj.weight"],
                                     params["out_proj.bias"])  # (B, Tq, out_dim)
    expect_close(f"{name} output", out, mixed, f"{case}: out must use the dropped-out weights",
                 TIGHT)


# On CPU the reported times are the worker's CPU time in the timed calls. The grader reads the
