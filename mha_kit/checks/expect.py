"""The `expect_*` helpers: each compares one answer of the student's with the expected value
and raises `CheckFailed` with a message that says what is off, naming a known mistake when
one reproduces the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .. import oracle
from ..messages import Message, msg
from ..runner.protocol import Call, StudentCodeError
from .causes import as_check_failed, runs_elsewhere
from .core import TIGHT, CheckFailed, Picture
from .diagnosis import Candidate, Diagnosis
from .feedback import Dims, describe_mismatch, describe_shape
from .scale import Read

Tensor = torch.Tensor


Label = Message | str  # what is compared, or a case: a message, or code as it is
_ALONE: Any = object()  # no other part of the answer to compare


def expect_tensor(what: Label, got: Any, expected: Tensor, case: Label, *,
                  dims: Dims | None = None, mistakes: list[Candidate] | None = None,
                  tol: dict = TIGHT, answer: Any = _ALONE) -> Tensor:
    """Type, shape, dtype and device, each with its own message.

    `what` names the value compared (code such as "split_heads(x, num_heads)", or a message
    such as `msg("what.output", name=...)`); `dims` names the expected dims for shape messages;
    `mistakes` are the known mistakes to try when the answer is wrong (see `diagnosis`), on
    `answer` (default: `got`); when only its dtype is, those that give that dtype (cos and sin
    left in float64, say); not when only its device is.
    """

    def fail(detail: Message, diagnosed: bool = True, same_dtype: bool = False
             ) -> CheckFailed:
        found = (Diagnosis(got if answer is _ALONE else answer, mistakes, tol,
                           same_dtype=same_dtype) if mistakes and diagnosed else None)
        return CheckFailed(msg("check.what", what=what, detail=detail), diagnosis=found,
                           case=case)

    if not isinstance(got, Tensor):
        raise fail(msg("tensor.not_tensor", shape=tuple(expected.shape),
                       type=type(got).__name__))
    if got.shape != expected.shape:
        raise fail(describe_shape(tuple(got.shape), tuple(expected.shape), dims))
    if got.dtype != expected.dtype and expected.dtype == torch.bool:
        raise fail(msg("tensor.bool_dtype", dtype=str(got.dtype)))
    if got.dtype != expected.dtype:
        values_right = got.device == expected.device and torch.allclose(
            got.detach().double(), expected.detach().double(), equal_nan=True, **tol)
        raise fail(msg("tensor.dtype", dtype=str(got.dtype), expected=str(expected.dtype)),
                   same_dtype=values_right)
    if got.device != expected.device:
        raise fail(msg("tensor.device", device=str(got.device), expected=str(expected.device)),
                   diagnosed=False)
    return got


def expect_close(what: Label, got: Any, expected: Tensor, case: Label, tol: dict, *,
                 dims: Dims | None = None, mistakes: list[Candidate] | None = None,
                 part: int | None = None, beside: Any = _ALONE,
                 read: Read | None = None) -> None:
    """As `expect_tensor`, then the values within `tol`; a mismatch comes with a picture, and
    `read` reads their scale off them, for when no known mistake explains them.

    `part` picks the element to compare of mistakes that give (out, weights) pairs; `beside`,
    the student's other element: a mistake is then named only if it reproduces both (the
    weights alone cannot tell a missing q bias from every bias missing).
    """
    answer: Any = got
    if mistakes and part is not None:
        if beside is _ALONE:
            mistakes = [(m, _element(make, part)) for m, make in mistakes]
        else:
            mistakes = [(m, _both(make, part)) for m, make in mistakes]
            answer = (got, beside)
    got = expect_tensor(what, got, expected, case, dims=dims, mistakes=mistakes, tol=tol,
                        answer=answer)
    expected_64, got_64 = expected.double(), got.double()
    close = torch.isclose(got_64, expected_64, equal_nan=True, **tol)
    if not bool(close.all()):
        picture = Picture(msg("check.case", text=what, case=case), expected, got,
                          dims=tuple(dims or ()))
        raise CheckFailed(
            msg("check.what", what=what, detail=describe_mismatch(got_64, expected_64, close,
                                                                  dims)),
            _blocked(picture) if dims and dims[-2:] == ("Tq", "Tk") else picture,
            diagnosis=(Diagnosis(answer, mistakes or [], tol, read and (lambda: read(got)))
                       if mistakes or read else None), case=case,
        )


def _blocked(picture: Picture) -> Picture:
    """Attention weights whose zeros (the blocked keys) are not where they should be: a
    picture of both masks, for the first head that differs; else the weights themselves. A
    row of NaN (every key blocked, 0 / 0) counts as blocked."""
    expected, got = (picture.expected == 0) | picture.expected.isnan(), (
        picture.got == 0) | picture.got.isnan()
    if torch.equal(expected, got):
        return picture
    while expected.dim() > 2:
        first = int((expected != got).flatten(1).any(1).nonzero()[0])
        expected, got = expected[first], got[first]
    return Picture(msg("picture.blocked", title=picture.title), expected, got)


def float64(params: dict[str, Tensor | None]) -> dict[str, Tensor | None]:
    """The same weights in float64 (None stays None: a missing bias), for the oracle."""
    return {k: None if v is None else v.double() for k, v in params.items()}


def _element(make: Callable[[], Any], index: int) -> Callable[[], Any]:
    return lambda: make()[index]


def _both(make: Callable[[], Any], index: int) -> Callable[[], Any]:
    """A pair's element `index`, then the other one."""
    def run() -> tuple[Any, Any]:
        pair = make()
        return pair[index], pair[1 - index]
    return run


def attempt(action: Callable[[], Call], case: Label,
            mistakes: list[Candidate] | None = None) -> Call:
    """Call into student code; an exception it raises is a failure of this case.

    A known mistake that raises the very same error is named (e.g. x @ weight with a
    non-square weight); so is one that meets the kit's very error about the module built
    (the grader's weights do not fit: projections of a mistake's widths). Missing names,
    stubs, timeouts, crashes and other errors about the module pass through unchanged.
    """
    try:
        return action()
    except StudentCodeError as err:
        if runs_elsewhere(err):  # half finished: this kind of case raises, as any error would
            raise as_check_failed(case, err) from None
        if err.kind == "bad_module" and mistakes:
            laid_out = Diagnosis(err, mistakes, TIGHT)
            if laid_out.mistake is not None:
                raise CheckFailed(err.message, diagnosis=laid_out, case=case,
                                  exc_type=err.kind) from None
        if err.kind != "raised":
            raise
        raise CheckFailed(err.message, diagnosis=Diagnosis(err, mistakes, TIGHT) if mistakes
                          else None, case=case, exc_type=err.exc_type or "Exception") from None


def expect_unchanged(name: str, call: Call, originals: dict[str, Tensor | None],
                     case: Label | None = None) -> None:
    """The tensors passed to `name` (argument name -> tensor, in the order passed, None for
    one not passed) are as they were: `call.inputs_after` holds them after the call. A tensor
    passed as several arguments (query/key/value) is named by all of them."""
    passed = [(arg, t) for arg, t in originals.items() if t is not None]
    for (_, before), after in zip(passed, call.inputs_after):
        if before.shape != after.shape or not torch.equal(before, after):
            shared = [other for other, t in passed if t is before]  # self-attention: all three
            raise CheckFailed(msg("check.in_place", name=name, input="/".join(shared)),
                              case=case)


def expect_blocked_zero(what: Label, weights: Tensor, mask: Tensor | None, case: Label) -> None:
    """Where `mask` (True = blocked, broadcast to the weights) blocks a key, the weight is
    exactly 0, as the softmax of -inf gives (or of -1e9, or finfo.min). A finite fill that
    leaks, -15 say, leaves weights near 1e-7: within the tolerance, caught here."""
    if mask is not None and bool((weights.masked_select(mask.expand_as(weights)) != 0).any()):
        raise CheckFailed(msg("attend.blocked_nonzero", what=what), case=case)


def expect_output_pair(name: str, call: Call) -> tuple[Any, Any]:
    if not isinstance(call.value, tuple) or len(call.value) != 2:
        raise CheckFailed(msg("check.not_pair", name=name, type=type(call.value).__name__))
    return call.value


def expect_value_error(sub, class_name: str, args: tuple, kwargs: dict, why: Message) -> None:
    """Building class_name(*args, **kwargs) raises ValueError, because `why`. Other failures
    of the student's code (missing, a stub, a timeout, a crash) are reported as they are."""
    call = f"{class_name}({', '.join([*map(str, args), *(f'{k}={v}' for k, v in kwargs.items())])})"
    try:
        sub.check_constructor(class_name, *args, **kwargs)
    except StudentCodeError as err:
        if err.kind != "raised":
            raise
        if err.exc_type != "ValueError":
            raise CheckFailed(msg("check.other_error", call=call, why=why, error=err.message)
                              ) from None
    else:
        raise CheckFailed(msg("check.no_value_error", call=call, why=why))


def expect_no_dropout_in_eval(name: str, weights: Any, expected_weights: Tensor, p: float,
                              case: Label) -> None:
    """In eval mode: weights that are the expected ones dropped out (each 0, or the softmax's
    scaled by 1 / (1 - p), some of them 0 where the softmax is not) say dropout acts there:
    `F.dropout(w, p)`, whose `training` is True unless told."""
    if _dropped_from(weights, expected_weights, p):
        raise CheckFailed(msg("dropout.in_eval", name=name, p=p), case=case)


def expect_dropout(name: str, out: Any, weights: Any, expected_weights: Tensor, v: Tensor,
                   params: dict[str, Tensor | None], p: float, case: Label) -> None:
    """Dropout p in training mode, on the attention weights: each weight the softmax gives is
    either dropped (0) or scaled by 1 / (1 - p), some are dropped, and `out` mixes the values
    v (B, H, Tk, Dv) with the weights returned, then applies out_proj from `params`. Called
    once the same module in eval mode gave the right output, so a training-mode `out` that
    differs is dropout's doing, somewhere."""
    weights = expect_tensor(msg("what.attention_weights", name=name), weights, expected_weights,
                            case, dims=("B", "H", "Tq", "Tk"))
    mixed = oracle.output_projection(oracle.merge_heads(weights @ v), params["out_proj.weight"],
                                     params["out_proj.bias"])  # (B, Tq, out_dim)
    if _dropped_from(out, mixed, p):
        raise CheckFailed(msg("dropout.on_output", p=p), case=case)
    kept = weights != 0
    if bool(kept[expected_weights != 0].all()):
        returned_softmax = torch.allclose(weights, expected_weights, **TIGHT)
        if returned_softmax and _differs(out, mixed):  # dropout elsewhere: before v, say
            raise CheckFailed(msg("dropout.weights_not_returned", p=p), case=case)
        raise CheckFailed(msg("dropout.none_dropped", p=p), case=case)
    if not torch.allclose(weights[kept], expected_weights[kept] / (1 - p), **TIGHT):
        raise CheckFailed(msg("dropout.not_used"), case=case)
    expect_close(msg("what.output", name=name), out, mixed, msg("case.dropped_out", case=case),
                 TIGHT)


def _differs(got: Any, value: Tensor) -> bool:
    """`got` is a tensor of value's shape, and not close to it."""
    return (isinstance(got, Tensor) and got.shape == value.shape
            and not torch.allclose(got.to(value.dtype), value, **TIGHT))


def _dropped_from(got: Any, value: Tensor, p: float) -> bool:
    """`got` is `value` after a dropout of p: some entries 0, the rest value / (1 - p)."""
    if not _differs(got, value):
        return False
    dropped = (got == 0) & (value != 0)
    return bool(dropped.any()) and torch.allclose(
        got[~dropped].to(value.dtype), value[~dropped] / (1 - p), **TIGHT)

