"""Gradients and devices: a layer that cannot be trained, or that crashes on the first GPU,
is wrong, so each step and module check asks for both as well as the right forward values.

Backward: in each float64 case whose forward comparison passed, the same call also runs
backward on loss = Σ_i (output_i · cotangent_i).sum(), with a random cotangent per output
drawn from the case's generator, and the gradients of every input that takes part and of
every parameter the grader loaded are compared with autograd through the oracle (torch
formulas; `nn.MultiheadAttention` with the same weights). float32 cases are forward only.

Devices: at the end of a check, one representative case runs with its inputs and weights on
the `meta` device (see `runner.devices`): a tensor the code makes on the CPU then meets meta
tensors, as it would meet a GPU's. Skipped when the checks already run on a GPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map

from ..messages import msg
from ..runner.protocol import Backward, Call, StudentCodeError
from .core import CheckFailed, Context
from .diagnosis import Candidate, Diagnosis
from .expect import Label, expect_close
from .inputs import randn

Tensor = torch.Tensor
META = "meta"


def backward_for(gen: torch.Generator, dtype: torch.dtype, expected: tuple[Tensor, ...],
                 outputs: tuple[str, ...], inputs: dict[int, str],
                 params: tuple[str, ...] = ()) -> Backward | None:
    """The backward to ask for in a case: a random cotangent shaped like each expected output,
    drawn from `gen` after the case's inputs; None (forward only) for float32 cases, and where
    the expected output holds NaN (a query whose every key is blocked): NaN spreads through
    the whole backward pass, so there is no gradient to compare."""
    if dtype != torch.float64 or any(bool(e.isnan().any()) for e in expected):
        return None
    cotangents = tuple(randn(gen, *e.shape, device=str(e.device)) for e in expected)
    return Backward(cotangents, outputs, inputs, params)


def call_with(sub: Any, name: str, args: tuple, backward: Backward | None) -> Call:
    """`sub.call(name, *args)`, with `backward` when there is one."""
    if backward is None:
        return sub.call(name, *args)
    return sub.call_backward(name, args, {}, backward)


def loaded(params: dict[str, Tensor | None]) -> tuple[str, ...]:
    """The names of the parameters the grader loads (a None is a bias that must not be)."""
    return tuple(k for k, v in params.items() if v is not None)


def expect_gradients(name: str, call: Call, backward: Backward | None,
                     expected: Callable[[], dict[str, Tensor | None]], case: Label,
                     tol: dict, mistakes: Callable[[str], list[Candidate]] | None = None
                     ) -> None:
    """The gradients `call` brought back, against `expected()` (by input or parameter name).

    Why there are none comes first (not connected, backward() failed: named when one of
    `mistakes` raises the same error), then a gradient that is None or all zero where the
    oracle's is not, then the values through `expect_close`, with `mistakes(name)`, the known
    mistakes' gradients of that input or parameter."""
    if backward is None:
        return
    case = msg("case.backward", case=case)
    if call.backward_failure is not None:
        raised = StudentCodeError("raised", call.backward_failure)
        raise CheckFailed(call.backward_failure, case=case, diagnosis=Diagnosis(
            raised, [m for wrt in backward.inputs.values() for m in mistakes(wrt)], tol)
            if mistakes else None, exc_type=call.backward_failure.params.get("type"))
    if call.grads is None:  # the outputs were right, yet no backward ran: say so
        raise CheckFailed(msg("grad.missing", name=name), case=case)
    compared = []
    for wrt, want in expected().items():
        if want is None:
            continue
        param = wrt in backward.params
        what = (msg("grad.of_param", name=name, param=wrt) if param
                else msg("grad.of_input", name=name, input=wrt))
        got = call.grads.get(wrt)
        if got is None:  # a gradient missing says the most: it comes first
            raise CheckFailed(msg("grad.none_param" if param else "grad.none", what=what),
                              case=case)
        compared.append((wrt, what, got, want, gradient_tolerance(tol, want)))
    for _, what, got, want, scaled in compared:  # then one that is all zeros
        if (got.shape == want.shape and not bool(got.any())
                and bool((want.abs() > scaled["atol"]).any())):
            raise CheckFailed(msg("grad.zero", what=what), case=case)
    for wrt, what, got, want, scaled in compared:
        expect_close(what, got, want, case, scaled, mistakes=mistakes(wrt) if mistakes else None)


def gradient_tolerance(tol: dict, expected: Tensor) -> dict:
    """The forward tolerance, with atol at least rtol times the largest expected gradient: a
    gradient sums over every token and row, so an error as small as a float32 scale constant's
    (relative 3e-8) is relative to the gradient's size, not to each of its entries."""
    largest = float(expected.abs().max()) if expected.numel() else 0.0
    return {"rtol": tol["rtol"], "atol": max(tol["atol"], tol["rtol"] * largest)}


def moved(value: Any, device: str) -> Any:
    """`value` with every tensor in it moved to `device`: tensors in tuples, lists and dicts,
    and the fields of a dataclass (`Inputs`). The checks draw a device check's inputs on the
    CPU and move them to meta: building a mask on meta would load PyTorch's symbolic shape
    code (sympy, a second or more) into the grader."""
    copies: dict[int, Tensor] = {}  # one copy per tensor: self-attention's stays one

    def move(v: Any) -> Any:
        if isinstance(v, Tensor) and id(v) not in copies:
            copies[id(v)] = v.to(device)
        return copies[id(v)] if isinstance(v, Tensor) else v

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: tree_map(move, getattr(value, f.name))
                                             for f in dataclasses.fields(value)})
    return tree_map(move, value)


def expect_on_meta(ctx: Context, name: str, run: Callable[[str], Call], case: Label, *,
                   wrong_output: str = "device.output") -> None:
    """The device check: `run(META)` runs one case with everything on meta (drawn on the CPU,
    then `moved`). A device mix fails; an error that is only a limit of meta tensors does not
    (`runner.devices`). `wrong_output`: the message for an output that is not on meta."""
    if ctx.device != "cpu":
        return  # on a GPU the checks themselves already ran there
    case = msg("case.meta", case=case)
    try:
        call = run(META)
    except StudentCodeError as err:
        if err.kind == "device":
            raise CheckFailed(err.message, case=case) from None
        if err.kind in ("raised", "not_implemented"):  # meta's limits: `.item()`, `if
            return  # mask.any():`, copying out (NotImplementedError): fine on a GPU
        raise
    for value in tree_leaves(call.value):
        if isinstance(value, Tensor) and value.device.type != META:
            raise CheckFailed(msg(wrong_output, name=name, device=str(value.device)), case=case)
