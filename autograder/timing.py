"""The speed check: the student's fused module against the kit's looped and fused baselines.

`measure_speed` runs where the student's code runs (the worker, or the notebook kernel): it
times three modules in interleaved rounds on the same fresh inputs and returns the raw
times and a few of the student's outputs. `score_speed` runs in the grader: it regenerates
those inputs from the seed, spot-checks the outputs against nn.MultiheadAttention, and
scores the student against both baselines. Why these configs and thresholds: docs/speed.md.
"""

from __future__ import annotations

import contextlib
import gc
import math
import random
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, Callable

import torch
from torch import nn

from .implementations import FusedReference, LoopedReference
from .submission import _plain, load_weights

Tensor = torch.Tensor
Forward = Callable[[Tensor], Any]
Timer = Callable[[Forward, list[Tensor]], tuple[float, list[Any]]]


@dataclass(frozen=True)
class SpeedConfig:
    B: int
    T: int
    E: int
    H: int
    rounds: int  # interleaved rounds; the median is taken over them
    calls: int  # forward calls per candidate per round, each on its own fresh input
    warmup: int = 3


# CPU: small and overhead-bound, so the per-head Python loop is what costs.
# CUDA: many heads, so the looped version pays one kernel launch per head per op.
CONFIGS = {
    "cpu": SpeedConfig(B=2, T=16, E=128, H=32, rounds=31, calls=8),
    "cuda": SpeedConfig(B=8, T=128, E=512, H=32, rounds=31, calls=10),
}

FULL_SPEEDUP = 3.5  # full points from this speedup over the looped baseline ...
MAX_REF_RATIO = 2.0  # ... when also within this factor of the kit's fused time
ZERO_SPEEDUP = 2.5  # and no points at or below this speedup
SPOT_CHECKS = 8  # timed calls whose outputs the grader compares with nn.MultiheadAttention
SPOT_TOLERANCE = {"rtol": 1e-2, "atol": 1e-2}  # catches stale or skipped work, not rounding


def config_for(device: str) -> SpeedConfig:
    return CONFIGS["cuda" if device.startswith("cuda") else "cpu"]


# --------------------------------------------------------------------------- inputs


def _generator(seed: int, index: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 100_003 + index)


def speed_params(cfg: SpeedConfig, seed: int, device: str = "cpu") -> dict[str, Tensor]:
    """The weights in the fused naming, biases random, float32 on `device`."""
    gen = _generator(seed, -1)
    params = {}
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        params[f"{name}.weight"] = torch.randn(cfg.E, cfg.E, generator=gen) / math.sqrt(cfg.E)
        params[f"{name}.bias"] = torch.randn(cfg.E, generator=gen)
    return {k: v.to(device) for k, v in params.items()}


def speed_input(cfg: SpeedConfig, seed: int, index: int) -> Tensor:
    """Input number `index` (round r, call c is index r * calls + c), on the CPU."""
    return torch.randn(cfg.B, cfg.T, cfg.E, generator=_generator(seed, index))  # (B, T, E)


def spot_indices(cfg: SpeedConfig, seed: int) -> list[int]:
    """Which timed calls are checked; both sides derive them from the seed."""
    return sorted(random.Random(seed).sample(range(cfg.rounds * cfg.calls), SPOT_CHECKS))


# --------------------------------------------------------------------------- timing


# The CPU time of this process, not the wall clock: time another process takes from us (a
# busy core, a container's CPU quota) is not counted, so short and long runs are not hit
# unequally (docs/speed.md). Windows counts CPU time only per 15.6 ms tick: wall clock there.
CPU_CLOCK = time.perf_counter if sys.platform == "win32" else time.process_time


def cpu_timer(fn: Forward, xs: list[Tensor]) -> tuple[float, list[Any]]:
    """CPU seconds per call of fn over the inputs xs; and the outputs."""
    start = CPU_CLOCK()
    outs = [fn(x) for x in xs]
    return (CPU_CLOCK() - start) / len(xs), outs


def cuda_timer(fn: Forward, xs: list[Tensor]) -> tuple[float, list[Any]]:
    """Seconds per call of fn over the inputs xs, by CUDA events; and the outputs."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    outs = [fn(x) for x in xs]
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / len(xs), outs


def timer_for(device: str) -> Timer:
    return cuda_timer if device.startswith("cuda") else cpu_timer


def interleaved_times(
    candidates: dict[str, Forward],
    round_inputs: Callable[[int], list[Tensor]],
    rounds: int,
    warmup: int,
    timer: Timer,
    keep: frozenset[int] = frozenset(),
) -> tuple[dict[str, list[float]], dict[str, dict[int, Any]]]:
    """Per-call times of each candidate, one per round, and their outputs at the `keep` indices.

    Every candidate sees the same fresh inputs in a round; who goes first rotates each round.
    """
    names = list(candidates)
    first = round_inputs(0)
    for name in names:
        for _ in range(warmup):
            candidates[name](first[0])
    times: dict[str, list[float]] = {name: [] for name in names}
    kept: dict[str, dict[int, Any]] = {name: {} for name in names}
    for r in range(rounds):
        xs = round_inputs(r)
        k = r % len(names)
        for name in names[k:] + names[:k]:
            seconds, outs = timer(candidates[name], xs)
            times[name].append(seconds)
            for c, out in enumerate(outs):
                if r * len(xs) + c in keep:
                    kept[name][r * len(xs) + c] = out
    return times, kept


def medians(times: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(ts) for name, ts in times.items()}


def paired_ratio(slow: list[float], fast: list[float]) -> float:
    """The median over rounds of slow / fast: candidates timed side by side in one round share
    that round's machine load, so the ratio holds even when the load drifts between rounds."""
    return statistics.median(s / f for s, f in zip(slow, fast))


def speed_ratios(times: dict[str, list[float]]) -> tuple[float, float]:
    """(the student's speedup over looped, the student's time over the kit's fused time)."""
    return (paired_ratio(times["looped"], times["student"]),
            paired_ratio(times["student"], times["fused"]))


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One torch thread: a fixed count for timings, and for tiny tensors, where waking a pool
    of threads for each op costs more than the op itself."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def steady() -> Iterator[None]:
    """The conditions of every timing: one thread, no garbage collection pauses, no autograd."""
    gc.disable()
    try:
        with one_thread(), torch.no_grad():
            yield
    finally:
        gc.enable()


def prepared(module: nn.Module, owner: str, params: dict[str, Tensor], device: str) -> Forward:
    """A contract module holding `params`, float32 on `device`, in eval mode, called the way
    the speed check calls it: causal self-attention, no weights returned."""
    with torch.no_grad():
        module.to(device=device, dtype=torch.float32)
        load_weights(module, owner, params)
    module.eval()
    return lambda x: module(x, attn_mask=None, is_causal=True, need_weights=False)[0]


def measure_speed(sub: Any, device: str, seed: int, timer: Timer | None = None) -> dict[str, Any]:
    """Time the student's fused module against the baselines (runs beside the student's code)."""
    cfg = config_for(device)
    params = speed_params(cfg, seed, device)
    student = sub.construct("MultiHeadAttention", cfg.E, cfg.H)
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
    with steady():
        times, kept = sub.guard(name, run)
    outputs = {i: _plain(out, name) for i, out in kept["student"].items()}
    return {"config": asdict(cfg), "device": device, "seed": seed, "times": times,
            "outputs": {i: o.cpu() if isinstance(o, Tensor) else o for i, o in outputs.items()}}


# --------------------------------------------------------------------------- scoring


def speed_fraction(speedup: float, ref_ratio: float) -> float:
    """The fraction of the points: linear in the speedup over looped between ZERO_SPEEDUP and
    FULL_SPEEDUP, and capped by how far the time is beyond MAX_REF_RATIO x the kit's fused."""
    by_speedup = (speedup - ZERO_SPEEDUP) / (FULL_SPEEDUP - ZERO_SPEEDUP)
    by_reference = (2 * MAX_REF_RATIO - ref_ratio) / MAX_REF_RATIO
    if speedup <= ZERO_SPEEDUP:
        return 0.0
    return round(max(0.0, min(1.0, by_speedup, by_reference)), 2)


def malformed(measurement: Any, cfg: SpeedConfig, seed: int) -> str | None:
    """What is wrong with a measurement's form, or None: the grader trusts none of it."""
    if not isinstance(measurement, dict):
        return "the timing run sent no measurement"
    if measurement.get("config") != asdict(cfg) or measurement.get("seed") != seed:
        return "the timing run used another config or seed than the grader asked for"
    times = measurement.get("times")
    if not isinstance(times, dict) or set(times) != {"student", "looped", "fused"} or any(
        not isinstance(ts, list) or len(ts) != cfg.rounds
        or not all(isinstance(t, float) and 0 < t < math.inf for t in ts)
        for ts in times.values()
    ):
        return "the timing run sent malformed times"
    if not isinstance(measurement.get("outputs"), dict):
        return "the timing run sent no outputs"
    return None


def spot_check(outputs: dict[int, Any], cfg: SpeedConfig, seed: int) -> str | None:
    """Compare the student's outputs of the seed's spot-checked calls with nn.MultiheadAttention."""
    from .oracle import causal_mask, multi_head_attention, torch_mha

    params = {k: v.double() for k, v in speed_params(cfg, seed).items()}
    mha = torch_mha(params, cfg.E, cfg.H)
    for i in spot_indices(cfg, seed):
        x = speed_input(cfg, seed, i).double()
        expected = multi_head_attention(mha, x, x, x, causal_mask(cfg.T))[0]
        got = outputs.get(i)
        if not isinstance(got, Tensor) or got.shape != expected.shape or not torch.allclose(
            got.double(), expected, **SPOT_TOLERANCE
        ):
            r, c = divmod(i, cfg.calls)
            return f"the output of call {c + 1} in timing round {r + 1} is not the right answer"
    return None


def speed_message(med: dict[str, float], speedup: float, device: str) -> str:
    return (
        f"your fused: {med['student'] * 1e3:.2f} ms, looped baseline: {med['looped'] * 1e3:.2f}"
        f" ms → {speedup:.1f}× faster (needed ≥ {FULL_SPEEDUP:g}×; the kit's fused: "
        f"{med['fused'] * 1e3:.2f} ms, on {device})"
    )


def score_speed(measurement: Any, device: str, seed: int) -> tuple[float, str]:
    """(fraction of the points, message) from what `measure_speed` sent for this device and seed."""
    cfg = config_for(device)
    problem = malformed(measurement, cfg, seed)
    if problem:
        return 0.0, f"speed not scored: {problem}"
    problem = spot_check(measurement["outputs"], cfg, seed)
    if problem:
        return 0.0, f"speed not scored: {problem} (is forward caching or skipping work?)"
    speedup, ref_ratio = speed_ratios(measurement["times"])
    fraction = speed_fraction(speedup, ref_ratio)
    message = speed_message(medians(measurement["times"]), speedup, device)
    if fraction <= 0:
        message += ". No faster than looping over heads: do all heads in one batched matmul"
    elif ref_ratio > MAX_REF_RATIO:
        message += f". {ref_ratio:.1f}× the kit's fused time: look for per-head Python work"
    return fraction, message


def total_measured(measurement: dict[str, Any]) -> float:
    """Seconds the reported times add up to, for the sanity check against wall time."""
    calls = measurement["config"]["calls"]
    return math.fsum(sum(ts) for ts in measurement["times"].values()) * calls
