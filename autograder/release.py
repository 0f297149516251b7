"""`mha-kit release`: regenerate assignments/ from solutions/ with nbgrader.

For each assignment, the points of every test cell in solutions/<assignment>/*.ipynb are first
set from that assignment's table, `assignments/<assignment>/points.py` (the one place points are
decided); then
`nbgrader generate_assignment` writes assignments/<assignment>/ and records the test cells in
gradebook.db, from which `nbgrader autograde` restores them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat

from .grading.registry import ASSIGNMENTS
from .runner.loading import is_test_cell


def sync_points(notebook: Path, assignment: str) -> list[str]:
    """Set each test cell's points from the assignment's table; the grade ids changed."""
    points = {spec.id: spec.points for spec in ASSIGNMENTS[assignment]}
    nb = nbformat.read(str(notebook), as_version=4)
    changed = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if is_test_cell(cell) and meta.get("grade_id") in points:
            if meta.get("points") != points[meta["grade_id"]]:
                meta["points"] = points[meta["grade_id"]]
                changed.append(meta["grade_id"])
    if changed:
        nbformat.write(nb, str(notebook))
    return changed


def with_interpreter_on_path(env: dict[str, str]) -> dict[str, str]:
    """`env` with this interpreter's bin/ first on PATH.

    nbgrader runs the `alembic` command to set up gradebook.db; it lives beside the
    interpreter, which is not on PATH when the venv is not activated.
    """
    return {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                            env.get("PATH", "")])}


def run_nbgrader(course: Path, *args: str, env: dict[str, str] | None = None,
                 **kwargs) -> subprocess.CompletedProcess:
    """`nbgrader ARGS` in the course directory, with this interpreter's bin/ on PATH."""
    env = with_interpreter_on_path(dict(os.environ if env is None else env))
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          **kwargs)
