"""A speed check's verdict in the grader, for timing jobs run in workers: each request timed
from outside (wall time, the kernel's count of the CPU time of the worker that ran it and of
the one beside it), in the machine's timing turn; what the workers report checked against
that; paired ratios of any two callables' times, all the points or none from one threshold,
measured again within a time budget while the result falls near it, and the run that decides.
An assignment's speed check (e.g. `assignments.mha.speed`) says what is timed and what is
needed.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from .. import settings
from ..messages import Message, msg
from ..runner.protocol import Submission
from .config import chosen_test_config

# While a baseline round runs in the clean worker, the student's worker waits for its next
# request: it may use at most this share of that round's CPU time (docs/trusted-grading.md).
MAX_BUSY_SHARE = 0.05
# One speed check, re-measurements included, stays within this many seconds: another run is
# started only if one more as long as the average so far still fits.
BUDGET_S = 4.5
# One timing at a time on a GPU, across every grader of the machine (`mha-kit grade --jobs N`
# shares one card): CUDA time-slices between processes, so another grader's kernels land inside
# this one's events. Seen on an H100: a correct file lost its speed points under --jobs 4.
GPU_TURN_LOCK = "mha-kit-gpu-timing.lock"
GPU_TURN_WAIT_S = 120.0  # past this the run is timed anyway: a stuck holder never stalls a class
V = TypeVar("V")  # one timing run's judgement
Run = TypeVar("Run")  # one timing run, judged: it has a `problem` and a `speedup`


@dataclass
class TimedRun:
    """The student's timing run, with what the grader saw of it from outside."""

    measurement: Any  # the times and what the jobs reported; trusted in nothing
    wall: float  # seconds the grader waited for the timed requests
    busy: float = 0.0  # the most CPU time the student's worker used while a baseline round ran
    # in another worker, as a share of that round's


@dataclass
class Request:
    """A kit job run in a worker, as the grader saw it."""

    reply: Any  # what the job returned; trusted in nothing
    wall: float  # seconds the grader waited for it
    cpu: float | None  # CPU seconds the worker used meanwhile, by the kernel's count
    beside: float | None  # CPU seconds the worker beside it used meanwhile (None: none, or
    # unreadable)


@contextlib.contextmanager
def gpu_turn(device: str, wait_s: float = GPU_TURN_WAIT_S) -> Iterator[None]:
    """On a GPU, hold the machine's timing lock (a file lock in the temporary folder) while
    timing; on the CPU nothing (each worker times its own CPU time, on one thread)."""
    if not device.startswith("cuda"):
        yield
        return
    try:
        fd = os.open(os.path.join(tempfile.gettempdir(), GPU_TURN_LOCK), os.O_RDWR | os.O_CREAT,
                     0o666)
    except OSError:  # another account's lock file: time without taking turns
        yield
        return
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


def _spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def timed_request(worker: Submission, beside: Submission | None, job: str, what: Message,
                  **kwargs: Any) -> Request:
    """`job` run in `worker` with `kwargs`, with the wall clock and the CPU time it and the
    worker `beside` it used meanwhile, by the kernel's count (`Submission.cpu_seconds`)."""
    others = beside.cpu_seconds() if beside is not None else None
    cpu = worker.cpu_seconds()
    started = time.perf_counter()
    reply = worker.run_job(job, what, **kwargs)
    wall = time.perf_counter() - started
    cpu = _spent(cpu, worker.cpu_seconds())
    after = beside.cpu_seconds() if beside is not None else None
    return Request(reply, wall, cpu, _spent(others, after))


def timed_job(sub: Submission, what: Message, device: str, prepare: str, job: str,
              **kwargs: Any) -> TimedRun:
    """A timing job (`job`, with `device` and `kwargs`) that times its candidates itself, beside
    the student's code, after its `prepare` job (construction and first calls), with the wall
    clock the grader waited. What it reports is bounded by that clock alone: a job that times
    the kit's baselines beside student code in one worker is not safe from it (the mha check's
    rounds are driven by the grader instead, `assignments.mha.speed`)."""
    sub.ensure_loaded()  # a worker restarted after an earlier check: not part of the timing
    sub.run_job(prepare, what, device=device)
    with gpu_turn(device):
        request = timed_request(sub, None, job, what, device=device, **kwargs)
    return TimedRun(request.reply, request.wall)


# Seconds of CPU a round of the student's calls is counted at least (`student_times`).
FASTEST_SEEN = 1e-9


def reported_seconds(request: Request) -> Any:
    """The seconds per call a round's worker reports (a float, if the worker is honest)."""
    return request.reply.get("seconds") if isinstance(request.reply, dict) else None


def student_times(student: list[Request], baselines: list[Request], calls: int,
                  counted: bool) -> list[Any]:
    """The student's seconds per call in each round. Where `counted` (on the CPU, beside a
    clean worker, the kernel's count readable): the CPU time the kernel counted for its worker
    over the round's request, less what such a request costs besides its timed calls, the
    median over the baseline rounds of their CPU time less their report, which no student code
    can touch. Else what the student's worker reports."""
    cpu = [r.cpu for r in student + baselines]
    if not counted or None in cpu:
        return [reported_seconds(r) for r in student]
    extra = statistics.median(spent - reported_seconds(r) * calls for spent, r in zip(
        cpu[len(student):], baselines) if isinstance(reported_seconds(r), float))
    # A round within the overhead's noise (calls that do no work) is as fast as can be seen,
    # not a malformed report: the outputs then decide (the red team's zeros, under load).
    return [max(spent - extra, FASTEST_SEEN) / calls for spent in cpu[:len(student)]]


def implausible_times(reported: float, run: TimedRun) -> Message | None:
    """Why `reported` seconds of timed calls cannot be right: more than the wall clock the
    grader waited; or why the run is not fair: the student's worker ran while a baseline was
    timed beside it; or None."""
    if reported > run.wall * 1.05:
        return msg("speed.not_scored", reason=msg("speed.over_wall", wall=float(run.wall)))
    if run.busy > MAX_BUSY_SHARE:
        return msg("speed.not_scored", reason=msg("speed.busy_beside",
                                                  share=float(run.busy) * 100))
    return None


def malformed_times(measurement: Any, config: dict[str, Any], seed: int,
                    candidates: set[str], rounds: int) -> Message | None:
    """What is wrong with the form of a timing job's report, or None: a dict of `config`
    and `seed`, with one positive finite float a round for each of `candidates`."""
    if not isinstance(measurement, dict):
        return msg("speed.no_measurement")
    if measurement.get("config") != config or measurement.get("seed") != seed:
        return msg("speed.other_config")
    times = measurement.get("times")
    if not isinstance(times, dict) or set(times) != candidates or any(
        not isinstance(ts, list) or len(ts) != rounds
        or not all(type(t) is float and 0 < t < math.inf for t in ts)
        for ts in times.values()
    ):
        return msg("speed.malformed_times")
    return None


def total_measured(measurement: dict[str, Any]) -> float:
    """Seconds the reported times add up to, for the sanity check against wall time."""
    calls = measurement["config"]["calls"]
    return math.fsum(sum(ts) for ts in measurement["times"].values()) * calls


def runs_until_decided(run: Callable[[], V], again: Callable[[list[V]], bool]) -> list[V]:
    """`run()` once, then again while `again(runs)` says the result is undecided (near the
    threshold), as long as one more run as long as the average so far fits in BUDGET_S."""
    started = time.perf_counter()
    runs: list[V] = []
    while not runs or again(runs):
        elapsed = time.perf_counter() - started
        if runs and elapsed * (len(runs) + 1) / len(runs) > BUDGET_S:
            break
        runs.append(run())
    return runs


def medians(times: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(ts) for name, ts in times.items()}


def paired_ratio(slow: list[float], fast: list[float]) -> float:
    """The median over rounds of slow / fast: candidates timed side by side in one round share
    that round's machine load, so the ratio holds even when the load drifts between rounds."""
    return statistics.median(s / f for s, f in zip(slow, fast))


def unfair(run: Any) -> bool:
    """Whether the run was not fair to time (the student's worker used CPU while a baseline
    round ran beside it): measured again, and left out where a fair run was made. Background
    work in every run still costs the points; a tail of the worker's own loop, stretched into
    a baseline round by a busy machine, no longer does (seen under `pytest -n 3` here)."""
    problem = run.problem
    reason = problem.params.get("reason") if problem is not None else None
    return isinstance(reason, Message) and reason.id == "speed.busy_beside"


def fair_runs(runs: list[Run]) -> list[Run]:
    """The runs that decide: the fair ones, or every run where none was fair."""
    return [r for r in runs if not unfair(r)] or runs


def deciding_run(runs: list[Run]) -> tuple[Message | None, Run]:
    """The first problem that stops the scoring, if any; and the run whose speedup decides:
    the median one (the upper one of two), whose times are shown; of the `fair_runs`."""
    runs = fair_runs(runs)
    problem = next((r.problem for r in runs if r.problem is not None), None)
    return problem, sorted(runs, key=lambda r: r.speedup)[len(runs) // 2]


def how_measured(runs: int) -> dict[str, Message]:
    """The `config` and `runs` fields of any speed check's message: the config it timed (the
    graded one, or the kit's test config) and over how many runs."""
    name = chosen_test_config()
    config = msg("speed.test_config", variable=settings.variable("speed_config"), name=name)
    return {"config": config if name else msg("speed.graded_config"),
            "runs": msg("speed.one_run") if runs == 1 else msg("speed.median_of", runs=runs)}
