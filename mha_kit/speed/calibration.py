"""Calibrating a speed check on the machine at hand, whatever it times: the dead band between
the slowest answer that must earn the points and the fastest that must not, the threshold in
its middle and the margins on both sides, and a core kept busy meanwhile (docs/speed.md). An
assignment's calibration (`assignments.mha.calibration`) runs its check over its styles.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

MIN_MARGIN = 1.25  # the threshold must sit this far from both edges of the dead band


# Torch work on one thread, as a grader does: matrix products and a softmax compete with the
# timed process for the caches and the memory as well as for a core. A Python spin loop
# competes for a core alone, and left unseen the failures of correct modules under graders.
BUSY_TORCH = ("import torch\ntorch.set_num_threads(1)\nx = torch.randn(512, 512)\n"
              "while True:\n    (x @ x).softmax(-1)\n")


@contextlib.contextmanager
def busy_core(busy: bool = True) -> Iterator[subprocess.Popen | None]:
    """Another process doing torch work on one core while the block runs (none if not busy)."""
    if not busy:
        yield None
        return
    hog = subprocess.Popen([sys.executable, "-c", BUSY_TORCH])
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait()


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    """min / median / max."""
    if not values:
        return "-"
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values),
                                               max(values)))


@dataclass(frozen=True)
class Band:
    """The dead band between the slowest correct style and the fastest whole loop."""

    slowest: float
    slowest_style: str
    fastest: float
    fastest_style: str

    @property
    def threshold(self) -> float:
        """The geometric middle, to two significant figures (a share of SDPA's speed is below 1,
        a speedup over a loop above): equal margins on both sides."""
        return float(f"{math.sqrt(self.slowest * self.fastest):.2g}")

    def margins(self, threshold: float) -> tuple[float, float]:
        """(below the slowest correct style, above the fastest whole loop)."""
        return self.slowest / threshold, threshold / self.fastest


def band_between(correct: dict[str, list[float]], loops: dict[str, list[float]]) -> Band | None:
    """The dead band between the speedups of answers that must earn the points (`correct`)
    and of those that must not (`loops`), by name. None without both."""
    correct = {n: min(v) for n, v in correct.items() if v}
    loops = {n: max(v) for n, v in loops.items() if v}
    if not correct or not loops:
        return None
    slow, fast = min(correct, key=correct.__getitem__), max(loops, key=loops.__getitem__)
    return Band(correct[slow], slow, loops[fast], fast)


def describe_band(band: Band | None, threshold: float, name: str) -> tuple[list[str], bool]:
    """The band, the threshold it supports, the margins of the current `threshold` (called
    `name` in its check); whether they hold."""
    if band is None:
        return ["dead band: needs a correct style and a whole loop"], False
    lines = [f"dead band: {band.fastest:.3g}× (fastest whole loop: {band.fastest_style}) to "
             f"{band.slowest:.3g}× (slowest correct style: {band.slowest_style})"]
    if band.slowest <= band.fastest:
        return lines + ["no dead band: no threshold separates them"], False
    below, above = band.margins(band.threshold)
    lines.append(f"threshold it would choose: {band.threshold:g}× (margins: {below:.2f}× below "
                 f"the slowest correct style, {above:.2f}× above the fastest whole loop)")
    below, above = band.margins(threshold)
    ok = min(below, above) >= MIN_MARGIN
    lines.append(f"{name} now: {threshold:g}× (margins {below:.2f}× and "
                 f"{above:.2f}×; {'both' if ok else 'NOT both'} ≥ {MIN_MARGIN:g})")
    return lines, ok


