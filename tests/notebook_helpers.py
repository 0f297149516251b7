"""Building student notebooks from the release and running them in real kernels."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
from conftest import CORPUS, ROOT, cli_at
from nbclient import NotebookClient

from mha_kit import editions
from mha_kit.grading.registry import ASSIGNMENTS, SPECS, WAITING_MESSAGES
from mha_kit.messages import msg
from mha_kit.release import with_interpreter_on_path
from mha_kit.runner.loading import is_test_cell

sys.path.insert(0, str(CORPUS))
from module_features import prelude  # noqa: E402

SOLUTION = ROOT / "solutions" / "mha" / "multi_head_attention.ipynb"
RELEASE = ROOT / "assignments" / "mha" / "multi_head_attention.ipynb"
# Three of the six step functions: what a student half way through section 3 has.
PARTIAL = ("split_heads", "causal_mask", "merge_heads")
VERDICT = re.compile(r"^([✓✗]) (\w+): ([\d.]+)/(\d+)", re.MULTILINE)
# The nbgrader cycle (conftest's `course`) goes through every assignment and every edition.
COURSE_ASSIGNMENTS = (*ASSIGNMENTS, *editions.edition_names(ROOT))
# Who submits what: the core assignment gets four students, every other assignment of
# SUBMITTED two, its solution ("complete") and its release ("empty"). Every edition is
# released, one is handed in: an edition's code and test cells are its master's
# (test_chinese_edition.py), so one tells whether an edition's grades come out in its language.
MHA_STUDENTS = ("complete", "empty", "partial", "tampered")
MHA_CHECK_IDS = [spec.id for spec in ASSIGNMENTS["mha"]]
STUDENTS = ("complete", "empty")
SUBMITTED = (*ASSIGNMENTS, "llm_attention_zh")


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def nbgrader_meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def solved(release: nbformat.NotebookNode, check_ids: tuple[str, ...] | None = None):
    """The release with the answers to some checks (all when None) pasted from the solution.

    A solution cell answers a check when its grade id is `<check id>_solution`; with
    check_ids None every solution cell is filled, helpers and optional cells included.
    """
    answers = {nbgrader_meta(c).get("grade_id"): c.source for c in read(SOLUTION).cells
               if nbgrader_meta(c).get("solution")}
    wanted = None if check_ids is None else {f"{i}_solution" for i in check_ids}
    nb = copy.deepcopy(release)
    for cell in nb.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if nbgrader_meta(cell).get("solution") and (wanted is None or grade_id in wanted):
            cell.source = answers[grade_id]
    return nb


def with_module_features(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """`nb` with a cell of module-level Python after its setup cell (the first code cell):
    tests/corpus/module_features.py, which a correct notebook may use and must lose nothing by."""
    nb = copy.deepcopy(nb)
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code") + 1
    cell = nbformat.v4.new_code_cell(prelude())
    cell.id = "module-features"
    nb.cells.insert(at, cell)
    return nb


# The tampered submission's test cells: one edited, one deleted, one copied (run twice).
EDITED, DELETED, COPIED = "attend", "scaled_scores", "merge_heads"


def tampered(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """One test cell replaced by `pass` (full marks if it ran), another deleted, a third
    copied right after itself, metadata included (Jupyter's copy and paste)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id") == EDITED:
            cell.source = "pass"
    nb.cells = [c for c in nb.cells if nbgrader_meta(c).get("grade_id") != DELETED]
    (at,) = [i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == COPIED]
    copied = copy.deepcopy(nb.cells[at])
    copied.id = "copied"
    nb.cells.insert(at + 1, copied)
    return nb


def kernel_env() -> dict[str, str]:
    """The environment of a student's kernel: matplotlib's inline backend, not CI's Agg."""
    return {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}


def run_autograde(course: Path, *argv: str, fresh: bool = False,
                  **env: str) -> subprocess.CompletedProcess:
    """`mha-kit autograde ARGV` in `course`, as an instructor runs it, `env` added: in this
    process (`conftest.cli_at`: its grader processes, kernels and workers are processes of
    their own either way), or with `fresh` in a fresh interpreter. Student code keeps the
    grader's account (no switch to `nobody` under root), so that a kernel can kill it."""
    env = with_interpreter_on_path({**kernel_env(), "MHA_KIT_LOAD_TIMEOUT": "10",
                                    "MHA_KIT_WORKER_USER": "", **env})
    if fresh:
        return subprocess.run([sys.executable, "-m", "mha_kit.cli", "autograde", *argv],
                              cwd=course, env=env, capture_output=True, text=True, timeout=900)
    return cli_at(course, "autograde", *argv, env=env, unset=("MPLBACKEND",))


def autograde(course: Path, *args: str, fresh: bool = False,
              **env: str) -> subprocess.CompletedProcess:
    """`mha-kit autograde mha ARGS` in `course` (`run_autograde`)."""
    return run_autograde(course, "mha", *args, fresh=fresh, **env)


def execute(nb: nbformat.NotebookNode, cwd: Path, kernel_name: str = "python3",
            timeout: int = 180) -> nbformat.NotebookNode:
    """Run every cell top to bottom in a fresh kernel; errors stay in the outputs. The kernel
    is stopped, not asked to tidy up: its outputs are all in by then, and the interpreter's
    teardown of torch takes seconds."""
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, allow_errors=True,
                            shutdown_kernel="immediate",
                            resources={"metadata": {"path": str(cwd)}})
    client.execute(env=kernel_env())
    return nb


def errors(cell) -> list[dict]:
    return [o for o in cell.get("outputs", []) if o.output_type == "error"]


def unexpected_errors(cell, lang: str | None = None) -> list[str]:
    """A cell's errors other than "not implemented" (for a check that waits for others, or
    whose pieces all fail their own checks, the message of what it waits for), those messages
    in `lang` (English when None)."""
    check_id = nbgrader_meta(cell).get("grade_id")
    spec = SPECS.get(check_id)
    if check_id in WAITING_MESSAGES:
        expected = WAITING_MESSAGES[check_id].render(lang or "en")
    elif spec and set(spec.uses) <= set(spec.stand_ins):  # every piece's own check fails
        expected = msg("waiting.stand_ins", pieces=", ".join(f"`{n}`" for n in spec.uses)
                       ).render(lang or "en")
    else:
        stub = msg("runner.not_implemented", name="name").render(lang or "en")
        expected = stub.replace("`name`", "").strip()
    return [f"{cell.id}: {e.ename}: {e.evalue}" for e in errors(cell)
            if e.ename != "NotImplementedError"
            and not (e.ename == "AssertionError" and expected in e.evalue)]


def verdicts(nb: nbformat.NotebookNode) -> dict[str, tuple[bool, float]]:
    """check id -> (passed, points) from the ✓/✗ line each executed test cell printed last."""
    found = {}
    for cell in nb.cells:
        if not is_test_cell(cell):
            continue
        text = "".join(o.text for o in cell.outputs if o.output_type == "stream")
        for mark, check_id, score, _ in VERDICT.findall(text):
            found[check_id] = (mark == "✓", float(score))
    return found


def normalised(nb: nbformat.NotebookNode) -> list:
    """What a release is made of: its cells' ids, types, sources and metadata."""
    return [(c.id, c.cell_type, c.source, c.metadata) for c in nb.cells]


def recorded_grades(course: Path, students) -> dict[str, dict[str, float]]:
    """What a course's gradebook.db holds for the mha notebook: student -> check -> points."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {student: {i: gradebook.find_grade(i, SOLUTION.stem, "mha", student).score
                          for i in MHA_CHECK_IDS} for student in students}
