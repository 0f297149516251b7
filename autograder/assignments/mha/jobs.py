"""Kit code that runs beside the student's code (the worker, or the notebook's kernel) for the
speed check: the student's fused module against the kit's looped and fused baselines
(`baselines`), timed in interleaved rounds on the same fresh inputs (`speed.timing`), and the
torch calls of one forward at H and H / 2 heads. Nothing here is trusted by the grader:
this package's `speed.judge` checks what comes back.
"""

from __future__ import annotations

import weakref
from dataclasses import asdict
from typing import Any

import torch
from torch import nn

from ...runner.inprocess import load_weights, vetted
from ...runner.protocol import LocalSubmission, ModuleRun
from ...runtime import one_thread
from ...speed.timing import (
    Forward,
    Timer,
    count_ops,
    interleaved_times,
    timer_for,
    timing_conditions,
)
from .baselines import FusedReference, LoopedReference
from .speed_config import config_for, speed_input, speed_params, spot_indices

Tensor = torch.Tensor
JOB = "autograder.assignments.mha.jobs:measure_speed"  # run by the runner beside the student's
# Run just before JOB, and not cross-checked with CPU time: construction and first calls.
PREPARE_JOB = "autograder.assignments.mha.jobs:prepare_speed"


def prepared(module: nn.Module, owner: str, params: dict[str, Tensor], device: str) -> Forward:
    """A contract module holding `params`, float32 on `device`, in eval mode, called the way
    the speed check calls it: causal self-attention, no weights returned."""
    with torch.no_grad():
        module.to(device=device, dtype=torch.float32)
        load_weights(module, owner, params)
    module.eval()
    return lambda x: module(x, attn_mask=None, is_causal=True, need_weights=False)[0]


# The student's modules that prepare_speed built for the next measure_speed, by submission.
# What prepare_speed leaves for the next timing run: its device, the two modules, their counts.
_BUILT: weakref.WeakKeyDictionary[Any, tuple[str, nn.Module, nn.Module, list]] = (
    weakref.WeakKeyDictionary())


def prepare_speed(sub: LocalSubmission, device: str) -> None:
    """Build the student's modules for the next timing run (H heads, and H / 2 for the count),
    call each once and count the calls of one forward of each, with weights of no seed: a slow
    constructor or first call, and what counting costs (torch.compile compiles the counting
    mode into a module it compiled), then cost nothing in the run whose CPU time the grader
    compares with the reported times. One forward of the timed shape also runs here under the
    forbidden-API watch, which is off while timing (it costs every torch call)."""
    cfg = config_for(device)
    params, x = speed_params(cfg, 0, device), speed_input(cfg, 0, 0).to(device)  # (B, T, E)
    name = "MultiHeadAttention.forward"
    built = [sub.construct("MultiHeadAttention", cfg.E, heads) for heads in (cfg.H, cfg.H // 2)]
    with one_thread():
        forwards = [sub.guard(name, lambda m=module: prepared(m, "MultiHeadAttention", params,
                                                              device), watch=False)
                    for module in built]
        for forward in forwards:
            with timing_conditions():
                sub.guard(name, lambda f=forward: f(x), watch=False)
        sub.run_module(ModuleRun("MultiHeadAttention", (cfg.E, cfg.H), forward_args=(x,),
                                 forward_kwargs={"is_causal": True, "need_weights": False},
                                 dtype=torch.float32))
        counts = _counted(sub, forwards, x)
    _BUILT[sub] = (device, *built, counts)


def _counted(sub: LocalSubmission, forwards: list[Forward], x: Tensor) -> list:
    """The calls of one forward of each (H heads, H / 2): which run once per head."""
    name = "MultiHeadAttention.forward"
    return [sub.guard(name, lambda f=f: count_ops(f, x), watch=False) for f in forwards]


def _built(sub: LocalSubmission, device: str, cfg: Any
           ) -> tuple[nn.Module, nn.Module, list | None]:
    """The modules prepare_speed built for this run and their counts, else new ones and None
    (no preparation ran, or the worker started again since)."""
    found = _BUILT.pop(sub, None)
    if found is not None and found[0] == device:
        return found[1], found[2], found[3]
    student, halved = (sub.construct("MultiHeadAttention", cfg.E, heads)
                       for heads in (cfg.H, cfg.H // 2))
    return student, halved, None


def measure_speed(sub: LocalSubmission, device: str, seed: int, timer: Timer | None = None
                  ) -> dict[str, Any]:
    """Time the student's fused module against the baselines, on the modules `prepare_speed`
    built, with the calls it counted (counted after the timing where it did not run)."""
    cfg = config_for(device)
    params = speed_params(cfg, seed, device)
    student, halved, counts = _built(sub, device, cfg)
    candidates = {
        "student": prepared(student, "MultiHeadAttention", params, device),
        "looped": LoopedReference(params, cfg.H),
        "fused": FusedReference(params, cfg.H),
    }

    def round_inputs(r: int) -> list[Tensor]:
        return [speed_input(cfg, seed, r * cfg.calls + c).to(device) for c in range(cfg.calls)]

    keep = frozenset(spot_indices(cfg, seed))

    def run() -> tuple[dict[str, list[float]], dict[str, dict[int, Any]]]:
        return interleaved_times(candidates, round_inputs, cfg.rounds, cfg.warmup,
                                 timer or timer_for(device), keep)

    name = "MultiHeadAttention.forward"
    with timing_conditions():
        times, kept = sub.guard(name, run, watch=False)
    outputs = {i: vetted(out, name) for i, out in kept["student"].items()}
    if counts is None:
        x = speed_input(cfg, seed, 0).to(device)  # (B, T, E)
        # On one thread as the timing: idle torch threads would spin on this process's CPU
        # time, which the grader compares with the reported times (speed.implausible).
        with one_thread():
            half = sub.guard(name, lambda: prepared(halved, "MultiHeadAttention", params,
                                                    device), watch=False)
            counts = _counted(sub, [candidates["student"], half], x)
    return {"config": asdict(cfg), "device": device, "seed": seed, "times": times,
            "outputs": {i: o.cpu() if isinstance(o, Tensor) else o for i, o in outputs.items()},
            "ops": {"heads": [cfg.H, cfg.H // 2], "counts": counts}}
