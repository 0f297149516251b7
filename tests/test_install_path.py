"""The released notebook in a fresh virtual environment that lacks the kit (a fresh Colab).

Only torch (the Makefile's pin) and ipykernel are installed; the notebook's setup cell must
install the kit itself from MHA_KIT_SOURCE, here a copy of this checkout.
"""

import copy
import json
import re
import shutil
import subprocess
import sys

import nbformat
from conftest import ROOT
from notebook_helpers import RELEASE, errors, execute, is_test_cell, read, unexpected_errors

SOURCE_LINE = re.compile(r'^MHA_KIT_SOURCE = ".*"$', re.MULTILINE)


def torch_pin() -> str:
    return re.search(r"^TORCH_PIN\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)[1]


def test_setup_cell_installs_the_kit_in_a_fresh_environment(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-compile", torch_pin(), "ipykernel"],
                   check=True, timeout=600)
    absent = subprocess.run([python, "-c", "import autograder"], cwd=tmp_path, capture_output=True)
    assert absent.returncode != 0

    # A Jupyter kernel that runs in the fresh environment.
    spec = tmp_path / "jupyter" / "kernels" / "fresh"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fresh", "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))

    # What the instructor publishes; a copy, so that pip's build leaves the checkout alone.
    kit = tmp_path / "kit"
    shutil.copytree(ROOT / "autograder", kit / "autograder",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, kit)

    # Left as released, with the placeholder, the setup cell says in one sentence what to do.
    nb = read(RELEASE)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    alone = nbformat.v4.new_notebook(cells=[copy.deepcopy(setup)], metadata=nb.metadata)
    execute(alone, tmp_path, kernel_name="fresh", timeout=120)
    assert [e.evalue for e in errors(alone.cells[0])] == [
        "The grading kit is not installed: set MHA_KIT_SOURCE above to the address your "
        "instructor gave you, or run `make lab` in a clone of mha-kit."]

    setup.source, count = SOURCE_LINE.subn(f'MHA_KIT_SOURCE = "{kit}"', setup.source)
    assert count == 1
    probe = nbformat.v4.new_code_cell("import autograder\nprint(autograder.__file__)", id="probe")
    nb.cells.append(probe)
    execute(nb, tmp_path, kernel_name="fresh", timeout=600)

    assert all(c.execution_count is not None for c in nb.cells if c.cell_type == "code")
    assert not errors(setup), errors(setup)
    installed = "".join(o.get("text", "") for o in probe.outputs)
    assert installed.startswith(str(venv)), installed
    assert [e for cell in nb.cells for e in unexpected_errors(cell)] == []
    assert all(errors(c) for c in nb.cells if is_test_cell(c))
