"""The wheel's build: pyproject.toml says what the kit is; this adds its course files.

`mha-kit course init` copies the kit's masters, their translations and its
nbgrader_config.py into a course folder. The checkout holds them once, at its root; a built
(non-editable) install gets a copy as package data in `mha_kit/course_files/`. An editable
install reads them from the checkout (mha_kit/course_folder.py).
"""

import runpy
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# The standard library only: read without importing the kit (or torch).
COURSE = runpy.run_path(str(ROOT / "mha_kit" / "course_layout.py"))


class BuildWithCourseFiles(build_py):
    """build_py, then the course files into the build's mha_kit/course_files/."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib, "mha_kit", COURSE["PACKAGED"])
        for name in COURSE["KIT_FILES"]:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, target / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
            elif source.is_file():
                target.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target / name)


setup(cmdclass={"build_py": BuildWithCourseFiles})
