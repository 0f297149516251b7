"""The released notebook in a fresh virtual environment that lacks the kit (a fresh Colab).

Like a Colab runtime, it has torch, Jupyter's kernel and the common libraries already: those
of this environment, seen through a path file, without the kit. The notebook's setup cell
must install the kit itself from MHA_KIT_SOURCE, here a copy of this checkout, with pip (a
built wheel, not an editable install). That install then sets up a course folder as the
instructor guide does, `mha-kit course init`, from the wheel's own files (what the course then
does, release and the nbgrader cycle, is conftest's `course`, a folder `course init` wrote).
"""

import copy
import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
from conftest import ROOT, kit_source
from notebook_helpers import RELEASE, errors, execute, is_test_cell, read, unexpected_errors

SOURCE_LINE = re.compile(r'^MHA_KIT_SOURCE = ".*"$', re.MULTILINE)
PLACEHOLDER = "git+https://github.com/YOUR-ORG/mha-kit.git"  # the setup cell knows YOUR-ORG
KIT_ENTRY = re.compile(r"mha_kit-.*\.dist-info|__editable__|.*\.pth$")  # the kit, and path hooks


def preinstalled(folder: Path) -> Path:
    """`folder` with links to every package of this environment but the kit (its metadata and
    its editable install's hooks): what a Colab runtime has before the setup cell runs."""
    folder.mkdir()
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if not KIT_ENTRY.match(entry.name):
            (folder / entry.name).symlink_to(entry)
    return folder


def test_setup_cell_installs_the_kit_in_a_fresh_environment(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "preinstalled.pth").write_text(f"{preinstalled(tmp_path / 'preinstalled')}\n")
    absent = subprocess.run([python, "-c", "import mha_kit"], cwd=tmp_path, capture_output=True)
    assert absent.returncode != 0
    # Another distribution's module of the kit's name (PyPI's `autograder` once took the kit's
    # old one): the setup cell asks for the distribution mha-kit, so it installs the kit anyway.
    foreign = tmp_path / "preinstalled" / "mha_kit"
    foreign.mkdir()
    (foreign / "__init__.py").write_text('"""Another distribution\'s module, not the kit."""\n')

    # A Jupyter kernel that runs in the fresh environment.
    spec = tmp_path / "jupyter" / "kernels" / "fresh"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fresh", "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))

    # What the instructor publishes; a copy, so that pip's build leaves the checkout alone.
    kit = kit_source(tmp_path / "kit")

    # With the placeholder (as this repository releases it, whatever an instructor's fork set
    # in its masters), the setup cell says in one sentence what to do.
    nb = read(RELEASE)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    alone = nbformat.v4.new_notebook(cells=[copy.deepcopy(setup)], metadata=nb.metadata)
    alone.cells[0].source, count = SOURCE_LINE.subn(f'MHA_KIT_SOURCE = "{PLACEHOLDER}"',
                                                    setup.source)
    assert count == 1
    execute(alone, tmp_path, kernel_name="fresh", timeout=120)
    assert [e.evalue for e in errors(alone.cells[0])] == [
        "The grading kit is not installed: set MHA_KIT_SOURCE above to the address your "
        "instructor gave you, or run `make lab` in a clone of mha-kit."]

    setup.source, count = SOURCE_LINE.subn(f'MHA_KIT_SOURCE = "{kit}"', setup.source)
    assert count == 1
    probe = nbformat.v4.new_code_cell("import mha_kit\nprint(mha_kit.__file__)", id="probe")
    nb.cells.append(probe)
    execute(nb, tmp_path, kernel_name="fresh", timeout=600)

    assert all(c.execution_count is not None for c in nb.cells if c.cell_type == "code")
    assert not errors(setup), errors(setup)
    installed = "".join(o.get("text", "") for o in probe.outputs)
    assert installed.startswith(str(venv)), installed
    assert [e for cell in nb.cells for e in unexpected_errors(cell)] == []
    assert all(errors(c) for c in nb.cells if is_test_cell(c))

    # The instructor's path on the same install: the wheel carries the masters and overlays.
    assert Path(installed.strip()).parent.joinpath("course_files", "solutions").is_dir()
    course = tmp_path / "course"
    init = subprocess.run([str(venv / "bin" / "mha-kit"), "course", "init", str(course),
                           "shapes"], capture_output=True, text=True, timeout=120)
    assert init.returncode == 0, init.stderr
    master = Path("solutions", "shapes", "shapes_warmup.ipynb")
    assert (course / master).read_bytes() == (ROOT / master).read_bytes()
