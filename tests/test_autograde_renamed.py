"""`mha-kit autograde` on a small course of its own (not conftest's `course`, which takes
minutes): a renamed notebook, what the command says before the first result, what --force
leaves in place, and a class report of a run that left some submissions as they were."""

from __future__ import annotations

import json
import os
import shutil

import nbformat
import pytest
from conftest import ROOT
from nbgrader.api import Gradebook
from notebook_helpers import SOLUTION, autograde, read

from mha_kit.release import with_interpreter_on_path


def test_a_renamed_notebook_is_named_with_the_fix_and_the_others_are_recorded(tmp_path):
    """The gradebook holds one notebook: bob hands it in as released, alice as
    `multi_head_attention (1).ipynb` (what a second download is called), carol both as released
    and as `Copy of multi_head_attention.ipynb`, erin as a file that is not a notebook; the run
    is forced.
    No generate_assignment: the gradebook is written with nbgrader's own API."""
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    with pytest.MonkeyPatch.context() as patch:  # a new gradebook runs `alembic`
        patch.setenv("PATH", with_interpreter_on_path(dict(os.environ))["PATH"])
        with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
            gradebook.add_assignment("mha")
            gradebook.add_notebook(SOLUTION.stem, "mha",  # as generate_assignment records it
                                   kernelspec=json.dumps(read(SOLUTION).metadata.kernelspec))
    for student, name in (("alice", f"{SOLUTION.stem} (1).ipynb"), ("bob", SOLUTION.name),
                          ("carol", SOLUTION.name), ("carol", f"Copy of {SOLUTION.name}")):
        folder = tmp_path / "submitted" / student / "mha"
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.v4.new_notebook(), str(folder / name))
    # alice and erin were graded before; erin's new notebook is not one nbgrader can read.
    # nbgrader's --force deletes both folders first, then grades neither.
    (tmp_path / "submitted" / "erin" / "mha").mkdir(parents=True)
    (tmp_path / "submitted" / "erin" / "mha" / SOLUTION.name).write_text("{not json")
    graded_before = [tmp_path / "autograded" / s / "mha" / SOLUTION.name for s in ("alice", "erin")]
    for path in graded_before:
        path.parent.mkdir(parents=True)
        path.write_text("{}")
    # In a fresh interpreter, as an instructor runs it (the suite's other runs are in-process).
    run = autograde(tmp_path, "--force", fresh=True, MHA_KIT_SPEED_CONFIG="tiny",
                    MHA_KIT_LANG="en")

    assert run.returncode == 1, run.stdout + run.stderr  # as for any submission not recorded
    lines = run.stderr.splitlines()
    assert lines[0] == "autograding 4 submissions of mha with 2 jobs ...", run.stderr
    name = SOLUTION.name
    assert (f"  alice: not graded: submitted/alice/mha/ holds {SOLUTION.stem} (1).ipynb, but "
            f"nbgrader grades only {name} for mha: rename it to {name} and run again"
            in lines), run.stderr
    assert (f"  carol: not graded: submitted/carol/mha/ also holds Copy of {name}, but nbgrader "
            f"grades only {name} for mha; to grade that one instead, rename it to {name} and "
            "run again with --force" in lines), run.stderr
    assert "2 recorded in" in run.stdout and "could not be recorded: alice, erin" in run.stderr
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        assert sorted(s.id for s in gradebook.students) == ["bob", "carol"]
    assert [path.read_text() for path in graded_before] == ["{}"] * 2  # as the gradebook is

    # Again, not forced, with dave handed in since: the report is of his alone, and says so;
    # alice and erin, graded before and not handed in again, are left as nbgrader leaves them.
    (tmp_path / "submitted" / "dave" / "mha").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / "submitted" / "dave" / "mha" / name))
    again = autograde(tmp_path, "--report", str(tmp_path / "class"),
                      MHA_KIT_SPEED_CONFIG="tiny", MHA_KIT_LANG="en")
    assert ("4 submissions autograded already were left as they are (--force grades them "
            "again): alice, bob, carol, erin" in again.stderr.splitlines()), again.stderr
    assert ("the class report is of this run's submissions only, not of the 4 left as they are"
            in again.stderr.splitlines()), again.stderr
    assert (tmp_path / "class.csv").is_file()
