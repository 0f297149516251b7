"""The speed check, fused against looped: gated on the fused module's values, measured in rounds
the grader drives (`timed_run`: the student's module in its worker, the baselines in a clean
one, by `jobs`), judged here: the run's form, its timed outputs against nn.MultiheadAttention
(every one, or a sample drawn after the run has committed to all of them), the counted
forward's output, the calls made once per head, what the grader saw from outside, and the
points from the paired ratios: all or nothing, one threshold in a wide dead band, measured
again near it (`speed.verdict`). Why: docs/speed.md.
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ... import oracle
from ...checks.core import CheckFailed, Context
from ...messages import Message, msg
from ...runner.inprocess import vetted
from ...runner.protocol import Submission
from ...speed.timing import rotation
from ...speed.verdict import (
    Request,
    TimedRun,
    deciding_run,
    fair_runs,
    gpu_turn,
    how_measured,
    implausible_times,
    malformed_times,
    medians,
    paired_ratio,
    reported_seconds,
    runs_until_decided,
    student_times,
    timed_request,
    total_measured,
    unfair,
)
from . import jobs
from .speed_config import (
    SpeedConfig,
    checked_indices,
    config_for,
    output_digest,
    speed_input,
    speed_params,
)

Tensor = torch.Tensor
SPEED_CHECK = "speed_fused_vs_looped"  # the timed check's id: the same inputs, hidden or not
WHAT = msg("worker.timing", name="MultiHeadAttention")  # the student code timed, for messages

SPEEDUP_NEEDED = 2.5  # all the points from this speedup over the kit's looped module, else none
NEAR = 1.2  # a first result within this factor of SPEEDUP_NEEDED is measured again ...
MAX_RUNS = 3  # ... up to this many runs in all, and the median decides
OUTPUT_TOLERANCE = {"rtol": 1e-2, "atol": 1e-2}  # catches stale or skipped work, not rounding
DIGEST = re.compile(r"[0-9a-f]{64}")  # one timed output's SHA-256 (`output_digest`)
MAX_OPS = 500  # distinct torch functions in a run's op counts

# Torch calls that only move data: indexing, views, splitting and joining, copies, new tensors,
# reading a tensor's shape or device (any property: `.__get__`). Made once per head they are
# per-head Python work outside the attention, which is allowed (docs/speed.md). Any other call
# made once per head is part of the attention looping over heads.
DATA_MOVEMENT = frozenset("""
    __getitem__ __setitem__ __iter__ __len__ __get__ __contains__ __index__
    view view_as reshape reshape_as flatten unflatten squeeze unsqueeze transpose t permute
    movedim moveaxis swapaxes swapdims expand expand_as narrow select as_strided unfold
    detach contiguous clone copy_ to type float double half cpu cuda
    split split_with_sizes tensor_split chunk unbind hsplit vsplit dsplit
    cat concat concatenate stack hstack vstack dstack column_stack
    index_select gather take take_along_dim
    empty empty_like zeros zeros_like ones ones_like full full_like arange tensor as_tensor
    new_empty new_zeros new_ones new_full new_tensor
    size dim numel stride is_contiguous data_ptr element_size item tolist
""".split())


def speed_ratios(times: dict[str, list[float]]) -> tuple[float, float]:
    """(the student's speedup over looped, the student's time over the kit's fused time)."""
    return (paired_ratio(times["looped"], times["student"]),
            paired_ratio(times["student"], times["fused"]))


# --------------------------------------------------------------------------- scoring


def speed_fraction(speedup: float) -> float:
    """All the points or none: no level between, so no result lands between two levels."""
    return 1.0 if speedup >= SPEEDUP_NEEDED else 0.0


def near_threshold(speedup: float) -> bool:
    """Close enough to SPEEDUP_NEEDED that another measurement could decide otherwise."""
    return SPEEDUP_NEEDED / NEAR < speedup < SPEEDUP_NEEDED * NEAR


def moves_data(op: str) -> bool:
    return op.rpartition(".")[2] in DATA_MOVEMENT


PerHead = tuple[str, int, int]  # an op, its calls with H heads, its calls with H / 2


def per_head_ops(ops: dict[str, Any]) -> list[PerHead]:
    """The ops of one forward call that run once per head: their count grows by at least one
    call for each head added between H / 2 and H heads. Most calls first."""
    (heads, half), (counts, halved) = ops["heads"], ops["counts"]
    grown = [(name, n, halved.get(name, 0)) for name, n in counts.items()
             if n - halved.get(name, 0) >= heads - half]
    return sorted(grown, key=lambda g: (-g[1], g[0]))


def _counts_ok(counts: Any) -> bool:
    return isinstance(counts, dict) and len(counts) <= MAX_OPS and all(
        isinstance(k, str) and len(k) <= 100 and type(v) is int and v >= 0
        for k, v in counts.items())


def malformed(measurement: Any, cfg: SpeedConfig, seed: int) -> Message | None:
    """What is wrong with a measurement's form, or None: the grader trusts none of it."""
    problem = malformed_times(measurement, asdict(cfg), seed, {"student", "looped", "fused"},
                              cfg.rounds)
    if problem:
        return problem
    digests, counted = measurement.get("digests"), measurement.get("counted")
    if not isinstance(digests, list) or len(digests) != cfg.rounds * cfg.calls or not all(
        isinstance(d, str) and DIGEST.fullmatch(d) for d in digests
    ) or not isinstance(counted, list) or len(counted) != 2:
        return msg("speed.no_outputs")
    ops = measurement.get("ops")
    if not isinstance(ops, dict) or ops.get("heads") != [cfg.H, cfg.H // 2] or not isinstance(
        ops.get("counts"), list
    ) or len(ops["counts"]) != 2 or not all(_counts_ok(c) for c in ops["counts"]):
        return msg("speed.malformed_ops")
    return None


Reveal = Callable[[list[int]], Any]  # the timed outputs at these indices, from the worker


def round_seeds(rounds: int) -> list[int]:
    """Each round's own seed for its inputs, drawn here and sent with that round alone."""
    return [secrets.randbelow(2**31) for _ in range(rounds)]


def timed_input(cfg: SpeedConfig, measurement: dict[str, Any], index: int) -> Tensor:
    """The input of timed call `index` (round r, call c is r * calls + c): from its round's
    seed, which the grader drew (`round_seeds`). (B, T, E)"""
    r, c = divmod(index, cfg.calls)
    return speed_input(cfg, measurement["round_seeds"][r], c)


def expected_outputs(cfg: SpeedConfig, seed: int, inputs: list[Tensor], heads: int | None = None
                     ) -> list[Tensor]:
    """nn.MultiheadAttention's outputs (float64) for `inputs`, each (B, T, E), with the run's
    weights and `heads` heads (the config's by default), in one batched call."""
    params = {k: v.double() for k, v in speed_params(cfg, seed).items()}
    mha = oracle.torch_mha(params, cfg.E, heads or cfg.H)
    x = torch.cat([t.double() for t in inputs])  # (n * B, T, E)
    expected = oracle.multi_head_attention(mha, x, x, x, oracle.causal_mask(cfg.T))[0]
    return list(expected.split(cfg.B))


def _right(got: Any, expected: Tensor) -> bool:
    return isinstance(got, Tensor) and got.shape == expected.shape and torch.allclose(
        got.double(), expected, **OUTPUT_TOLERANCE)


def output_check(measurement: dict[str, Any], reveal: Reveal, cfg: SpeedConfig, seed: int
                 ) -> Message | None:
    """Draw the timed calls to check (`checked_indices`: after the run, which committed to
    every output by its digest), have the worker reveal their outputs, and compare each with
    its digest and with nn.MultiheadAttention."""
    indices = checked_indices(cfg)
    revealed = reveal(indices)
    if not isinstance(revealed, dict) or set(revealed) != set(indices):
        return msg("speed.no_outputs")
    inputs = [timed_input(cfg, measurement, i) for i in indices]
    for i, expected in zip(indices, expected_outputs(cfg, seed, inputs)):
        r, c = divmod(i, cfg.calls)
        if output_digest(revealed[i]) != measurement["digests"][i]:
            return msg("speed.output_changed", call=c + 1, round=r + 1)
        if not _right(revealed[i], expected):
            return msg("speed.wrong_output", call=c + 1, round=r + 1)
    return None


def counted_check(counted: list[Any], cfg: SpeedConfig, seed: int) -> Message | None:
    """Compare the outputs of the two counted forwards (H and H / 2 heads, the run's weights,
    its first input) with nn.MultiheadAttention: the calls counted are those of a right answer."""
    for got, heads in zip(counted, (cfg.H, cfg.H // 2)):
        if not _right(got, expected_outputs(cfg, seed, [speed_input(cfg, seed, 0)], heads)[0]):
            return msg("speed.wrong_counted", heads=heads)
    return None


@dataclass(frozen=True)
class Verdict:
    """One timing run, judged: why it cannot be scored, or its ratios and per-head calls."""

    problem: Message | None = None  # not scored: the whole message
    speedup: float = math.nan  # over the kit's looped module (paired median)
    ref_ratio: float = math.nan  # the student's time over the kit's fused time
    medians: dict[str, float] = field(default_factory=dict)  # seconds per call, by candidate
    loops: list[PerHead] = field(default_factory=list)  # computations made once per head
    moves: list[PerHead] = field(default_factory=list)  # data moved once per head (allowed)
    heads: tuple[int, int] = (0, 0)  # H and H / 2, as counted


def judge(measurement: Any, device: str, seed: int, reveal: Reveal) -> Verdict:
    """What one timing run (`timed_run`) for this device and seed shows, with the timed outputs
    the grader draws afterwards revealed by `reveal`."""
    cfg = config_for(device)
    problem = malformed(measurement, cfg, seed) or counted_check(measurement["counted"], cfg,
                                                                 seed)
    if problem:
        return Verdict(msg("speed.not_scored", reason=problem))
    problem = output_check(measurement, reveal, cfg, seed)
    if problem:
        return Verdict(msg("speed.not_scored_spot", reason=problem))
    per_head = per_head_ops(measurement["ops"])
    return Verdict(None, *speed_ratios(measurement["times"]), medians(measurement["times"]),
                   loops=[p for p in per_head if not moves_data(p[0])],
                   moves=[p for p in per_head if moves_data(p[0])],
                   heads=(cfg.H, cfg.H // 2))


def wants_another(verdicts: list[Verdict]) -> bool:
    """Measure again: every run so far was unfair (`speed.verdict.unfair`), or the first fair
    result fell near the threshold and nothing else decides."""
    fair = [v for v in verdicts if not unfair(v)]
    return len(verdicts) < MAX_RUNS and (not fair or (
        near_threshold(fair[0].speedup) and all(v.problem is None and not v.loops for v in fair)))


def speed_message(med: dict[str, float], speedup: float, device: str, runs: int = 1
                  ) -> Message:
    """What was measured: the speedup over the kit's looped module, and the times per call."""
    return msg("speed.measured", speedup=float(speedup), student=med["student"] * 1e3,
               looped=med["looped"] * 1e3, fused=med["fused"] * 1e3, device=device,
               **how_measured(runs))


def decide(verdicts: list[Verdict], device: str) -> tuple[float, Message]:
    """(fraction of the points, message) from one run, or from the median of a few."""
    problem, median = deciding_run(verdicts)
    if problem is not None:
        return 0.0, problem
    measured = speed_message(median.medians, median.speedup, device, len(fair_runs(verdicts)))
    heads, half = median.heads
    if median.loops:
        op, count, half_count = median.loops[0]
        return 0.0, msg("speed.loops", op=op, count=count, heads=heads, half_count=half_count,
                        half=half, measured=measured)
    fraction = speed_fraction(median.speedup)
    message = msg("speed.passed" if fraction else "speed.too_slow", measured=measured,
                  needed=SPEEDUP_NEEDED)
    if median.moves:
        op, count, _ = median.moves[0]
        message = msg("speed.per_head", result=message, op=op, count=count, heads=heads,
                      needed=SPEEDUP_NEEDED)
    return fraction, message


CANDIDATES = ["student", "looped", "fused"]  # the first in its worker, the others in a clean one
WORKER_TOLD = ("ops", "counted")  # what the measurement takes of the student's START_JOB reply


def round_digests(student: list[Request]) -> list[Any] | None:
    """The digests of the student's timed outputs, in the order of its calls, as its rounds
    sent them (`jobs.time_round`); None where a round sent no list."""
    sent = [r.reply.get("digests") if isinstance(r.reply, dict) else None for r in student]
    return None if any(not isinstance(d, list) for d in sent) else [x for d in sent for x in d]


def timed_run(sub: Submission, device: str, seed: int) -> TimedRun:
    """The timing run, driven from here in the machine's timing turn: in each round every
    candidate's calls in a request of its own, in a rotating order; the student's in its
    worker, the baselines in a clean worker (`clean_worker`; in process, the same process),
    where they report their own times (`student_times` says how the student's are taken); the
    student's worker watched while a baseline round runs. With the digests of the student's
    outputs and its counted outputs made safe to compare."""
    cfg = config_for(device)
    clean = sub.clean_worker()
    baselines = clean or sub
    sub.ensure_loaded()  # a worker restarted after an earlier check: not part of the timing
    baselines.ensure_loaded()
    sub.run_job(jobs.PREPARE_JOB, WHAT, device=device, seed=seed)
    summary = sub.run_job(jobs.START_JOB, WHAT, device=device, seed=seed, names=CANDIDATES[:1])
    baselines.run_job(jobs.START_JOB, WHAT, device=device, seed=seed, names=CANDIDATES[1:])
    done: dict[str, list[Request]] = {name: [] for name in CANDIDATES}
    inputs = round_seeds(cfg.rounds)
    with gpu_turn(device):
        for r in range(cfg.rounds):
            for name in rotation(CANDIDATES, r):
                student = name == "student"
                done[name].append(timed_request(
                    sub if student else baselines, None if student or clean is None else sub,
                    jobs.ROUND_JOB, WHAT, device=device, name=name, inputs=inputs[r]))
    times = {name: [reported_seconds(r) for r in done[name]] for name in CANDIDATES[1:]}
    times["student"] = student_times(done["student"], done["looped"] + done["fused"], cfg.calls,
                                     device == "cpu" and clean is not None)
    # What the worker told at the start: its counted calls and their outputs, and nothing
    # else (a summary of its own `times` overwrote the grader's: review 52).
    told = {key: summary[key] for key in WORKER_TOLD if isinstance(summary, dict)
            and key in summary}
    measurement = {**told, "config": asdict(cfg), "device": device, "seed": seed,
                   "times": times, "digests": round_digests(done["student"]),
                   "round_seeds": inputs}
    if isinstance(measurement.get("counted"), list):
        measurement["counted"] = [vetted(o, jobs.NAME) for o in measurement["counted"]]
    requests = [r for name in CANDIDATES for r in done[name]]
    busy = [r.beside / r.cpu for r in requests if r.beside is not None and r.cpu]
    return TimedRun(measurement, math.fsum(r.wall for r in requests), max(busy, default=0.0))


def revealed(sub: Submission, indices: list[int]) -> Any:
    """The timed outputs at `indices` of the last run, from `jobs.reveal_outputs`, made safe."""
    outputs = sub.run_job(jobs.REVEAL_JOB, WHAT, indices=indices)
    return {i: vetted(o, jobs.NAME) for i, o in outputs.items()} if isinstance(
        outputs, dict) else outputs


def implausible(run: TimedRun) -> Message | None:
    """Why the times cannot be right, or the run not fair, from what the grader saw outside:
    or None."""
    return implausible_times(total_measured(run.measurement), run)


def speed_runs(sub: Submission, device: str) -> list[Verdict]:
    """Time, judge, sanity-check; again while the result is near the threshold (up to MAX_RUNS
    runs within `speed.verdict.BUDGET_S`): the judged runs, for `decide`."""

    def run_once() -> Verdict:
        seed = secrets.randbelow(2**31)
        run = timed_run(sub, device, seed)
        verdict = judge(run.measurement, device, seed, lambda i: revealed(sub, i))
        problem = verdict.problem or implausible(run)
        if problem:  # no time is told, but the count stands: it timed nothing
            verdict = Verdict(problem, loops=verdict.loops, moves=verdict.moves,
                              heads=verdict.heads)
        return verdict

    return runs_until_decided(run_once, wants_another)


def check_speed(sub: Submission, ctx: Context) -> float:
    """Run after fused_mha and fused_mha_masks have passed (the checks it needs): the runs
    `speed_runs` makes, decided."""
    fraction, message = decide(speed_runs(sub, ctx.device), ctx.device)
    if fraction <= 0:
        raise CheckFailed(message)
    ctx.notes = message
    return fraction
