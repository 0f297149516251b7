"""The assignment notebook: its cells, the in-notebook `check`, and real kernels running it."""

import json
import re

import nbformat
import pytest
from conftest import ROOT, STUBS, TEMPLATE, assert_full_marks, run_cli
from notebook_helpers import (
    PARTIAL,
    RELEASE,
    SOLUTION,
    SPEED,
    errors,
    execute,
    is_test_cell,
    nbgrader_meta,
    read,
    solved,
    unexpected_errors,
    verdicts,
)

from autograder.editions import split_name
from autograder.grading.registry import ASSIGNMENTS, POINTS
from autograder.notebook import check
from autograder.release import sync_points

NOTEBOOKS = sorted((ROOT / "solutions").glob("*/*.ipynb")) + sorted(
    (ROOT / "assignments").glob("*/*.ipynb")
)
CELL_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_one_test_cell_per_check_with_the_tables_points(path):
    table = ASSIGNMENTS[split_name(path.parent.name)[0]]  # an edition shares its master's table
    cells = [c for c in read(path).cells if is_test_cell(c)]
    assert sorted(nbgrader_meta(c)["grade_id"] for c in cells) == sorted(s.id for s in table)
    for cell in cells:
        meta = nbgrader_meta(cell)
        assert meta["points"] == POINTS[meta["grade_id"]], meta["grade_id"]
        assert meta["locked"], meta["grade_id"]


def test_test_cells_run_their_check_on_visible_and_hidden_inputs():
    for cell in filter(is_test_cell, read(SOLUTION).cells):
        check_id = nbgrader_meta(cell)["grade_id"]
        assert f'check("{check_id}")' in cell.source
        if check_id != SPEED:  # the speed check draws fresh inputs on every run anyway
            hidden = cell.source.split("### BEGIN HIDDEN TESTS")[1]
            assert f'check("{check_id}", hidden=True)' in hidden.split("### END HIDDEN TESTS")[0]


def test_cells_have_stable_readable_ids_kept_by_the_release():
    ids = [c.id for c in read(SOLUTION).cells]
    assert len(set(ids)) == len(ids)
    assert all(CELL_ID.match(i) for i in ids), [i for i in ids if not CELL_ID.match(i)]
    assert [c.id for c in read(RELEASE).cells] == ids


def test_release_has_no_solutions_hidden_tests_or_outputs():
    text = RELEASE.read_text()
    for marker in ("BEGIN SOLUTION", "HIDDEN TESTS", "hidden=True"):
        assert marker not in text
    assert all(not c.get("outputs") for c in read(RELEASE).cells)


def test_check_grades_the_callers_namespace(capsys):
    namespace = {"check": check}
    exec(TEMPLATE.read_text(), namespace)
    exec('score = check("split_heads")\nhidden = check("split_heads", hidden=True)', namespace)
    assert namespace["score"] == namespace["hidden"] == POINTS["split_heads"]
    assert capsys.readouterr().out.splitlines()[0] == (
        f"✓ split_heads: {POINTS['split_heads']}/{POINTS['split_heads']} ok"
    )

    stubs = {"check": check}
    exec(STUBS.read_text(), stubs)
    with pytest.raises(AssertionError, match="`attend` is not implemented yet"):
        exec('check("attend")', stubs)
    assert capsys.readouterr().out.startswith("✗ attend: 0/")
    with pytest.raises(ValueError, match="unknown check"):
        check("no_such_check")


def test_sync_points_takes_the_points_from_the_table(tmp_path):
    nb = read(SOLUTION)
    cell = next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") == "attend")
    cell.metadata.nbgrader.points = 99
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, str(path))
    assert sync_points(path, "mha") == ["attend"]
    synced = next(c for c in read(path).cells if nbgrader_meta(c).get("grade_id") == "attend")
    assert synced.metadata.nbgrader.points == POINTS["attend"]
    assert sync_points(path, "mha") == []


def test_solution_notebook_passes_every_test_cell(tmp_path):
    nb = execute(read(SOLUTION), tmp_path)
    for cell in nb.cells:
        assert not errors(cell), (cell.id, errors(cell))
    assert_full_marks(verdicts(nb), [s.id for s in ASSIGNMENTS["mha"]])
    for cell in filter(is_test_cell, nb.cells):  # the hidden run printed its own line
        lines = "".join(o.text for o in cell.outputs if o.output_type == "stream").splitlines()
        assert len(lines) == (1 if nbgrader_meta(cell)["grade_id"] == SPEED else 2), cell.id


def test_release_runs_every_cell_and_fails_only_with_not_implemented(tmp_path):
    nb = execute(read(RELEASE), tmp_path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    assert not errors(code[0]), "the setup cell must work"
    assert [e for cell in code for e in unexpected_errors(cell)] == []
    assert all(errors(c) for c in code if is_test_cell(c))


def test_mha_kit_check_gives_the_notebooks_verdicts(tmp_path):
    path = tmp_path / "partial.ipynb"
    nbformat.write(solved(read(RELEASE), PARTIAL), str(path))
    in_notebook = verdicts(execute(read(path), tmp_path))

    results = tmp_path / "results.json"
    run = run_cli("check", str(path), "--json", str(results))
    assert run.returncode == 1, run.stdout + run.stderr
    tests = json.loads(results.read_text())["tests"]
    from_cli = {t["name"]: (t["status"] == "passed", float(t["score"])) for t in tests}

    assert from_cli == in_notebook
    assert {check_id for check_id, (passed, _) in from_cli.items() if passed} == set(PARTIAL)
