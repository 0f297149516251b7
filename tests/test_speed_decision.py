"""The speed check's decision, deterministic: the calls counted once per head, all or nothing,
measuring again near the threshold within the time budget, the dead band the calibration
finds. Fake timers and fake clocks; no time is asserted."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from conftest import TINY, measured, score_once
from test_timing import KIT_TIMES, fake_timer

from mha_kit.assignments.mha import calibration
from mha_kit.assignments.mha import jobs as mha_jobs
from mha_kit.assignments.mha import speed as mha_speed
from mha_kit.assignments.mha.speed import NEAR, SPEEDUP_NEEDED, Verdict
from mha_kit.assignments.mha.speed_config import speed_input, speed_params
from mha_kit.assignments.mha.styleset import PARTIAL_LOOPS, RELIABILITY, STYLES, kind, must_earn
from mha_kit.checks.core import CheckFailed, Context
from mha_kit.grading.registry import run_check
from mha_kit.messages import ids_in, msg
from mha_kit.oracle import causal_mask, multi_head_attention, torch_mha
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.speed import calibration as speed_calibration
from mha_kit.speed import verdict as speed_verdict

MEDIANS = {"student": 1e-3, "looped": 3e-3, "fused": 1e-3}


def verdict(speedup: float, **kwargs) -> Verdict:
    return Verdict(None, speedup, 1.0, MEDIANS, heads=(32, 16), **kwargs)


# --------------------------------------------------------------------------- the style set


def test_every_style_computes_multi_head_attention() -> None:
    params = speed_params(TINY, 3)
    x = speed_input(TINY, 3, 0)
    p64 = {k: v.double() for k, v in params.items()}
    expected = multi_head_attention(torch_mha(p64, TINY.E, TINY.H), x.double(), x.double(),
                                    x.double(), causal_mask(TINY.T))[0]
    for name, cls in STYLES.items():
        forward = mha_jobs.prepared(cls(TINY.E, TINY.H), "MultiHeadAttention", params, "cpu")
        with torch.no_grad():
            got = forward(x)
        torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=1e-5, msg=name)


def test_the_style_set_has_every_kind_and_the_reliability_set_covers_them() -> None:
    kinds = {kind(name) for name in STYLES}
    assert kinds == {"fused", "per-head", "loop", "partial loop"}
    assert PARTIAL_LOOPS <= set(STYLES) and set(RELIABILITY) <= set(STYLES)
    assert {kind(name) for name in RELIABILITY} == kinds
    assert must_earn("einsum") and must_earn("per-head: cat of slices in merge")
    assert not must_earn("loop: softmax only") and not must_earn("loop: column slices")


@pytest.mark.parametrize("name", ["per-head: slices in split and merge",
                                  "seeds: bmm, nn.Softmax, tensor scale, buffer mask"])
def test_a_style_is_a_complete_submission(name: str) -> None:
    """`mha-kit bench --reliability` grades styles as submissions: they pass the speed check."""
    sub = InProcessSubmission({"MultiHeadAttention": STYLES[name]}, kit_code=True)
    for check_id in ("fused_mha", "fused_mha_masks", "fused_mha_contract"):
        assert run_check(check_id, sub).passed, check_id


# --------------------------------------------------------------------------- the count


def test_data_movement_and_computation() -> None:
    for op in ("torch.Tensor.__getitem__", "torch.cat", "torch.stack", "torch.Tensor.unbind",
               "torch.Tensor.chunk", "torch.Tensor.contiguous", "torch.Tensor.shape.__get__"):
        assert mha_speed.moves_data(op), op
    for op in ("torch.Tensor.softmax", "torch.matmul", "torch.Tensor.masked_fill",
               "torch.nn.functional.linear", "torch.functional.einsum", "torch.Tensor.div"):
        assert not mha_speed.moves_data(op), op


def test_what_grows_with_the_heads_runs_once_per_head() -> None:
    ops = {"heads": [32, 16], "counts": [
        {"torch.matmul": 2, "torch.Tensor.__getitem__": 96, "torch.Tensor.softmax": 33,
         "torch.cat": 1, "torch.Tensor.view": 40},
        {"torch.matmul": 2, "torch.Tensor.__getitem__": 48, "torch.Tensor.softmax": 17,
         "torch.Tensor.view": 30},  # view grows, but by less than a call per head
    ]}
    assert mha_speed.per_head_ops(ops) == [("torch.Tensor.__getitem__", 96, 48),
                                             ("torch.Tensor.softmax", 33, 17)]


@pytest.mark.parametrize(("name", "loops", "moves"), [
    ("einsum", [], []),
    ("per-head: cat of slices in merge", [], ["torch.Tensor.__getitem__"]),
    ("loop: softmax only", ["torch.Tensor.masked_fill", "torch.Tensor.softmax"],
     ["torch.Tensor.__getitem__"]),
])
def test_the_timing_run_counts_the_calls(tiny, name: str, loops: list, moves: list) -> None:
    sub = InProcessSubmission({"MultiHeadAttention": STYLES[name]}, forbidden={},
                              kit_code=True)
    measurement = measured(sub, 3, fake_timer(KIT_TIMES, 1e-3))
    judged = mha_speed.judge(measurement, "cpu", 3, lambda i: mha_speed.revealed(sub, i))
    assert judged.problem is None and judged.heads == (TINY.H, TINY.H // 2)
    assert sorted(op for op, _, _ in judged.loops) == loops
    assert [op for op, _, _ in judged.moves] == moves
    fraction, message = mha_speed.decide([judged], "cpu")
    if loops:  # 8× faster than looped, yet nothing, however fast: the count decides
        assert fraction == 0 and message.id == "speed.loops", message
        counted = {k: message.params[k] for k in ("count", "heads", "half_count", "half")}
        assert counted == {"count": TINY.H, "heads": TINY.H, "half_count": TINY.H // 2,
                           "half": TINY.H // 2}
    else:
        assert fraction == 1 and (message.id == "speed.per_head") == bool(moves), message


def test_malformed_counts_are_not_scored(tiny) -> None:
    sub = InProcessSubmission({"MultiHeadAttention": STYLES["einsum"]}, forbidden={},
                              kit_code=True)
    measurement = measured(sub, 4, fake_timer(KIT_TIMES, 1e-3))
    for bad in (None, {"heads": [TINY.H, TINY.H], "counts": [{}, {}]},
                {"heads": [TINY.H, TINY.H // 2], "counts": [{"x": -1}, {}]},
                {"heads": [TINY.H, TINY.H // 2], "counts": [{"x": 1.5}, {}]}):
        fraction, message = score_once(sub, {**measurement, "ops": bad}, "cpu", 4)
        assert fraction == 0 and "speed.malformed_ops" in ids_in(message), message


# --------------------------------------------------------------------------- the decision


def test_measure_again_only_when_the_first_result_is_near() -> None:
    assert mha_speed.wants_another([verdict(SPEEDUP_NEEDED * 1.1)])
    assert mha_speed.wants_another([verdict(SPEEDUP_NEEDED * 1.1), verdict(9.0)])
    assert not mha_speed.wants_another([verdict(SPEEDUP_NEEDED * 1.1)] * 3)  # MAX_RUNS
    assert not mha_speed.wants_another([verdict(SPEEDUP_NEEDED * NEAR)])  # decided
    assert not mha_speed.wants_another([verdict(SPEEDUP_NEEDED / NEAR)])
    assert not mha_speed.wants_another([verdict(2.5, loops=[("torch.matmul", 33, 17)])])
    assert not mha_speed.wants_another([Verdict(mha_speed.msg("speed.no_outputs"))])


def busy_beside() -> Verdict:
    """A run the machine made unfair: the student's worker busy while a baseline ran."""
    return Verdict(mha_speed.msg("speed.not_scored", reason=mha_speed.msg(
        "speed.busy_beside", share=6.0)))


def test_an_unfair_run_is_measured_again_and_decides_only_if_every_run_was() -> None:
    """A worker busy beside a baseline in one run (a busy machine stretching the tail of its
    own loop) costs nothing where another run was fair; busy in every run, the points."""
    assert mha_speed.wants_another([busy_beside()])
    assert mha_speed.wants_another([busy_beside(), verdict(SPEEDUP_NEEDED * 1.1)])
    assert not mha_speed.wants_another([busy_beside(), verdict(SPEEDUP_NEEDED * 2)])
    assert not mha_speed.wants_another([busy_beside()] * 3)  # MAX_RUNS
    fraction, message = mha_speed.decide([busy_beside(), verdict(SPEEDUP_NEEDED * 2)], "cpu")
    assert fraction == 1.0 and {"speed.passed", "speed.one_run"} <= ids_in(message), message
    fraction, message = mha_speed.decide([busy_beside()] * 3, "cpu")
    assert fraction == 0.0 and "speed.busy_beside" in ids_in(message), message


@pytest.mark.parametrize(("speedups", "fraction"), [
    ([2.4, 2.7, 2.6], 1.0),  # the median decides, not the first
    ([2.6, 2.3, 2.4], 0.0),
    ([2.4, 2.6], 1.0),  # two runs (the budget ran out): the upper one
])
def test_the_median_run_decides(speedups: list, fraction: float) -> None:
    got, message = mha_speed.decide([verdict(s) for s in speedups], "cpu")
    assert got == fraction
    median = sorted(speedups)[len(speedups) // 2]
    assert message.id in ("speed.passed", "speed.too_slow"), message  # what was measured first
    measured = message.params["measured"]
    assert measured.params["speedup"] == pytest.approx(median)
    assert measured.params["runs"] == msg("speed.median_of", runs=len(speedups))


def test_a_problem_in_any_run_decides() -> None:
    problem = mha_speed.msg("speed.not_scored", reason=mha_speed.msg("speed.no_outputs"))
    assert mha_speed.decide([verdict(9.0), Verdict(problem)], "cpu") == (0.0, problem)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_gate(monkeypatch, speedups: list[float], seconds_per_run: float) -> tuple[float, int]:
    """check_speed with every timing run replaced: each takes `seconds_per_run` on a fake
    clock and is judged to have the next speedup. (points fraction, runs made)."""
    clock, made, queue = FakeClock(), [], iter(speedups)

    def timed_run(sub, device, seed):
        clock.now += seconds_per_run
        made.append(seed)
        return speed_verdict.TimedRun({}, seconds_per_run, None)

    monkeypatch.setattr(speed_verdict.time, "perf_counter", clock)
    monkeypatch.setattr(mha_speed, "timed_run", timed_run)
    monkeypatch.setattr(mha_speed, "judge", lambda m, device, seed, reveal: verdict(next(queue)))
    monkeypatch.setattr(mha_speed, "implausible", lambda run: None)
    try:
        fraction = mha_speed.check_speed(None, Context())
    except CheckFailed:
        fraction = 0.0
    return fraction, len(made)


@pytest.mark.parametrize(("speedups", "seconds", "fraction", "runs"), [
    ([6.0], 0.5, 1.0, 1),  # far above: one run
    ([1.5], 0.5, 0.0, 1),  # far below: one run
    ([2.4, 2.7, 2.6], 0.5, 1.0, 3),  # near: three runs, the median decides
    ([2.6, 2.3, 2.4], 0.5, 0.0, 3),
    ([2.4, 2.7, 2.6], 2.0, 1.0, 2),  # a third 2 s run would pass BUDGET_S: two
    ([2.4, 2.7, 2.6], 3.0, 0.0, 1),  # a second 3 s run would pass it: the first decides
])
def test_the_gate_measures_again_within_its_budget(monkeypatch, speedups, seconds, fraction,
                                                   runs) -> None:
    assert speed_verdict.BUDGET_S < 5
    assert run_gate(monkeypatch, speedups, seconds) == (fraction, runs)


def request(cpu: float | None, seconds: float, beside: float | None = None
            ) -> speed_verdict.Request:
    return speed_verdict.Request({"seconds": seconds}, 1.0, cpu, beside)


def test_the_students_rounds_are_timed_by_the_kernels_count() -> None:
    """Each student round: its worker's CPU time less what a round costs besides its calls in
    the clean worker (CPU less report: 0.5 ms here); what the student reports is ignored."""
    baselines = [request(0.0305, 0.010), request(0.0035, 0.001), request(0.0040, 0.001)]
    student = [request(0.0065, 1e-9), request(0.0095, 1e-9)]  # a rewound clock reports ~0
    assert speed_verdict.student_times(student, baselines, 3, True) == [
        pytest.approx(0.002), pytest.approx(0.003)]
    # No count to read (no /proc, or on a GPU, where the times are CUDA events): the reports
    assert speed_verdict.student_times(student, baselines, 3, False) == [1e-9, 1e-9]
    unread = [request(None, 2e-3), request(0.0095, 3e-3)]
    assert speed_verdict.student_times(unread, baselines, 3, True) == [2e-3, 3e-3]
    # A round that costs less than the overhead (calls that do nothing, on a busy machine) is
    # the fastest the count can see, a positive time, never a malformed 0: its outputs decide.
    idle = [request(0.0003, 1e-9)]
    assert speed_verdict.student_times(idle, baselines, 3, True) == [speed_verdict.FASTEST_SEEN / 3]


class Clocked(InProcessSubmission):
    """In process, with a CPU clock the test moves: `spend` seconds per round it runs, and
    `neighbour_spend` on its neighbour's clock meanwhile (a process busy beside it)."""

    def __init__(self, namespace: dict, spend: float, clean: Clocked | None = None,
                 neighbour_spend: float = 0.0):
        super().__init__(namespace, forbidden={}, kit_code=True)
        self.clock, self.spend, self.clean = 0.0, spend, clean
        self.neighbour: Clocked | None = None
        self.neighbour_spend = neighbour_spend

    def cpu_seconds(self) -> float:
        return self.clock

    def clean_worker(self) -> Clocked | None:
        return self.clean

    def run_job(self, job, what, **kwargs):
        if job == mha_jobs.ROUND_JOB:
            self.clock += self.spend
            if self.neighbour is not None:
                self.neighbour.clock += self.neighbour_spend
        return super().run_job(job, what, **kwargs)


@pytest.mark.parametrize(("busy", "scored"), [(0.0, True), (0.5e-6, False)])
def test_a_student_process_busy_while_a_baseline_is_timed_is_not_scored(tiny, monkeypatch,
                                                                        busy, scored) -> None:
    # Microseconds, so that the times stay below the wall time the check sees.
    micro = {k: v * 1e-3 for k, v in KIT_TIMES.items()}
    monkeypatch.setattr(mha_jobs, "timer_for", lambda device: fake_timer(micro, 1e-6))
    clean = Clocked({}, spend=4e-6, neighbour_spend=busy)  # 5% of a round: 0.2 µs
    student = Clocked({"MultiHeadAttention": STYLES["einsum"]}, spend=3.5e-6, clean=clean)
    clean.neighbour = student
    seed = 5
    run = mha_speed.timed_run(student, "cpu", seed)
    problem = mha_speed.implausible(run)
    assert run.busy == pytest.approx(busy / 4e-6)
    assert (problem is None) == scored, problem
    if not scored:
        assert "speed.busy_beside" in ids_in(problem), problem
    verdict = mha_speed.judge(run.measurement, "cpu", seed,
                              lambda i: mha_speed.revealed(student, i))
    assert verdict.problem is None, verdict.problem


def test_an_implausible_run_is_not_scored(monkeypatch) -> None:
    problem = mha_speed.msg("speed.not_scored", reason=mha_speed.msg("speed.over_wall",
                                                                         wall=0.1))
    monkeypatch.setattr(mha_speed, "timed_run",
                        lambda sub, device, seed: speed_verdict.TimedRun({}, 0.1, None))
    monkeypatch.setattr(mha_speed, "judge", lambda m, device, seed, reveal: verdict(9.0))
    monkeypatch.setattr(mha_speed, "implausible", lambda run: problem)
    with pytest.raises(CheckFailed) as failed:
        mha_speed.check_speed(None, Context())
    assert failed.value.message == problem


# --------------------------------------------------------------------------- calibration


def test_the_dead_band_lies_between_correct_styles_and_whole_loops() -> None:
    band = calibration.dead_band({
        "einsum": [6.0, 6.4], "per-head: slices in split and merge": [3.3, 3.6],
        "loop: softmax only": [3.9],  # a partial loop: left to the count
        "loop: column slices": [1.7, 1.8], "loop: per-head linear": [0.9],
    })
    assert (band.slowest, band.slowest_style) == (3.3, "per-head: slices in split and merge")
    assert (band.fastest, band.fastest_style) == (1.8, "loop: column slices")
    assert band.threshold == 2.4  # √(3.3 × 1.8) = 2.437, to two figures
    # Shares of another's speed, below 1 (the Triton check's): two figures, not one decimal
    shares = calibration.dead_band({"fast enough": [0.36], "loop: one launch per head": [0.04]})
    assert shares.threshold == 0.12 and min(shares.margins(0.12)) == pytest.approx(3.0)
    below, above = band.margins(2.4)
    assert below == pytest.approx(3.3 / 2.4) and above == pytest.approx(2.4 / 1.8)
    lines, ok = calibration.describe_band(band, SPEEDUP_NEEDED, "SPEEDUP_NEEDED")
    assert ok == (min(band.margins(SPEEDUP_NEEDED)) >= speed_calibration.MIN_MARGIN)
    assert "threshold it would choose: 2.4×" in "\n".join(lines)
    overlap = calibration.dead_band({"einsum": [1.5], "loop: column slices": [1.8]})
    assert calibration.describe_band(overlap, SPEEDUP_NEEDED, "SPEEDUP_NEEDED") == ([
        "dead band: 1.8× (fastest whole loop: loop: column slices) to 1.5× (slowest correct "
        "style: einsum)", "no dead band: no threshold separates them"], False)
    assert calibration.dead_band({"einsum": [6.0]}) is None


def test_points_seen_and_expected() -> None:
    assert calibration.points_seen([1.0] * 99 + [0.0]) == "10 ×99, 0 ×1"
    assert calibration.as_expected("einsum", [1.0, 1.0, 0.0]) == 2
    assert calibration.as_expected("loop: softmax only", [0.0, 1.0]) == 1
    assert calibration.spread([3.0, 1.0, 2.0]) == "1.0 / 2.0 / 3.0"


def test_check_runs_report_the_deciding_speedup() -> None:
    runs = [calibration.CheckRun(1.0, s, 1.0, "", 0.1, 0.1) for s in
            [(3.0,), (2.4, 2.7, 2.6), (2.4, 2.6), ()]]
    assert [r.speedup for r in runs[:3]] == [3.0, 2.6, 2.6] and math.isnan(runs[3].speedup)


def test_repeated_checks_alternate_and_record(tiny, monkeypatch) -> None:
    monkeypatch.setattr(mha_jobs, "timer_for", lambda device: fake_timer(
        {k: v * 1e-3 for k, v in KIT_TIMES.items()}, 1e-6))
    monkeypatch.setattr(mha_speed, "implausible", lambda run: None)  # fake times are tiny
    names = ["einsum", "loop: softmax only"]
    runs = calibration.repeated_checks({n: STYLES[n] for n in names}, 2, "cpu", forbidden={})
    assert list(runs) == names and all(len(r) == 2 for r in runs.values())
    assert [r.per_head for r in runs["loop: softmax only"]] == ["compute"] * 2
    assert [r.fraction for r in itertools.chain(*runs.values())] == [1.0, 1.0, 0.0, 0.0]
