"""Shared paths, constants and helpers for the kit's own tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grading.registry import CHECKS, POINTS
from autograder.speed import config as speed_config

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
TEMPLATE = CORPUS / "template.py"
STUBS = CORPUS / "stubs.py"
HOSTILE = ROOT / "tests" / "hostile"
SPEED = "speed_fused_vs_looped"
# Every check but the speed check: what a submission gets the same way on any machine.
DETERMINISTIC = [c.id for c in CHECKS if c.id != SPEED]
# The speed check at a size that takes milliseconds; 9 calls >= the 8 spot-checked outputs.
TINY = speed_config.TINY


def run_cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`mha-kit ...` as a user runs it, in a fresh interpreter; `env` is added to ours."""
    return subprocess.run(
        [sys.executable, "-m", "autograder.cli", *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})},
    )


def assert_full_marks(found: dict[str, tuple[bool, float]], check_ids) -> None:
    """check id -> (passed, points) for exactly `check_ids`, each passed with full points, but
    the speed check: timed on a shared machine, it may earn partial credit."""
    assert set(found) == set(check_ids)
    for check_id, (passed, score) in found.items():
        if check_id == SPEED:
            assert score > 0, found[SPEED]
        else:
            assert passed and score == POINTS[check_id], (check_id, found[check_id])


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU speed check at the TINY size."""
    monkeypatch.setenv(speed_config.SPEED_CONFIG_ENV, "tiny")
