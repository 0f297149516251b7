"""`mha-kit autograde mha --jobs 2` on a copy of conftest's `course`, whose gradebook holds what
`nbgrader autograde` recorded for the same submissions with the same configuration.

Three more students break things: a kernel that dies, a cell that loops forever ignoring the
interrupt, and a kernel that kills the process grading it. The others must be recorded as
nbgrader recorded them, cell by cell, and `nbgrader generate_feedback` and `nbgrader export`
must then work as usual. Nothing is mocked: real nbgrader, kernels, workers and torch.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from conftest import KILL_REFUSED, SPEED
from nbgrader.api import Gradebook
from notebook_helpers import (
    MHA_CHECK_IDS,
    MHA_STUDENTS,
    SOLUTION,
    autograde,
    errors,
    is_test_cell,
    nbgrader_meta,
    read,
    recorded_grades,
    run_autograde,
    solved,
    verdicts,
)

from mha_kit.grading.registry import POINTS
from mha_kit.release import run_nbgrader

NOTEBOOK = SOLUTION.stem
# Each inserted after the setup cell of a complete submission.
BREAKING = {
    "dies": "import os\nos._exit(1)\n",
    # Asleep rather than busy: the same hang to nbgrader and the worker, without a core kept busy.
    "loops": "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
             "while True:\n    time.sleep(1)\n",
    # The process that started the kernel (jupyter_client says which): the one grading it.
    "kills_grader": "import os, signal\n"
                    "os.kill(int(os.environ['JPY_PARENT_PID']), signal.SIGKILL)\n",
}
TIMEOUT = 20  # Execute.timeout in the copy, so that "loops" is stopped soon
SUBMITTED_AT = "2026-01-02 03:04:05.000000 UTC"  # partial's timestamp.txt, in the copy
UNSET = -1.0  # a score no check gives, in the copy's gradebook before the kit records


@pytest.fixture(scope="module")
def kit_course(course, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A copy of `course`, the mha submissions of MHA_STUDENTS and BREAKING graded by
    `mha-kit autograde` (the course's other mha submissions are left out, for time). The
    copy's gradebook holds nbgrader's records of MHA_STUDENTS with every score set to UNSET
    first: the kit must write over each one."""
    copy = tmp_path_factory.mktemp("kit") / "course"
    shutil.copytree(course, copy)
    for folder in ("autograded", "feedback"):
        shutil.rmtree(copy / folder)
    for folder in (copy / "submitted").glob("*/mha"):
        if folder.parent.name not in MHA_STUDENTS:
            shutil.rmtree(folder)
    (copy / "grades.csv").unlink()
    with Gradebook(f"sqlite:///{copy / 'gradebook.db'}") as gradebook:  # the kit must overwrite
        for student in MHA_STUDENTS:
            for check_id in MHA_CHECK_IDS:
                gradebook.find_grade(check_id, NOTEBOOK, "mha", student).auto_score = UNSET
        gradebook.db.commit()
    with open(copy / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.Execute.timeout = {TIMEOUT}\n")
    (copy / "submitted" / "partial" / "mha" / "timestamp.txt").write_text(SUBMITTED_AT)
    complete = read(copy / "submitted" / "complete" / "mha" / SOLUTION.name)
    setup = next(i for i, c in enumerate(complete.cells) if c.cell_type == "code")
    for student, source in BREAKING.items():
        nb = solved(complete)
        nb.cells.insert(setup + 1, nbformat.v4.new_code_cell(source, id="breaks"))
        folder = copy / "submitted" / student / "mha"
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / SOLUTION.name))
    return copy, autograde(copy, "--jobs", "2", "--report", "class")


def test_the_gradebook_holds_what_nbgrader_autograde_recorded(course, kit_course):
    copy, run = kit_course
    assert run.returncode == 0, run.stdout + run.stderr
    kit, nbgrader = recorded_grades(copy, MHA_STUDENTS), recorded_grades(course, MHA_STUDENTS)
    speed = kit["complete"].pop(SPEED), nbgrader["complete"].pop(SPEED)
    assert kit == nbgrader
    assert speed == (POINTS[SPEED],) * 2, speed  # timed separately: all or nothing, earned
    nothing, full = dict.fromkeys(MHA_CHECK_IDS, 0), {i: POINTS[i] for i in MHA_CHECK_IDS}
    assert recorded_grades(copy, ("dies",)) == {"dies": nothing}
    # A kill refused (KILL_REFUSED) is an error in one cell of a complete notebook.
    assert recorded_grades(copy, ("kills_grader",)) == {
        "kills_grader": full if KILL_REFUSED else nothing}
    # The kit's worker leaves out the cell that never ends: it costs what it defines, nothing.
    assert recorded_grades(copy, ("loops",)) == {"loops": full}


def test_the_autograded_notebooks_are_nbgrader_s(course, kit_course):
    copy, _ = kit_course
    for student in MHA_STUDENTS:
        ours = read(copy / "autograded" / student / "mha" / SOLUTION.name)
        theirs = read(course / "autograded" / student / "mha" / SOLUTION.name)
        # (A test cell nbgrader adds back gets a new random id each time.)
        assert ([(c.cell_type, c.source, nbgrader_meta(c)) for c in ours.cells]
                == [(c.cell_type, c.source, nbgrader_meta(c)) for c in theirs.cells])
        assert ({i: v for i, v in verdicts(ours).items() if i != SPEED}
                == {i: v for i, v in verdicts(theirs).items() if i != SPEED})
        # The kernel ran the student's cells only: the kit wrote every test cell's outputs.
        assert all(c.execution_count is None for c in ours.cells if is_test_cell(c))
    assert (copy / "autograded" / "partial" / "mha" / "timestamp.txt").read_text() == SUBMITTED_AT
    with Gradebook(f"sqlite:///{copy / 'gradebook.db'}") as gradebook:
        submitted_at = gradebook.find_submission("mha", "partial").timestamp
    assert submitted_at.strftime("%Y-%m-%d %H:%M:%S") == SUBMITTED_AT[:19]


def test_a_broken_submission_is_recorded_with_a_line_saying_why(kit_course):
    copy, run = kit_course
    print(run.stdout, run.stderr)  # with -s: the progress, the lines, the time it took
    lines = run.stderr.splitlines()
    said = {s: " ".join(line for line in lines if line.startswith(f"  {s}: ")) for s in BREAKING}
    assert "the kernel died while running the cell" in said["dies"], run.stderr
    assert "ran past Execute.timeout" in said["loops"], run.stderr
    assert ("the grading process died" in said["kills_grader"]) != KILL_REFUSED, run.stderr
    assert f"autograded {len(MHA_STUDENTS) + len(BREAKING)} submissions of mha" in run.stdout
    assert (copy / "class.csv").is_file() and (copy / "class.png").is_file()

    def breaking_cell(student: str) -> nbformat.NotebookNode:
        nb = read(copy / "autograded" / student / "mha" / SOLUTION.name)
        return next(c for c in nb.cells if c.get("id") == "breaks")

    assert [e.ename for e in errors(breaking_cell("dies"))] == ["DeadKernelError"]
    assert [e.ename for e in errors(breaking_cell("loops"))] == ["CellTimeoutError"]
    assert "stopped answering" in errors(breaking_cell("loops"))[0].evalue  # not interrupted
    killed = read(copy / "autograded" / "kills_grader" / "mha" / SOLUTION.name)
    test_cells = [c for c in killed.cells if is_test_cell(c)]
    assert len(test_cells) == len(MHA_CHECK_IDS)
    if KILL_REFUSED:
        assert [e.ename for e in errors(breaking_cell("kills_grader"))] == ["PermissionError"]
        assert not any(errors(c) for c in test_cells)
    else:
        assert all("the grading process died" in errors(c)[0].evalue for c in test_cells)


def test_feedback_and_export_then_work_as_usual(kit_course):
    copy, _ = kit_course
    feedback = run_nbgrader(copy, "generate_feedback", "mha", capture_output=True, text=True,
                            timeout=600)
    assert feedback.returncode == 0, feedback.stdout + feedback.stderr
    for student in (*MHA_STUDENTS, *BREAKING):
        assert (copy / "feedback" / student / "mha" / f"{NOTEBOOK}.html").is_file(), student
    export = run_nbgrader(copy, "export", capture_output=True, text=True, timeout=600)
    assert export.returncode == 0, export.stdout + export.stderr
    with open(copy / "grades.csv", newline="") as f:
        exported = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)
                    if r["assignment"] == "mha"}
    recorded = recorded_grades(copy, (*MHA_STUDENTS, *BREAKING))
    assert {s: exported[s] for s in recorded} == {s: sum(g.values()) for s, g in recorded.items()}


def test_graded_submissions_are_left_alone_unless_forced(kit_course):
    copy, _ = kit_course
    again = autograde(copy, "--report", str(copy / "again"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{len(MHA_STUDENTS) + len(BREAKING)} submissions autograded already" in again.stderr
    assert "no class report: no submission was graded in this run" in again.stderr
    assert not list(copy.glob("again*"))


def test_an_unreleased_assignment_is_a_usage_error(kit_course):
    copy, _ = kit_course
    run = run_autograde(copy, "nosuch")
    assert run.returncode == 2
    assert "has no assignment nosuch" in run.stderr
