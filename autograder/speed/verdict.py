"""A speed check's verdict in the grader, for any timing job run beside the student's code: the
job run in the machine's timing turn, what it reports checked against what the grader saw from
outside (wall time and the worker's CPU time), paired ratios of any two callables' times, all
the points or none from one threshold, measured again within a time budget while the result
falls near it, and the run that decides. An assignment's speed check (e.g.
`assignments.mha.speed`) says what is timed and what is needed.
"""

from __future__ import annotations

import contextlib
import fcntl
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

# On CPU the reported times are the worker's CPU time in the timed calls. The grader reads the
# worker's whole CPU time from outside; honest runs report 0.76-0.96 of it, under load too,
# a clock rewound in forward 0.17-0.39 (docs/trusted-grading.md).
MIN_TIMED_SHARE = 0.6
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

    measurement: Any  # what the run reported (an assignment's timing job); trusted in nothing
    wall: float  # seconds the grader waited for it
    cpu: float | None  # CPU seconds the student's process used meanwhile, where readable


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


def timed_job(sub: Submission, what: Message, device: str, prepare: str, job: str,
              **kwargs: Any) -> TimedRun:
    """A timing job (`job`, with `device` and `kwargs`) run beside the student's code, after its
    `prepare` job (with the same arguments: construction and first calls, not part of the
    cross-checked run), with the wall clock and the worker's CPU time the grader saw meanwhile."""
    sub.ensure_loaded()  # a worker restarted after an earlier check: not part of the timing
    sub.run_job(prepare, what, device=device, **kwargs)
    with gpu_turn(device):
        cpu_before = sub.cpu_seconds()
        started = time.perf_counter()
        measurement = sub.run_job(job, what, device=device, **kwargs)
        wall = time.perf_counter() - started
    cpu_after = sub.cpu_seconds()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return TimedRun(measurement, wall, cpu)


def implausible_times(reported: float, run: TimedRun, device: str) -> Message | None:
    """Why `reported` seconds of timed calls cannot be right: more than the wall clock the
    grader waited, or (on the CPU) too small a share of the worker's CPU time; or None."""
    if reported > run.wall * 1.05:
        return msg("speed.not_scored", reason=msg("speed.over_wall", wall=float(run.wall)))
    if device == "cpu" and run.cpu is not None and reported < MIN_TIMED_SHARE * run.cpu:
        return msg("speed.not_scored", reason=msg("speed.under_cpu", reported=float(reported),
                                                  cpu=float(run.cpu)))
    return None


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


def deciding_run(runs: list[Run]) -> tuple[Message | None, Run]:
    """The first problem that stops the scoring, if any; and the run whose speedup decides:
    the median one (the upper one of two), whose times are shown."""
    problem = next((r.problem for r in runs if r.problem is not None), None)
    return problem, sorted(runs, key=lambda r: r.speedup)[len(runs) // 2]


def how_measured(runs: int) -> dict[str, Message]:
    """The `config` and `runs` fields of any speed check's message: the config it timed (the
    graded one, or the kit's test config) and over how many runs."""
    name = chosen_test_config()
    config = msg("speed.test_config", variable=settings.variable("speed_config"), name=name)
    return {"config": config if name else msg("speed.graded_config"),
            "runs": msg("speed.one_run") if runs == 1 else msg("speed.median_of", runs=runs)}
