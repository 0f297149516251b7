"""Timing any callables side by side, beside the student's code (the worker, or the notebook
kernel): interleaved rounds on the same fresh inputs, the CPU time of this process (CUDA events
on a GPU), the torch calls one call makes, and the conditions of every timing. An assignment's
timing job (`assignments/<name>/jobs.py`) uses them; what it reports is judged in the grader.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, resolve_name

from ..runtime import one_thread

Tensor = torch.Tensor
Forward = Callable[[Tensor], Any]
Timer = Callable[[Forward, list[Tensor]], tuple[float, list[Any]]]


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
    """Per-call times of each candidate, one per round, and their outputs at the `keep` indices
    (call c of round r is index r * calls + c).

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
        for name in rotation(names, r):
            seconds, outs = timer(candidates[name], xs)
            times[name].append(seconds)
            kept[name].update((r * len(xs) + c, out) for c, out in enumerate(outs)
                              if r * len(xs) + c in keep)
    return times, kept


def rotation(names: list[str], r: int) -> list[str]:
    """The order of round r: who goes first rotates from round to round."""
    k = r % len(names)
    return names[k:] + names[:k]


MAX_OP_NAME = 80  # characters of an op's name that are kept


class OpCounter(TorchFunctionMode):
    """Counts the torch functions and tensor methods called while it is active, by name.
    Only the calls student code makes itself: torch's own calls inside them are not seen."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = resolve_name(func) or getattr(func, "__qualname__", None) or repr(func)
        self.counts[str(name)[:MAX_OP_NAME]] += 1
        return func(*args, **(kwargs or {}))


def count_ops(forward: Forward, x: Tensor) -> tuple[dict[str, int], Any]:
    """How many times one call of `forward` calls each torch function (counted at two sizes,
    what grows with the size runs once per unit: `assignments.mha.speed.per_head_ops`), and
    what it returned: the grader checks it, so that the counted call is an honest one."""
    with torch.no_grad(), OpCounter() as counter:
        output = forward(x)
    return dict(counter.counts), output


@contextlib.contextmanager
def timing_conditions() -> Iterator[None]:
    """The conditions of every timing: one thread, no garbage collection pauses, no autograd."""
    gc.disable()
    try:
        with one_thread(), torch.no_grad():
            yield
    finally:
        gc.enable()
