"""`nbgrader autograde` records the kit's grades, never what the student's kernel printed.

nbgrader executes the submitted notebook in the student's kernel and reads each test cell's
points from its outputs, so code in the notebook could decide its own score (a function named
`check` that returns the points, a patched `autograder.notebook`, a printed ✓). `TrustedGrades`
is a preprocessor listed in nbgrader_config.py right before `SaveAutoGrades`: it grades the
same notebook again with the kit's isolated worker (the student's code runs in a separate
process under the kit's limits, the comparisons happen here), then rewrites the outputs of
every kit test cell from those results: the ✓ line and the points as the cell's value, or the
✗ line, the picture, and an error. `SaveAutoGrades` then records the trusted points. The
student's own cells keep the outputs the kernel gave them, plots and prints included.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from .checks.core import HIDDEN_SALT, CheckResult
from .editions import notebook_language
from .grading.batch import grade_submission
from .grading.files import detect_assignment
from .grading.report import score_line
from .messages import LANG_VARIABLE, msg, render
from .runner.loading import is_test_cell
from .runner.policy import Limits
from .runtime import default_device


@contextlib.contextmanager
def language(lang: str | None) -> Iterator[None]:
    """Messages rendered in `lang` meanwhile (None: as they are)."""
    before = os.environ.get(LANG_VARIABLE)
    if lang:
        os.environ[LANG_VARIABLE] = lang
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(LANG_VARIABLE, None)
        else:
            os.environ[LANG_VARIABLE] = before


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
    with language(lang):
        return _outputs(result)


def _outputs(result: CheckResult) -> list[nbformat.NotebookNode]:
    line = nbformat.v4.new_output("stream", name="stdout", text=score_line(result) + "\n")
    if result.score > 0:
        return [line, nbformat.v4.new_output(
            "execute_result", data={"text/plain": f"{result.score:g}"}, execution_count=None)]
    outputs = [line]
    png = _png(result)
    if png is not None:
        outputs.append(nbformat.v4.new_output("display_data", data={"image/png": png}))
    text = render(result.message)
    outputs.append(nbformat.v4.new_output("error", ename="AssertionError", evalue=text,
                                          traceback=[text]))
    return outputs


class TrustedGrades(Preprocessor):
    """Every kit test cell's outputs, from the kit's isolated grading of the notebook."""

    enabled = Bool(True).tag(config=True)  # nbconvert's preprocessors are off by default

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict[str, Any]
                   ) -> tuple[nbformat.NotebookNode, dict[str, Any]]:
        with tempfile.TemporaryDirectory(prefix="mha-kit-autograde-") as folder:
            path = Path(folder) / "submission.ipynb"
            nbformat.write(nb, str(path))
            assignment = detect_assignment(path)
            results, problems = grade_submission(path, default_device(), assignment=assignment,
                                                 limits=Limits.from_env(), salt=HIDDEN_SALT)
        found = {result.id: result for result in results}
        lang = notebook_language(nb)  # an edition shows the grader's messages in its language
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if is_test_cell(cell) and grade_id in found:
                cell.outputs = cell_outputs(found[grade_id], lang)
        for problem in problems:
            self.log.warning(render(msg("trusted.problem", problem=problem)))
        return nb, resources
