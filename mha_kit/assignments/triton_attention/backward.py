"""Checks of the backward: `flash_attention_triton`'s gradients against autograd through an
explicit softmax, with what its Function saves."""

from __future__ import annotations

import torch

from ...checks.core import CheckFailed, Context
from ...checks.expect import expect_close
from ...checks.gradients import gradient_tolerance, moved
from ...checks.inputs import randn
from ...checks.search import run_cases
from ...messages import msg
from ...runner.protocol import Backward
from . import oracle, variants
from .forward import WATCH_CASE, Flash, expect_kernel_computes, expect_no_full_matrix, on

Tensor = torch.Tensor
AUTOGRAD = "flash_attention_triton"
INPUTS = {0: "q", 1: "k", 2: "v"}
BACKWARD_CASES = (
    Flash(1, 2, 21, 21, 16),
    Flash(1, 1, 37, 37, 16, causal=True),
    Flash(1, 1, 5, 21, 16, causal=True),  # Tq != Tk, Tq shorter than one block
)


def check_backward(sub, ctx: Context) -> float:
    """Once, an autograd graph, no softmax computed by PyTorch, nothing saved but q, k, v,
    the output and the logsumexp, and no (Tq, Tk) tensor made; then dQ, dK and dV for a
    random dO, against autograd through softmax(q kᵀ / sqrt(D)) v in float64."""
    def one_case(c: Flash) -> None:
        gen = ctx.generator("triton_flash_backward", c)
        q, k, v = c.draw(gen)
        want = oracle.attention(q.double(), k.double(), v.double(), c.causal)
        d_out = randn(gen, *want.shape, device="cpu").float()
        call = sub.call_backward(AUTOGRAD, moved((q, k, v), ctx.device), c.kwargs, Backward(
            (moved(d_out, ctx.device),), ("out",), INPUTS))
        tol = c.tol(ctx.device)
        expect_close(msg("triton.flash_out", name=AUTOGRAD), call.value,
                     want.float().to(ctx.device), c.label(), tol, dims=("B", "H", "Tq", "D"))
        case = msg("case.backward", case=c.label())
        if call.backward_failure is not None:
            raise CheckFailed(call.backward_failure, case=case)
        if call.grads is None:
            raise CheckFailed(msg("grad.missing", name=AUTOGRAD), case=case)
        leaves = [t.double().requires_grad_() for t in (q, k, v)]
        oracle.attention(*leaves, c.causal).backward(d_out.double())
        wrong = variants.delta_missing(q, k, v, d_out, c.causal)
        for name, leaf in zip(INPUTS.values(), leaves):
            got = call.grads.get(name)
            what = msg("grad.of_input", name=AUTOGRAD, input=name)
            if got is None:
                raise CheckFailed(msg("grad.none", what=what), case=case)
            expect_close(what, got, leaf.grad.float().to(ctx.device), case,
                         gradient_tolerance(tol, leaf.grad),
                         mistakes=on(ctx.device, [("triton_delta_missing",
                                                   lambda n=name: wrong[n])]))

    c = WATCH_CASE
    report = expect_kernel_computes(sub, ctx, AUTOGRAD, backward=True)
    q_size, k_size = c.B * c.H * c.Tq * c.D, c.B * c.H * c.Tk * c.D
    saved, allowed = report.get("saved"), 2 * q_size + 2 * k_size + c.B * c.H * c.Tq
    if saved is None:
        raise CheckFailed(msg("triton.no_graph", name=AUTOGRAD), case=c.label())
    if not isinstance(saved, int):
        raise CheckFailed(msg("triton.bad_reply", name=AUTOGRAD))
    if saved > allowed:
        raise CheckFailed(msg("triton.saves_too_much", name=AUTOGRAD, elements=saved,
                              allowed=allowed), case=c.label())
    expect_no_full_matrix(AUTOGRAD, report)
    run_cases(one_case, BACKWARD_CASES)
    return 1.0

