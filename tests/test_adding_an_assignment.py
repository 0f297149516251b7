"""Adding an assignment is one folder: a package scaffolded outside the kit by `mha-kit new`,
touching no shared module, is graded by `mha-kit check`, released with nbgrader and autograded
by nbgrader; a broken package beside it is named once and costs the others nothing.

The package ("toy": one function, one check, one mistake, two languages) is written by
`mha-kit new toy --into <folder>` in a temporary folder named by the `assignments` setting,
which `mha_kit.catalog` searches besides the kit's, and its one function filled in, as
docs/architecture.md's "Adding an assignment" describes.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

from mha_kit import scaffold, settings
from mha_kit.cli import main
from mha_kit.runner.loading import is_test_cell

ANSWER = "return x.exp() / x.exp().sum(-1, keepdim=True)"
RIGHT = f"def toy(x):\n    {ANSWER}\n"
WRONG = "def toy(x):\n    return x.softmax(0)\n"  # the scaffold's named mistake
# Packages beside the toy that cannot be used, each left out, and why: a points table that does
# not parse, and the message ids, check ids and contract names of the kit's own declared again.
POINTS = ("from mha_kit.checks.spec import CheckSpec\n"
          "CHECKS = (CheckSpec({!r}, 100, (), lambda sub, ctx: 1.0),)\n")  # with its check id
PLANTED = {
    "broken": {"points.py": "CHECKS = (\n"},
    "clashing": {"messages.py": 'TEMPLATES = {"en": {"cli.jobs": "mine"}, '
                                '"zh": {"cli.jobs": "mine"}}\n'},
    "copied_checks": {"points.py": POINTS.format("fused_mha")},
    "copied_contract": {"contract.py": "from mha_kit.catalog import Entry\n"
                                       "ENTRIES = (Entry('MultiHeadAttention', 'mine'),)\n"},
}
LEFT_OUT = {"broken": "points.py:1",
            "clashing": "messages.py redeclares message ids: ['cli.jobs']",
            "copied_checks": "points.py redeclares check ids: ['fused_mha']",
            "copied_contract": "contract.py redeclares contract names: ['MultiHeadAttention']"}
SOLUTION = re.compile(r"(### BEGIN SOLUTION\n).*?(\n\s*### END SOLUTION)", re.S)


def solution_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    (cell,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    return cell


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """The environment of a process that sees the toy assignment and the broken ones beside it
    (`PLANTED`), and the course of its notebook."""
    packages, course = tmp_path_factory.mktemp("assignments"), tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    env = {**os.environ, settings.variable("assignments"): str(packages),
           settings.variable("worker_user"): ""}
    with contextlib.redirect_stdout(io.StringIO()) as said:  # in this process: no torch to load
        assert main(["new", "toy", "--into", str(packages), "--course-dir", str(course)]) == 0
    assert "mha-kit release toy_zh" in said.getvalue()  # what to do next
    master = course / "solutions" / "toy" / "toy.ipynb"
    nb = nbformat.read(str(master), as_version=4)
    cell = solution_cell(nb)
    cell.source, filled = SOLUTION.subn(rf"\g<1>    {ANSWER}\g<2>", cell.source)
    assert filled == 1
    nbformat.write(nb, str(master))
    for package, files in PLANTED.items():
        (packages / package).mkdir()
        for name, text in {"__init__.py": "", "contract.py": "ENTRIES = ()\n",
                           "messages.py": 'TEMPLATES = {"en": {}, "zh": {}}\n',
                           "points.py": POINTS.format(package), **files}.items():
            (packages / package / name).write_text(text, encoding="utf-8")
    return env, course


def kit(env: dict[str, str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mha_kit.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_mha_kit_check_grades_a_py_answer_and_names_the_mistake(toy, tmp_path: Path):
    env, _ = toy
    (tmp_path / "right.py").write_text(RIGHT)
    (tmp_path / "wrong.py").write_text(WRONG)
    right = kit(env, "check", str(tmp_path / "right.py"), "--json", str(tmp_path / "r.json"))
    assert right.returncode == 0, right.stdout + right.stderr
    said = [(m[1], line) for line in right.stderr.splitlines()
            if (m := re.match(r"mha-kit: assignment '(\w+)' cannot be loaded", line))]
    left_out = dict(said)
    assert sorted(name for name, _ in said) == sorted(LEFT_OUT), right.stderr  # once; not mha
    assert left_out["broken"].startswith(
        "mha-kit: assignment 'broken' cannot be loaded and is left out "
        "(the others work as usual): SyntaxError"), left_out["broken"]
    for name, why in LEFT_OUT.items():
        assert why in left_out[name], left_out[name]
    assert json.loads((tmp_path / "r.json").read_text())["score"] == 100
    wrong = kit(env, "check", str(tmp_path / "wrong.py"), "--lang", "zh")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "✗ toy" in wrong.stdout and "0/100" in wrong.stdout
    assert "在第一维上做 softmax" in wrong.stdout  # the mistake, named in the language asked


def test_nbgrader_releases_and_autogrades_it(toy):
    env, course = toy
    release = kit(env, "release", "toy", "--course-dir", str(course))
    assert release.returncode == 0, release.stdout + release.stderr
    assert "toy, still to do" not in release.stderr  # a course's package needs nothing more
    released = nbformat.read(str(course / "assignments" / "toy" / "toy.ipynb"), as_version=4)
    assert ANSWER not in solution_cell(released).source
    for student, answer in (("alice", RIGHT), ("bob", WRONG), ("carol", None)):
        folder = course / "submitted" / student / "toy"
        folder.mkdir(parents=True)
        nb = nbformat.read(str(course / "assignments" / "toy" / "toy.ipynb"), as_version=4)
        solution_cell(nb).source = answer or solution_cell(nb).source  # carol: the release
        nbformat.write(nb, str(folder / "toy.ipynb"))
    cycle = subprocess.run([sys.executable, str(ROOT / "tests" / "nbgrader_cycle.py"),
                            str(course), "toy"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=600)
    assert cycle.returncode == 0, cycle.stdout[-3000:] + cycle.stderr[-3000:]
    with open(course / "grades.csv") as sheet:
        scores = {row["student_id"]: float(row["score"]) for row in csv.DictReader(sheet)}
    assert scores == {"alice": 100.0, "bob": 0.0, "carol": 0.0}
    graded = nbformat.read(str(course / "autograded" / "carol" / "toy" / "toy.ipynb"),
                           as_version=4)
    (test_cell,) = filter(is_test_cell, graded.cells)
    assert "`toy` is not implemented yet" in json.dumps(test_cell.outputs)


def test_the_kits_notebooks_begin_their_setup_as_the_scaffold_writes_it():
    for master in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        nb = nbformat.read(str(master), as_version=4)
        setup = next(c for c in nb.cells if c.cell_type == "code")
        assert setup.source.startswith(f"{scaffold.INSTALL}\n"), master.name
