"""Correct answers after module-level Python that `python file.py` and Jupyter run (a config
dataclass, pickling, enums, `torch.jit.script`, ...: tests/corpus/module_features.py) lose
nothing: as a .py file and as a notebook, in the grader's worker and through `mha-kit grade`.
nbgrader's path: the `course` fixture's "complete" students have the same cell."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import CORPUS, ROOT, assert_full_marks, cli_here
from notebook_helpers import read, with_module_features

from mha_kit.grading.batch import grade_submission
from mha_kit.grading.registry import ASSIGNMENTS

sys.path.insert(0, str(CORPUS))
from module_features import FEATURES, prelude  # noqa: E402

# Each assignment's correct answers: its reference .py file where the corpus has one, and
# its solution notebook.
PY_FILES = {"mha": CORPUS / "template.py", "llm_attention": CORPUS / "llm" / "reference.py"}
NOTEBOOKS = {name: next((ROOT / "solutions" / name).glob("*.ipynb")) for name in ASSIGNMENTS}


def test_the_corpus_has_a_dozen_features():
    assert len(FEATURES) >= 12
    assert next(iter(FEATURES.values())).startswith("from __future__ import annotations")


def _with_features(base: Path, folder: Path) -> Path:
    path = folder / f"features_{base.stem}{base.suffix}"
    if base.suffix == ".py":
        path.write_text(f"{prelude()}\n\n{base.read_text()}")
    else:
        nbformat.write(with_module_features(read(base)), str(path))
    return path


@pytest.mark.parametrize("base", [PY_FILES["llm_attention"], *(
    path for name, path in NOTEBOOKS.items() if name != "mha")], ids=lambda p: p.name)
def test_full_marks_in_the_worker(base: Path, tmp_path: Path):
    assignment = next(name for name, b in (*PY_FILES.items(), *NOTEBOOKS.items()) if b == base)
    results, problems = grade_submission(_with_features(base, tmp_path), assignment=assignment)
    assert not problems, problems
    assert_full_marks({r.id: (r.passed, r.score) for r in results},
                      [c.id for c in ASSIGNMENTS[assignment]])


def test_full_marks_through_mha_kit_grade(tmp_path: Path):
    """A class of two: mha's .py file and its notebook, each after the features."""
    folder = tmp_path / "submitted"
    for student, base in (("py", PY_FILES["mha"]), ("notebook", NOTEBOOKS["mha"])):
        (folder / student).mkdir(parents=True)
        _with_features(base, folder / student)
    sheet = tmp_path / "grades.csv"
    done = cli_here("grade", str(folder), "--assignment", "mha",
                    "--jobs", "1", "--csv", str(sheet))  # 2: test_batch
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["student"]: row for row in csv.DictReader(sheet.open())}
    assert set(rows) == {"py", "notebook"}
    for row in rows.values():
        assert float(row["total"]) == 100, row
