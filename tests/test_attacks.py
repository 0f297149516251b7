"""Each attack of tests/corpus/attacks.py, graded through the worker, earns only what an honest
file with the same code of its own would: the kit's code answers nothing for a student, and
the memory watched is the memory of the code whose values are graded. A file that reads the
kit's own files (tests/corpus/kit_reads) earns what an empty file does; an import is no read."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import CORPUS

from mha_kit.grading.batch import grade_submission
from mha_kit.messages import ids_in

sys.path.insert(0, str(CORPUS))
from attacks import ATTACKS, BASES, Attack  # noqa: E402

KIT_READS = sorted((CORPUS / "kit_reads").glob("*.py"))


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.label for a in ATTACKS])
def test_an_attack_earns_what_its_own_code_earns(attack: Attack, tmp_path: Path):
    path = tmp_path / "attack.py"
    path.write_text(attack.source())
    results, _ = grade_submission(path, assignment=attack.assignment, only=list(attack.earns))
    assert {r.id: r.score for r in results} == attack.earns
    for r in results:
        if r.score < r.max_score:
            assert attack.message in ids_in(r.message), f"{r.id}: {r.message}"


@pytest.mark.parametrize("source", KIT_READS, ids=[p.stem for p in KIT_READS])
def test_a_file_that_reads_the_kits_own_files_earns_nothing(source: Path, tmp_path: Path):
    """Red team 45: the kit's oracle read at load time, then run under a name of the file's
    own, earned 88/100 with no work. The read fails, and the file earns what an empty one does."""
    path = tmp_path / source.name
    shutil.copyfile(source, path)
    results, problems = grade_submission(path, assignment="mha", only=["split_heads", "attend"])
    assert [r.score for r in results] == [0, 0]
    assert len(problems) == 1 and "load.kit_read" in ids_in(problems[0]), problems
    assert problems[0].params["path"] == "mha_kit/oracle.py"


def test_importing_the_kit_is_no_read(tmp_path: Path):
    """An import of the kit's oracle (read again by `importlib.reload`) is no read: the code
    keeps the kit's name, and only calling it would cost the checks it answers."""
    path = tmp_path / "imports.py"
    path.write_text(f"{BASES['mha'].read_text()}\n\nimport importlib\n\nimport mha_kit.oracle\n\n"
                    "importlib.reload(mha_kit.oracle)\n")
    results, problems = grade_submission(path, assignment="mha", only=["split_heads", "attend"])
    assert problems == [] and all(r.passed for r in results)
