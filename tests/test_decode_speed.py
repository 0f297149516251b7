"""The decoding speed check, through the real worker: a correct cache earns the points, a
module that keeps a cache but recomputes everything does not (the reliability over many runs
and the dead band: scripts/decode_speed_reliability.py, docs/speed.md). Run at the kit's test
config, MHA_KIT_SPEED_CONFIG=small (tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import CORPUS

from autograder.assignments.llm_attention.decode_config import decode_config
from autograder.assignments.llm_attention.decode_speed import DECODE_SPEED_CHECK, decoded, judge
from autograder.grading.batch import grade_submission
from autograder.messages import ids_in
from autograder.speed.check import TimedRun

sys.path.insert(0, str(CORPUS / "llm"))
from decode_styles import STYLES, source  # noqa: E402

ONLY = ["llm_kv_cache", DECODE_SPEED_CHECK]


def graded(style: str, tmp_path: Path) -> dict:
    path = tmp_path / "style.py"
    path.write_text(source(style))
    results, problems = grade_submission(path, assignment="llm_attention", only=ONLY)
    assert not problems
    return {r.id: r for r in results}


def test_a_growing_cache_earns_the_points(tmp_path: Path):
    results = graded("a growing cache (torch.cat)", tmp_path)
    assert results["llm_kv_cache"].passed
    speed = results[DECODE_SPEED_CHECK]
    assert speed.passed and "llm.speed_passed" in ids_in(speed.message), speed.message


def test_recomputing_everything_loses_them_though_its_values_are_right(tmp_path: Path):
    style = "recomputes everything, keeps the new rows"
    assert not STYLES[style][0]
    results = graded(style, tmp_path)
    assert results["llm_kv_cache"].passed
    speed = results[DECODE_SPEED_CHECK]
    assert not speed.passed and "llm.speed_too_slow" in ids_in(speed.message), speed.message


def test_a_report_that_is_not_times_is_not_scored():
    for junk in (None, {"times": {"cached": [1.0]}}, {"times": {"cached": "x", "recomputed": []},
                                                       "outputs": []}):
        run = judge(TimedRun(junk, 1.0, None), 1)
        assert run.problem is not None and "llm.speed_malformed" in ids_in(run.problem)


def _right_report(seed: int, cached: float, recomputed: float) -> dict:
    """A report with the right outputs and these times per round."""
    cfg = decode_config()
    return {"times": {"cached": [cached] * cfg.rounds, "recomputed": [recomputed] * cfg.rounds},
            "outputs": list(decoded(cfg, seed).float().split(1, dim=1))}


def test_reported_times_are_checked_against_what_the_grader_saw():
    report = _right_report(7, 0.01, 0.2)
    reported = 0.21 * decode_config().rounds
    run = judge(TimedRun(report, reported * 2, reported), 7)
    assert run.problem is None and abs(run.speedup - 20) < 1e-9
    over_wall = judge(TimedRun(report, reported / 2, None), 7)
    assert "speed.over_wall" in ids_in(over_wall.problem)
    under_cpu = judge(TimedRun(report, reported * 2, reported * 3), 7)
    assert "speed.under_cpu" in ids_in(under_cpu.problem)
    wrong = judge(TimedRun(report, reported * 2, None), 8)  # another seed's outputs
    assert "llm.speed_spot" in ids_in(wrong.problem)
