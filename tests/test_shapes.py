"""The shapes warm-up: its solution gets full marks; the classic shape mistakes do not."""

import nbformat
import pytest
from conftest import ROOT, messages_with

from mha_kit.assignments.shapes import checks as shapes
from mha_kit.grading import registry
from mha_kit.grading.registry import run_checks
from mha_kit.messages import ids_in, msg
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.worker import WorkerSubmission

SOLUTION = ROOT / "solutions" / "shapes" / "shapes_warmup.ipynb"
SHAPES_IDS = [c.id for c in registry.ASSIGNMENTS["shapes"]]


def mutated(tmp_path, edits: dict[str, str]):
    """The solution notebook with some text of its solution cells replaced."""
    nb = nbformat.read(str(SOLUTION), as_version=4)
    for old, new in edits.items():
        cells = [c for c in nb.cells if c.cell_type == "code" and old in c.source]
        assert len(cells) == 1, f"{old!r} is not in exactly one cell"
        cells[0].source = cells[0].source.replace(old, new)
    path = tmp_path / "mutant.ipynb"
    nbformat.write(nb, str(path))
    return path


def grade(path):
    return {r.id: r for r in run_checks(InProcessSubmission.from_path(path), assignment="shapes")}


def test_solution_gets_full_marks():
    results = grade(SOLUTION)
    assert list(results) == SHAPES_IDS
    assert all(r.passed for r in results.values()), results
    assert sum(r.score for r in results.values()) == 100


SPLIT = "x.view(B, T, num_heads, E // num_heads).transpose(1, 2)"
NO_TRANSPOSE_SPLIT = "mistake.split_no_transpose"
NO_TRANSPOSE_MERGE = "mistake.merge_no_transpose"
MERGE = "x.transpose(1, 2).reshape(B, T, H * D)"

# (label, edits, {failing check: a message id in its message, or (id, some of its fields)})
MUTANTS = [
    # the roundtrip merges the kit's split (CheckSpec.stand_ins)
    ("view straight to (B, H, T, D)", {SPLIT: "x.view(B, num_heads, T, E // num_heads)"},
     {"shapes_split_view": NO_TRANSPOSE_SPLIT}),
    ("a split that copies", {SPLIT: SPLIT + ".contiguous()"},
     {"shapes_split_view": "shapes.copy"}),
    # the roundtrip passes: split's output transposes back
    ("view after the transpose", {MERGE: "x.transpose(1, 2).view(B, T, H * D)"},
     {"shapes_merge": ("runner.raised_text", {"type": "RuntimeError"})}),
    ("merge without the transpose", {MERGE: "x.reshape(B, T, H * D)"},
     {"shapes_merge": NO_TRANSPOSE_MERGE}),
    ("rearrange with the axes of a group swapped",
     {'"b t (h d) -> b h t d"': '"b t (d h) -> b h t d"'},
     {"shapes_rearrange": "mistake.split_interleaved"}),
    # with the kit's split and merge in place of both, no code of the student's would run
    ("two mirror bugs: the roundtrip waits for either",
     {SPLIT: "x.view(B, num_heads, T, E // num_heads)", MERGE: "x.reshape(B, T, H * D)"},
     {"shapes_split_view": NO_TRANSPOSE_SPLIT, "shapes_merge": NO_TRANSPOSE_MERGE,
      "shapes_roundtrip": "waiting.stand_ins"}),
]


@pytest.mark.parametrize("label,edits,failing", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_a_shape_mistake_fails_its_own_checks(tmp_path, label, edits, failing):
    results = grade(mutated(tmp_path, edits))
    assert {i for i, r in results.items() if not r.passed} == set(failing)
    for check_id, said in failing.items():
        message_id, fields = said if isinstance(said, tuple) else (said, {})
        assert any(fields.items() <= m.params.items()
                   for m in messages_with(results[check_id].message, message_id)), \
            results[check_id].message


def test_the_quiz_gives_partial_credit(tmp_path):
    truth = shapes.view_quiz_truth()
    answers = tuple(not t if i < 3 else t for i, t in enumerate(truth))  # three wrong
    path = mutated(tmp_path, {"    return (\n": f"    return {answers}\n    return (\n"})
    quiz = grade(path)["shapes_view_quiz"]
    expected = registry.POINTS["shapes_view_quiz"] * (len(truth) - 3) / len(truth)
    assert not quiz.passed and quiz.score == expected
    assert quiz.message == msg("shapes.quiz_score", right=len(truth) - 3, count=len(truth))


def test_a_copy_is_seen_through_the_worker_too(tmp_path):
    """View or copy survives the trip from the worker process: the pipe keeps shared storage."""
    path = mutated(tmp_path, {SPLIT: SPLIT + ".contiguous()"})
    with WorkerSubmission(path) as sub:
        results = {r.id: r for r in run_checks(sub, assignment="shapes",
                                                only=["shapes_split_view", "shapes_roundtrip"])}
    assert "shapes.copy" in ids_in(results["shapes_split_view"].message)
    assert results["shapes_roundtrip"].passed

