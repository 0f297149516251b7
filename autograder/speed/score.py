"""Scoring a timing run in the grader: its form, a spot check of its outputs against
nn.MultiheadAttention, and the points from the paired ratios. Thresholds: docs/speed.md.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict
from typing import Any

import torch

from .. import oracle
from ..messages import Message, msg
from .config import SpeedConfig, config_for, speed_input, speed_params, spot_indices

Tensor = torch.Tensor

FULL_SPEEDUP = 3.5  # full points from this speedup over the looped baseline ...
MAX_REF_RATIO = 2.0  # ... when also within this factor of the kit's fused time
ZERO_SPEEDUP = 2.5  # and no points at or below this speedup
SPOT_TOLERANCE = {"rtol": 1e-2, "atol": 1e-2}  # catches stale or skipped work, not rounding


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


# --------------------------------------------------------------------------- scoring


def speed_fraction(speedup: float, ref_ratio: float) -> float:
    """The fraction of the points: linear in the speedup over looped between ZERO_SPEEDUP and
    FULL_SPEEDUP, and capped by how far the time is beyond MAX_REF_RATIO x the kit's fused."""
    by_speedup = (speedup - ZERO_SPEEDUP) / (FULL_SPEEDUP - ZERO_SPEEDUP)
    by_reference = (2 * MAX_REF_RATIO - ref_ratio) / MAX_REF_RATIO
    if speedup <= ZERO_SPEEDUP:
        return 0.0
    return round(max(0.0, min(1.0, by_speedup, by_reference)), 2)


def malformed(measurement: Any, cfg: SpeedConfig, seed: int) -> Message | None:
    """What is wrong with a measurement's form, or None: the grader trusts none of it."""
    if not isinstance(measurement, dict):
        return msg("speed.no_measurement")
    if measurement.get("config") != asdict(cfg) or measurement.get("seed") != seed:
        return msg("speed.other_config")
    times = measurement.get("times")
    if not isinstance(times, dict) or set(times) != {"student", "looped", "fused"} or any(
        not isinstance(ts, list) or len(ts) != cfg.rounds
        or not all(isinstance(t, float) and 0 < t < math.inf for t in ts)
        for ts in times.values()
    ):
        return msg("speed.malformed_times")
    if not isinstance(measurement.get("outputs"), dict):
        return msg("speed.no_outputs")
    return None


def spot_check(outputs: dict[int, Any], cfg: SpeedConfig, seed: int) -> Message | None:
    """Compare the student's outputs of the seed's spot-checked calls with nn.MultiheadAttention."""
    params = {k: v.double() for k, v in speed_params(cfg, seed).items()}
    mha = oracle.torch_mha(params, cfg.E, cfg.H)
    for i in spot_indices(cfg, seed):
        x = speed_input(cfg, seed, i).double()
        expected = oracle.multi_head_attention(mha, x, x, x, oracle.causal_mask(cfg.T))[0]
        got = outputs.get(i)
        if not isinstance(got, Tensor) or got.shape != expected.shape or not torch.allclose(
            got.double(), expected, **SPOT_TOLERANCE
        ):
            r, c = divmod(i, cfg.calls)
            return msg("speed.wrong_output", call=c + 1, round=r + 1)
    return None


def speed_message(med: dict[str, float], speedup: float, device: str) -> Message:
    return msg("speed.line", student=med["student"] * 1e3, looped=med["looped"] * 1e3,
               speedup=float(speedup), needed=FULL_SPEEDUP, fused=med["fused"] * 1e3,
               device=device)


def score_speed(measurement: Any, device: str, seed: int) -> tuple[float, Message]:
    """(fraction of the points, message) from what `measure_speed` sent for this device and seed."""
    cfg = config_for(device)
    problem = malformed(measurement, cfg, seed)
    if problem:
        return 0.0, msg("speed.not_scored", reason=problem)
    problem = spot_check(measurement["outputs"], cfg, seed)
    if problem:
        return 0.0, msg("speed.not_scored_spot", reason=problem)
    speedup, ref_ratio = speed_ratios(measurement["times"])
    fraction = speed_fraction(speedup, ref_ratio)
    message = speed_message(medians(measurement["times"]), speedup, device)
    if fraction <= 0:
        message = msg("speed.no_faster", line=message)
    elif ref_ratio > MAX_REF_RATIO:
        message = msg("speed.far_from_kit", line=message, ratio=float(ref_ratio))
    return fraction, message


def total_measured(measurement: dict[str, Any]) -> float:
    """Seconds the reported times add up to, for the sanity check against wall time."""
    calls = measurement["config"]["calls"]
    return math.fsum(sum(ts) for ts in measurement["times"].values()) * calls
