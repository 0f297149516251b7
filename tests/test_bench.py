"""`mha-kit bench`, the calibration and reliability runs and the notebook comparison, at
tiny sizes."""

from __future__ import annotations

import contextlib
import subprocess
import time

import matplotlib.image
import pytest
from conftest import TEMPLATE, TINY

from mha_kit.assignments.mha import bench, speed_config, styleset
from mha_kit.assignments.mha import calibration as reliability
from mha_kit.assignments.mha.baselines import BENCH_ROWS
from mha_kit.cli import bench as bench_command
from mha_kit.cli import build_parser
from mha_kit.runner.loading import load_source
from mha_kit.speed import calibration as speed_calibration


@pytest.fixture
def tiny_bench(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    """The graded config TINY (conftest's `tiny`), and a tiny larger one."""
    monkeypatch.setattr(bench, "bench_configs", lambda device: {
        "graded": TINY, "larger": speed_config.SpeedConfig(B=1, T=7, E=12, H=3, rounds=3, calls=1)})


def bench_args(*argv: str):
    args = build_parser().parse_args(["bench", *argv])
    assert args.run is bench_command.run
    return args


def test_bench_tables_with_a_submission_and_a_plot(tiny_bench, tmp_path, capsys) -> None:
    png = tmp_path / "bench.png"
    assert bench_command.run(bench_args("--submission", str(TEMPLATE), "--plot", str(png))) == 0
    out = capsys.readouterr().out
    assert "graded config: B=2, T=5, E=8, H=4" in out and "larger config: B=1, T=7" in out
    for name in [*BENCH_ROWS, "your MultiHeadAttention"]:
        assert out.count(f"  {name} ") == 2, name
    assert out.count("1.0×") >= 2  # looped against itself, in each table
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 200 and image.shape[1] > 600


def test_the_plot_says_which_config_is_graded_and_why_larger_may_show_no_gain(tmp_path):
    import matplotlib.pyplot as plt

    figures = []
    tables = {"graded config: B=2, T=16, E=128, H=32 (cpu, 1 thread)": {"looped": 4.0, "a": 1.0},
              "larger config: B=8, T=128, E=256, H=8 (cpu, 1 thread)": {"looped": 2.0, "a": 2.0}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plt, "close", figures.append)
        bench.plot_tables(tables, "looped", tmp_path / "bench.png")
    (caption,) = [t.get_text() for t in figures[0].texts if "Graded" in t.get_text()]
    caption = " ".join(caption.split())
    assert "the 'B=2, T=16, E=128, H=32' sizes only" in caption
    assert "larger config is for comparison, not graded" in caption
    assert "can show little or no gain there" in caption  # on a CPU
    assert "no gain" not in bench.bench_caption(["graded config: B=8 (cuda:0, 1 thread)"])
    assert bench.bench_caption(["B=2, T=16, E=128, H=32, cpu"]) == ""  # compare: one table


def test_a_failing_submission_is_left_out(tiny_bench, tmp_path, capsys) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text(TEMPLATE.read_text() + "\nMultiHeadAttention.forward = lambda *a, **k: 1/0\n")
    assert bench_command.run(bench_args("--submission", str(broken))) == 0
    out = capsys.readouterr().out
    assert "your MultiHeadAttention is left out" in out and "ZeroDivisionError" in out
    assert "  your MultiHeadAttention " not in out


def test_compare_in_notebook(tiny, capsys) -> None:
    ns = load_source(TEMPLATE).namespace
    med = bench.compare_in_notebook(ns["LoopedMultiHeadAttention"], ns["MultiHeadAttention"],
                                    plot=False)
    assert list(med) == ["your LoopedMultiHeadAttention", "your MultiHeadAttention"]
    assert all(seconds > 0 for seconds in med.values())
    out = capsys.readouterr().out
    assert "B=2, T=5, E=8, H=4, cpu" in out and "your MultiHeadAttention" in out


@pytest.fixture
def busy_cores(monkeypatch) -> list[subprocess.Popen | None]:
    """The busy processes `speed.calibration.busy_core` starts (None where it was asked for
    none), for the calibration and for `mha-kit bench --under-load`."""
    started: list[subprocess.Popen | None] = []
    original = speed_calibration.busy_core

    @contextlib.contextmanager
    def recorded(busy: bool = True):
        with original(busy) as hog:
            started.append(hog)
            yield hog

    monkeypatch.setattr(reliability, "busy_core", recorded)
    monkeypatch.setattr(speed_calibration, "busy_core", recorded)
    return started


def test_reliability_reports_every_case_and_stops_its_busy_process(tiny, monkeypatch,
                                                                   busy_cores) -> None:
    started = busy_cores

    def batch(names: list[str], n: int, device: str) -> dict[str, list[tuple[float, str]]]:
        said = "measured: 3.1× faster than the kit's looped version, the median of 3 measurements"
        return {name: [(float(styleset.must_earn(name)), said)] * n for name in names}

    report, met = reliability.reliability(1, "cpu", batch)
    lines = report.splitlines()
    for name in styleset.RELIABILITY:
        for condition in ("alone", "one core busy", reliability.GRADED):
            assert sum(line.startswith(name) and f" {condition} " in line for line in lines) == 1
    grade_rows = [line for line in lines[:-1] if f" {reliability.GRADED} " in line]
    assert len(grade_rows) == len(styleset.RELIABILITY)
    assert all("3.1 / 3.1 / 3.1" in row and " 1/1 " in row for row in grade_rows)  # re-measured
    assert lines[-1].startswith("reliability on cpu, N=1 (alone ")
    assert lines[-1].endswith("target met" if met else "TARGET MISSED")
    hogs = [hog for hog in started if hog is not None]  # beside a core, and beside the batch
    assert len(started) == 3 and len(hogs) == 2 and all(h.poll() is not None for h in hogs)


def test_calibration_prints_each_style_and_the_band(tiny) -> None:
    names = ["einsum", "per-head: cat of slices in merge", "loop: softmax only",
             "loop: column slices"]
    report, ok = reliability.calibrate(1, "cpu", {n: styleset.STYLES[n] for n in names})
    lines = report.splitlines()
    assert lines[0] == "calibration on cpu (B=2, T=5, E=8, H=4): 1 checks per style"
    for name in names:
        row = next(line for line in lines if line.startswith(name + " "))
        assert f" {styleset.kind(name)} " in row
        assert ("compute 1/1" in row) == (not styleset.must_earn(name))  # the count decides
    assert any(line.startswith("dead band: ") for line in lines)
    assert lines[-1].startswith("calibration on cpu, N=1, 4 styles")
    assert lines[-1].endswith(": ok" if ok else ": CHECK THE MARGINS")


def test_bench_calibrate_and_reliability_options(monkeypatch, capsys) -> None:
    assert bench_args("--calibrate").calibrate == bench_command.CALIBRATE_N
    assert bench_args("--calibrate", "3").calibrate == 3
    calls = []
    monkeypatch.setattr(reliability, "calibrate", lambda n, device: calls.append(n) or ("t", True))
    monkeypatch.setattr(reliability, "reliability",
                        lambda n, device, batch: calls.append((n, batch)) or ("r", False))
    assert bench_command.run(bench_args("--calibrate", "--device", "cpu")) == 0
    assert bench_command.run(bench_args("--reliability", "5", "--device", "cpu")) == 1
    assert calls == [bench_command.CALIBRATE_N, (5, bench_command.grade_batch)]


def test_styles_graded_inside_a_batch(tiny) -> None:
    """The grade condition: the styles as submissions, graded by `mha-kit grade`'s pool."""
    ((fraction, message),) = bench_command.grade_batch(["loop: softmax only"], 1, "cpu")[
        "loop: softmax only"]
    # At the tiny size the timed calls take microseconds, and the CPU-time bound may reject
    # the run before the count speaks: either way, no points, said by the speed check.
    assert fraction == 0.0 and message.startswith(("part of the attention loops over heads",
                                                   "speed not scored"))


def test_calibrating_under_load_grades_beside_it_and_stops(monkeypatch, busy_cores) -> None:
    """--under-load: `mha-kit grade --jobs 2` over the reliability styles, again and again, and
    a busy core, for as long as the calibration runs; nothing is left running after it."""
    from mha_kit.grading import batch

    graded, started = [], busy_cores

    def grade_all(entries: list, jobs: int, device: str, assignment: str, limits):
        graded.append((len(entries), jobs, assignment))
        yield from ((entry, {}) for entry in entries)

    monkeypatch.setattr(batch, "grade_all", grade_all)
    with bench_command.grading_load("cpu"):
        while len(graded) < 2:  # graded twice: again and again
            time.sleep(0.01)
    stopped = len(graded)
    time.sleep(0.1)
    assert graded[0] == (len(styleset.RELIABILITY), 2, "mha") and len(graded) == stopped
    assert len(started) == 1 and started[0].poll() is not None
