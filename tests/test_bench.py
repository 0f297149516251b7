"""`mha-kit bench`, the reliability run and the notebook comparison, at tiny sizes."""

from __future__ import annotations

import contextlib
import subprocess

import matplotlib.image
import pytest
from conftest import TEMPLATE, TINY

from autograder.cli import bench as bench_command
from autograder.cli import build_parser
from autograder.runner.loading import load_source
from autograder.speed import bench
from autograder.speed import config as speed_config
from autograder.speed.baselines import BENCH_ROWS


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


def test_reliability_reports_every_case_and_stops_its_busy_process(tiny_bench, monkeypatch) -> None:
    started: list[subprocess.Popen] = []
    original = bench.busy_core

    @contextlib.contextmanager
    def recorded(busy: bool = True):
        with original(busy) as hog:
            started.append(hog)
            yield hog

    monkeypatch.setattr(bench, "busy_core", recorded)
    report, met = bench.reliability(1, "cpu")
    lines = report.splitlines()
    for name in ("fused reference", "loop in disguise"):
        for load in ("no other load", "one core busy"):
            assert sum(line.startswith(f"{name}, {load}") for line in lines) == 1
    assert lines[-1].startswith("reliability on cpu, N=1: fused reference full points")
    assert lines[-1].endswith("target met" if met else "TARGET MISSED")
    hogs = [hog for hog in started if hog is not None]
    assert len(started) == 2 and len(hogs) == 1 and hogs[0].poll() is not None
