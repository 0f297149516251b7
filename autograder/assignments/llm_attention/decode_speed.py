"""The decoding speed check: N tokens decoded one at a time through the student's KVCache,
against the same module recomputing the whole prefix for each token. A cache does O(T) work
per token, recomputing O(T^2): a correct cache is many times faster, a module that keeps its
cache but recomputes keys and values (or everything) is not (docs/speed.md, the dead band).

Measured beside the student's code (`jobs.time_decoding`), on the CPU whatever device grades
(`decode_config`), judged here: the outputs of the cached decoding are spot-checked against
the oracle, the reported times against what the grader saw from outside (the wall clock, and
the worker's CPU time), as in `speed.check`.
"""

from __future__ import annotations

import math
import secrets
import statistics
from dataclasses import dataclass, field
from typing import Any

import torch

from ...checks.core import CheckFailed, Context
from ...messages import Message, msg
from ...runner.inprocess import vetted
from ...speed.check import TimedRun, implausible_times, runs_until_decided, timed_job
from ...speed.score import MAX_RUNS, deciding_run, how_measured, near_threshold, paired_ratio
from . import oracle
from .decode_config import (
    SPOT_TOLERANCE,
    DecodeConfig,
    decode_config,
    decode_input,
    decode_params,
)
from .jobs import MODULE, PREPARE_TIMING_JOB, TIMING_JOB

Tensor = torch.Tensor
DECODE_SPEED_CHECK = "llm_decode_speed"
DEVICE = "cpu"  # where it times, whatever device grades (decode_config)
# All the points from this speedup of the cache over recomputing, else none: near the
# geometric middle of the dead band measured on the graded config, between 4.3x (a module
# that recomputes every token's keys and values) and 15.1x (the slowest correct cache), 100
# checks per style alone and beside a busy core (docs/speed.md,
# scripts/decode_speed_reliability.py).
SPEEDUP_NEEDED = 8.0
ROPE_BASE = 10000.0  # the module's default, which the timing builds it with


@dataclass(frozen=True)
class Run:
    """One timing run, judged: why it cannot be scored, or its speedup and times per token."""

    problem: Message | None = None
    speedup: float = math.nan
    per_token: dict[str, float] = field(default_factory=dict)  # median seconds, by way


def _malformed(report: Any, rounds: int) -> bool:
    if not isinstance(report, dict) or not isinstance(report.get("times"), dict):
        return True
    times = report["times"]
    return (set(times) != {"cached", "recomputed"} or not all(
        isinstance(ts, list) and len(ts) == rounds
        and all(type(t) is float and math.isfinite(t) and t > 0 for t in ts)
        for ts in times.values()) or not isinstance(report.get("outputs"), list))


def decoded(cfg: DecodeConfig, seed: int) -> Tensor:
    """The oracle's outputs for the N decoded tokens (B, N, E), float64: what a cache gives."""
    params = {k: v.double() for k, v in decode_params(cfg, seed).items()}
    return oracle.gqa(params, decode_input(cfg, seed).double(), cfg.H, cfg.Hkv,
                      ROPE_BASE)[:, cfg.P:]


def judge(run: TimedRun, seed: int) -> Run:
    """What one run of `jobs.time_decoding` shows, checked against what the grader saw."""
    cfg = decode_config()
    report = run.measurement
    if _malformed(report, cfg.rounds):
        return Run(msg("speed.not_scored", reason=msg("llm.speed_malformed")))
    outputs = [vetted(o, MODULE) for o in report["outputs"]]
    want = decoded(cfg, seed)  # (B, N, E)
    if (len(outputs) != cfg.N or any(type(o) is not Tensor or o.shape != (cfg.B, 1, cfg.E)
                                     for o in outputs)
            or not torch.allclose(torch.cat(outputs, 1).double(), want, **SPOT_TOLERANCE)):
        return Run(msg("speed.not_scored_spot", reason=msg("llm.speed_spot", name=MODULE)))
    times = report["times"]
    problem = implausible_times(math.fsum(sum(ts) for ts in times.values()), run, DEVICE)
    if problem is not None:
        return Run(problem)
    return Run(None, paired_ratio(times["recomputed"], times["cached"]),
               {name: statistics.median(ts) / cfg.N for name, ts in times.items()})


def timed_run(sub, seed: int) -> Run:
    return judge(timed_job(sub, msg("llm.timing_decoding", name=MODULE), DEVICE,
                           PREPARE_TIMING_JOB, TIMING_JOB, seed=seed), seed)


def decide(runs: list[Run]) -> tuple[float, Message]:
    problem, median = deciding_run(runs)
    if problem is not None:
        return 0.0, problem
    cfg = decode_config()
    measured = msg("llm.speed_measured", N=cfg.N, P=cfg.P, speedup=float(median.speedup),
                   cached=median.per_token["cached"] * 1e3,
                   recomputed=median.per_token["recomputed"] * 1e3, device=DEVICE,
                   **how_measured(len(runs)))
    if median.speedup >= SPEEDUP_NEEDED:
        return 1.0, msg("llm.speed_passed", measured=measured, needed=SPEEDUP_NEEDED)
    return 0.0, msg("llm.speed_too_slow", measured=measured, needed=SPEEDUP_NEEDED)


def check_decode_speed(sub, ctx: Context) -> float:
    """Run once llm_kv_cache has passed: time, judge; again while the result is near the
    threshold (up to MAX_RUNS runs within the speed checks' budget); decide."""

    def undecided(runs: list[Run]) -> bool:
        first = runs[0]
        return (len(runs) < MAX_RUNS and first.problem is None
                and near_threshold(first.speedup, SPEEDUP_NEEDED))

    fraction, message = decide(runs_until_decided(
        lambda: timed_run(sub, secrets.randbelow(2**31)), undecided))
    if fraction <= 0:
        raise CheckFailed(message)
    ctx.notes = message
    return fraction
