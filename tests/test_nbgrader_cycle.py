"""The real nbgrader cycle, on a temporary copy of the course. Nothing is mocked.

`mha-kit release` (points sync + `nbgrader generate_assignment`), four submissions, then
`nbgrader autograde`, `generate_feedback` and `export`; the grades CSV must hold exactly what
each submission's code earns, computed from the points table.
"""

import copy
import csv
import shutil
import time

import nbformat
import pytest
from conftest import ROOT, run_cli
from nbgrader.api import Gradebook
from notebook_helpers import (
    PARTIAL,
    RELEASE,
    SOLUTION,
    SPEED,
    is_test_cell,
    kernel_env,
    nbgrader_meta,
    normalised,
    read,
    solved,
)

from autograder.grading.registry import ASSIGNMENTS, POINTS
from autograder.release import run_nbgrader

NOTEBOOK = SOLUTION.stem
CHECK_IDS = [spec.id for spec in ASSIGNMENTS["mha"]]
EDITED, DELETED = "attend", "scaled_scores"  # the tampered submission's two test cells


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A copy of the course, released with `mha-kit release` from a source whose points drifted."""
    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    source = course / "solutions" / "mha" / SOLUTION.name
    shutil.copytree(SOLUTION.parent, source.parent)
    nb = read(source)
    next(filter(is_test_cell, nb.cells)).metadata.nbgrader.points = 1
    nbformat.write(nb, str(source))

    run = run_cli("release", "mha", "--course-dir", str(course))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "points updated" in run.stdout
    return course


def test_committed_release_is_a_fresh_generation(course):
    fresh = read(course / "assignments" / "mha" / SOLUTION.name)
    assert normalised(fresh) == normalised(read(RELEASE))
    assert fresh.metadata.kernelspec == read(RELEASE).metadata.kernelspec


def tampered(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """One test cell replaced by `pass` (full marks if it ran), another deleted."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id") == EDITED:
            cell.source = "pass"
    nb.cells = [c for c in nb.cells if nbgrader_meta(c).get("grade_id") != DELETED]
    return nb


def test_autograde_feedback_export(course):
    release = read(course / "assignments" / "mha" / SOLUTION.name)
    submissions = {
        "complete": solved(release),
        "empty": release,
        "partial": solved(release, PARTIAL),
        "tampered": tampered(solved(release, PARTIAL)),
    }
    for student, nb in submissions.items():
        folder = course / "submitted" / student / "mha"
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / SOLUTION.name))

    def nbgrader(*args: str) -> None:
        run = run_nbgrader(course, *args, capture_output=True, text=True, env=kernel_env())
        assert run.returncode == 0, run.stdout + run.stderr

    started = time.perf_counter()
    nbgrader("autograde", "mha")
    per_submission = (time.perf_counter() - started) / len(submissions)
    print(f"nbgrader autograde: {per_submission:.1f} s per submission")
    nbgrader("generate_feedback", "mha")
    nbgrader("export")

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        earned = {
            student: {i: gradebook.find_grade(i, NOTEBOOK, "mha", student).score
                      for i in CHECK_IDS}
            for student in submissions
        }
    partial = {i: POINTS[i] if i in PARTIAL else 0 for i in CHECK_IDS}
    assert earned["empty"] == dict.fromkeys(CHECK_IDS, 0)
    assert earned["partial"] == partial
    assert earned["tampered"] == partial, "a tampered test cell must grade the code, not the edit"
    speed = earned["complete"].pop(SPEED)
    assert 0 < speed <= POINTS[SPEED]  # timed on a shared machine: partial credit is possible
    assert earned["complete"] == {i: POINTS[i] for i in CHECK_IDS if i != SPEED}

    with open(course / "grades.csv", newline="") as f:
        scores = {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)}
    assert scores == {
        "complete": sum(POINTS[i] for i in CHECK_IDS if i != SPEED) + speed,
        "empty": 0,
        "partial": sum(partial.values()),
        "tampered": sum(partial.values()),
    }

    graded = read(course / "autograded" / "tampered" / "mha" / SOLUTION.name)
    restored = {nbgrader_meta(c)["grade_id"]: c.source for c in graded.cells if is_test_cell(c)}
    assert set(restored) == set(CHECK_IDS)
    assert f'check("{EDITED}", hidden=True)' in restored[EDITED]
    for student in submissions:
        feedback = course / "feedback" / student / "mha" / f"{NOTEBOOK}.html"
        assert feedback.is_file(), feedback
    complete = course / "feedback" / "complete" / "mha" / f"{NOTEBOOK}.html"
    points = POINTS["fused_mha"]
    assert f"✓ fused_mha: {points}/{points} ok" in complete.read_text(encoding="utf-8")
