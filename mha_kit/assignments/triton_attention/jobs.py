"""Kit code that runs beside the student's code (the worker, or the notebook's kernel): the
count of the forward kernel's matrix-product work in Triton's interpreter, the watch for
softmax and attention computed by PyTorch around the kernels (in the launchers and the
Function) with what the Function saves for backward, and the speed check's timing of forward
and backward. What these return is untrusted data: the checks judge it, on their side of the
pipe."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ...runner.protocol import LocalSubmission
from ...runtime import triton_interpreting

Tensor = torch.Tensor
WORK_JOB = "mha_kit.assignments.triton_attention.jobs:dot_work"
WATCH_JOB = "mha_kit.assignments.triton_attention.jobs:torch_watch"
UNSTORED_JOB = "mha_kit.assignments.triton_attention.jobs:unstored_lse"
# The ATen ops of a softmax or of attention: the kernels must compute them.
COMPUTED_BY_TORCH = ("aten::_softmax", "aten::softmax", "aten::_safe_softmax",
                     "aten::_log_softmax", "aten::log_softmax",
                     "aten::scaled_dot_product_attention",
                     "aten::_scaled_dot_product_attention_math",
                     "aten::_scaled_dot_product_flash_attention_for_cpu",
                     "aten::_scaled_dot_product_flash_attention",
                     "aten::_scaled_dot_product_efficient_attention")


def interpreting() -> bool:
    """Whether Triton is installed and runs kernels through its interpreter here."""
    return importlib.util.find_spec("triton") is not None and triton_interpreting()


@contextlib.contextmanager
def _dots_counted(count: list[int], block_n: int) -> Iterator[None]:
    """While active, every tl.dot the interpreter runs over a block of keys (one of its sizes
    block_n: q kᵀ, p v, or either transposed) adds its multiply-adds to count[0]. Other
    products are not the work the causal bound saves (FlagAttention multiplies q by an identity
    matrix once, to keep it in registers)."""
    from triton.runtime.interpreter import interpreter_builder

    create_dot = interpreter_builder.create_dot

    def counted(a: Any, b: Any, *args: Any) -> Any:
        m, inner, n = (int(a.data.shape[-2]), int(a.data.shape[-1]), int(b.data.shape[-1]))
        if block_n in (m, inner, n):
            count[0] += m * inner * n
        return create_dot(a, b, *args)

    interpreter_builder.create_dot = counted
    try:
        yield
    finally:
        del interpreter_builder.create_dot  # the class's method again


def dot_work(sub: LocalSubmission, *, q: Tensor, k: Tensor, v: Tensor, is_causal: bool,
             block_m: int, block_n: int) -> int | None:
    """The multiply-adds of the tl.dot products over blocks of keys that `flash_forward` runs
    on q, k, v (block_n must differ from block_m and from D); None where kernels are compiled
    (a GPU), where the interpreter cannot count them."""
    if not interpreting():
        return None
    function, count = sub.lookup("flash_forward"), [0]
    with _dots_counted(count, block_n):
        sub.guard("flash_forward", lambda: function(q, k, v, is_causal=is_causal,
                                                    block_m=block_m, block_n=block_n))
    return count[0]


class _EmptyFilled(TorchDispatchMode):
    """Every floating-point tensor made uninitialised (torch.empty, empty_like) filled with
    NaN."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        out = func(*args, **(kwargs or {}))
        if func in (torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default) \
                and out.is_floating_point():
            out.fill_(float("nan"))
        return out


def unstored_lse(sub: LocalSubmission, *, q: Tensor, k: Tensor, v: Tensor,
                 kwargs: dict) -> bool:
    """Whether the logsumexp `flash_forward` returns is all NaN when every uninitialised
    tensor starts as NaN: its kernel never stores it."""
    function = sub.lookup("flash_forward")

    def run() -> Any:
        with _EmptyFilled():
            return function(q, k, v, **kwargs)

    value = sub.guard("flash_forward", run)
    lse = value[1] if isinstance(value, tuple) and len(value) == 2 else None
    return isinstance(lse, Tensor) and lse.is_floating_point() and bool(lse.isnan().all())


def _storages(value: Any) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tree_leaves(value)
            if isinstance(t, Tensor) and t.device.type != "meta"}


class _TorchOps(TorchDispatchMode):
    """Notes the first op of COMPUTED_BY_TORCH that runs while active, and the largest tensor
    an op made in new memory (not a view, nor an op writing into its inputs), with the op."""

    def __init__(self) -> None:
        super().__init__()
        self.used: str | None = None
        self.largest, self.largest_op = 0, ""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        name = str(func._schema.name) if hasattr(func, "_schema") else ""
        if self.used is None and name in COMPUTED_BY_TORCH:
            self.used = name.removeprefix("aten::")
        out = func(*args, **(kwargs or {}))
        given = _storages((args, kwargs))
        for t in tree_leaves(out):
            if isinstance(t, Tensor) and t.untyped_storage().data_ptr() not in given \
                    and t.numel() > self.largest:
                self.largest, self.largest_op = t.numel(), name
        return out


def torch_watch(sub: LocalSubmission, *, name: str, args: tuple, kwargs: dict,
                backward: bool) -> dict[str, Any]:
    """`name`(*args, **kwargs) (with `backward`: with autograd on, then backward of the
    output's sum): the first softmax or attention op PyTorch ran for it ("torch_op"), and
    with `backward` how many elements the autograd graph saved ("saved", each storage once),
    or {"torch_op": ..., "saved": None} where the output has no graph; and the largest tensor
    made in new memory meanwhile ("made": its elements and the op), the kernels' own
    allocations aside (Triton writes into tensors it is given)."""
    watch, saved, counted = _TorchOps(), [0], set()
    inputs = [a.detach().clone().requires_grad_(backward) if isinstance(a, Tensor) else a
              for a in args]

    def pack(t: Tensor) -> Tensor:
        storage = t.untyped_storage()._cdata
        if storage not in counted:
            counted.add(storage)
            saved[0] += t.untyped_storage().nbytes() // t.element_size()
        return t

    def run() -> Any:
        with watch:
            return sub.lookup(name)(*inputs, **kwargs)

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.set_grad_enabled(backward):
        out = sub.guard(name, run)
    result: dict[str, Any] = {"torch_op": watch.used, "saved": None}
    made = {"largest": watch.largest, "op": watch.largest_op}
    if backward and type(out) is Tensor and out.requires_grad:

        def run_backward() -> None:
            with watch:
                out.backward(torch.ones_like(out))

        sub.guard(f"{name} (backward)", run_backward)
        result.update(torch_op=watch.used, saved=saved[0])
        made = {"largest": watch.largest, "op": watch.largest_op}
    return {**result, "made": made}


# --------------------------------------------------------------------------- the speed check

SPEED_JOB = "mha_kit.assignments.triton_attention.jobs:measure_speed"
# Run just before SPEED_JOB: the kernels compiled and the libraries warmed, outside the timing.
SPEED_PREPARE_JOB = "mha_kit.assignments.triton_attention.jobs:prepare_speed"
Attention = Callable[[Tensor, Tensor, Tensor], Tensor]


def forward_backward(attention: Attention) -> Callable[[tuple[Tensor, ...]], tuple[Tensor, ...]]:
    """One timed call: attention on leaves q, k, v made from the input (q, k, v, dO), then its
    backward from dO; (out, dq, dk, dv)."""

    def call(x: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        q, k, v, d_out = x
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        with torch.enable_grad():
            out = attention(*leaves)
            out.backward(d_out)
        return (out.detach(), *(t.grad for t in leaves))

    return call


def speed_candidates(attention: Attention) -> dict[str, Callable]:
    """`attention` (a student's, causal, with the config's blocks) timed against SDPA (on a
    GPU, FlashAttention's CUDA kernels) and the kit's FlashAttention in PyTorch (blocks of
    queries against every key, llm_attention's), each forward and backward."""
    import torch.nn.functional as F

    from ...oracle import flash_by_query_blocks

    return {"student": forward_backward(attention),
            "sdpa": forward_backward(lambda q, k, v: F.scaled_dot_product_attention(
                q, k, v, is_causal=True)),
            "pytorch": forward_backward(lambda q, k, v: flash_by_query_blocks(q, k, v, True)[0])}


def student_attention(sub: LocalSubmission, cfg: Any) -> Attention:
    function = sub.lookup("flash_attention_triton")
    return lambda q, k, v: function(q, k, v, is_causal=True, block_m=cfg.block_m,
                                    block_n=cfg.block_n)


def prepare_speed(sub: LocalSubmission, device: str) -> None:
    """Each candidate called once at the timed shape: Triton compiles the student's kernels
    (seconds on a GPU) here, not inside the timing."""
    from .speed_config import speed_config, speed_inputs

    cfg = speed_config()
    x = tuple(t.to(device) for t in speed_inputs(cfg, 0, 0))
    for candidate in speed_candidates(student_attention(sub, cfg)).values():
        sub.guard("flash_attention_triton", lambda c=candidate: c(x), watch=False)


def measure_speed(sub: LocalSubmission, device: str, seed: int,
                  attention: Attention | None = None) -> dict[str, Any]:
    """The student's forward and backward (or `attention`'s: a style of the calibration)
    timed against SDPA and the kit's FlashAttention in PyTorch, in interleaved rounds on the
    same fresh inputs (CUDA events on a GPU); the spot-checked calls' outputs and gradients,
    for batch element 0 and its first SPOT_HEADS heads, on the CPU."""
    from dataclasses import asdict

    from ...speed.timing import interleaved_times, timer_for, timing_conditions
    from .speed_config import SPOT_HEADS, speed_config, speed_inputs, spot_indices

    cfg = speed_config()
    candidates = speed_candidates(attention or student_attention(sub, cfg))

    def round_inputs(r: int) -> list[tuple[Tensor, ...]]:
        return [tuple(t.to(device) for t in speed_inputs(cfg, seed, r * cfg.calls + c))
                for c in range(cfg.calls)]

    def run() -> tuple[dict[str, list[float]], dict[str, dict[int, Any]]]:
        return interleaved_times(candidates, round_inputs, cfg.rounds, cfg.warmup,
                                 timer_for(device), frozenset(spot_indices(cfg, seed)))

    with timing_conditions():
        times, kept = sub.guard("flash_attention_triton", run, watch=False)
    outputs = {i: [t[:1, :SPOT_HEADS].cpu() if isinstance(t, Tensor) else t for t in out]
               for i, out in kept["student"].items()}
    return {"config": asdict(cfg), "device": device, "seed": seed, "times": times,
            "outputs": outputs}
