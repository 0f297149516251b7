"""The hostile notebooks (hostile_notebooks.py), graded by the suite's real nbgrader cycle
(conftest's `course`) and by `mha-kit grade` run as an ordinary user (no drop to `nobody`):
each earns exactly what its code earns, whatever its attacks, nothing lands outside its scratch
folder, and a kernel that dies or hangs is named in the autograded notebook."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import hostile_notebooks
import pytest
from conftest import ROOT, cli_here
from notebook_helpers import MHA_CHECK_IDS, SOLUTION, read, recorded_grades

from mha_kit.grading.registry import POINTS
from mha_kit.trusted_autograde import KERNEL_TROUBLE

CASES = hostile_notebooks.cases()
FULL_MARKS = sum(POINTS[i] for i in MHA_CHECK_IDS)
STUDENTS = ["complete", "empty", *hostile_notebooks.submissions(CASES)]


def earned(case: hostile_notebooks.Attack) -> float:
    """What the notebook of the case's code earns: its hostile cells add nothing to its base."""
    return FULL_MARKS if case.base == "complete" else 0


def gradebook_totals(course: Path) -> dict[str, float]:
    return {student: sum(scores.values())
            for student, scores in recorded_grades(course, STUDENTS).items()}


def written_outside(course: Path) -> list[Path]:
    """The files the cases tried to create outside their scratch folders, that exist."""
    found = hostile_notebooks.targets(course, ROOT / "mha_kit", Path.home())
    found += [course / "autograded" / student / "mha" / "filler.bin"
              for student in hostile_notebooks.submissions(CASES)]
    return [path for path in found if path.exists()]


def test_the_corpus_has_a_case_for_every_attack():
    assert len(hostile_notebooks.CASES) >= 10
    assert {case.base for case in hostile_notebooks.CASES} == {"complete", "empty"}


def test_nbgrader_records_what_each_notebooks_code_earns(course):
    totals = gradebook_totals(course)
    assert totals["empty"] == 0 and totals["complete"] == FULL_MARKS
    assert {case.student: totals[case.student] for case in CASES} == \
        {case.student: earned(case) for case in CASES}


@pytest.mark.skipif(not any(case.writes for case in CASES),
                    reason="no sandbox (bwrap) here: the cases that write are left out")
def test_nothing_is_written_outside_the_scratch_folders(course):
    assert written_outside(course) == []
    before = json.loads((course.parent / "submitted-before.json").read_text())
    assert hostile_notebooks.fingerprint([Path(p) for p in before]) == before
    database = (course / "gradebook.db").read_bytes()
    assert not any(hostile_notebooks.MARK.format(name=case.name).encode() in database
                   for case in CASES)


@pytest.mark.parametrize("name", ["kills_kernel", "loops_forever"])
def test_a_kernel_that_dies_or_hangs_is_named_where_it_happened(course, name):
    case = hostile_notebooks.BY_NAME[name]
    graded = read(course / "autograded" / case.student / "mha" / SOLUTION.name)
    cell = next(c for c in graded.cells if c.get("id") == f"hostile-{name}")
    names = [o.ename for o in cell.outputs if o.output_type == "error"]
    assert set(names) & set(KERNEL_TROUBLE), cell.outputs  # (a KeyboardInterrupt may come first)


def test_mha_kit_grades_the_same_notebooks_the_same_as_an_ordinary_user(course, tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    for student in STUDENTS:
        shutil.copy(course / "submitted" / student / "mha" / SOLUTION.name,
                    folder / f"{student}.ipynb")
    sheet = tmp_path / "grades.csv"
    run = cli_here("grade", str(folder), "--assignment", "mha",
                   "--csv", str(sheet), MHA_KIT_WORKER_USER="")
    assert run.returncode == 0, run.stdout + run.stderr
    with open(sheet, newline="", encoding="utf-8") as rows:
        totals = {row["student"]: float(row["total"]) for row in csv.DictReader(rows)}
    assert totals == gradebook_totals(course)
    if any(case.writes for case in CASES):
        assert written_outside(course) == []
