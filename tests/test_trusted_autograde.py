"""`TrustedGrades`: the points nbgrader records come from the kit's isolated grading of the
notebook, never from what the student's kernel printed or returned.

Each hostile notebook is the release with one cell added; its test cells carry the outputs a
kernel running that code would give (a ✓ and the full points). nbgrader's own
`determine_grade` then reads the cells that `TrustedGrades` rewrote.
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest
import torch
from conftest import ROOT, SPEED
from nbgrader.utils import determine_grade
from notebook_helpers import RELEASE, read, solved

from mha_kit.checks.core import HIDDEN_SALT, CheckResult, Picture
from mha_kit.grading.batch import grade_submission
from mha_kit.grading.registry import POINTS
from mha_kit.messages import msg, render
from mha_kit.runner import no_student_code
from mha_kit.runner.loading import PICTURE_TAG, SKIP_TAG, is_test_cell
from mha_kit.runner.worker import WorkerSubmission
from mha_kit.trusted_autograde import (
    StudentCells,
    TrustedGrades,
    cell_outputs,
    shown_results,
)

HOSTILE_CELLS = {
    "defines_check": 'def check(check_id, hidden=False):\n'
                     '    print(f"✓ {check_id}: full marks")\n'
                     '    return 100\n',
    "patches_run_check": "import mha_kit.grading.registry as registry\n"
                         "import mha_kit.notebook as notebook\n"
                         "fake = lambda check_id, *a, **k: registry.CheckResult(\n"
                         "    check_id, 100, 100, 'ok')\n"
                         "registry.run_check = notebook.run_check = fake\n",
    "swallows_exceptions": "get_ipython().set_custom_exc((BaseException,), "
                           "lambda *args, **kwargs: None)\n",
}


def claimed_full_marks(nb: nbformat.NotebookNode) -> None:
    """The outputs a kernel gives when the notebook's own code claims every point."""
    for cell in nb.cells:
        if is_test_cell(cell):
            check_id = cell.metadata["nbgrader"]["grade_id"]
            cell.outputs = [
                nbformat.v4.new_output("stream", name="stdout", text=f"✓ {check_id}: ok\n"),
                nbformat.v4.new_output("execute_result", data={"text/plain": "100"},
                                       execution_count=1)]


def trusted_points(nb: nbformat.NotebookNode) -> dict[str, float]:
    nb, _ = TrustedGrades().preprocess(nb, {})
    return {cell.metadata["nbgrader"]["grade_id"]: determine_grade(cell)[0]
            for cell in nb.cells if is_test_cell(cell)}


@pytest.mark.parametrize("name", sorted(HOSTILE_CELLS))
def test_code_in_the_notebook_does_not_decide_its_points(name, tiny):
    nb = read(RELEASE)  # every function a stub
    nb.cells.insert(1, nbformat.v4.new_code_cell(HOSTILE_CELLS[name], id="hostile"))
    claimed_full_marks(nb)
    points = trusted_points(nb)
    assert set(points) == set(POINTS) & set(points) and SPEED in points
    assert points == dict.fromkeys(points, 0)
    outputs = next(c for c in nb.cells if is_test_cell(c)).outputs
    assert [o.output_type for o in outputs][-1] == "error"
    assert "not implemented yet" in outputs[0].text


def test_an_honest_notebook_keeps_its_points_and_shows_a_tick():
    nb = solved(read(RELEASE))
    claimed = copy.deepcopy(nb)
    claimed_full_marks(claimed)
    points = trusted_points(claimed)
    assert SPEED in points and points == {check_id: POINTS[check_id] for check_id in points}
    first = next(c for c in claimed.cells if is_test_cell(c))
    assert first.outputs[0].text.startswith("✓ ")


def _result(check_id: str, score: float, text: str) -> CheckResult:
    picture = Picture("t", torch.zeros(2), torch.ones(2)) if score < 10 else None
    return CheckResult(check_id, score, 10, text, picture)


def test_a_failure_is_told_with_the_visible_inputs_and_scored_by_both():
    hidden = [_result("attend", 0, "hidden values"), _result("merge_heads", 10, "ok")]
    shown = shown_results(hidden, [_result("attend", 4, "visible values")])
    assert [(r.id, r.score, r.message) for r in shown] == \
        [("attend", 0, "visible values"), ("merge_heads", 10, "ok")]


def test_a_failure_only_on_hidden_inputs_shows_no_values_and_no_picture():
    (shown,) = shown_results([_result("attend", 0, "hidden values")], [_result("attend", 10, "ok")])
    assert (shown.score, shown.picture) == (0, None)
    assert shown.message == msg("trusted.hidden_failed")


@pytest.mark.parametrize("named", ["mha", "hw3"])
def test_the_assignment_is_the_one_nbgrader_grades_when_the_kit_has_it(named, tiny):
    """A finished warm-up submitted for `mha` is graded as mha, whatever its cells say; under a
    name of the instructor's own (hw3), the notebook's test cells say which it is."""
    nb = read(ROOT / "solutions" / "shapes" / "shapes_warmup.ipynb")
    nb, _ = TrustedGrades().preprocess(nb, {"nbgrader": {"assignment": named}})
    graded = [cell for cell in nb.cells if is_test_cell(cell)]
    points = [determine_grade(cell)[0] for cell in graded]
    if named == "mha":
        assert points == [0] * len(graded)
        reason = render(msg("autograde.other_assignment", assignment="mha"))
        assert graded[0].outputs[-1].evalue == reason
    else:
        assert points == [cell.metadata["nbgrader"]["points"] for cell in graded]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_failed_cell_says_why_once_as_the_students_kernel_does(lang):
    """The feedback shows the ✗ line and the error's traceback: the message is in the first
    only (it was in both), the error's value holds all of it, as `check()` raises it."""
    message = msg("trusted.hidden_failed")
    stream, error = cell_outputs(CheckResult("attend", 0.0, 10, message), lang)
    shown = stream.text + "".join(error.traceback)
    assert shown.count(render(message, lang)[:10]) == 1, shown  # [:10]: before a line break
    assert error.evalue == render(message, lang)
    assert render(msg("notebook.failed", check="attend", points=10), lang) in error.traceback[0]


def test_the_feedback_of_a_wrong_notebook_holds_no_hidden_value(tiny, tmp_path, monkeypatch):
    nb = solved(read(RELEASE))
    for cell in nb.cells:  # √embed_dim in place of √d_head: wrong on any input
        cell.source = cell.source.replace("math.sqrt(q.shape[-1])", "math.sqrt(q.shape[-1] * 2)")
    path = tmp_path / "wrong.ipynb"
    nbformat.write(nb, str(path))
    only = ["scaled_scores"]
    hidden = render(grade_submission(path, only=only, salt=HIDDEN_SALT)[0][0].message)
    visible = render(grade_submission(path, only=only)[0][0].message)
    assert hidden != visible
    started = set()  # the submissions TrustedGrades starts a worker for (not the clean worker
    start = WorkerSubmission.start  # that times the speed check's baselines)
    clean = Path(no_student_code.__file__).resolve()

    def counted_start(sub: WorkerSubmission) -> None:
        if sub.path != clean:
            started.add(id(sub))
        start(sub)

    monkeypatch.setattr(WorkerSubmission, "start", counted_start)
    TrustedGrades().preprocess(nb, {})
    assert len(started) == 1  # one worker for the hidden inputs, then the visible rerun
    cell = next(c for c in nb.cells if is_test_cell(c) and c.metadata.nbgrader.grade_id in only)
    shown = "".join(o.get("text", "") + o.get("evalue", "") for o in cell.outputs)
    assert visible in shown and hidden not in shown


@pytest.mark.parametrize("run_demos", [False, True])
def test_the_kernel_leaves_out_the_kit_demos_unless_asked(run_demos, tmp_path):
    """A demo cell (tagged mha-kit-skip) says it was not run; a graded cell runs, tag or not;
    a picture (tagged mha-kit-picture, which only the worker leaves out) runs."""
    code = nbformat.v4.new_code_cell
    graded = {"grade": True, "solution": False, "grade_id": "mine", "points": 1, "locked": True}
    nb = nbformat.v4.new_notebook(cells=[
        code("x = 1"),
        code("x = 2\nprint('demo ran')", metadata={"tags": [SKIP_TAG]}),
        code("print('graded ran')", metadata={"tags": [SKIP_TAG], "nbgrader": graded}),
        code("print('picture drawn')", metadata={"tags": [PICTURE_TAG]}),
        code("print(x)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb, _ = StudentCells(run_demos=run_demos).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    printed = ["".join(o.get("text", "") for o in cell.outputs) for cell in nb.cells[1:]]
    demo = "demo ran\n" if run_demos else render(msg("autograde.demo_not_run")) + "\n"
    assert printed == [demo, "graded ran\n", "picture drawn\n", "2\n" if run_demos else "1\n"]
