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
from .speed_config import config_for, output_digest, speed_input, speed_params

Tensor = torch.Tensor
JOB = "autograder.assignments.mha.jobs:measure_speed"  # run by the runner beside the student's
# Run just before JOB, and not cross-checked with CPU time: construction and first calls.
PREPARE_JOB = "autograder.assignments.mha.jobs:prepare_speed"
# Run after JOB: the outputs the grader drew, once the run has committed to all of them.
REVEAL_JOB = "autograder.assignments.mha.jobs:reveal_outputs"
NAME = "MultiHeadAttention.forward"  # what the student's code is called in messages


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


def measure_speed(sub: LocalSubmission, device: str, seed: int, timer: Timer | None = None
                  ) -> dict[str, Any]:
    """Time the student's fused module against the baselines, on the modules `prepare_speed`
    built, with the calls it counted (counted after the timing where it did not run). Every
    timed output of the student's is kept for `reveal_outputs`, and the run commits to them by
    their digests. The timed calls run without the forbidden-API watch, which made a correct
    module's calls 3.3 times as slow (docs/speed.md); the counted ones run under it."""
    cfg = config_for(device)
    params = speed_params(cfg, seed, device)
    student, halved, counted = _built(sub, device, cfg)
    candidates = {
        "student": prepared(student, "MultiHeadAttention", params, device),
        "looped": LoopedReference(params, cfg.H),
        "fused": FusedReference(params, cfg.H),
    }

    def round_inputs(r: int) -> list[Tensor]:
        return [speed_input(cfg, seed, r * cfg.calls + c).to(device) for c in range(cfg.calls)]

    def run() -> tuple[dict[str, list[float]], dict[str, list[Any]]]:
        return interleaved_times(candidates, round_inputs, cfg.rounds, cfg.warmup,
                                 timer or timer_for(device), kept=("student",))

    with timing_conditions():
        times, outputs = sub.guard(NAME, run, watch=False)
    kept = _KEPT[sub] = [vetted(out, NAME) for out in outputs["student"]]
    if counted is None:
        x = speed_input(cfg, seed, 0).to(device)  # (B, T, E)
        # On one thread as the timing: idle torch threads would spin on this process's CPU
        # time, which the grader compares with the reported times (speed.implausible).
        with one_thread():
            half = sub.guard(NAME, lambda: prepared(halved, "MultiHeadAttention", params,
                                                    device), watch=False)
            counted = _counted(sub, [candidates["student"], half], x)
    return {"config": asdict(cfg), "device": device, "seed": seed, "times": times,
            "digests": [output_digest(out) for out in kept],
            "ops": {"heads": [cfg.H, cfg.H // 2], "counts": [c for c, _ in counted]},
            "counted": [_to_cpu(vetted(out, NAME)) for _, out in counted]}


# Every timed output of the student's last timing run, by submission, until the grader asks.
_KEPT: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def reveal_outputs(sub: LocalSubmission, indices: list[int]) -> dict[int, Any]:
    """The timed outputs at `indices` of the last timing run (none if no run is kept), which
    the grader compares with the digests the run reported, then with nn.MultiheadAttention."""
    outputs = _KEPT.pop(sub, [])
    return {i: _to_cpu(outputs[i]) for i in indices if type(i) is int and 0 <= i < len(outputs)}


def _to_cpu(value: Any) -> Any:
    return value.cpu() if isinstance(value, Tensor) else value
