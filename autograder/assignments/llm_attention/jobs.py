"""Kit code that runs beside the student's code (the worker, or the notebook's kernel) for the
checks that drive it through more than one call: decoding with the KV cache, and the memory
watch of FlashAttention on the `meta` device. What these return is untrusted data: the checks
(`gqa.py`, `flash.py`) judge it, on their side of the pipe."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ...runner.inprocess import load_weights, vetted
from ...runner.protocol import LocalSubmission, StudentCodeError
from ...speed.measure import CPU_CLOCK, timing_conditions
from .decode_config import DecodeConfig, decode_config, decode_input, decode_params

Tensor = torch.Tensor
DECODE_JOB = "autograder.assignments.llm_attention.jobs:decode"
MEMORY_JOB = "autograder.assignments.llm_attention.jobs:memory"
PREPARE_TIMING_JOB = "autograder.assignments.llm_attention.jobs:prepare_timing"
TIMING_JOB = "autograder.assignments.llm_attention.jobs:time_decoding"
MODULE = "GroupedQueryAttention"
# Ops that read a tensor's values into Python (`.item()`, `int(t)`, `if t:`): meta tensors
# have none, so code that does cannot be measured there.
READS_VALUES = ("aten::_local_scalar_dense",)


def decode(sub: LocalSubmission, *, init: tuple, params: dict[str, Tensor],
           chunks: list[Tensor], dtype: torch.dtype) -> dict[str, Any]:
    """The module run twice over every token without a cache, then over the chunks one after
    the other through one `KVCache`: every output, and len(cache) after each chunk."""
    module = sub.construct(MODULE, *init)
    device = chunks[0].device

    def prepare() -> None:
        with torch.no_grad():
            module.to(device=device, dtype=dtype)
            load_weights(module, MODULE, params)
        module.eval()

    sub.guard(MODULE, prepare)
    forward = f"{MODULE}.forward"
    whole = torch.cat(chunks, dim=1)  # (B, T, E)
    with torch.no_grad():
        twice = [vetted(sub.guard(forward, lambda: module(whole.clone())), forward)
                 for _ in range(2)]
        cache = sub.guard("KVCache", sub.lookup("KVCache"))
        steps, lengths = [], []
        for chunk in chunks:
            steps.append(vetted(sub.guard(forward, lambda c=chunk: module(c.clone(),
                                                                         cache=cache)), forward))
            lengths.append(sub.guard("len(cache)", lambda: len(cache)))
    return {"twice": twice, "steps": steps, "lengths": lengths}


class SizeWatch(TorchDispatchMode):
    """The largest tensor any op makes or grows, counted by the memory it owns (its storage's
    elements: an expanded view costs what it expands, and a tensor grown by `resize_` or
    written by `out=` what it holds after); the most elements the tensors it made held at once
    (blocks kept in a list add up); and whether values were read."""

    def __init__(self) -> None:
        super().__init__()
        self.largest, self.shape, self.op, self.reads_values = 0, (), "", False
        self.live = self.peak = 0
        self.owned: dict[int, int] = {}  # storage -> its elements, as this watch last saw it

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        if func._schema.name in READS_VALUES:
            self.reads_values = True
        out = func(*args, **(kwargs or {}))
        given = {t.untyped_storage()._cdata for t in tree_leaves((args, kwargs))
                 if type(t) is Tensor}
        for t in tree_leaves(out):
            if type(t) is not Tensor or not t.element_size():
                continue
            key, owned = t.untyped_storage()._cdata, _owned(t)
            if owned > self.largest:
                self.largest, self.shape, self.op = owned, tuple(t.shape), func._schema.name
            before = self.owned.get(key)
            if before is None and key in given:  # an input's memory, not this code's
                continue
            self.live += owned - (before or 0)  # new memory, or memory grown in place
            self.peak = max(self.peak, self.live)
            if before is None:
                weakref.finalize(t, self._freed, key)
            self.owned[key] = max(owned, before or 0)
        return out

    def _freed(self, key: int) -> None:
        self.live -= self.owned.pop(key, 0)

    def report(self) -> dict[str, Any]:
        return {"largest": self.largest, "shape": self.shape, "op": self.op, "peak": self.peak}


def _owned(t: Tensor) -> int:
    """The elements of the memory a tensor holds: an expanded view costs what it expands."""
    return t.untyped_storage().nbytes() // t.element_size() if t.element_size() else 0


def _tensors_in(value: Any, where: str, depth: int = 0) -> list[tuple[str, Tensor]]:
    """(where, tensor) for each tensor `value` holds: in containers, in the closure and
    defaults of a function (a lambda that captured the scores), in an object's attributes."""
    if type(value) is Tensor or isinstance(value, nn.Parameter):
        return [(where, value)]
    if depth >= 4:
        return []
    if isinstance(value, (list, tuple)):
        parts = [(f"{where}[{i}]", v) for i, v in enumerate(value)]
    elif isinstance(value, dict):
        parts = [(f"{where}[{k!r}]", v) for k, v in value.items()]
    elif callable(value) and hasattr(value, "__code__"):
        parts = [(f"{where} (captured)", cell.cell_contents)
                 for cell in value.__closure__ or () if cell.cell_contents is not value]
        parts += [(f"{where} (default)", d) for d in value.__defaults__ or ()]
    elif hasattr(value, "__dict__") and not isinstance(value, (type, nn.Module)):
        parts = [(f"{where}.{k}", v) for k, v in vars(value).items()]
    else:
        return []
    return [found for w, v in parts for found in _tensors_in(v, w, depth + 1)]


def kept_in_ctx(out: Tensor, counted: set[int]) -> dict[str, Any]:
    """What the autograd graph of `out` keeps beside its saved tensors: the tensors a custom
    Function put on `ctx` as attributes (directly, in a list, in a closure), each storage
    once and none of `counted`'s; the largest by where it is kept. And whether the graph has
    a custom Function at all."""
    elements, largest, function = 0, {"where": "", "shape": (), "elements": 0}, False
    nodes, seen = [out.grad_fn], set()
    while nodes:
        node = nodes.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            function = True
            kept = [found for attr, value in vars(node).items()
                    for found in _tensors_in(value, f"ctx.{attr}")]
            for where, t in kept:
                key = t.untyped_storage()._cdata
                if key not in counted:
                    counted.add(key)
                    elements += _owned(t)
                    if _owned(t) > largest["elements"]:
                        largest = {"where": where, "shape": tuple(t.shape),
                                   "elements": _owned(t)}
        nodes.extend(next_node for next_node, _ in node.next_functions)
    return {"elements": elements, "largest": largest, "function": function}


def memory(sub: LocalSubmission, *, name: str, q_shape: tuple[int, ...],
           k_shape: tuple[int, ...], is_causal: bool, block_size: int, backward: bool,
           inputs: tuple[Tensor, Tensor, Tensor] | None = None) -> dict[str, Any]:
    """`name`(q, k, v) on meta tensors of these shapes, or on the real `inputs`: the largest
    tensor made in forward (and, with `backward`, in backward, how many elements the autograd
    graph saves for it and what a custom Function keeps on `ctx`), and with `inputs` what it
    returned (its values are checked: the code measured is the code graded); or
    {"reads_values": True} when the code reads values, which meta tensors do not have."""
    q, k, v = (t.detach().clone().requires_grad_(backward) for t in inputs) if inputs else (
        torch.randn(shape, device="meta", requires_grad=backward)
        for shape in (q_shape, k_shape, k_shape))
    function, watch, saved, counted = sub.lookup(name), SizeWatch(), [0], set()

    def pack(t: Tensor) -> Tensor:
        if t.untyped_storage()._cdata not in counted:  # a tensor saved twice costs once
            counted.add(t.untyped_storage()._cdata)
            saved[0] += _owned(t)
        return t

    def run() -> Any:
        with watch:
            return function(q, k, v, is_causal=is_causal, block_size=block_size)

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                torch.set_grad_enabled(backward):
            out = sub.guard(name, run)
    except StudentCodeError:
        if watch.reads_values:
            return {"reads_values": True}
        raise
    result: dict[str, Any] = {"forward": watch.report(), "saved": saved[0]}
    if inputs:
        result["out"] = vetted(out, name)
    if backward:
        if type(out) is not Tensor or not out.requires_grad:
            return {**result, "backward": None}
        result["in_ctx"] = sub.guard(name, lambda: kept_in_ctx(out, counted), watch=False)
        watch = SizeWatch()

        def run_backward() -> None:
            with watch:
                out.backward(torch.ones_like(out))

        sub.guard(f"{name} (backward)", run_backward)
        result["backward"] = watch.report()
    return result


# --------------------------------------------------------------------------- decoding speed


# The module prepare_timing built and warmed up for the next time_decoding, by submission.
_PREPARED: weakref.WeakKeyDictionary[Any, tuple[str, nn.Module]] = weakref.WeakKeyDictionary()


def _load(sub: LocalSubmission, module: nn.Module, cfg: DecodeConfig, seed: int,
          device: str) -> nn.Module:
    """`module`, float32 on `device` in eval mode, holding the weights of `seed`."""
    params = {k: v.to(device) for k, v in decode_params(cfg, seed).items()}

    def prepare() -> None:
        with torch.no_grad():
            module.to(device=device, dtype=torch.float32)
            load_weights(module, MODULE, params)
        module.eval()

    sub.guard(MODULE, prepare, watch=False)
    return module


def _candidates(sub: LocalSubmission, module: nn.Module, x: Tensor, cfg: DecodeConfig
                ) -> dict[str, Callable[[], tuple[float, list[Tensor]]]]:
    """The two ways of decoding N tokens after the prefill, each timed in CPU seconds (the
    check times on the CPU whatever device grades: `decode_speed`) with its outputs: through a
    KVCache (its prefill untimed), and the whole prefix again for each token."""
    cache_class = sub.lookup("KVCache")
    now = CPU_CLOCK

    def cached() -> tuple[float, list[Tensor]]:
        cache = cache_class()
        module(x[:, :cfg.P], cache=cache)
        start = now()
        outs = [module(x[:, cfg.P + n:cfg.P + n + 1], cache=cache) for n in range(cfg.N)]
        return now() - start, outs

    def recomputed() -> tuple[float, list[Tensor]]:
        start = now()
        outs = [module(x[:, :cfg.P + n + 1])[:, -1:] for n in range(cfg.N)]
        return now() - start, outs

    return {"cached": cached, "recomputed": recomputed}


def prepare_timing(sub: LocalSubmission, *, device: str) -> None:
    """Build the module and decode once each way (weights and tokens of no seed): a slow
    constructor or first call then costs nothing in the run whose CPU time the grader compares
    with the reported times."""
    cfg = decode_config()
    module = _load(sub, sub.construct(MODULE, cfg.E, cfg.H, cfg.Hkv), cfg, 0, device)
    candidates = _candidates(sub, module, decode_input(cfg, 0).to(device), cfg)
    with timing_conditions():
        for _ in range(max(cfg.warmup, 1)):
            for run in candidates.values():
                sub.guard(f"{MODULE}.forward", run, watch=False)
    _PREPARED[sub] = (device, module)


def time_decoding(sub: LocalSubmission, *, device: str, seed: int) -> dict[str, Any]:
    """Decode N tokens with the cache and by recomputing, in interleaved rounds (who goes
    first alternates): the seconds of each round, the cached outputs of the first."""
    cfg = decode_config()
    found = _PREPARED.pop(sub, None)
    module = (found[1] if found is not None and found[0] == device
              else sub.construct(MODULE, cfg.E, cfg.H, cfg.Hkv))
    module = _load(sub, module, cfg, seed, device)
    x = decode_input(cfg, seed).to(device)  # (B, P + N, E)
    candidates = _candidates(sub, module, x, cfg)
    times: dict[str, list[float]] = {name: [] for name in candidates}
    kept: list[Tensor] = []

    def run() -> None:
        for r in range(cfg.rounds):
            for name in (("cached", "recomputed") if r % 2 == 0 else ("recomputed", "cached")):
                seconds, outs = candidates[name]()
                times[name].append(seconds)
                if name == "cached" and r == 0:
                    kept.extend(outs)

    forward = f"{MODULE}.forward"
    with timing_conditions():
        sub.guard(forward, run, watch=False)
    outputs = [vetted(out, forward).cpu() for out in kept]
    return {"config": asdict(cfg), "seed": seed, "times": times, "outputs": outputs}
