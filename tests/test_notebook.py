"""The assignment notebook: its cells, the in-notebook `check`, and real kernels running it."""

import json
import re

import nbformat
import pytest
from conftest import ROOT, SPEED, STUBS, TEMPLATE, check_here
from nbgrader.utils import determine_grade
from notebook_helpers import (
    PARTIAL,
    RELEASE,
    SOLUTION,
    errors,
    execute,
    is_test_cell,
    nbgrader_meta,
    read,
    solved,
    verdicts,
)

from mha_kit.grading.registry import ASSIGNMENTS, POINTS, split_name
from mha_kit.notebook import check
from mha_kit.release import sync_points

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


def test_mha_kit_check_gives_the_notebooks_verdicts(tmp_path):
    path = tmp_path / "partial.ipynb"
    nbformat.write(solved(read(RELEASE), PARTIAL), str(path))
    executed = execute(read(path), tmp_path)
    in_notebook = verdicts(executed)
    for cell in filter(is_test_cell, executed.cells):  # as a student sees it: one verdict
        lines = "".join(o.text for o in cell.outputs if o.output_type == "stream").splitlines()
        assert len([line for line in lines if line.startswith(("✓", "✗"))]) == 1, cell.id
        assert all(line.startswith(("✓", "✗", "  ")) for line in lines), lines  # wrapped

    results = tmp_path / "results.json"
    run = check_here(str(path), "--json", str(results))
    assert run.returncode == 1, run.stdout + run.stderr
    tests = json.loads(results.read_text())["tests"]
    from_cli = {t["name"]: (t["status"] == "passed", float(t["score"])) for t in tests}

    assert from_cli == in_notebook
    assert {check_id for check_id, (passed, _) in from_cli.items() if passed} == set(PARTIAL)


def test_a_failed_check_shows_its_verdict_once_and_no_traceback_into_the_kit(tmp_path):
    """A wrong split_heads in a real kernel: the ✗ line once, wrapped; an error output that
    nbgrader scores 0, whose traceback holds no frame of the kit. A merge_heads that raises
    is told at which line of which cell (the kernel numbers each cell's lines from 1)."""
    nb = read(RELEASE)
    wanted = {"setup", "split-heads-solution", "split-heads-test", "merge-heads-solution",
              "merge-heads-test"}
    nb.cells = [c for c in nb.cells if c.id in wanted]
    solution = next(c for c in nb.cells if c.id == "split-heads-solution")
    solution.source = ("def split_heads(x, num_heads):\n"
                       "    B, T, E = x.shape\n"
                       "    return x.view(B, num_heads, T, E // num_heads)  # no transpose\n")
    merge = next(c for c in nb.cells if c.id == "merge-heads-solution")
    merge.source = ("def merge_heads(x):\n"
                    "    B, H, T, D = x.shape\n"
                    "    return x.transpose(1, 2).view(B, T, H * D)  # not contiguous\n")
    cells = {c.id: c for c in execute(nb, tmp_path).cells}
    merged = "".join(o.text for o in cells["merge-heads-test"].outputs
                     if o.output_type == "stream")
    assert "line 3 of the cell that defines `merge_heads`" in " ".join(merged.split()), merged
    test = cells["split-heads-test"]
    (error,) = errors(test)
    assert error.ename == "AssertionError"
    assert not [line for line in error.traceback if "mha_kit" in line], error.traceback
    assert len(error.traceback) == 1 and "earned 0 of 7 points" in error.traceback[0]
    printed = "".join(o.text for o in test.outputs if o.output_type == "stream")
    assert printed.count("✗ split_heads: 0/7") == 1
    assert all(len(line) <= 100 for line in printed.splitlines()), printed
    assert any(o.output_type == "display_data" for o in test.outputs)  # the picture
    assert determine_grade(test) == (0, 7)


def test_notebook_lines_wrap_at_words_and_keep_code_whole(monkeypatch):
    from mha_kit.notebook import wrap

    text = ("✗ causal_mask: 0/6 This matches the mask inverted, True taken as allowed: in "
            "causal_mask True marks a *blocked* pair (key j > query i): "
            "torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1), not torch.tril; got "
            "shape (1, 1, 2, 1), expected (1, 2, 1, 1) = (B, H, T, D)\n    x          .")
    lines = wrap(text, 64).splitlines()
    assert all(len(line) <= 64 for line in lines)
    assert any("torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)," in line
               for line in lines)
    assert any("(1, 1, 2, 1)" in line for line in lines)
    assert lines[-1] == "      x          ."  # a drawing stays as it is, under the message
    assert " ".join(line.strip() for line in lines[:-1]) == text.splitlines()[0]
    narrow = wrap(text, 60).splitlines()  # the call is wider than a line: broken at its spaces
    assert all(len(line) <= 60 for line in narrow)
    assert any(line.endswith("torch.triu(torch.ones(T, T,") for line in narrow), narrow
    assert " ".join(line.strip() for line in narrow[:-1]) == text.splitlines()[0]
    monkeypatch.setenv("MHA_KIT_LANG", "zh")
    chinese = wrap("✗ causal_mask: 0/6 " + "这与掩码取反的结果一致，" * 10).splitlines()
    assert len(chinese) > 1 and not any(line.lstrip().startswith("，") for line in chinese)
