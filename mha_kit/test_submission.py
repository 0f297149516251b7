"""One pytest test per graded check of the submission's assignment (see conftest.py)."""

from __future__ import annotations

from .grading.registry import run_check


def test_check(check_id: str, submission, context) -> None:
    result = run_check(check_id, submission, context)
    assert result.passed, f"{result.score:g}/{result.max_score}: {result.message}"
