"""The real nbgrader cycle of conftest's `course` fixture, on a temporary copy of the course.

`mha-kit release` (points sync + `nbgrader generate_assignment`), four submissions of the core
assignment, two of every other one, then nbgrader's `autograde`, `generate_feedback` and
`export`; the grades CSV must hold exactly what each submission's code earns, computed from
the points table. Every other assignment, and one edition (SUBMITTED): its solution passes
every test cell, its release fails only with "not implemented", in the edition's language.
"""

import csv

import nbformat
import pytest
from conftest import COURSE_SPEED_CONFIG, ROOT, SPEED, TIMED, assert_full_marks
from notebook_helpers import (
    COPIED,
    COURSE_ASSIGNMENTS,
    EDITED,
    MHA_CHECK_IDS,
    MHA_STUDENTS,
    PARTIAL,
    SOLUTION,
    STUDENTS,
    SUBMITTED,
    errors,
    is_test_cell,
    nbgrader_meta,
    normalised,
    read,
    recorded_grades,
    unexpected_errors,
    verdicts,
)

from mha_kit import settings
from mha_kit.grading.registry import ASSIGNMENTS, POINTS, split_name
from mha_kit.messages import msg

NOTEBOOK = SOLUTION.stem
OTHERS = [name for name in COURSE_ASSIGNMENTS if name != "mha"]


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
    copies = [c for c in graded.cells if nbgrader_meta(c).get("grade_id") == COPIED]
    assert len(copies) == 1, "a copy of a test cell is left out (nbgrader: KeyError)"
    for student in MHA_STUDENTS:
        feedback = course / "feedback" / student / "mha" / f"{NOTEBOOK}.html"
        assert feedback.is_file(), feedback
    complete = course / "feedback" / "complete" / "mha" / f"{NOTEBOOK}.html"
    points = POINTS["fused_mha"]
    assert f"✓ fused_mha: {points}/{points} ok" in complete.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- every assignment


def _graded(course, name: str, student: str) -> nbformat.NotebookNode:
    (path,) = (course / "autograded" / student / name).glob("*.ipynb")
    assert (course / "feedback" / student / name / path.with_suffix(".html").name).is_file()
    return read(path)


@pytest.mark.parametrize("name", SUBMITTED)
def test_solution_passes_every_test_cell(course, name):
    base, lang = split_name(name)
    table = {s.id for s in ASSIGNMENTS[base]}
    nb = _graded(course, name, "complete")
    assert [(c.id, errors(c)) for c in nb.cells if errors(c)] == []
    assert_full_marks(verdicts(nb), table)
    ok = msg("ok").render(lang)
    assert all(ok in "".join(o.get("text", "") for o in c.outputs)
               for c in nb.cells if is_test_cell(c) and nbgrader_meta(c)["grade_id"] not in TIMED)
    for cell in filter(is_test_cell, nb.cells):  # one verdict a cell: the graded run's
        lines = "".join(o.text for o in cell.outputs if o.output_type == "stream").splitlines()
        assert len([line for line in lines if line.startswith(("✓", "✗"))]) == 1, cell.id
        assert all(line.startswith(("✓", "✗", "  ")) for line in lines), lines  # wrapped


@pytest.mark.parametrize("name", SUBMITTED)
def test_release_fails_only_with_not_implemented(course, name):
    base, lang = split_name(name)
    nb = _graded(course, name, "empty")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not errors(code[0]), "the setup cell must work"
    assert [e for c in code for e in unexpected_errors(c, lang)] == []
    assert {i: passed for i, (passed, _) in verdicts(nb).items()} == dict.fromkeys(
        [s.id for s in ASSIGNMENTS[base]], False)


def test_grades_csv_holds_what_the_test_cells_earned(course):
    expected = {}
    for name in OTHERS:
        table = ASSIGNMENTS[split_name(name)[0]]
        # the timed check included; nbgrader exports 0 for what was not handed in
        expected[(name, "complete")] = sum(s.points for s in table) if name in SUBMITTED else 0
        expected[(name, "empty")] = 0
    with open(course / "grades.csv", newline="") as f:
        scores = {(r["assignment"], r["student_id"]): float(r["score"]) for r in csv.DictReader(f)
                  if r["assignment"] in OTHERS and r["student_id"] in STUDENTS}
    assert scores == expected


def test_the_course_is_a_folder_apart_from_the_kit(course):
    """Set up as the instructor guide sets one up: `mha-kit course init`, outside the kit."""
    assert ROOT not in course.parents and not (course / "mha_kit").exists()
    header = (course / "nbgrader_config.py").read_text(encoding="utf-8").split('"""')[1]
    assert "mha-kit course init" in header


def test_a_setting_in_nbgrader_config_holds_for_the_kits_grading(course):
    """The course's nbgrader_config.py sets `c.MhaKit.speed_config`, which its environment
    does not: the speed check names the config it timed."""
    graded = read(course / "autograded" / "complete" / "mha" / SOLUTION.name)
    (cell,) = [c for c in graded.cells if nbgrader_meta(c).get("grade_id") == SPEED]
    text = "".join(o.get("text", "") for o in cell.outputs)
    said = f"`{settings.variable('speed_config')}={COURSE_SPEED_CONFIG}`"
    assert text.startswith(f"✓ {SPEED}") and said in text, text


def test_agents_md_is_released_but_not_handed_back(course):
    """What a student's coding assistant may do is in the release; autograde does not copy the
    master's into each student's autograded/ and feedback/ folders."""
    assert (course / "assignments" / "llm_attention" / "AGENTS.md").is_file()
    for folder in ("autograded", "feedback"):
        assert not list((course / folder).glob("*/*/AGENTS.md")), folder
