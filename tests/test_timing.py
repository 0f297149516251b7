"""The speed check's logic, made deterministic: fake timers, tiny configs, no timing asserts."""

from __future__ import annotations

import dataclasses
import gc
import math
import shutil

import pytest
import torch
from conftest import SPEED, STUBS, TEMPLATE, TINY, measured, score_once
from torch import nn
from torch.overrides import _get_current_function_mode_stack

from mha_kit import settings
from mha_kit.assignments.mha import jobs as mha_jobs
from mha_kit.assignments.mha import speed as mha_speed
from mha_kit.assignments.mha import speed_config
from mha_kit.assignments.mha.baselines import (
    BENCH_ROWS,
    FusedReference,
    HeadLoopReference,
    LoopedReference,
    as_student_class,
)
from mha_kit.assignments.mha.modules import LONGEST_TIMED_T
from mha_kit.checks.core import CheckResult, Context
from mha_kit.grading.batch import grade_submission
from mha_kit.grading.registry import POINTS, WAITING_MESSAGES, run_check
from mha_kit.messages import Message, ids_in, msg
from mha_kit.oracle import causal_mask, multi_head_attention, torch_mha
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.loading import load_source
from mha_kit.speed import timing as speed_timing
from mha_kit.speed import verdict as speed_verdict


def fake_timer(per_call: dict[type, float], student: float):
    """Times by who is called (kit classes by type, anything else is the student's module)."""

    def timer(fn, xs):
        outs = [fn(x) for x in xs]
        return per_call.get(type(fn), student), outs

    return timer


KIT_TIMES = {LoopedReference: 8e-3, FusedReference: 1e-3}


def template_submission() -> InProcessSubmission:
    return InProcessSubmission(load_source(TEMPLATE).namespace, forbidden={})


# --------------------------------------------------------------------------- the harness


def test_rounds_rotate_who_goes_first_and_share_inputs() -> None:
    order: list[tuple[str, float]] = []

    def candidate(name: str):
        return lambda x: order.append((name, float(x))) or name

    inputs = {r: [torch.tensor(10.0 * r + c) for c in range(2)] for r in range(4)}
    times, _ = speed_timing.interleaved_times(
        {n: candidate(n) for n in "abc"}, inputs.__getitem__, rounds=4, warmup=1,
        timer=fake_timer({}, 1.0),
    )
    warmup, timed = order[:3], order[3:]
    assert warmup == [("a", 0.0), ("b", 0.0), ("c", 0.0)]
    firsts = [timed[i][0] for i in range(0, len(timed), 6)]
    assert firsts == ["a", "b", "c", "a"]
    for r in range(4):  # each candidate saw exactly this round's inputs
        seen = sorted(timed[6 * r:6 * (r + 1)])
        assert seen == sorted((n, 10.0 * r + c) for n in "abc" for c in range(2))
    assert times == {n: [1.0] * 4 for n in "abc"}
    assert [speed_timing.rotation(list("abc"), r) for r in (0, 1, 3)] == [
        list("abc"), list("bca"), list("abc")]  # the grader's rounds (speed.timed_run) too


def test_medians_and_paired_ratios() -> None:
    assert speed_verdict.medians({"a": [3.0, 1.0, 2.0], "b": [4.0, 4.0, 9.0, 1.0]}) == {
        "a": 2.0, "b": 4.0}
    # Round 2 is slow for both: the paired ratio ignores it, the ratio of medians would not.
    looped, student = [4.0, 4.0, 40.0, 4.0, 4.4], [1.0, 1.0, 10.0, 2.0, 1.1]
    assert speed_verdict.paired_ratio(looped, student) == 4.0
    times = {"looped": looped, "student": student, "fused": [0.5, 0.5, 5.0, 1.0, 0.55]}
    assert mha_speed.speed_ratios(times) == (4.0, 2.0)


@pytest.mark.parametrize(("name", "device", "config"), [
    ("tiny", "cuda", speed_config.TINY),
    ("small", "cpu", speed_config.SpeedConfig(B=2, T=16, E=128, H=32, rounds=9, calls=8, warmup=1)),
    ("small", "cuda", speed_config.SpeedConfig(B=8, T=128, E=512, H=32, rounds=9, calls=8,
                                               warmup=1, checked=16)),
    ("", "cpu", speed_config.CONFIGS["cpu"]), ("graded", "cuda", speed_config.CONFIGS["cuda"])])
def test_a_test_config_is_chosen_by_name_else_the_devices(name, device, config, monkeypatch
                                                         ) -> None:
    monkeypatch.setenv(settings.variable("speed_config"), name)
    assert speed_config.config_for(device) == config


def test_the_masks_check_runs_the_longest_sequence_any_device_times() -> None:
    """Else a module that cannot take that length (a 64-token mask buffer, say) passes every
    check on the CPU and fails only the timing run on a GPU, with PyTorch's size error."""
    assert max(cfg.T for cfg in speed_config.CONFIGS.values()) == LONGEST_TIMED_T


def test_inputs_come_from_the_seed_and_the_checked_calls_from_no_seed() -> None:
    assert torch.equal(speed_config.speed_input(TINY, 7, 3), speed_config.speed_input(TINY, 7, 3))
    assert not torch.equal(speed_config.speed_input(TINY, 7, 3),
                           speed_config.speed_input(TINY, 7, 4))
    cpu, cuda = speed_config.CONFIGS["cpu"], speed_config.CONFIGS["cuda"]
    assert speed_config.checked_indices(cpu) == list(range(cpu.rounds * cpu.calls))  # all
    drawn = [speed_config.checked_indices(cuda) for _ in range(2)]
    for sample in drawn:
        assert sample == sorted(set(sample)) and len(sample) == cuda.checked
        assert 0 <= sample[0] and sample[-1] < cuda.rounds * cuda.calls
    assert drawn[0] != drawn[1]  # the system's randomness, not the run's seed: 1 in 10^25 alike


def test_kit_modules_all_compute_multi_head_attention() -> None:
    params = speed_config.speed_params(TINY, 3)
    x = speed_config.speed_input(TINY, 3, 0)
    p64 = {k: v.double() for k, v in params.items()}
    expected = multi_head_attention(torch_mha(p64, TINY.E, TINY.H), x.double(), x.double(),
                                    x.double(), causal_mask(TINY.T))[0]
    kit = {**BENCH_ROWS, "loop in disguise": HeadLoopReference}
    for name, cls in kit.items():
        with torch.no_grad():
            got = cls(params, TINY.H)(x)
        torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=1e-5, msg=name)


# --------------------------------------------------------------------------- scoring


NEEDED = mha_speed.SPEEDUP_NEEDED


@pytest.mark.parametrize(
    ("speedup", "fraction"),
    [
        (1.0, 0.0),  # as slow as looping
        (NEEDED * 0.999, 0.0),  # just below: nothing, never a part
        (NEEDED, 1.0),  # the threshold itself
        (20.0, 1.0),  # far faster
    ],
)
def test_all_or_nothing(speedup: float, fraction: float) -> None:
    assert mha_speed.speed_fraction(speedup) == fraction


def test_near_the_threshold_is_a_band_around_it() -> None:
    near = mha_speed.near_threshold
    assert 1 < NEEDED / mha_speed.NEAR and mha_speed.MAX_RUNS >= 3
    assert near(NEEDED) and near(NEEDED / mha_speed.NEAR * 1.01) and near(
        NEEDED * mha_speed.NEAR * 0.99)
    assert not near(NEEDED / mha_speed.NEAR) and not near(NEEDED * mha_speed.NEAR)
    assert not near(1.0) and not near(20.0) and not near(math.nan)


def test_measured_and_scored_with_a_fake_timer(tiny) -> None:
    sub, seed = template_submission(), 11
    timer = fake_timer(KIT_TIMES, student=1.6e-3)
    measurement = measured(sub, seed, timer)
    assert measurement["times"]["looped"] == [8e-3] * TINY.rounds
    assert len(measurement["digests"]) == TINY.rounds * TINY.calls
    assert mha_speed.total_measured(measurement) == pytest.approx(
        (8e-3 + 1e-3 + 1.6e-3) * TINY.rounds * TINY.calls)
    fraction, message = score_once(sub, measurement, "cpu", seed)
    assert fraction == 1.0
    assert message == msg("speed.passed", measured=message.params["measured"], needed=NEEDED)
    assert message.params["measured"].params == {
        "speedup": pytest.approx(5.0), "student": pytest.approx(1.6),  # ms per call
        "looped": pytest.approx(8.0), "fused": pytest.approx(1.0), "device": "cpu",
        "runs": msg("speed.one_run"),  # the test config is named: this is not a grade
        "config": msg("speed.test_config", variable="MHA_KIT_SPEED_CONFIG", name="tiny")}


def test_too_slow_scores_nothing_and_says_what_was_measured_and_needed(tiny) -> None:
    sub, seed = template_submission(), 12
    measurement = measured(sub, seed, fake_timer(KIT_TIMES, 6e-3))
    fraction, message = score_once(sub, measurement, "cpu", seed)
    assert fraction == 0.0
    # all or nothing, and what to change (not the old "No faster", speed.no_faster)
    assert message.id == "speed.too_slow" and message.params["needed"] == NEEDED, message
    assert message.params["measured"].params["speedup"] == pytest.approx(8 / 6)


def test_a_threads_setting_is_restored(tiny) -> None:
    before = torch.get_num_threads()
    measured(template_submission(), 1, fake_timer(KIT_TIMES, 1e-3))
    assert torch.get_num_threads() == before


# --------------------------------------------------------------------------- anti-gaming


class CachesItsOutput(as_student_class(FusedReference)):
    """Computes once, then returns the same answer whatever the input."""

    def forward(self, query, **kwargs):
        if not hasattr(self, "cached"):
            self.cached = super().forward(query, **kwargs)
        return self.cached


class ReturnsZeros(as_student_class(FusedReference)):
    def forward(self, query, **kwargs):
        return torch.zeros_like(query), None


class ZerosWhileCounted(as_student_class(FusedReference)):
    """Answers nothing while its torch calls are counted (red team n1): no loop is counted."""

    def forward(self, query, **kwargs):
        if any(isinstance(m, speed_timing.OpCounter) for m in _get_current_function_mode_stack()):
            return torch.zeros_like(query), None
        return super().forward(query, **kwargs)


class SkipsMostCalls(as_student_class(FusedReference)):
    """While timed (garbage collection paused), computes one call in five, zeros otherwise (red
    team n9 computed only the calls it found the spot check would keep)."""

    def forward(self, query, **kwargs):
        self.calls = getattr(self, "calls", 0) + 1
        if gc.isenabled() or self.calls % 5 == 0:
            return super().forward(query, **kwargs)
        return torch.zeros_like(query), None


@pytest.mark.parametrize(("cls", "problem"), [(CachesItsOutput, "speed.wrong_output"),
                                              (SkipsMostCalls, "speed.wrong_output"),
                                              (ReturnsZeros, "speed.wrong_counted"),
                                              (ZerosWhileCounted, "speed.wrong_counted")])
def test_wrong_outputs_are_not_scored(tiny, cls: type[nn.Module], problem: str) -> None:
    sub = InProcessSubmission({"MultiHeadAttention": cls}, forbidden={}, kit_code=True)
    seed = 5
    measurement = measured(sub, seed, fake_timer(KIT_TIMES, 1e-4))
    fraction, message = score_once(sub, measurement, "cpu", seed)
    assert fraction == 0.0
    assert problem in ids_in(message), message


def test_an_output_other_than_the_committed_one_is_not_scored(tiny) -> None:
    sub, seed = template_submission(), 6
    measurement = measured(sub, seed, fake_timer(KIT_TIMES, 1e-4))
    right = mha_jobs._KEPT[sub][4]
    mha_jobs._KEPT[sub][4] = right + 0  # the same values, another tensor: still committed to
    assert score_once(sub, measurement, "cpu", seed)[0] == 1.0
    measurement = measured(sub, seed, fake_timer(KIT_TIMES, 1e-4))
    mha_jobs._KEPT[sub][4] = mha_jobs._KEPT[sub][4] + 1e-6  # right within the tolerance
    fraction, message = score_once(sub, measurement, "cpu", seed)
    assert fraction == 0.0 and "speed.output_changed" in ids_in(message), message


def test_kit_modules_pass_the_output_check_as_students(tiny) -> None:
    for cls in (FusedReference, HeadLoopReference):
        sub = InProcessSubmission({"MultiHeadAttention": as_student_class(cls)}, forbidden={},
                                  kit_code=True)
        measurement = measured(sub, 9, fake_timer(KIT_TIMES, 1e-3))
        assert mha_speed.output_check(measurement, lambda i, s=sub: mha_speed.revealed(s, i),
                                    TINY, 9) is None


def test_a_sample_drawn_after_the_commitment_is_revealed_and_checked(tiny, monkeypatch) -> None:
    """The GPU's way (`checked` outputs of all, as on cuda): the run commits to every output,
    the grader then draws which to see, and only those come back and are compared."""
    sampled = dataclasses.replace(TINY, checked=4)
    monkeypatch.setattr(mha_speed, "config_for", lambda device: sampled)
    monkeypatch.setattr(mha_jobs, "config_for", lambda device: sampled)
    drawn = [1, 5, 6, 17]
    monkeypatch.setattr(mha_speed, "checked_indices", lambda cfg: drawn)
    monkeypatch.setattr(mha_speed, "round_seeds", lambda rounds: [100 + r for r in range(rounds)])
    asked: list[list[int]] = []

    def judged(cls: type[nn.Module]) -> Message:
        sub = InProcessSubmission({"MultiHeadAttention": cls}, forbidden={}, kit_code=True)
        measurement = measured(sub, 8, fake_timer(KIT_TIMES, 1e-4))
        assert len(measurement["digests"]) == TINY.rounds * TINY.calls  # committed to all

        def reveal(indices: list[int]) -> dict:
            asked.append(indices)
            return mha_speed.revealed(sub, indices)

        return mha_speed.judge(measurement, "cpu", 8, reveal).problem

    class ZeroAt(as_student_class(FusedReference)):
        def forward(self, query, **kwargs):
            r, c = divmod(self.zero_at, TINY.calls)  # round r's seed is 100 + r (above)
            if torch.equal(query, speed_config.speed_input(TINY, 100 + r, c)):
                return torch.zeros_like(query), None
            return super().forward(query, **kwargs)

    assert judged(type("Unchecked", (ZeroAt,), {"zero_at": 3})) is None  # 3 was not drawn
    problem = judged(type("Checked", (ZeroAt,), {"zero_at": 5}))
    assert problem is not None and "speed.wrong_output" in ids_in(problem), problem
    assert asked == [drawn, drawn]


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        (lambda m: m.update(seed=m["seed"] + 1), "speed.other_config"),
        (lambda m: m["config"].update(calls=1), "speed.other_config"),
        (lambda m: m["times"]["student"].__setitem__(0, math.nan), "speed.malformed_times"),
        (lambda m: m["times"]["student"].pop(), "speed.malformed_times"),
        (lambda m: m["times"].pop("looped"), "speed.malformed_times"),
        (lambda m: m.update(digests=None), "speed.no_outputs"),
        (lambda m: m["digests"].pop(), "speed.no_outputs"),
        (lambda m: m.update(counted=[]), "speed.no_outputs"),
        (lambda m: m["digests"].__setitem__(2, "0" * 64), "speed.output_changed"),
    ],
)
def test_malformed_measurements_score_nothing(tiny, tamper, problem: str) -> None:
    sub = template_submission()
    measurement = measured(sub, 4, fake_timer(KIT_TIMES, 1e-3))
    tamper(measurement)
    fraction, message = score_once(sub, measurement, "cpu", 4)
    assert fraction == 0.0 and problem in ids_in(message), message


# --------------------------------------------------------------------------- the graded check


class NeverTimed(InProcessSubmission):
    def time_speed(self, device: str, seed: int) -> dict:
        raise AssertionError("timed although a check it needs failed")


def test_it_waits_for_the_value_checks_it_relies_on() -> None:
    waiting = WAITING_MESSAGES["speed_fused_vs_looped"]
    sub = NeverTimed(load_source(STUBS).namespace, forbidden={})
    result = run_check("speed_fused_vs_looped", sub, Context())
    assert result.score == 0 and result.message == msg(
        "waiting.failing", what=waiting, checks="fused_mha, fused_mha_masks")
    failed = CheckResult("fused_mha", 0, POINTS["fused_mha"], "values differ")
    result = run_check("speed_fused_vs_looped", NeverTimed(load_source(TEMPLATE).namespace),
                       Context(results={"fused_mha": failed}))
    assert result.score == 0 and result.message == msg("waiting.failing", what=waiting,
                                                       checks="fused_mha")
    # The timing is causal: a module's wrong causal mask is a failing value check, never
    # "cheating" (one in causal_mask costs that check alone: the module gets the kit's).
    tril = TEMPLATE.read_text().replace(
        "causal = causal_mask(tq, device=device)",
        "causal = torch.ones(tq, tq, dtype=torch.bool, device=device).tril()")
    result = run_check("speed_fused_vs_looped", NeverTimed(_namespace(tril)), Context())
    assert result.score == 0 and result.message == msg("waiting.failing", what=waiting,
                                                       checks="fused_mha_masks")


def _namespace(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "submission.py", "exec"), namespace)
    return namespace


@pytest.mark.parametrize(("student", "runs"), [(2.7e-6, 3), (1.6e-6, 1)])
def test_graded_check_measures_again_near_the_threshold(tiny, monkeypatch, student, runs) -> None:
    """The real check on a real module, its timer replaced: a first result near the threshold
    (8 / 2.7 = 3.0×) is measured MAX_RUNS times in all and the message says so; 5.0× once."""
    # Microseconds, so that the reported times stay below the wall time the check sees.
    micro = {LoopedReference: 8e-6, FusedReference: 1e-6}
    monkeypatch.setattr(mha_jobs, "timer_for", lambda device: fake_timer(micro, student))
    jobs = []
    sub = InProcessSubmission(load_source(TEMPLATE).namespace, forbidden={})
    monkeypatch.setattr(sub, "run_job", lambda *a, **k: (a[0] == mha_jobs.REVEAL_JOB and (
        jobs.append(a))) or InProcessSubmission.run_job(sub, *a, **k))
    passed = CheckResult("fused_mha", POINTS["fused_mha"], POINTS["fused_mha"], "ok")
    result = run_check("speed_fused_vs_looped", sub, Context(results={"fused_mha": passed}))
    assert result.score == POINTS["speed_fused_vs_looped"] and len(jobs) == runs
    median = msg("speed.median_of", runs=runs) if runs > 1 else msg("speed.one_run")
    assert result.message.id == "speed.passed", result.message  # it starts with what was measured
    measured = result.message.params["measured"]
    assert measured.params["speedup"] == pytest.approx(8e-6 / student, abs=0.05)  # as shown
    assert measured.params["runs"] == median


# --------------------------------------------------------------------------- one timing per GPU

def test_timings_on_a_gpu_take_turns_across_graders(tmp_path, monkeypatch):
    """`mha-kit grade --jobs N` on one GPU: a timing waits for another grader's to end (the
    lock is per open file, so a second open in this process stands in for another grader)."""
    import fcntl
    import os
    import threading
    import time


    monkeypatch.setattr(speed_verdict.tempfile, "gettempdir", lambda: str(tmp_path))
    other = os.open(tmp_path / speed_verdict.GPU_TURN_LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_EX)
    threading.Timer(0.3, os.close, (other,)).start()  # the other grader's timing ends
    started = time.monotonic()
    with speed_verdict.gpu_turn("cuda"):
        waited = time.monotonic() - started
        with pytest.raises(BlockingIOError):  # and now this grader holds the turn
            probe = os.open(tmp_path / speed_verdict.GPU_TURN_LOCK, os.O_RDWR)
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(probe)
    assert 0.25 <= waited < 5
    empty = tmp_path / "cpu"
    empty.mkdir()
    monkeypatch.setattr(speed_verdict.tempfile, "gettempdir", lambda: str(empty))
    with speed_verdict.gpu_turn("cpu"):  # the CPU takes no turn: no lock file is opened
        assert not any(empty.iterdir())


def test_a_stuck_gpu_turn_is_waited_for_a_bounded_time(tmp_path, monkeypatch):
    import fcntl
    import os
    import time


    monkeypatch.setattr(speed_verdict.tempfile, "gettempdir", lambda: str(tmp_path))
    stuck = os.open(tmp_path / speed_verdict.GPU_TURN_LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(stuck, fcntl.LOCK_EX)
    started = time.monotonic()
    with speed_verdict.gpu_turn("cuda:0", wait_s=0.2):
        pass
    os.close(stuck)
    assert 0.2 <= time.monotonic() - started < 5


def test_a_lock_file_this_account_cannot_open_does_not_stop_the_timing(tmp_path, monkeypatch):
    """Another account's lock file (made by root, say): the timing runs without a turn."""

    monkeypatch.setattr(speed_verdict.tempfile, "gettempdir", lambda: str(tmp_path / "missing"))
    # os.open fails: no such folder, as it fails for no permission
    with speed_verdict.gpu_turn("cuda"):
        pass


@pytest.mark.parametrize("where", ["in process", "worker"])
def test_a_slow_constructor_is_timed_and_never_accused(tmp_path, where):
    """A correct module whose constructor burns CPU earned 0, read "a slow constructor or first
    call, or a patched clock?": in process the CPU-time cross-check is gone (the kernel is
    untrusted by design); in the worker, construction and first calls run in a job of their
    own (measure.prepare_speed), outside the cross-checked run. A patched clock is still
    caught there (tests/test_batch.py: fake_timer.py)."""
    path = tmp_path / "slow_init.py"
    path.write_text(TEMPLATE.read_text().replace(
        "        self.num_heads = num_heads\n",
        "        self.num_heads = num_heads\n        sum(range(5_000_000))  # a slow setup\n", 1))
    if where == "worker":
        results, _ = grade_submission(path, only=["fused_mha", "fused_mha_masks", SPEED])
        result = results[-1]
    else:
        passed = {c: CheckResult(c, POINTS[c], POINTS[c], "ok") for c in ("fused_mha",
                                                                          "fused_mha_masks")}
        result = run_check(SPEED, InProcessSubmission.from_path(path), Context(results=passed))
    assert result.id == SPEED and result.score == POINTS[SPEED], result.message


@pytest.mark.skipif(shutil.which("g++") is None, reason="torch.compile needs a C++ compiler")
def test_a_module_that_compiles_its_softmax_earns_the_speed_points_in_the_worker(tmp_path):
    """torch.compile in a correct module: its first compile writes a precompiled header of
    about 150 MB (64 MiB per file failed it with CppCompileError), and counting the calls after
    the timing compiled the counting mode inside the cross-checked run ("a patched clock?").
    The limit has room for it, and the count runs in measure.prepare_speed."""
    path = tmp_path / "compiled_softmax.py"
    source = TEMPLATE.read_text()
    softmax = "        weights = self.dropout(F.softmax(scores, dim=-1))\n"
    assert source.count(softmax) == 1
    path.write_text(source.replace(softmax, "        weights = self.dropout(_softmax(scores))\n")
                    .replace("\ndef split_heads", "\n@torch.compile\ndef _softmax(scores):\n"
                             "    return F.softmax(scores, dim=-1)\n\n\ndef split_heads", 1))
    results, _ = grade_submission(path, only=["fused_mha", "fused_mha_masks", SPEED])
    assert [(r.id, r.score) for r in results] == [
        (check, POINTS[check]) for check in ("fused_mha", "fused_mha_masks", SPEED)], results
