"""`nbgrader autograde` records the kit's grades, never what the student's kernel printed.

nbgrader executes the submitted notebook in the student's kernel and reads each test cell's
points from its outputs, so code in the notebook could decide its own score (a function named
`check` that returns the points, a patched `mha_kit.notebook`, a printed ✓). `TrustedGrades`
is a preprocessor listed in nbgrader_config.py right before `SaveAutoGrades`: it grades the
same notebook again with the kit's isolated worker (the student's code runs in a separate
process under the kit's limits, the comparisons happen here), then rewrites the outputs of
every kit test cell from those results: the ✓ line and the points as the cell's value, or the
✗ line, the picture, and an error. `SaveAutoGrades` then records the trusted points. The
student's own cells keep the outputs the kernel gave them, plots and prints included.

`StudentCells` replaces nbgrader's `Execute` in that list: it runs every cell but the kit's
test cells, which the kernel would only grade a second time (`check()` in the student's
kernel, whose outputs `TrustedGrades` overwrites anyway), and the kit's demos (cells tagged
`mha-kit-skip`: a timing and a training run, two seconds a submission, that grade nothing and
define only what they show, `times` and `losses`; `run_demos` turns them on). Test cells
call `check()` and nothing else, so no later cell depends on them. A kit test cell is one
whose grade id is a check id (`graded_by_kit`); a test cell of the instructor's own still
runs in the kernel.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import io
import tempfile
from pathlib import Path
from typing import Any

import nbformat
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from nbgrader.utils import is_grade, is_locked, is_solution
from traitlets import Bool, default

from . import settings
from .checks.core import HIDDEN_SALT, CheckResult
from .course_settings import configured
from .grading.batch import loaded_worker, worker_problems
from .grading.files import detect_assignment, shown_language
from .grading.registry import ASSIGNMENTS, POINTS, SPECS, run_checks, split_name
from .grading.report import score_line
from .messages import Message, msg, render
from .notebook import CheckFailedHere, wrap
from .runner.loading import cell_name, is_demo, is_test_cell
from .runner.policy import Limits
from .runtime import default_device


def _png(result: CheckResult) -> str | None:
    """The failure's picture as base64 PNG, or None."""
    if result.picture is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .grading.pictures import draw

    figure = draw(result.picture)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def cell_outputs(result: CheckResult, lang: str | None = None) -> list[nbformat.NotebookNode]:
    """What a test cell shows for a result, in `lang`: ✓ and the points, or ✗, the picture
    and an error."""
    with settings.chosen(lang=lang):
        return _outputs(result)


def _outputs(result: CheckResult) -> list[nbformat.NotebookNode]:
    """As the student's kernel shows them (`notebook.check`): the ✓ or ✗ line says why, and
    the error of a cell that earned nothing is one short line pointing at it, not the
    message again; its value (`evalue`) is the whole message."""
    line = nbformat.v4.new_output("stream", name="stdout", text=wrap(score_line(result)) + "\n")
    if result.score > 0:
        return [line, nbformat.v4.new_output(
            "execute_result", data={"text/plain": f"{result.score:g}"}, execution_count=None)]
    outputs = [line]
    png = _png(result)
    if png is not None:
        outputs.append(nbformat.v4.new_output("display_data", data={"image/png": png}))
    error = CheckFailedHere.of(result)
    outputs.append(nbformat.v4.new_output("error", ename="AssertionError", evalue=str(error),
                                          traceback=error._render_traceback_()))
    return outputs


def graded_by_kit(cell: nbformat.NotebookNode) -> bool:
    """A test cell whose outputs `TrustedGrades` writes: its grade id is a kit check's."""
    return is_test_cell(cell) and cell.metadata["nbgrader"].get("grade_id") in POINTS


def zero_points(cell: nbformat.NotebookNode, reason: Message, lang: str | None
                ) -> list[nbformat.NotebookNode]:
    """A test cell's outputs for no points, and why (an empty test cell earns them all)."""
    meta = cell.metadata["nbgrader"]
    return cell_outputs(CheckResult(meta["grade_id"], 0.0, meta.get("points", 0), reason), lang)


def shown_results(hidden: list[CheckResult], visible: list[CheckResult]) -> list[CheckResult]:
    """What each test cell records and shows: its check on the hidden inputs (the grade), told
    with the visible inputs' failure, which the student can run, never the hidden one's
    values or picture. A cell earns the lower of its two scores, as when both `check` calls
    in it ran; one that fails only on the hidden inputs says just that. `visible`: the
    failed checks run again on the visible inputs (the timed check has no hidden inputs)."""
    again = {result.id: result for result in visible}
    shown = []
    for result in hidden:
        seen = again.get(result.id)
        if seen is None:
            shown.append(result)
        elif not seen.passed:
            shown.append(dataclasses.replace(seen, score=min(seen.score, result.score)))
        else:
            shown.append(CheckResult(result.id, result.score, result.max_score,
                                     msg("trusted.hidden_failed")))
    return shown


def graded_assignment(resources: dict[str, Any]) -> str | None:
    """The kit's assignment that nbgrader is grading, when the instructor's name for it is one
    (`mha`, `shapes_zh`); else None, and the notebook's restored test cells say."""
    base, _ = split_name(resources.get("nbgrader", {}).get("assignment") or "")
    return base if base in ASSIGNMENTS else None


class TrustedGrades(Preprocessor):
    """Every kit test cell's outputs, from the kit's isolated grading of the notebook.

    `graded` keeps (results, problems) of each notebook graded, for `course_autograde`.
    """

    enabled = Bool(True).tag(config=True)  # nbconvert's preprocessors are off by default

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.graded: list[tuple[list[CheckResult], list]] = []

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict[str, Any]
                   ) -> tuple[nbformat.NotebookNode, dict[str, Any]]:
        with settings.chosen(**configured(self.config)):  # c.MhaKit in nbgrader_config.py
            return self._graded(nb, resources)

    def _graded(self, nb: nbformat.NotebookNode, resources: dict[str, Any]
                ) -> tuple[nbformat.NotebookNode, dict[str, Any]]:
        device = default_device()
        with tempfile.TemporaryDirectory(prefix="mha-kit-autograde-") as folder:
            path = Path(folder) / "submission.ipynb"
            nbformat.write(nb, str(path))
            assignment = graded_assignment(resources) or detect_assignment(path)
            with loaded_worker(path, device, Limits.from_settings()) as sub:  # for both runs
                grade = functools.partial(run_checks, sub, device=device, assignment=assignment)
                hidden = grade(salt=HIDDEN_SALT)
                again = [r.id for r in hidden if not r.passed and not SPECS[r.id].timed]
                sub.restart_clock()  # each run gets the whole cap, as in its own worker
                visible = grade(only=again) if again else []
                problems = worker_problems(sub)
        results = shown_results(hidden, visible)
        self.graded.append((results, problems))
        found = {result.id: result for result in results}
        lang = shown_language(nb.cells)  # an edition shows the grader's messages in its language
        for cell in filter(graded_by_kit, nb.cells):
            grade_id = cell.metadata["nbgrader"]["grade_id"]
            cell.outputs = (cell_outputs(found[grade_id], lang) if grade_id in found else
                            zero_points(cell, msg("autograde.other_assignment",
                                                  assignment=assignment), lang))
        for problem in problems:
            self.log.warning(render(msg("trusted.problem", problem=problem)))
        return nb, resources


# What the name of an error in a student's cell says about the kernel: nbgrader's Execute shows
# a CellTimeoutError in a cell it interrupted at its timeout; `StudentCells` shows the error
# nbclient raised when the kernel died, or stopped answering (it ignored the interrupt).
KERNEL_TROUBLE = {"CellTimeoutError": "autograde.timed_out",
                  "DeadKernelError": "autograde.kernel_died"}
_HALTED = {DeadKernelError: "autograde.kernel_died", CellTimeoutError: "autograde.kernel_stuck"}


class StudentCells(Execute):
    """nbgrader's Execute for every cell but two kinds: the kit's test cells, which get 0
    points until `TrustedGrades` writes their outputs (so that a list without it grades
    nothing), and the kit's demos, which say they were not run. A kernel that dies or stops
    answering ends the run at that cell, with an error saying so; the later cells stay
    unexecuted (a test cell of the instructor's own among them gets 0 points), and the
    grading goes on."""

    run_demos = Bool(False, help="Run the cells tagged mha-kit-skip too: the kit's timing and "
                                 "training demos, which grade nothing.").tag(config=True)

    @default("shutdown_kernel")
    def _immediately(self) -> str:
        """Every output is in once the last cell is done: the kernel is stopped, not asked to
        tidy up (a second, mostly the interpreter's teardown of torch)."""
        return "immediate"

    def preprocess(self, nb: nbformat.NotebookNode, resources: Any = None, km: Any = None
                   ) -> tuple[nbformat.NotebookNode, dict[str, Any]]:
        self._halted: Message | None = None
        with settings.chosen(**configured(self.config)):  # the kernel's, and its workers'
            self._lang = shown_language(nb.cells)
            return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell: nbformat.NotebookNode, resources: dict[str, Any],
                        index: int) -> tuple[nbformat.NotebookNode, dict[str, Any]]:
        if graded_by_kit(cell):
            cell.outputs = zero_points(cell, msg("autograde.kit_grades"), self._lang)
            return cell, self.resources
        if (cell.cell_type == "code" and not self.run_demos and is_demo(cell)
                and not cell.metadata.get("nbgrader", {}).get("grade")):  # a graded cell runs
            text = render(msg("autograde.demo_not_run"), self._lang)
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text + "\n")]
            return cell, self.resources
        if self._halted is not None:
            if cell.cell_type == "code" and is_test_cell(cell):
                cell.outputs = zero_points(cell, self._halted, self._lang)
            return cell, self.resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except (DeadKernelError, CellTimeoutError) as err:
            gib = getattr(self.km, "disk_limit_passed", None)  # a sandboxed kernel's
            name = cell_name(cell, self.nb.cells)
            self._halted = (msg("autograde.kernel_disk", cell=name, gib=gib) if gib else
                            msg(_HALTED[type(err)], cell=name, seconds=self.timeout))
            self.log.warning(render(self._halted))
            text = render(self._halted, self._lang)
            cell.outputs.append(nbformat.v4.new_output(
                "error", ename=type(err).__name__, evalue=text, traceback=[text]))
            return cell, self.resources


class KeepOneCopy(NbGraderPreprocessor):
    """nbgrader's `DeduplicateIds` (the last cell of a grade id keeps it), but without failing
    the submission. A student who copies a test cell to run it again gets a copy whose nbgrader
    metadata nbgrader's own preprocessor leaves empty, and `add_missing_cells` then fails the
    whole submission on it (KeyError: 'grade_id'). Here a copied test cell is left out (the
    test cell comes back from gradebook.db, as always), and a copied solution or locked cell
    becomes a plain cell (its code still runs)."""

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict[str, Any]
                   ) -> tuple[nbformat.NotebookNode, dict[str, Any]]:
        seen: set[str] = set()
        kept = []
        for cell in reversed(nb.cells):
            if is_grade(cell) or is_solution(cell) or is_locked(cell):
                grade_id = cell.metadata["nbgrader"]["grade_id"]
                if grade_id in seen:
                    self.log.warning("Cell with id '%s' exists multiple times!", grade_id)
                    if is_test_cell(cell):
                        continue
                    del cell.metadata["nbgrader"]
                seen.add(grade_id)
            kept.append(cell)
        nb.cells = kept[::-1]
        return nb, resources
