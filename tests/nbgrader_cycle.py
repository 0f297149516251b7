"""One real nbgrader cycle over several assignments, in one process.

    python tests/nbgrader_cycle.py COURSE [--feedback STUDENT,...] ASSIGNMENT...

In the course directory COURSE (with nbgrader_config.py, solutions/<assignment>/ and the
students' files under submitted/<student>/<assignment>/), this runs `generate_assignment` for
each assignment not released yet (one `mha-kit release` has released is left as it is), then
`autograde` for every submission and `generate_feedback` for each (or for those of the students
listed after --feedback), then exports grades.csv, all through
nbgrader's own Python API: the same apps as the `nbgrader` commands, without paying nbgrader's
import time once per command.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import mha_kit  # noqa: F401  (before nbgrader imports nbformat: mha_kit/__init__.py)

# isort: split
from nbgrader.api import Gradebook
from nbgrader.apps.api import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import CsvExportPlugin
from traitlets.config.loader import PyFileConfigLoader

from mha_kit.release import with_interpreter_on_path


def _ok(step: str, result: dict) -> None:
    if not result["success"]:
        sys.exit(f"nbgrader {step} failed:\n{result.get('error', '')}\n{result.get('log', '')}")


def main(course: Path, assignments: list[str], feedback: set[str] | None = None) -> None:
    os.chdir(course)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    coursedir = CourseDirectory(config=config, root=str(course))
    api = NbGraderAPI(coursedir=coursedir, config=config)
    for assignment in assignments:
        if not (course / "assignments" / assignment).is_dir():
            _ok(f"generate_assignment {assignment}", api.generate_assignment(assignment))
    for assignment in assignments:
        for student in sorted(p.parent.name for p in course.glob(f"submitted/*/{assignment}")):
            _ok(f"autograde {assignment} {student}", api.autograde(assignment, student))
            if feedback is None or student in feedback:
                _ok(f"generate_feedback {assignment} {student}",
                    api.generate_feedback(assignment, student))
    with Gradebook(coursedir.db_url) as gradebook:
        CsvExportPlugin(config=config, to=str(course / "grades.csv")).export(gradebook)


if __name__ == "__main__":
    os.environ.update(with_interpreter_on_path(dict(os.environ)))  # nbgrader runs `alembic`
    course, *assignments = sys.argv[1:]
    feedback = None
    if assignments[:1] == ["--feedback"]:
        feedback, assignments = set(assignments[1].split(",")), assignments[2:]
    main(Path(course).resolve(), assignments, feedback)
