"""Where the Triton speed check's threshold belongs on the GPU at hand: each style of a style
set (tests/corpus/triton/speed_styles.py) timed by the check's own job and judged by its own
judge, its share of SDPA's speed over N runs, the dead band between the slowest style that must
earn the points and the fastest that must not, the threshold in its middle and the margins
(`speed.calibration`). scripts/triton_speed_calibration.py prints it; docs/speed.md says what
a GPU session runs.
"""

from __future__ import annotations

import math
import secrets
import statistics

from ...runner.protocol import LocalSubmission
from ...speed.calibration import band_between, describe_band, spread
from . import jobs, speed

KINDS = ("correct", "shown", "slow")  # must earn the points, printed only, must not


def timed_runs(sub: LocalSubmission, device: str, runs: int) -> list[speed.Verdict]:
    """`runs` runs of the check's timing job on the submission, each on a fresh seed, judged;
    its kernels compiled first (`jobs.prepare_speed`), as the check does."""
    jobs.prepare_speed(sub, device)
    verdicts = []
    for _ in range(runs):
        seed = secrets.randbelow(2**31)
        verdicts.append(speed.judge(jobs.measure_speed(sub, device, seed), seed))
    return verdicts


def table_head(device: str) -> list[str]:
    """The table's title and column heads."""
    return [f"Triton speed check, {device}: share of SDPA's speed (SDPA's time / the style's, "
            "forward and backward), min / median / max; ms per call, medians",
            f"{'style':28} {'kind':8} {'share of SDPA':20} {'style':>8} {'SDPA':>8} "
            f"{'PyTorch':>8}"]


def style_row(label: str, kind: str, verdicts: list[speed.Verdict]) -> str:
    """One style's row: its share of SDPA's speed over its scored runs, and its median times."""
    good = [v for v in verdicts if v.problem is None]
    problems = len(verdicts) - len(good)
    ms = {name: statistics.median(v.medians[name] for v in good) * 1e3 if good else math.nan
          for name in speed.CANDIDATES}
    return (f"{label:28} {kind:8} {spread([v.speedup for v in good], '{:.3f}'):20} "
            f"{ms['student']:8.2f} {ms['sdpa']:8.2f} {ms['pytorch']:8.2f}"
            + (f"  ({problems} runs not scored)" if problems else ""))


def calibration_table(results: dict[str, tuple[str, list[speed.Verdict]]], device: str
                      ) -> tuple[list[str], bool]:
    """For each style (label: its kind and its runs): its share of SDPA's speed (min / median
    / max) and its median times per call; then the dead band, the threshold it supports and
    the margins of SDPA_SHARE_NEEDED (its suggested value while unset); whether they hold."""
    lines = table_head(device)
    shares: dict[str, dict[str, list[float]]] = {kind: {} for kind in KINDS}
    for label, (kind, verdicts) in results.items():
        shares[kind][label] = [v.speedup for v in verdicts if v.problem is None]
        lines.append(style_row(label, kind, verdicts))
    band = band_between(shares["correct"], shares["slow"])
    needed = speed.SDPA_SHARE_NEEDED
    if needed is None and band is not None:
        lines.append("SDPA_SHARE_NEEDED is unset (the check does not score): the margins below "
                     "are those of the threshold the band supports")
        needed = band.threshold
    described, ok = describe_band(band, needed if needed is not None else math.nan,
                                  "SDPA_SHARE_NEEDED")
    return lines + described, ok
