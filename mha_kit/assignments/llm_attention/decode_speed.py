"""The decoding speed check: N tokens decoded one at a time through the student's KVCache after
a long prefill, the work of every op counted (`jobs.decode_work`), against the kit's own count
of recomputing the whole prefix for each token. A cache does O(T·E) work per token,
recomputing O(T·E²): a correct cache does many times less, a module that keeps a cache but
recomputes the prefix's keys and values (or everything) does not (docs/speed.md, the dead
band). A count is the same on every run and under any load, and so is the verdict; the time
per token is measured too, and shown, never judged.

Judged here, on the grader's side: the outputs of the counted decoding against the oracle; an
op the counter cannot count, or a value read into Python while decoding, earns nothing; a count
below the least a correct decoding does is not scored. The count runs in the student's process,
where student code can change it: a count that passes is checked against the decoding timed
from outside that process, against the kit's recomputing decoding (`contradicted`).
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
from ...speed.timing import rotation
from ...speed.verdict import (
    MAX_BUSY_SHARE,
    Request,
    how_measured,
    paired_ratio,
    reported_seconds,
    runs_until_decided,
    student_times,
    timed_request,
)
from . import oracle
from .decode_config import (
    ROPE_BASE,
    SPOT_TOLERANCE,
    DecodeConfig,
    decode_config,
    decode_input,
    decode_params,
)
from .jobs import (
    DECODE_ROUND_JOB,
    MODULE,
    PREFILL_JOB,
    RECOMPUTE_ROUND_JOB,
    WEIGHTS_JOB,
    WORK_JOB,
)

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
# The count is made in the student's process, where student code can change it (red team 52
# patched `jobs.WorkCount`): a count that passes is checked against the time the grader measures
# from outside, the student's decoding against the kit's recomputing one, in CPU time. A count
# that passes, with a decoding not this many times faster than recomputing in any run, is
# contradicted and earns nothing. Under load, the correct styles of the corpus measured 3.3x
# and more, a static buffer of 4096 tokens (17.2x less work by count) 1.64x and more, those that
# recompute everything 1.07x and less: margins 1.26 and 1.21 (docs/speed.md,
# scripts/decode_time_margins.py).
MEASURED_SPEEDUP_NEEDED = 1.3
MAX_TIMED_RUNS = 3  # timed runs in all while every one so far contradicts the count
TIMED = msg("llm.timing_decoding", name=MODULE)  # the student code timed, for messages


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


def decoded(cfg: DecodeConfig, seed: int, tokens: int | None = None) -> Tensor:
    """The oracle's outputs for the N decoded tokens (B, N, E), float64: what a cache gives
    (the tokens drawn from `tokens`, `decode_input`)."""
    params = {k: v.double() for k, v in decode_params(cfg, seed).items()}
    return oracle.gqa(params, decode_input(cfg, seed, tokens).double(), cfg.H, cfg.Hkv,
                      ROPE_BASE)[:, cfg.P:]


def decodes_right(outputs: Any, want: Tensor) -> bool:
    """Whether `outputs`, as a worker gave them back, are the N decoded tokens `want`
    (B, N, E), one (B, 1, E) tensor a token."""
    if type(outputs) is not list:
        return False
    outputs = [vetted(o, MODULE) for o in outputs]
    return (len(outputs) == want.shape[1] and all(
        type(o) is Tensor and o.shape == (want.shape[0], 1, want.shape[2]) for o in outputs)
        and torch.allclose(torch.cat(outputs, 1).double(), want, **SPOT_TOLERANCE))


def judge(report: Any, seed: int) -> Run:
    """What one run of `jobs.decode_work` shows."""
    cfg = decode_config()
    if _malformed(report, cfg.rounds):
        return Run(msg("speed.not_scored", reason=msg("llm.speed_malformed")))
    if not decodes_right(report["outputs"], decoded(cfg, seed)):
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


def measured_message(run: Run) -> Message:
    """What was counted of a run that has no problem, and its times (not judged)."""
    cfg = decode_config()
    recomputed = recomputing_work(cfg) / cfg.N
    return msg("llm.speed_measured", P=cfg.P, cached=run.work / 1e6,
               recomputed=recomputed / 1e6, ratio=recomputed / run.work, cpu=run.cpu * 1e3,
               wall=run.wall * 1e3, device=DEVICE, config=how_measured(1)["config"])


def decide(run: Run) -> tuple[float, Message]:
    if run.problem is not None:
        return 0.0, run.problem
    measured = measured_message(run)
    if measured.params["ratio"] >= LESS_WORK_NEEDED:
        return 1.0, msg("llm.speed_passed", measured=measured, needed=LESS_WORK_NEEDED)
    return 0.0, msg("llm.speed_too_slow", measured=measured, needed=LESS_WORK_NEEDED)


# --------------------------------------------------------------------------- the time, measured


@dataclass(frozen=True)
class Timing:
    """One timed run of the decoding (`timed_decoding`), judged: why it is not scored, or the
    student's decoding's speedup over the kit's recomputing one (the median over rounds of
    their ratio of CPU times, by the kernel's count), and their CPU seconds per token (medians
    over rounds)."""

    problem: Message | None = None
    speedup: float = math.nan
    student: float = math.nan
    kit: float = math.nan


def timed_decoding(sub: Submission, clean: Submission) -> Timing:
    """`rounds` rounds, each on the weights and prefix of one seed and the tokens of another,
    drawn here, in a rotating order: the student's prefill (untimed), then its decoding of the
    tokens through the cache, in its worker; the kit's decoding of them by recomputing the
    prefix, in `clean`, the student's worker watched meanwhile. Each decoding is timed from
    outside, its request's CPU time by the kernel's count (`speed.verdict.timed_request`)."""
    cfg = decode_config()
    done: dict[str, list[Request]] = {"student": [], "kit": []}
    for r in range(cfg.rounds):
        seed, tokens = secrets.randbelow(2**31), secrets.randbelow(2**31)
        for name in rotation(list(done), r):
            if name == "kit":
                clean.run_job(WEIGHTS_JOB, TIMED, seed=seed)
                done[name].append(timed_request(clean, sub, RECOMPUTE_ROUND_JOB, TIMED,
                                                seed=seed, tokens=tokens))
                continue
            sub.run_job(PREFILL_JOB, TIMED, seed=seed)
            request = timed_request(sub, None, DECODE_ROUND_JOB, TIMED, seed=seed, tokens=tokens)
            if not decodes_right(request.reply, decoded(cfg, seed, tokens)):
                return Timing(msg("speed.not_scored_spot", reason=msg("llm.speed_spot_timed",
                                                                      name=MODULE)))
            done[name].append(request)
    requests = done["student"] + done["kit"]
    if any(r.cpu is None for r in requests):  # a thread that ended as it was read
        return Timing(msg("speed.not_scored", reason=msg("llm.speed_unmeasured")))
    busy = max((r.beside / r.cpu for r in done["kit"] if r.beside is not None and r.cpu),
               default=0.0)
    if busy > MAX_BUSY_SHARE:
        return Timing(msg("speed.not_scored", reason=msg("speed.busy_beside",
                                                         share=busy * 100)))
    kit = [reported_seconds(r) for r in done["kit"]]
    student = student_times(done["student"], done["kit"], cfg.N, counted=True)
    return Timing(None, paired_ratio(kit, student), statistics.median(student),
                  statistics.median(kit))


def _contradicting(timings: list[Timing]) -> Timing | None:
    """The fastest of the scored timings if none is MEASURED_SPEEDUP_NEEDED times faster than
    the kit's recomputing; else None. Where none was scored, the last."""
    scored = [t for t in timings if t.problem is None]
    if not scored:
        return timings[-1]
    fastest = max(scored, key=lambda t: t.speedup)
    return None if fastest.speedup >= MEASURED_SPEEDUP_NEEDED else fastest


def contradicted(sub: Submission, run: Run) -> Message | None:
    """Why a count that passed does not stand, or None: the decoding, timed from outside
    (`timed_decoding`), is not MEASURED_SPEEDUP_NEEDED times faster than the kit's recomputing
    in any run, or no run could be scored; measured again while so, up to MAX_TIMED_RUNS runs
    within `speed.verdict.BUDGET_S` (a correct cache needs one fast run: load only slows).
    None where nothing is timed from outside: in process (the notebook, where student code is
    not kept from the kit's anyway), without /proc."""
    clean = sub.clean_worker()
    if clean is None:
        return None
    sub.ensure_loaded()  # a worker restarted after an earlier check: not part of the timing
    clean.ensure_loaded()
    if sub.cpu_seconds() is None or clean.cpu_seconds() is None:
        return None
    timings = runs_until_decided(lambda: timed_decoding(sub, clean), lambda done: len(
        done) < MAX_TIMED_RUNS and _contradicting(done) is not None)
    timing = _contradicting(timings)
    if timing is None:
        return None
    if timing.problem is not None:
        return timing.problem
    return msg("llm.speed_time_contradicts", measured=measured_message(run),
               student=timing.student * 1e3, kit=timing.kit * 1e3, speedup=timing.speedup,
               needed=MEASURED_SPEEDUP_NEEDED)


def check_decode_speed(sub: Submission, ctx: Context) -> float:
    """Run once llm_kv_cache has passed: count one decoding, on fresh inputs; judge; decide; a
    count that passes is checked against the time measured from outside (`contradicted`)."""
    run = counted_run(sub, secrets.randbelow(2**31))
    fraction, message = decide(run)
    if fraction > 0:
        contradiction = contradicted(sub, run)
        if contradiction is not None:
            fraction, message = 0.0, contradiction
    if fraction <= 0:
        raise CheckFailed(message)
    ctx.notes = message
    return fraction
