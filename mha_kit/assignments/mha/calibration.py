"""Where the speed check's threshold belongs on the machine at hand, and how reliably it decides
there (docs/speed.md).

`mha-kit bench --calibrate [N]` runs the whole style set (`styleset`) through the real
check N times and prints each style's speedups, the dead band between the slowest correct
style and the fastest whole loop, the threshold in its middle, and the margins.
`mha-kit bench --reliability N` prints the points each style of a smaller set earns over N
checks: alone, beside a busy core, and (with a batch runner, which the CLI passes) inside
`mha-kit grade --jobs 2` with a core busy besides.
"""

from __future__ import annotations

import math
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ...runner.inprocess import InProcessSubmission
from ...speed.calibration import Band, band_between, busy_core, describe_band, spread
from .speed import SPEEDUP_NEEDED, decide, speed_runs
from .speed_config import config_for
from .styleset import RELIABILITY, STYLES, kind, must_earn

POINTS = 10  # the speed check's points, for the tables (grading.registry holds the real ones)
# A batch runner: (style names, n, device) -> for each style, n checks: (the fraction of the
# points, the message the student reads, in English).
Batch = Callable[[list[str], int, str], dict[str, list[tuple[float, str]]]]
GRADED = "grade --jobs 2 + busy"  # the batch's condition: its graders, one core busy besides
MEASURED = re.compile(r"measured: ([0-9.]+)× faster than the kit's looped version(, the median)?")


@dataclass(frozen=True)
class CheckRun:
    """One graded speed check: its points, the speedup of each timing run, what ran per head."""

    fraction: float
    speedups: tuple[float, ...]  # over the kit's looped module: one per run (more near the line)
    ref_ratio: float  # the first run's time over the kit's fused time
    per_head: str  # what the count found once per head: "compute", "data" or ""
    wall: float
    cpu: float

    @property
    def speedup(self) -> float:
        """The speedup that decided: the median run's (the upper of two)."""
        ordered = sorted(self.speedups)
        return ordered[len(ordered) // 2] if ordered else math.nan


def repeated_checks(subjects: dict[str, type], n: int, device: str,
                    forbidden: dict | None = None) -> dict[str, list[CheckRun]]:
    """Run the graded speed check n times on each `MultiHeadAttention` class, in process,
    alternating between them so that all see the same load. The checks it needs are taken as
    passed: the classes are correct by construction. `forbidden` as for `InProcessSubmission`;
    the kit's code computes for them (they are the kit's own styles)."""

    subs = {name: InProcessSubmission({"MultiHeadAttention": cls}, forbidden=forbidden,
                                      kit_code=True) for name, cls in subjects.items()}
    runs: dict[str, list[CheckRun]] = {name: [] for name in subjects}
    for _ in range(n):
        for name, sub in subs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            verdicts = speed_runs(sub, device)
            first = verdicts[0]
            runs[name].append(CheckRun(
                decide(verdicts, device)[0], tuple(v.speedup for v in verdicts),
                first.ref_ratio, "compute" if first.loops else "data" if first.moves else "",
                time.perf_counter() - wall, time.process_time() - cpu))
        print(".", end="", flush=True, file=sys.stderr)
    print(file=sys.stderr)
    return runs


# --------------------------------------------------------------------------- tables


def dead_band(speedups: dict[str, list[float]]) -> Band | None:
    """From each style's speedups: correct styles against whole loops (partial loops are
    stopped by the count, and are as fast as some correct styles). None without both."""
    return band_between({n: v for n, v in speedups.items() if must_earn(n)},
                        {n: v for n, v in speedups.items() if kind(n) == "loop"})


def points_seen(fractions: list[float]) -> str:
    """The points earned and how often, most often first: "10 ×99, 0 ×1"."""
    counts = Counter(round(f * POINTS, 2) for f in fractions)
    return ", ".join(f"{points:g} ×{count}" for points, count in counts.most_common())


def expected_points(name: str) -> float:
    return float(POINTS) if must_earn(name) else 0.0


def as_expected(name: str, fractions: list[float]) -> int:
    """How many checks gave the style the points it must get (all, or none for a loop)."""
    return sum(round(f * POINTS, 2) == expected_points(name) for f in fractions)


def calibrate(n: int, device: str, styles: dict[str, type] | None = None) -> tuple[str, bool]:
    """The style set through the real check n times each (forbidden-API policy off, for the
    SDPA style): each style's speedups, the dead band, the threshold, the count's findings."""
    styles = STYLES if styles is None else styles
    cfg, started = config_for(device), time.perf_counter()
    runs = repeated_checks(styles, n, device, forbidden={})
    width = max(map(len, styles)) + 1
    lines = [f"calibration on {device} (B={cfg.B}, T={cfg.T}, E={cfg.E}, H={cfg.H}): {n} checks "
             f"per style",
             f"{'style':<{width}} {'kind':<12}  speedup over looped  × kit's  "
             f"{'once per head':<15}  points",
             f"{'':<{width}} {'':<12}  min / median / max    fused"]
    count_ok = True
    for name, scored in runs.items():
        speedups = [s for r in scored for s in r.speedups]
        found = Counter(r.per_head for r in scored)
        caught = found["compute"]
        count_ok &= caught == (0 if must_earn(name) else n)
        per_head = ", ".join(f"{k} {v}/{n}" for k, v in found.items() if k) or "-"
        ratio = statistics.median(r.ref_ratio for r in scored)
        lines.append(f"{name:<{width}} {kind(name):<12}  {spread(speedups):<19}  {ratio:>6.2f}  "
                     f"{per_head:<15}  {points_seen([r.fraction for r in scored])}")
    band_lines, band_ok = describe_band(dead_band(
        {name: [s for r in scored for s in r.speedups] for name, scored in runs.items()}),
        SPEEDUP_NEEDED, "SPEEDUP_NEEDED")
    points_ok = all(as_expected(name, [r.fraction for r in scored]) == n
                    for name, scored in runs.items())
    lines += band_lines
    lines.append(f"count: {'every loop found, no correct style' if count_ok else 'WRONG'}; "
                 f"points: {'as expected in every check' if points_ok else 'NOT as expected'}")
    ok = band_ok and count_ok and points_ok
    lines.append(f"calibration on {device}, N={n}, {len(styles)} styles, "
                 f"{time.perf_counter() - started:.0f} s: {'ok' if ok else 'CHECK THE MARGINS'}")
    return "\n".join(lines), ok


def from_messages(graded: list[tuple[float, str]]) -> list[CheckRun]:
    """What a batch's messages say of each check: its speedup, and whether it was measured
    again (the median of several runs). NaN where a message names none (not scored)."""
    runs = []
    for fraction, text in graded:
        found = MEASURED.search(text)
        speedups = (float(found[1]),) * (2 if found[2] else 1) if found else ()
        runs.append(CheckRun(fraction, speedups, math.nan, "", math.nan, math.nan))
    return runs


def reliability(n: int, device: str, batch: Batch | None = None) -> tuple[str, bool]:
    """The points of each style in RELIABILITY over n checks, alone, with one core busy and
    (if `batch` is given) inside a grading batch with one core busy besides. Target: the
    points each style must get (all, or none for a loop) in at least 99% of the checks of
    every condition."""
    subjects = {name: STYLES[name] for name in RELIABILITY}
    needed, timings = math.ceil(0.99 * n), []
    results: dict[str, dict[str, tuple[list[float], list[CheckRun]]]] = {}
    for condition in ("alone", "one core busy"):
        started = time.perf_counter()
        with busy_core(condition == "one core busy"):
            for name, scored in repeated_checks(subjects, n, device).items():
                results.setdefault(name, {})[condition] = ([r.fraction for r in scored], scored)
        timings.append(f"{condition} {time.perf_counter() - started:.0f} s")
    if batch is not None:
        started = time.perf_counter()
        with busy_core():
            graded_batch = batch(list(subjects), n, device)
        for name, graded in graded_batch.items():
            results[name][GRADED] = ([f for f, _ in graded], from_messages(graded))
        timings.append(f"{GRADED} {time.perf_counter() - started:.0f} s")
    width = max(map(len, subjects)) + 1
    lines = [f"{'style':<{width}} {'condition':<21} {'points (of 10)':<16} {'expected':>8}  "
             f"speedup over looped  re-measured  check's time (max)"]
    met = True
    for name, by_condition in results.items():
        for condition, (fractions, scored) in by_condition.items():
            hits = as_expected(name, fractions)
            met &= hits >= needed
            speedups = spread([r.speedup for r in scored if r.speedups])
            again = f"{sum(len(r.speedups) > 1 for r in scored)}/{len(scored)}"
            walls = [r.wall for r in scored if not math.isnan(r.wall)]
            wall = f"{max(walls):.1f} s" if walls else "-"
            lines.append(f"{name:<{width}} {condition:<21} {points_seen(fractions):<16} "
                         f"{f'{hits}/{len(fractions)}':>8}  {speedups:<19}  {again:>11}  {wall}")
    verdict = "target met" if met else "TARGET MISSED"
    lines.append(f"reliability on {device}, N={n} ({', '.join(timings)}): the expected points in "
                 f"≥ {needed}/{n} checks of every style and condition: {verdict}")
    return "\n".join(lines), met
