"""The real nbgrader cycle of conftest's `course` fixture, on a temporary copy of the course.

`mha-kit release` (points sync + `nbgrader generate_assignment`), four submissions of the core
assignment, two of every other one, then nbgrader's `autograde`, `generate_feedback` and
`export`; the grades CSV must hold exactly what each submission's code earns, computed from
the points table. The other assignments' results: test_chinese_edition.py.
"""

import csv

import pytest
from conftest import ROOT
from notebook_helpers import (
    COURSE_ASSIGNMENTS,
    EDITED,
    MHA_CHECK_IDS,
    MHA_STUDENTS,
    PARTIAL,
    SOLUTION,
    is_test_cell,
    nbgrader_meta,
    normalised,
    read,
    recorded_grades,
)

from autograder.grading.registry import POINTS

NOTEBOOK = SOLUTION.stem


@pytest.mark.parametrize("name", COURSE_ASSIGNMENTS)
def test_committed_release_is_a_fresh_generation(course, name):
    fresh = sorted((course / "assignments" / name).glob("*.ipynb"))
    assert [p.name for p in fresh] == sorted(p.name for p in (ROOT / "assignments" / name).glob(
        "*.ipynb"))
    for path in fresh:
        committed = read(ROOT / "assignments" / name / path.name)
        assert normalised(read(path)) == normalised(committed)
        assert read(path).metadata.kernelspec == committed.metadata.kernelspec


def test_autograde_feedback_export(course):
    earned = recorded_grades(course, MHA_STUDENTS)
    partial = {i: POINTS[i] if i in PARTIAL else 0 for i in MHA_CHECK_IDS}
    assert earned["empty"] == dict.fromkeys(MHA_CHECK_IDS, 0)
    assert earned["partial"] == partial
    assert earned["tampered"] == partial, "a tampered test cell must grade the code, not the edit"
    assert earned["complete"] == {i: POINTS[i] for i in MHA_CHECK_IDS}  # the timed one too

    with open(course / "grades.csv", newline="") as f:
        scores = {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)
                  if row["assignment"] == "mha" and row["student_id"] in MHA_STUDENTS}
    assert scores == {
        "complete": sum(POINTS[i] for i in MHA_CHECK_IDS),
        "empty": 0,
        "partial": sum(partial.values()),
        "tampered": sum(partial.values()),
    }

    graded = read(course / "autograded" / "tampered" / "mha" / SOLUTION.name)
    restored = {nbgrader_meta(c)["grade_id"]: c.source for c in graded.cells if is_test_cell(c)}
    assert set(restored) == set(MHA_CHECK_IDS)
    assert f'check("{EDITED}", hidden=True)' in restored[EDITED]
    for student in MHA_STUDENTS:
        feedback = course / "feedback" / student / "mha" / f"{NOTEBOOK}.html"
        assert feedback.is_file(), feedback
    complete = course / "feedback" / "complete" / "mha" / f"{NOTEBOOK}.html"
    points = POINTS["fused_mha"]
    assert f"✓ fused_mha: {points}/{points} ok" in complete.read_text(encoding="utf-8")
