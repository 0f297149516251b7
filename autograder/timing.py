"""The speed check: the student's fused module against the kit's looped and fused baselines.

`measure_speed` runs where the student's code runs (the worker, or the notebook kernel): it
times three modules in interleaved rounds on the same fresh inputs and returns the raw
times and the student's outputs. `score_speed` runs in the grader: it regenerates the inputs
from the seed, spot-checks the outputs against nn.MultiheadAttention, and scores the ratios.
Why these configs and thresholds: docs/speed.md.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import torch

from .implementations import FusedReference, LoopedReference
from .submission import load_weights

Tensor = torch.Tensor


@dataclass(frozen=True)
class SpeedConfig:
    B: int
    T: int
    E: int
    H: int
    rounds: int  # interleaved rounds, each on fresh inputs
    calls: int  # forward calls timed together in one measurement
    warmup: int = 3


# CPU: small and overhead-bound, where the per-head Python loop is what costs (docs/speed.md).
# CUDA: many heads, so the looped version pays one kernel launch per head per op.
CONFIGS = {
    "cpu": SpeedConfig(B=2, T=32, E=128, H=16, rounds=31, calls=8),
    "cuda": SpeedConfig(B=8, T=128, E=512, H=32, rounds=31, calls=10),
}

FULL_SPEEDUP = 2.0  # full points from here (correct styles measured 3.0x-4.3x)
ZERO_SPEEDUP = 1.25  # nothing at or below this (a loop in disguise measured 0.9x-1.1x)
MAX_REF_RATIO = 2.0  # and full points need no more than 2x the kit's fused time
SPOT_CHECKS = 3  # rounds whose outputs are compared with nn.MultiheadAttention


def config_for(device: str) -> SpeedConfig:
    return CONFIGS["cuda" if device.startswith("cuda") else "cpu"]


def speed_inputs(cfg: SpeedConfig, seed: int, device: str) -> tuple[dict, list[Tensor]]:
    """The weights (fused naming, biases random) and one input per round, from a seed."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int, scale: float = 1.0) -> Tensor:
        return (torch.randn(*shape, generator=gen) * scale).to(device)

    params = {f"{n}.weight": randn(cfg.E, cfg.E, scale=cfg.E ** -0.5)
              for n in ("q_proj", "k_proj", "v_proj", "out_proj")}
    params.update({f"{n}.bias": randn(cfg.E) for n in ("q_proj", "k_proj", "v_proj",
                                                      "out_proj")})
    inputs = [randn(cfg.B, cfg.T, cfg.E) for _ in range(cfg.rounds)]
    return params, inputs


def _timer(device: str) -> Callable[[Callable[[], Any], int], float]:
    """Seconds per call of fn, over `calls` calls; CUDA events on a GPU."""
    if device.startswith("cuda"):
        def cuda_time(fn: Callable[[], Any], calls: int) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3 / calls
        return cuda_time

    def cpu_time(fn: Callable[[], Any], calls: int) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - start) / calls
    return cpu_time


def interleaved_times(
    candidates: dict[str, Callable[[Tensor], Any]],
    inputs: list[Tensor],
    calls: int,
    warmup: int,
    timer: Callable[[Callable[[], Any], int], float],
) -> dict[str, list[float]]:
    """Per-call times of each candidate, one per round; the order rotates every round."""
    names = list(candidates)
    for name in names:
        for _ in range(warmup):
            candidates[name](inputs[0])
    times: dict[str, list[float]] = {name: [] for name in names}
    for r, x in enumerate(inputs):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            times[name].append(timer(functools.partial(candidates[name], x), calls))
    return times


def measure_speed(sub: Any, device: str, seed: int) -> dict[str, Any]:
    """Time the student's fused module against the baselines (runs beside the student's code)."""
    cfg = config_for(device)
    params, inputs = speed_inputs(cfg, seed, device)
    student = sub.construct("MultiHeadAttention", cfg.E, cfg.H)
    with torch.no_grad():
        student.to(device=device, dtype=torch.float32)
        load_weights(student, "MultiHeadAttention", params)
    student.eval()
    latest: dict[int, Any] = {}  # id(input) -> the student's latest output on it

    def run_student(x: Tensor) -> Any:
        out = student(x, attn_mask=None, is_causal=True, need_weights=False)[0]
        latest[id(x)] = out
        return out

    candidates = {
        "student": lambda x: sub.guard("MultiHeadAttention.forward", lambda: run_student(x)),
        "looped": LoopedReference(params, cfg.H),
        "fused": FusedReference(params, cfg.H),
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            times = interleaved_times(candidates, inputs, cfg.calls, cfg.warmup, _timer(device))
    finally:
        torch.set_num_threads(threads)
    outputs = [latest.get(id(x)) for x in inputs]
    return {"config": asdict(cfg), "device": device, "seed": seed, "times": times,
            "outputs": [o.detach() if isinstance(o, Tensor) else None for o in outputs]}


def speed_fraction(speedup: float, ref_ratio: float) -> float:
    """Points earned: linear in the speedup between ZERO_SPEEDUP and FULL_SPEEDUP."""
    by_speedup = (speedup - ZERO_SPEEDUP) / (FULL_SPEEDUP - ZERO_SPEEDUP)
    by_reference = (2 * MAX_REF_RATIO - ref_ratio) / MAX_REF_RATIO
    return round(max(0.0, min(1.0, by_speedup, by_reference)), 2)


def spot_check(measurement: dict[str, Any], rounds: list[int]) -> str | None:
    """Compare the student's outputs of some rounds with nn.MultiheadAttention."""
    from .oracle import causal_mask, multi_head_attention, torch_mha

    cfg = SpeedConfig(**measurement["config"])
    params, inputs = speed_inputs(cfg, measurement["seed"], "cpu")
    mha = torch_mha({k: v.double() for k, v in params.items()}, cfg.E, cfg.H)
    outputs = measurement["outputs"]
    if len(outputs) != cfg.rounds:
        return f"expected one output per timing round, got {len(outputs)}"
    for r in rounds:
        x = inputs[r].double()
        expected = multi_head_attention(mha, x, x, x, causal_mask(cfg.T))[0]
        got = outputs[r]
        if not isinstance(got, Tensor) or got.shape != expected.shape or not torch.allclose(
            got.detach().double().cpu(), expected, rtol=1e-3, atol=1e-4
        ):
            return f"the output of timing round {r} does not match nn.MultiheadAttention"
    return None


def score_speed(measurement: dict[str, Any], rounds: list[int]) -> tuple[float, str]:
    """(fraction of the points, message) from a measurement made by `measure_speed`."""
    problem = spot_check(measurement, rounds)
    if problem:
        return 0.0, f"speed not scored: {problem} (is forward caching or skipping work?)"
    med = {name: statistics.median(ts) for name, ts in measurement["times"].items()}
    speedup = med["looped"] / med["student"]
    ref_ratio = med["student"] / med["fused"]
    fraction = speed_fraction(speedup, ref_ratio)
    message = (
        f"your fused: {med['student'] * 1e3:.2f} ms, looped baseline: {med['looped'] * 1e3:.2f}"
        f" ms -> {speedup:.1f}x faster (needed >= {FULL_SPEEDUP:g}x; kit's fused: "
        f"{med['fused'] * 1e3:.2f} ms) on {measurement['device']}"
    )
    if fraction < 1 and ref_ratio > MAX_REF_RATIO and speedup >= FULL_SPEEDUP:
        message += f"; {ref_ratio:.1f}x slower than the kit's fused version"
    if fraction <= 0:
        message += ": no faster than looping over heads. Do all heads in one batched matmul"
    return fraction, message


def total_measured(measurement: dict[str, Any]) -> float:
    """Seconds the reported times add up to, for the sanity check against wall time."""
    calls = measurement["config"]["calls"]
    return math.fsum(sum(ts) for ts in measurement["times"].values()) * calls
