"""The kit's pieces that stand in for a student's failing ones (`CheckSpec.stand_ins`): each is
right by its own checks, and the worker puts it in place of the student's for one check only."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import TEMPLATE, messages_with

from mha_kit.grading.batch import loaded_worker
from mha_kit.grading.registry import ASSIGNMENTS, SPECS, STAND_INS, own_checks, run_checks
from mha_kit.messages import msg
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.protocol import StandIns

WITH_STAND_INS = sorted({name for name, table in ASSIGNMENTS.items()
                         for spec in table if spec.stand_ins})


class StandingIn(InProcessSubmission):
    """The kit's stand-ins as a submission, standing in for every check: the kit's code is
    refused wherever it does not stand in (`runner.kit_code`)."""

    def __init__(self, stand_ins: StandIns):
        super().__init__({})
        super().stand_in(stand_ins)

    def stand_in(self, stand_ins: StandIns | None) -> None:
        """Stays as built."""


@pytest.mark.parametrize("assignment", WITH_STAND_INS)
def test_each_stand_in_passes_the_checks_of_its_piece(assignment: str):
    pieces = {(spec.id, piece) for spec in ASSIGNMENTS[assignment] for piece in spec.stand_ins}
    checks = sorted({own for check_id, piece in pieces
                     for own in own_checks(SPECS[check_id], piece)})
    sub = StandingIn(StandIns(STAND_INS.format(assignment),
                              tuple(sorted({piece for _, piece in pieces}))))
    results = run_checks(sub, only=checks, assignment=assignment)
    assert [r.id for r in results if not r.passed] == [], [str(r.message) for r in results]


def test_the_worker_stands_in_for_one_check_only(tmp_path: Path):
    """attend is wrong: AttentionHead is graded with the kit's attend, and after that check the
    student's attend is the one a call finds again."""
    path = tmp_path / "wrong_attend.py"
    path.write_text(TEMPLATE.read_text().replace("F.softmax(scores, dim=-1)",
                                                 "F.softmax(scores, dim=-2)"))
    with loaded_worker(path, "cpu", None) as sub:
        results = {r.id: r for r in run_checks(sub, only=["attend", "attention_head"])}
        scores = torch.randn(1, 3, 3, dtype=torch.float64)
        after = sub.call("attend", scores, torch.randn(1, 3, 2, dtype=torch.float64)).value[1]
    assert not results["attend"].passed and results["attention_head"].passed
    (note,) = messages_with(results["attention_head"].message, "standin.note")
    assert note.params == {"text": msg("ok"), "pieces": "`attend`", "checks": "attend"}
    assert torch.allclose(after, scores.softmax(dim=-2))  # the student's own, again


def test_a_stand_in_the_graded_code_never_calls_is_not_named(tmp_path: Path):
    """attend is wrong, and the fused module never calls it: fused_mha passes with no note,
    while AttentionHead, which calls it, is told it was graded with the kit's."""
    path = tmp_path / "wrong_attend.py"
    path.write_text(TEMPLATE.read_text().replace("F.softmax(scores, dim=-1)",  # in attend
                                                 "F.softmax(scores, dim=-2)", 1))
    with loaded_worker(path, "cpu", None) as sub:
        results = {r.id: r for r in run_checks(sub, only=["attend", "attention_head",
                                                          "fused_mha"])}
    assert not results["attend"].passed
    assert messages_with(results["attention_head"].message, "standin.note")
    assert results["fused_mha"].passed and results["fused_mha"].message == msg("ok")
