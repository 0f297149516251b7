"""The speed check of the Triton kernels, gated on the backward's values: forward and backward
of the student's `flash_attention_triton` timed on a GPU against SDPA and the kit's
FlashAttention in PyTorch (`jobs.measure_speed`, beside the student's code), judged here: the
run's form, a spot check of its outputs and gradients against PyTorch, what the grader saw
from outside, and the points from the paired ratio to SDPA's time: all or nothing, measured
again near the threshold (`speed.verdict`).

Not scored, and no points lost, where the kernels run in Triton's interpreter (its time says
nothing of a GPU's) and, on a GPU, until a calibration on one sets SDPA_SHARE_NEEDED
(`styleset`, scripts/triton_speed_calibration.py, docs/speed.md).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ...checks.core import CheckFailed, Context
from ...messages import Message, msg
from ...runner.inprocess import vetted
from ...runner.protocol import Submission
from ...speed.verdict import (
    deciding_run,
    how_measured,
    implausible_times,
    malformed_times,
    medians,
    paired_ratio,
    runs_until_decided,
    timed_job,
    total_measured,
)
from . import jobs, oracle
from .backward import AUTOGRAD
from .speed_config import SPOT_HEADS, SpeedConfig, speed_config, speed_inputs, spot_indices

Tensor = torch.Tensor
SPEED_CHECK = "triton_speed"
CANDIDATES = ("student", "sdpa", "pytorch")
# All the points from this share of SDPA's speed (SDPA's time over the student's, forward and
# backward), else none. None until a calibration on a GPU sets it: the check then says why it
# was not scored, and costs nothing (docs/speed.md).
SDPA_SHARE_NEEDED: float | None = None
NEAR = 1.2  # a first result within this factor of the threshold is measured again ...
MAX_RUNS = 3  # ... up to this many runs in all, and the median decides
# float16 against a float64 oracle at T = 1024: catches stale or skipped work, not rounding.
SPOT_TOLERANCE = {"rtol": 5e-2, "atol": 5e-2}


@dataclass(frozen=True)
class Verdict:
    """One timing run, judged: why it cannot be scored, or the student's share of SDPA's speed
    (named `speedup` for `speed.verdict.deciding_run`) and the medians per call."""

    problem: Message | None = None
    speedup: float = math.nan  # SDPA's time over the student's, paired median over rounds
    medians: dict[str, float] = field(default_factory=dict)


def malformed(measurement: Any, cfg: SpeedConfig, seed: int) -> Message | None:
    """What is wrong with a measurement's form, or None: the grader trusts none of it."""
    problem = malformed_times(measurement, asdict(cfg), seed, set(CANDIDATES), cfg.rounds)
    if problem:
        return problem
    if not isinstance(measurement.get("outputs"), dict):
        return msg("speed.no_outputs")
    return None


def spot_check(outputs: dict[int, Any], cfg: SpeedConfig, seed: int) -> Message | None:
    """The seed's spot-checked calls: output and gradients of batch element 0's first heads
    against autograd through softmax(q kᵀ / sqrt(D)) v in float64."""
    for i in spot_indices(cfg, seed):
        q, k, v, d_out = (t[:1, :SPOT_HEADS].double() for t in speed_inputs(cfg, seed, i))
        leaves = [t.requires_grad_() for t in (q, k, v)]
        out = oracle.attention(*leaves, True)
        out.backward(d_out)
        want = [out.detach(), *(t.grad for t in leaves)]
        got = outputs.get(i)
        if not isinstance(got, list) or len(got) != len(want) or not all(
                type(g) is Tensor and g.shape == w.shape
                and torch.allclose(g.double(), w, **SPOT_TOLERANCE) for g, w in zip(got, want)):
            r, c = divmod(i, cfg.calls)
            return msg("speed.wrong_output", call=c + 1, round=r + 1)
    return None


def judge(measurement: Any, seed: int) -> Verdict:
    """What one run of `jobs.measure_speed` for this seed shows."""
    cfg = speed_config()
    problem = malformed(measurement, cfg, seed)
    if problem:
        return Verdict(msg("speed.not_scored", reason=problem))
    problem = spot_check(measurement["outputs"], cfg, seed)
    if problem:
        return Verdict(msg("speed.not_scored_spot", reason=problem))
    times = measurement["times"]
    return Verdict(None, paired_ratio(times["sdpa"], times["student"]), medians(times))


def wants_another(verdicts: list[Verdict], needed: float) -> bool:
    """Measure again: the first result fell near the threshold, and nothing else decides."""
    share = verdicts[0].speedup
    return (len(verdicts) < MAX_RUNS and needed / NEAR < share < needed * NEAR
            and all(v.problem is None for v in verdicts))


def decide(verdicts: list[Verdict], device: str, needed: float) -> tuple[float, Message]:
    """(fraction of the points, message) from one run, or from the median of a few."""
    problem, median = deciding_run(verdicts)
    if problem is not None:
        return 0.0, problem
    med = median.medians
    measured = msg("triton.speed_measured", share=median.speedup, student=med["student"] * 1e3,
                   sdpa=med["sdpa"] * 1e3, pytorch=med["pytorch"] * 1e3, device=device,
                   **how_measured(len(verdicts)))
    if median.speedup >= needed:
        return 1.0, msg("triton.speed_passed", measured=measured, needed=needed)
    return 0.0, msg("triton.speed_too_slow", measured=measured, needed=needed)


def timed_verdict(sub: Submission, device: str, seed: int) -> Verdict:
    """One timing run beside the student's code, judged and sanity-checked."""
    run = timed_job(sub, msg("worker.timing", name=AUTOGRAD), device,
                    jobs.SPEED_PREPARE_JOB, jobs.SPEED_JOB, seed=seed)
    measurement = run.measurement
    if isinstance(measurement, dict) and isinstance(measurement.get("outputs"), dict):
        measurement["outputs"] = {i: vetted(o, AUTOGRAD)
                                  for i, o in measurement["outputs"].items()}
    verdict = judge(measurement, seed)
    if verdict.problem is None:
        problem = implausible_times(total_measured(measurement), run)
        verdict = Verdict(problem) if problem else verdict
    return verdict


def not_scored_because(device: str, needed: float | None) -> str | None:
    """Why the check cannot score here: the interpreter (or no GPU), or no threshold yet."""
    if jobs.interpreting() or not device.startswith("cuda"):
        return "triton.speed_interpreted"
    return "triton.speed_uncalibrated" if needed is None else None


def check_speed(sub: Submission, ctx: Context) -> float:
    """Run once flash_attention_triton passes its check. Where it cannot be scored, full
    points and a note that says why; else time, judge, sanity-check, again while near the
    threshold (up to MAX_RUNS runs within `speed.verdict.BUDGET_S`), decide."""
    needed = SDPA_SHARE_NEEDED
    reason = not_scored_because(ctx.device, needed)
    if reason is not None:
        ctx.notes = msg("triton.speed_not_scored", reason=msg(reason, device=ctx.device))
        return 1.0
    assert needed is not None
    verdicts = runs_until_decided(
        lambda: timed_verdict(sub, ctx.device, secrets.randbelow(2**31)),
        lambda vs: wants_another(vs, needed))
    fraction, message = decide(verdicts, ctx.device, needed)
    if fraction <= 0:
        raise CheckFailed(message)
    ctx.notes = message
    return fraction
