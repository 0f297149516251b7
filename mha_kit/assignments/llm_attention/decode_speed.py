"""The decoding speed check: N tokens decoded one at a time through the student's KVCache after
a long prefill, the work of every op counted (`jobs.decode_work`), against the kit's own count
of recomputing the whole prefix for each token. A cache does O(T·E) work per token,
recomputing O(T·E²): a correct cache does many times less, a module that keeps a cache but
recomputes the prefix's keys and values (or everything) does not (docs/speed.md, the dead
band). A count is the same on every run and under any load, and so is the verdict; the time
per token is measured too, and shown, never judged.

Judged here, on the grader's side: the outputs of the counted decoding against the oracle; an
op the counter cannot count, or a value read into Python while decoding, earns nothing; a count
below the least a correct decoding does is not scored.
"""

from __future__ import annotations

import math
import secrets
import statistics
from dataclasses import dataclass
from typing import Any

import torch

from ...checks.core import CheckFailed, Context
from ...messages import Message, msg
from ...runner.inprocess import vetted
from ...runner.protocol import Submission
from ...speed.verdict import how_measured
from . import oracle
from .decode_config import (
    SPOT_TOLERANCE,
    DecodeConfig,
    decode_config,
    decode_input,
    decode_params,
)
from .jobs import MODULE, WORK_JOB

Tensor = torch.Tensor
DECODE_SPEED_CHECK = "llm_decode_speed"
DEVICE = "cpu"  # where it decodes, whatever device grades (decode_config)
# All the points from this factor of less work than recomputing the prefix, else none. In the
# dead band of the style set, between 7.1x (the most a style that recomputes reaches: the keys
# of every token, the values cached) and 32x (the least correct style: a static buffer of 2048
# tokens attended whole): margins 1.69 and 2.68, below the band's geometric middle (15.1x),
# where a static buffer of 4096 tokens would pass by 1.15 only (docs/speed.md,
# scripts/decode_speed_reliability.py).
LESS_WORK_NEEDED = 12.0
ROPE_BASE = 10000.0  # the module's default, which the check builds it with


@dataclass(frozen=True)
class Run:
    """One counted decoding, judged: why it earns nothing, or its work and times per token."""

    problem: Message | None = None
    work: float = math.nan  # per token, in the counter's unit
    cpu: float = math.nan  # median seconds per token, not judged
    wall: float = math.nan


def recomputing_work(cfg: DecodeConfig) -> int:
    """The kit's count of decoding the N tokens by recomputing the prefix for each: the FLOPs
    of the matrix products alone (the four projections of every token so far, the scores and
    weighted sums of attention over them, every entry computed), less than any recomputation
    does in all."""
    D = cfg.E // cfg.H
    return sum(2 * cfg.B * L * cfg.E * (2 * cfg.E + 2 * cfg.Hkv * D)
               + 4 * cfg.B * cfg.H * L * L * D for L in range(cfg.P + 1, cfg.P + cfg.N + 1))


def least_work(cfg: DecodeConfig) -> int:
    """The least a correct decoding of the N tokens does: the products that make each new
    token's key and value."""
    return cfg.N * 2 * cfg.B * cfg.E * 2 * cfg.Hkv * (cfg.E // cfg.H)


def _malformed(report: Any, rounds: int) -> bool:
    if not isinstance(report, dict):
        return True
    names = [report.get("uncounted"), report.get("reads")]
    times = [report.get("cpu"), report.get("wall")]
    return (type(report.get("work")) is not int or report["work"] < 0
            or not all(type(n) is list and all(type(s) is str for s in n) for n in names)
            or not all(type(ts) is list and len(ts) == rounds and all(
                type(t) is float and math.isfinite(t) and t >= 0 for t in ts) for ts in times)
            or type(report.get("outputs")) is not list)


def decoded(cfg: DecodeConfig, seed: int) -> Tensor:
    """The oracle's outputs for the N decoded tokens (B, N, E), float64: what a cache gives."""
    params = {k: v.double() for k, v in decode_params(cfg, seed).items()}
    return oracle.gqa(params, decode_input(cfg, seed).double(), cfg.H, cfg.Hkv,
                      ROPE_BASE)[:, cfg.P:]


def judge(report: Any, seed: int) -> Run:
    """What one run of `jobs.decode_work` shows."""
    cfg = decode_config()
    if _malformed(report, cfg.rounds):
        return Run(msg("speed.not_scored", reason=msg("llm.speed_malformed")))
    outputs = [vetted(o, MODULE) for o in report["outputs"]]
    want = decoded(cfg, seed)  # (B, N, E)
    if (len(outputs) != cfg.N or any(type(o) is not Tensor or o.shape != (cfg.B, 1, cfg.E)
                                     for o in outputs)
            or not torch.allclose(torch.cat(outputs, 1).double(), want, **SPOT_TOLERANCE)):
        return Run(msg("speed.not_scored_spot", reason=msg("llm.speed_spot", name=MODULE)))
    if report["reads"]:
        return Run(msg("llm.speed_reads", name=MODULE, how=", ".join(report["reads"])))
    if report["uncounted"]:
        return Run(msg("llm.speed_uncounted", name=MODULE,
                       ops=", ".join(f"`{op}`" for op in report["uncounted"])))
    if report["work"] < least_work(cfg):
        return Run(msg("speed.not_scored", reason=msg(
            "llm.speed_unseen", work=report["work"] / cfg.N / 1e6,
            least=least_work(cfg) / cfg.N / 1e6)))
    return Run(None, report["work"] / cfg.N, statistics.median(report["cpu"]) / cfg.N,
               statistics.median(report["wall"]) / cfg.N)


def counted_run(sub: Submission, seed: int) -> Run:
    return judge(sub.run_job(WORK_JOB, msg("llm.counting_decoding", name=MODULE), seed=seed),
                 seed)


def decide(run: Run) -> tuple[float, Message]:
    if run.problem is not None:
        return 0.0, run.problem
    cfg = decode_config()
    recomputed = recomputing_work(cfg) / cfg.N
    ratio = recomputed / run.work
    measured = msg("llm.speed_measured", P=cfg.P, cached=run.work / 1e6,
                   recomputed=recomputed / 1e6, ratio=ratio, cpu=run.cpu * 1e3,
                   wall=run.wall * 1e3, device=DEVICE, config=how_measured(1)["config"])
    if ratio >= LESS_WORK_NEEDED:
        return 1.0, msg("llm.speed_passed", measured=measured, needed=LESS_WORK_NEEDED)
    return 0.0, msg("llm.speed_too_slow", measured=measured, needed=LESS_WORK_NEEDED)


def check_decode_speed(sub: Submission, ctx: Context) -> float:
    """Run once llm_kv_cache has passed: count one decoding, on fresh inputs; judge; decide."""
    fraction, message = decide(counted_run(sub, secrets.randbelow(2**31)))
    if fraction <= 0:
        raise CheckFailed(message)
    ctx.notes = message
    return fraction
