"""`mha-kit bench`: the attention implementations timed side by side, and how reliable the
speed check is (`--reliability N`). `compare_in_notebook` shows a student's own looped and
fused modules the same way.

torch is imported inside the functions: building the CLI's parser does not import it.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks.core import CheckFailed, Context
from ..checks.inputs import per_head_params
from ..runner.inprocess import InProcessSubmission
from .baselines import BENCH_ROWS, FusedReference, HeadLoopReference, as_student_class
from .config import SpeedConfig, config_for, speed_input, speed_params
from .gate import check_speed
from .measure import Forward, interleaved_times, prepared, steady, timer_for
from .score import medians, speed_ratios


def bench_configs(device: str) -> dict[str, SpeedConfig]:
    """The graded config and one larger config where memory, not overhead, dominates."""
    graded = config_for(device)
    if device.startswith("cuda"):
        larger = SpeedConfig(B=8, T=1024, E=768, H=12, rounds=11, calls=3)
    else:
        larger = SpeedConfig(B=8, T=128, E=256, H=8, rounds=7, calls=2)
    return {"graded": graded, "larger": larger}


def describe(cfg: SpeedConfig) -> str:
    return f"B={cfg.B}, T={cfg.T}, E={cfg.E}, H={cfg.H}"


def time_rows(rows: dict[str, Forward], cfg: SpeedConfig, device: str) -> dict[str, float]:
    """Median seconds per call of each row: interleaved rounds on the same fresh inputs."""
    def round_inputs(r: int) -> list:
        return [speed_input(cfg, 0, r * cfg.calls + c).to(device) for c in range(cfg.calls)]

    with steady():
        times, _ = interleaved_times(rows, round_inputs, cfg.rounds, cfg.warmup,
                                     timer_for(device))
    return medians(times)


def kit_rows(cfg: SpeedConfig, device: str) -> dict[str, Forward]:
    params = speed_params(cfg, 0, device)
    return {name: cls(params, cfg.H) for name, cls in BENCH_ROWS.items()}


def student_row(sub: Any, cfg: SpeedConfig, device: str) -> Forward:
    """The student's fused module holding the same weights as the kit's rows."""
    params = speed_params(cfg, 0, device)
    forward = prepared(sub.construct("MultiHeadAttention", cfg.E, cfg.H), "MultiHeadAttention",
                       params, device)
    sub.guard("MultiHeadAttention.forward", lambda: forward(speed_input(cfg, 0, 0).to(device)))
    return forward


def bench_table(title: str, med: dict[str, float], baseline: str) -> str:
    """One row per implementation: its median time and its speedup over `baseline`."""
    width = max(len(name) for name in med) + 2
    lines = [title, f"  {'implementation':<{width}} {'median':>10}  {'speedup':>8}"]
    for name, seconds in med.items():
        speedup = med[baseline] / seconds
        lines.append(f"  {name:<{width}} {seconds * 1e3:>7.3f} ms  {speedup:>7.1f}×")
    return "\n".join(lines + [f"  (speedup: over {baseline})"])


def plot_tables(tables: dict[str, dict[str, float]], baseline: str, path: str | Path | None
                ) -> None:
    """Horizontal bars of the median times, one panel per table; saved to `path` or shown."""
    import matplotlib

    if path:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tables), figsize=(6.5 * len(tables), 0.5 * max(
        len(t) for t in tables.values()) + 1.6), squeeze=False)
    for ax, (title, med) in zip(axes[0], tables.items()):
        names = list(med)[::-1]
        ms = [med[n] * 1e3 for n in names]
        colors = ["tab:red" if n == baseline else "tab:green" if n.startswith("your") else
                  "tab:blue" for n in names]
        ax.barh(names, ms, color=colors)
        for y, (name, value) in enumerate(zip(names, ms)):
            ax.text(value, y, f" {med[baseline] / med[name]:.1f}×", va="center", fontsize=9)
        ax.set_xlim(0, max(ms) * 1.2)
        ax.set_xlabel("median time per forward call (ms)")
        ax.set_title(title, fontsize=10)
    fig.suptitle(f"× = speedup over {baseline}", fontsize=9)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    else:
        plt.show()


def compare_in_notebook(looped_cls: type, fused_cls: type, *, device: str = "cpu",
                        plot: bool = True) -> dict[str, float]:
    """Time your own LoopedMultiHeadAttention against your MultiHeadAttention at the graded
    config, on the same inputs and weights; print a table, draw bars, return median seconds."""
    cfg = config_for(device)
    params = speed_params(cfg, 0, device)
    rows = {
        "your LoopedMultiHeadAttention": prepared(looped_cls(cfg.E, cfg.H),
                                                  "LoopedMultiHeadAttention",
                                                  per_head_params(params, cfg.H), device),
        "your MultiHeadAttention": prepared(fused_cls(cfg.E, cfg.H), "MultiHeadAttention",
                                            params, device),
    }
    med = time_rows(rows, cfg, device)
    title = f"{describe(cfg)}, {device}"
    print(bench_table(title, med, "your LoopedMultiHeadAttention"))
    if plot:
        plot_tables({title: med}, "your LoopedMultiHeadAttention", None)
    return med


# --------------------------------------------------------------------------- reliability


@contextlib.contextmanager
def busy_core(busy: bool = True) -> Iterator[subprocess.Popen | None]:
    """Another process that keeps one CPU core busy while the block runs (none if not busy)."""
    if not busy:
        yield None
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait()


@dataclass(frozen=True)
class CheckRun:
    """One graded speed check: the fraction of its points, the paired ratios, its cost."""

    fraction: float
    speedup: float  # over the kit's looped baseline
    ref_ratio: float  # the module's time over the kit's fused time
    wall: float
    cpu: float


def repeated_checks(subjects: dict[str, type], n: int, device: str,
                    forbidden: dict | None = None) -> dict[str, list[CheckRun]]:
    """Run the graded speed check n times on each `MultiHeadAttention` class, alternating
    between them so that all see the same load. Its gate is taken as passed: the classes are
    correct by construction. `forbidden` as for `InProcessSubmission` (default: the policy)."""

    class Recording(InProcessSubmission):
        def run_job(self, job: str, what: str, **kwargs: Any) -> Any:
            self.last = super().run_job(job, what, **kwargs)
            return self.last

    subs = {name: Recording({"MultiHeadAttention": cls}, forbidden=forbidden)
            for name, cls in subjects.items()}
    runs: dict[str, list[CheckRun]] = {name: [] for name in subjects}
    for _ in range(n):
        for name, sub in subs.items():
            sub.last = None
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                fraction = check_speed(sub, Context(device=device))
            except CheckFailed:
                fraction = 0.0
            ratios = speed_ratios(sub.last["times"]) if sub.last else (math.nan, math.nan)
            runs[name].append(CheckRun(fraction, *ratios, time.perf_counter() - wall,
                                       time.process_time() - cpu))
        print(".", end="", flush=True, file=sys.stderr)
    return runs


def reliability(n: int, device: str) -> tuple[str, bool]:
    """The speed check n times on the kit's fused module (target: full points every time) and
    on a loop in disguise (target: no points ever), alone and beside a busy core."""
    subjects = {"fused reference": as_student_class(FusedReference),
                "loop in disguise": as_student_class(HeadLoopReference)}
    lines = [f"{'':<32} {'full points':>11} {'some points':>11}  speedup over looped"
             f"  check's time (max)",
             f"{'':<32} {'':>11} {'':>11}  min / median / max   wall   CPU"]
    met, summary = True, []
    for load in ("no other load", "one core busy"):
        with busy_core(load == "one core busy"):
            runs = repeated_checks(subjects, n, device)
        for name, scored in runs.items():
            fractions = [r.fraction for r in scored]
            speedups = [r.speedup for r in scored]
            walls, cpus = [r.wall for r in scored], [r.cpu for r in scored]
            full, some = sum(f >= 1 for f in fractions), sum(f > 0 for f in fractions)
            spread = f"{min(speedups):.1f} / {statistics.median(speedups):.1f} / " \
                     f"{max(speedups):.1f}"
            lines.append(f"{name + ', ' + load:<32} {f'{full}/{n}':>11} {f'{some}/{n}':>11}  "
                         f"{spread:<19} {max(walls):>5.1f} s {max(cpus):>4.1f} s")
            fused = name == "fused reference"
            count, target = (full, n) if fused else (some, 0)
            met = met and count == target
            summary.append(f"{name} {'full' if fused else 'some'} points {count}/{n} ({load})")
    print(file=sys.stderr)
    verdict = "target met" if met else "TARGET MISSED"
    lines.append(f"reliability on {device}, N={n}: {', '.join(summary)}: {verdict}")
    return "\n".join(lines), met
