"""Kit code for the speed check that runs in a worker (or the notebook's kernel): the student's
fused module, or the kit's looped and fused baselines (`baselines`), timed one round of one
candidate at a time as the grader asks (`speed.timed_run`: the student's in its own worker,
the baselines in a clean one), on the round's fresh inputs; and the torch calls of one forward
at H and H / 2 heads. Nothing here is trusted by the grader: this package's `speed.judge`
checks what comes back.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import nn

from ...runner.inprocess import load_weights, vetted
from ...runner.protocol import LocalSubmission, ModuleRun
from ...runtime import one_thread
from ...speed.timing import (
    Forward,
    count_ops,
    timer_for,
    timing_conditions,
)
from .baselines import FusedReference, LoopedReference
from .speed_config import config_for, output_digest, speed_input, speed_params

Tensor = torch.Tensor
# The speed check's jobs, in the order the grader runs them. In the student's worker: build
# and count (construction and first calls, untimed); make the candidates ready (there the
# student's module, in a clean worker the baselines); one round of one candidate, many times;
# the digests of every output of the student's; the outputs the grader then drew.
PREPARE_JOB = "mha_kit.assignments.mha.jobs:prepare_speed"
START_JOB = "mha_kit.assignments.mha.jobs:start_timing"
ROUND_JOB = "mha_kit.assignments.mha.jobs:time_round"
REVEAL_JOB = "mha_kit.assignments.mha.jobs:reveal_outputs"
NAME = "MultiHeadAttention.forward"  # what the student's code is called in messages


def prepared(module: nn.Module, owner: str, params: dict[str, Tensor], device: str) -> Forward:
    """A contract module holding `params`, float32 on `device`, in eval mode, called the way
    the speed check calls it: causal self-attention, no weights returned."""
    with torch.no_grad():
        module.to(device=device, dtype=torch.float32)
        load_weights(module, owner, params)
    module.eval()
    return lambda x: module(x, attn_mask=None, is_causal=True, need_weights=False)[0]


# What prepare_speed leaves for the next timing run, by submission: its device, the two
# modules, their counts and counted outputs.
_BUILT: weakref.WeakKeyDictionary[Any, tuple[str, nn.Module, nn.Module, list]] = (
    weakref.WeakKeyDictionary())


def prepare_speed(sub: LocalSubmission, device: str, seed: int) -> None:
    """Build the student's modules for the next timing run (H heads, and H / 2 for the count),
    call each once and count the calls of one forward of each, with the run's weights and its
    first input: a slow constructor or first call, and what counting costs (torch.compile
    compiles the counting mode into a module it compiled), then cost nothing in the run whose
    CPU time the grader compares with the reported times. One forward of the timed shape also
    runs here through the contract's `run_module`."""
    cfg = config_for(device)
    params, x = speed_params(cfg, seed, device), speed_input(cfg, seed, 0).to(device)  # (B, T, E)
    built = [sub.construct("MultiHeadAttention", cfg.E, heads) for heads in (cfg.H, cfg.H // 2)]
    with one_thread():
        forwards = [sub.guard(NAME, lambda m=module: prepared(m, "MultiHeadAttention", params,
                                                              device), watch=False)
                    for module in built]
        for forward in forwards:
            with timing_conditions():
                sub.guard(NAME, lambda f=forward: f(x))
        sub.run_module(ModuleRun("MultiHeadAttention", (cfg.E, cfg.H), forward_args=(x,),
                                 forward_kwargs={"is_causal": True, "need_weights": False},
                                 dtype=torch.float32))
        counted = _counted(sub, forwards, x)
    _BUILT[sub] = (device, *built, counted)


Counted = list[tuple[dict[str, int], Any]]  # (calls, output) of one forward at H and H / 2 heads


def _counted(sub: LocalSubmission, forwards: list[Forward], x: Tensor) -> Counted:
    """The calls of one forward of each (H heads, H / 2), which show what runs once per head,
    and their outputs, which the grader checks; watched, as every graded call."""
    return [sub.guard(NAME, lambda f=f: count_ops(f, x)) for f in forwards]


def _built(sub: LocalSubmission, device: str, cfg: Any
           ) -> tuple[nn.Module, nn.Module, Counted | None]:
    """The modules prepare_speed built for this run and their counts, else new ones and None
    (no preparation ran, or the worker started again since)."""
    found = _BUILT.pop(sub, None)
    if found is not None and found[0] == device:
        return found[1], found[2], found[3]
    student, halved = (sub.construct("MultiHeadAttention", cfg.E, heads)
                       for heads in (cfg.H, cfg.H // 2))
    return student, halved, None


def start_timing(sub: LocalSubmission, device: str, seed: int, names: list[str]
                 ) -> dict[str, Any]:
    """Make ready the candidates `names` for `time_round`, with the run's weights, and call each
    `warmup` times: "student", the modules `prepare_speed` built (new ones where it did not run,
    counted now), or "looped" and "fused", the kit's baselines. For the student, what the grader
    checks besides the times: the calls of the two counted forwards and their outputs."""
    cfg = config_for(device)
    params = speed_params(cfg, seed, device)
    candidates: dict[str, Forward] = {}
    summary: dict[str, Any] = {}
    if "student" in names:
        student, halved, counted = _built(sub, device, cfg)
        candidates["student"] = prepared(student, "MultiHeadAttention", params, device)
        if counted is None:
            with one_thread():
                half = sub.guard(NAME, lambda: prepared(halved, "MultiHeadAttention", params,
                                                        device), watch=False)
                counted = _counted(sub, [candidates["student"], half],
                                   speed_input(cfg, seed, 0).to(device))
        summary = {"ops": {"heads": [cfg.H, cfg.H // 2], "counts": [c for c, _ in counted]},
                   "counted": [_to_cpu(vetted(out, NAME)) for _, out in counted]}
    baselines = {"looped": LoopedReference, "fused": FusedReference}
    candidates |= {name: baselines[name](params, cfg.H) for name in names if name in baselines}
    x = speed_input(cfg, seed, 0).to(device)  # (B, T, E)
    with timing_conditions():
        for forward in candidates.values():
            for _ in range(cfg.warmup):
                sub.guard(NAME, lambda f=forward: f(x), watch=False)
    _TIMING[sub] = {**_TIMING.get(sub, {}), **candidates}  # in process, one holds all three
    if "student" in names:
        _KEPT[sub] = []
    return summary


def time_round(sub: LocalSubmission, device: str, name: str, inputs: int) -> dict[str, Any]:
    """A round of candidate `name` (`start_timing`): its calls on the round's inputs,
    made from `inputs`, the round's own seed, which the grader draws and sends with this round
    only (no code in the worker can know a later round's inputs, and compute their outputs in
    a round of its own); their time per call by this worker's clock; and the SHA-256 digest of
    each output, made here, in the round's request, whose CPU time the grader counts: work put
    off until after the rounds (empty outputs filled later) cannot make a digest the grader
    will check (review 52). Every candidate makes its digests, so that a round costs each the
    same besides its calls. The student's outputs are kept for `reveal_outputs`."""
    cfg = config_for(device)
    xs = [speed_input(cfg, inputs, c).to(device) for c in range(cfg.calls)]  # each (B, T, E)
    forward, clock = _TIMING[sub][name], timer_for(device)
    with timing_conditions():
        seconds, outs = sub.guard(NAME, lambda: clock(forward, xs), watch=False)
    kept = [vetted(out, NAME) for out in outs]
    if name == "student":
        _KEPT[sub] += kept
    return {"seconds": seconds, "digests": [output_digest(out) for out in kept]}


# The candidates `start_timing` made ready for `time_round`.
_TIMING: weakref.WeakKeyDictionary[Any, dict[str, Forward]] = weakref.WeakKeyDictionary()
# Every timed output of the student's last timing run, by submission, until the grader asks.
_KEPT: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def reveal_outputs(sub: LocalSubmission, indices: list[int]) -> dict[int, Any]:
    """The timed outputs at `indices` of the last timing run (none if no run is kept), which
    the grader compares with the digests the rounds reported, then with nn.MultiheadAttention."""
    outputs = _KEPT.pop(sub, [])
    return {i: _to_cpu(outputs[i]) for i in indices if type(i) is int and 0 <= i < len(outputs)}


def _to_cpu(value: Any) -> Any:
    return value.cpu() if isinstance(value, Tensor) else value
