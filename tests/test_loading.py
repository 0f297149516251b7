"""Loading a submission: which notebook cells run, and what a failing cell costs."""

import json
import subprocess
import sys

import nbformat
import pytest
from conftest import ROOT, TEMPLATE

from mha_kit.grading.registry import run_check
from mha_kit.messages import msg
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.loading import (
    PICTURE_TAG,
    SKIP_TAG,
    cell_name,
    load_source,
    pictures_needed,
)


def notebook(tmp_path, *cells):
    path = tmp_path / "student.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=list(cells)), str(path))
    return path


def code(source, **metadata):
    return nbformat.v4.new_code_cell(source, metadata=metadata)


def test_magics_and_shell_lines_are_tolerated_and_a_failing_cell_is_reported(tmp_path):
    path = notebook(
        tmp_path,
        code("%matplotlib inline\n!echo installing\nimport torch"),
        code("undefined_name + 1"),
        code(TEMPLATE.read_text()),
    )
    loaded = load_source(path)
    assert callable(loaded.namespace["split_heads"])  # the cells after the failure still ran
    assert loaded.problems == [msg(
        "load.raised", where=msg("load.cell_starting", line="undefined_name + 1"),
        line=msg("runner.at_line", line=1, cell=""), type="NameError",
        error="name 'undefined_name' is not defined")]  # Python's own words


def test_test_cells_demos_and_pictures_are_not_run(tmp_path):
    test_cell = {"nbgrader": {"grade": True, "solution": False, "grade_id": "split_heads",
                              "points": 7, "locked": True}}
    path = notebook(
        tmp_path,
        code("def split_heads(x, num_heads):\n    return 'mine'"),
        code("raise SystemExit('a test cell')", **test_cell),
        code("split_heads = None  # a demo that only shows something", tags=[SKIP_TAG]),
        code("import no_such_module  # a picture: it imports matplotlib", tags=[PICTURE_TAG]),
    )
    loaded = load_source(path)
    assert loaded.problems == []
    assert loaded.namespace["split_heads"](None, 1) == "mine"


def test_tags_that_are_not_a_list_count_as_none(tmp_path):
    """nbformat refuses to write such a notebook, but a student's editor may."""
    nb = nbformat.v4.new_notebook(cells=[code("ran = True"), code("tagged = True")])
    nb.cells[0].metadata.tags, nb.cells[1].metadata.tags = 5, None
    path = tmp_path / "student.ipynb"
    path.write_text(json.dumps(nb))
    assert {"ran", "tagged"} <= set(load_source(path).namespace)


def test_grading_leaves_nothing_in_the_working_folder(tmp_path, monkeypatch):
    """Hypothesis's caches go to the temporary folder, not the student's (no .hypothesis/)."""
    monkeypatch.chdir(tmp_path)
    result = run_check("split_heads", InProcessSubmission.from_path(TEMPLATE))
    assert result.passed
    assert list(tmp_path.iterdir()) == []


def test_the_worker_loads_the_shipped_notebooks_without_matplotlib():
    """Their pictures are tagged, and import matplotlib themselves: importing it and drawing
    were half a second of every `mha-kit check`."""
    script = ("import pathlib, sys\n"
              "from mha_kit.runner.loading import load_source\n"
              "notebooks = sorted(pathlib.Path('solutions').glob('*/*.ipynb'))\n"
              "assert notebooks\n"
              "assert all(load_source(path).problems == [] for path in notebooks)\n"
              "print(sorted(m for m in sys.modules if m.startswith('matplotlib')))\n")
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=ROOT, check=True)
    assert loaded.stdout == "[]\n"


def test_pictures_run_when_an_answer_uses_what_they_bind(tmp_path):
    """A student who draws in an answer with the `plt` that only the picture cells import gets
    the grade that the notebook's own check() cells give."""
    path = notebook(
        tmp_path,
        code("import math as plt  # stands for matplotlib.pyplot", tags=[PICTURE_TAG]),
        code("def split_heads(x, num_heads):\n    return plt.pi"),
    )
    loaded = load_source(path)
    assert loaded.problems == []
    assert loaded.namespace["split_heads"](None, 1) == pytest.approx(3.14159)


PICTURE = ("import matplotlib.pyplot as plt\nweights = scores.softmax(-1)\n"
           "plt.imshow(weights[0, 0])", True)


@pytest.mark.parametrize(("other", "needed"), [
    ("def attend(scores, v, mask=None):\n    weights = scores.softmax(-1)\n"
     "    return weights @ v, weights", False),  # a local that shares a picture's name
    ("weights = torch.ones(3)\nprint(weights)", False),  # binds the name itself
    ("print(weights)", True),  # reads what only the picture binds
    ("class Head:\n    def forward(self, x):\n        return plt.imshow(x)", True),
    ("print(globals()['weights'])", True),  # reads globals by name
    ("def f(:", False),  # does not compile: it runs nowhere
])
def test_pictures_are_needed_when_another_cell_reads_what_they_bind(other, needed):
    assert pictures_needed([PICTURE, (other, False)]) is needed


def test_a_picture_that_binds_a_contract_name_runs():
    """A fix written in the picture cell below a buggy answer is what the kernel grades."""
    fix = ("def causal_mask(seq_len, device=None):\n    return None", True)
    assert pictures_needed([fix, ("x = 1", False)]) is True


def test_student_code_runs_in_a_real_module_with_only_its_own_future_flags(tmp_path):
    """The kit's `from __future__ import annotations` made every annotation a string, which a
    dataclass then looked up in a module that was not in sys.modules: 0/100 for nanoGPT's
    config dataclass. A student's own future import carries over to the cells after it."""
    source = ("import dataclasses, sys, typing\n"
              "@dataclasses.dataclass\nclass Config:\n    n_head: int = 4\n"
              "assert typing.get_type_hints(Config) == {'n_head': int}\n"
              "annotated = Config.__annotations__['n_head']\n"
              "same = vars(sys.modules[__name__]) is globals()\n")
    py = tmp_path / "student.py"
    py.write_text(source)
    loaded = load_source(py)
    assert loaded.problems == []
    assert loaded.namespace["annotated"] is int and loaded.namespace["same"]
    assert loaded.namespace["__file__"] == str(py.resolve())
    later = "def f(x: undefined_name): pass\nlater = f.__annotations__['x']"
    loaded = load_source(notebook(tmp_path, code("from __future__ import annotations"),
                                  code(source), code(later)))
    assert loaded.problems == []
    assert loaded.namespace["annotated"] == "int" and loaded.namespace["later"] == "undefined_name"


def test_an_error_without_text_is_told_without_an_empty_quote(tmp_path):
    loaded = load_source(notebook(tmp_path, code("x = 1\nraise NotImplementedError")))
    assert loaded.problems == [msg("load.raised_bare", where=msg("load.cell_defining", name="x"),
                                   line=msg("runner.at_line", line=2, cell=""),
                                   type="NotImplementedError")]


def test_a_cell_is_named_as_jupyterlab_shows_it_never_by_its_position(tmp_path):
    """JupyterLab numbers no cells: a cell is named by what it defines (the contract's names,
    then functions, then other names, imports last), by its In [n] where two define the same
    name or it defines nothing, else by its first line of code."""
    defines = code("import math\nhalf = 2\n\ndef apply_rope(x, cos, sin):\n    return x\n")
    again = code("def apply_rope(x, cos, sin):\n    return x\n")
    again.execution_count = 12
    plain = code("# a demo\nprint(apply_rope)\n")
    ran = code("print(1)\n")
    ran.execution_count = 3
    cells = [defines, again, plain, ran]
    assert [cell_name(cell, cells) for cell in cells] == [
        msg("load.cell_defining", name="apply_rope"), msg("load.cell_ran", count=12),
        msg("load.cell_starting", line="print(apply_rope)"), msg("load.cell_ran", count=3)]
    path = notebook(tmp_path, nbformat.v4.new_markdown_cell("# 1 / 0, the title"), code("1 / 0"))
    assert load_source(path).problems[0].params["where"] == msg("load.cell_starting", line="1 / 0")


def test_a_kit_run_from_a_source_tree_passes_the_setup_cell(monkeypatch):
    """With no `mha-kit` metadata installed (a checkout on PYTHONPATH, as on the GPU machine),
    the setup cell's check for the kit's distribution still finds the kit that grades: the
    reference's cells all run (it scored 20/100 there before)."""
    import importlib.metadata
    from importlib.machinery import PathFinder

    from mha_kit.runner import kit_distribution

    found = PathFinder.find_distributions

    def without_the_kit(*args, **kwargs):
        return (d for d in found(*args, **kwargs) if d.metadata["Name"] != "mha-kit")

    monkeypatch.setattr(PathFinder, "find_distributions", without_the_kit)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    kit_distribution.make_findable.cache_clear()
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.distribution("mha-kit")
    loaded = load_source(ROOT / "solutions" / "mha" / "multi_head_attention.ipynb")
    assert loaded.problems == [] and {"math", "torch", "MultiHeadAttention"} <= set(
        loaded.namespace)
    assert importlib.metadata.distribution("mha_kit").metadata["Name"] == "mha-kit"
    kit_distribution.make_findable.cache_clear()
