"""The speed check: gated on the fused module's values, measured beside the student's code
(`speed.measure`, run as a job by the runner), scored here (`speed.score`), and checked
against what the grader saw from outside: wall time and the worker's CPU time.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from ..checks.core import CheckFailed, Context
from ..messages import msg
from ..runner.inprocess import plain
from ..runner.protocol import Submission
from . import measure
from .score import score_speed, total_measured

# On CPU the reported times are the worker's CPU time in the timed calls. The grader reads the
# worker's whole CPU time from outside; honest runs report 0.76-0.96 of it, under load too,
# a clock rewound in forward 0.17-0.39 (docs/trusted-grading.md).
MIN_TIMED_SHARE = 0.6


@dataclass
class TimedRun:
    """The student's timing run, with what the grader saw of it from outside."""

    measurement: Any  # what the run reported (see measure.measure_speed); trusted in nothing
    wall: float  # seconds the grader waited for it
    cpu: float | None  # CPU seconds the student's process used meanwhile, where readable


def timed_run(sub: Submission, device: str, seed: int) -> TimedRun:
    sub.ensure_loaded()  # a worker restarted after an earlier check: not part of the timing
    cpu_before = sub.cpu_seconds()
    started = time.perf_counter()
    measurement = sub.run_job(measure.JOB, msg("worker.timing", name="MultiHeadAttention"),
                              device=device, seed=seed)
    wall = time.perf_counter() - started
    cpu_after = sub.cpu_seconds()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    if isinstance(measurement, dict) and isinstance(measurement.get("outputs"), dict):
        outputs = measurement["outputs"].items()
        measurement["outputs"] = {i: plain(o, "MultiHeadAttention.forward") for i, o in outputs}
    return TimedRun(measurement, wall, cpu)


def check_speed(sub: Submission, ctx: Context) -> float:
    """Run after fused_mha has passed (the registry's gate): time, score, sanity-check."""
    seed = secrets.randbelow(2**31)
    run = timed_run(sub, ctx.device, seed)
    fraction, message = score_speed(run.measurement, ctx.device, seed)
    if fraction <= 0:
        raise CheckFailed(message)
    reported = total_measured(run.measurement)
    if reported > run.wall * 1.05:
        raise CheckFailed(msg("speed.not_scored", reason=msg("speed.over_wall",
                                                             wall=float(run.wall))))
    if ctx.device == "cpu" and run.cpu is not None and reported < MIN_TIMED_SHARE * run.cpu:
        raise CheckFailed(msg("speed.not_scored", reason=msg(
            "speed.under_cpu", reported=float(reported), cpu=float(run.cpu))))
    ctx.notes = message
    return fraction
