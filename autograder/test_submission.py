"""One pytest test per graded check, in points-table order."""

from __future__ import annotations

import pytest

from .checks import run_check
from .points import CHECKS


@pytest.mark.parametrize("check_id", [c.id for c in CHECKS])
def test_check(check_id: str, submission, context) -> None:
    result = run_check(check_id, submission, context)
    assert result.passed, f"{result.score:g}/{result.max_score}: {result.message}"
