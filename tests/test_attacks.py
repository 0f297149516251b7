"""Each attack of tests/corpus/attacks.py, graded through the worker, earns only what an honest
file with the same code of its own would: the kit's code answers nothing for a student, and
the memory watched is the memory of the code whose values are graded."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import CORPUS

from mha_kit.grading.batch import grade_submission
from mha_kit.messages import ids_in

sys.path.insert(0, str(CORPUS))
from attacks import ATTACKS, Attack  # noqa: E402


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.label for a in ATTACKS])
def test_an_attack_earns_what_its_own_code_earns(attack: Attack, tmp_path: Path):
    path = tmp_path / "attack.py"
    path.write_text(attack.source())
    results, _ = grade_submission(path, assignment=attack.assignment, only=list(attack.earns))
    assert {r.id: r.score for r in results} == attack.earns
    for r in results:
        if r.score < r.max_score:
            assert attack.message in ids_in(r.message), f"{r.id}: {r.message}"
