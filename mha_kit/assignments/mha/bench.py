"""`mha-kit bench`: the attention implementations timed side by side (the speed check's
calibration and reliability: `calibration`). `compare_in_notebook` shows a student's own
looped and fused modules the same way.

torch is imported inside the functions: building the CLI's parser does not import it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from ...checks.inputs import per_head_params
from ...speed.timing import Forward, interleaved_times, timer_for, timing_conditions
from ...speed.verdict import medians
from .baselines import BENCH_ROWS
from .jobs import prepared
from .speed_config import SpeedConfig, config_for, speed_input, speed_params


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

    with timing_conditions():
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
    caption = bench_caption(list(tables))
    fig.tight_layout(rect=(0, 0.16 if caption else 0, 1, 1))
    if caption:
        fig.text(0.01, 0.01, textwrap.fill(caption, int(fig.get_figwidth() * 15)), fontsize=8,
                 va="bottom", ha="left")
    if path:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    else:
        plt.show()


def bench_caption(titles: list[str]) -> str:
    """What a reader of the figure must know: which config is graded, and why the larger one
    may show no gain on a CPU. Empty when no table is the graded one."""
    graded = next((t for t in titles if t.startswith("graded")), None)
    if graded is None:
        return ""
    text = (f"Graded: the speed check times the fused module against the looped one at the "
            f"'{graded.split(' (')[0].removeprefix('graded config: ')}' sizes only. The "
            f"larger config is for comparison, not graded.")
    if "cpu" in graded:
        text += (" On a CPU (one thread) the larger config's time goes into the matmuls, which "
                 "the looped and the fused module do in equal amounts; what fusing saves is "
                 "per-head Python and call overhead, so it can show little or no gain there.")
    return text


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
