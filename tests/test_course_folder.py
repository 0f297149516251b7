"""`mha-kit course init`: a course folder apart from the kit, and what it refuses to overwrite.

The course's files are the kit's (here, an editable install: the checkout's); its
nbgrader_config.py is the checkout's with a course's header, and loads as nbgrader loads it.
A release in such a folder runs in tests/test_install_path.py and in the `course` fixture.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT
from traitlets.config.loader import PyFileConfigLoader

from mha_kit.cli import main
from mha_kit.cli.exits import EXIT_PASS, EXIT_USAGE
from mha_kit.course_folder import CONFIG, CourseError, init, kit_files
from mha_kit.course_settings import CONFIGURABLE, configured
from mha_kit.messages import msg, render

SHAPES_FILES = {"nbgrader_config.py", "solutions/shapes/shapes_warmup.ipynb",
                "solutions/shapes_zh/shapes_warmup_zh.ipynb",
                "translations/zh/shapes_warmup.json"}


def written(course: Path) -> set[str]:
    return {str(p.relative_to(course)) for p in course.rglob("*") if p.is_file()}


def test_init_writes_the_masters_editions_and_overlays_asked_for(tmp_path):
    course = tmp_path / "course"
    assert {str(p.relative_to(course)) for p in init(course, ["shapes"])} == SHAPES_FILES
    assert written(course) == SHAPES_FILES
    for name in SHAPES_FILES - {CONFIG}:
        assert (course / name).read_bytes() == (ROOT / name).read_bytes(), name
    assert kit_files() == ROOT  # an editable install reads the checkout


def test_init_takes_every_assignment_by_default_with_its_agents_file(tmp_path):
    init(tmp_path, [])
    for folder in (ROOT / "solutions").iterdir():
        for path in folder.iterdir():
            assert (tmp_path / path.relative_to(ROOT)).is_file(), path
    assert not (tmp_path / "assignments").exists()  # `mha-kit release` writes it


def test_the_course_config_is_the_kits_and_sets_what_is_uncommented(tmp_path):
    init(tmp_path, ["shapes"])
    config = (tmp_path / CONFIG).read_text(encoding="utf-8")
    kits = (ROOT / CONFIG).read_text(encoding="utf-8")
    assert "course init" in config.split('"""')[1] and "this repository" not in config
    assert kits.split('"""', 2)[2].rstrip() in config  # every option of the kit's, as it is
    examples = [line for line in config.splitlines() if line.startswith("# c.MhaKit.")]
    assert {line.split()[1].removeprefix("c.MhaKit.") for line in examples} <= set(CONFIGURABLE)
    assert configured(PyFileConfigLoader(CONFIG, path=str(tmp_path)).load_config()) == {}

    call_timeout = next(line for line in examples if ".call_timeout " in line)
    (tmp_path / CONFIG).write_text(config.replace(call_timeout, "c.MhaKit.call_timeout = 7"))
    loaded = PyFileConfigLoader(CONFIG, path=str(tmp_path)).load_config()
    assert configured(loaded) == {"call_timeout": 7.0}
    assert loaded.CourseDirectory.source_directory == "solutions"


def test_init_refuses_to_overwrite_unless_forced(tmp_path, capsys):
    course = tmp_path / "course"
    init(course, ["shapes"])
    master = course / "solutions" / "shapes" / "shapes_warmup.ipynb"
    master.write_text("the instructor's own edits")
    with pytest.raises(CourseError) as refused:
        init(course, ["shapes"])
    assert refused.value.message.id == "course.exists"
    assert str(master) in refused.value.message.params["paths"]
    assert master.read_text() == "the instructor's own edits"

    capsys.readouterr()
    assert main(["course", "init", str(course), "shapes"]) == EXIT_USAGE
    assert render(refused.value.message) in capsys.readouterr().err
    assert main(["course", "init", str(course), "shapes", "--force"]) == EXIT_PASS
    assert master.read_bytes() == (ROOT / master.relative_to(course)).read_bytes()
    out = capsys.readouterr().out
    assert render(msg("cli.wrote", path=master)) in out and "mha-kit release" in out


def test_an_assignment_the_kit_lacks_is_refused_before_anything_is_written(tmp_path, capsys):
    assert main(["course", "init", str(tmp_path / "course"), "shapes", "nope"]) == EXIT_USAGE
    assert "nope" in capsys.readouterr().err
    assert not (tmp_path / "course").exists()
