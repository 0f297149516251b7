"""Adding an assignment is one folder: a package written outside the kit, touching no shared
module, is graded by `mha-kit check`, released with nbgrader and autograded by nbgrader; a
broken package beside it is named once and costs the others nothing.

The package ("toy": one function, one check, one mistake, two languages) lives in a temporary
folder named by the `assignments` setting, which `autograder.catalog` searches besides the kit's,
as docs/architecture.md's "Adding an assignment" describes.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder import settings

TOY = {
    "__init__.py": '"""A toy assignment: double a tensor."""\n',
    "contract.py": ('from autograder.catalog import Entry\n\n'
                    'ENTRIES = (Entry("double", "double(x)"),)\n'),
    "mistakes.py": 'CATALOGUE = ("toy_squared",)\n',
    "messages.py": '''TEMPLATES = {
    "en": {"toy.case": "x of shape {shape}",
           "mistake.toy_squared": "you multiplied x by itself: double it, x * 2"},
    "zh": {"toy.case": "形状为 {shape} 的 x",
           "mistake.toy_squared": "你把 x 和自己相乘了：应当乘以 2，x * 2"},
}
''',
    "checks.py": '''import torch

from ...checks.core import TIGHT, Context
from ...checks.expect import expect_close
from ...messages import msg


def check_double(sub, ctx: Context) -> float:
    x = torch.randn(3, 4, dtype=torch.float64, generator=ctx.generator("toy_double"))
    got = sub.call("double", x).value
    expect_close("double(x)", got, x * 2, msg("toy.case", shape=tuple(x.shape)), TIGHT,
                 mistakes=[("toy_squared", lambda: x * x)])
    return 1.0
''',
    "points.py": '''from ...checks.spec import CheckSpec
from . import checks

CHECKS = (CheckSpec("toy_double", 100, ("double",), checks.check_double),)
''',
}
RIGHT = "def double(x):\n    return x + x\n"
WRONG = "def double(x):\n    return x * x\n"


@pytest.fixture(scope="module")
def toy_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a process that sees the toy assignment, and a broken one beside it
    (a points table that does not parse)."""
    packages = tmp_path_factory.mktemp("assignments")
    (packages / "toy").mkdir()
    for name, text in TOY.items():
        (packages / "toy" / name).write_text(text, encoding="utf-8")
    (packages / "broken").mkdir()
    for name, text in {"__init__.py": "", "contract.py": "ENTRIES = ()\n",
                       "messages.py": 'TEMPLATES = {"en": {}, "zh": {}}\n',
                       "points.py": "CHECKS = (\n"}.items():
        (packages / "broken" / name).write_text(text, encoding="utf-8")
    return {**os.environ, settings.variable("assignments"): str(packages),
            settings.variable("worker_user"): ""}


def kit(env: dict[str, str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_mha_kit_check_grades_a_py_answer_and_names_the_mistake(toy_env, tmp_path: Path):
    (tmp_path / "right.py").write_text(RIGHT)
    (tmp_path / "wrong.py").write_text(WRONG)
    right = kit(toy_env, "check", str(tmp_path / "right.py"), "--json", str(tmp_path / "r.json"))
    assert right.returncode == 0, right.stdout + right.stderr
    (said,) = [line for line in right.stderr.splitlines() if "'broken'" in line]
    assert said.startswith("mha-kit: assignment 'broken' cannot be loaded and is left out "
                           "(the others work as usual): SyntaxError") and "points.py:1" in said
    assert json.loads((tmp_path / "r.json").read_text())["score"] == 100
    wrong = kit(toy_env, "check", str(tmp_path / "wrong.py"), "--lang", "zh")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "toy_double" in wrong.stdout and "0/100" in wrong.stdout
    assert "你把 x 和自己相乘了" in wrong.stdout  # the mistake, named in the language asked


def toy_notebook(answer: str) -> nbformat.NotebookNode:
    solution = "def double(x):\n    ### BEGIN SOLUTION\n    return x + x\n    ### END SOLUTION"
    return new_notebook(cells=[
        new_markdown_cell("# Double a tensor"),
        new_code_cell("from autograder.notebook import check"),
        new_code_cell(solution if answer == "solution" else answer, metadata={"nbgrader": {
            "grade": False, "grade_id": "double_solution", "locked": False,
            "schema_version": 3, "solution": True}}),
        new_code_cell('check("toy_double")', metadata={"nbgrader": {
            "grade": True, "grade_id": "toy_double", "locked": True, "points": 1,
            "schema_version": 3, "solution": False}}),
    ], metadata={"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                "name": "python3"}})


def test_nbgrader_releases_and_autogrades_it(toy_env, tmp_path: Path):
    course = tmp_path / "course"
    (course / "solutions" / "toy").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    nbformat.write(toy_notebook("solution"), str(course / "solutions" / "toy" / "toy.ipynb"))
    release = kit(toy_env, "release", "toy", "--course-dir", str(course))
    assert release.returncode == 0, release.stdout + release.stderr
    assert "toy_double" in release.stdout  # its points set from the package's table: 1 -> 100
    released = nbformat.read(str(course / "assignments" / "toy" / "toy.ipynb"), as_version=4)
    assert "return x + x" not in released.cells[2].source
    for student, answer in (("alice", RIGHT), ("bob", WRONG)):
        folder = course / "submitted" / student / "toy"
        folder.mkdir(parents=True)
        nb = nbformat.read(str(course / "assignments" / "toy" / "toy.ipynb"), as_version=4)
        nb.cells[2].source = answer
        nbformat.write(nb, str(folder / "toy.ipynb"))
    cycle = subprocess.run([sys.executable, str(ROOT / "tests" / "nbgrader_cycle.py"),
                            str(course), "toy"], cwd=ROOT, env=toy_env, capture_output=True,
                           text=True, timeout=600)
    assert cycle.returncode == 0, cycle.stdout[-3000:] + cycle.stderr[-3000:]
    with open(course / "grades.csv") as sheet:
        scores = {row["student_id"]: float(row["score"]) for row in csv.DictReader(sheet)}
    assert scores == {"alice": 100.0, "bob": 0.0}
