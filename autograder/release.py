"""`mha-kit release`: regenerate assignments/ from solutions/ with nbgrader.

For each assignment, the points of every test cell in solutions/<assignment>/*.ipynb are first
set from that assignment's table in `points.py` (the one place points are decided); then
`nbgrader generate_assignment` writes assignments/<assignment>/ and records the test cells in
gradebook.db, from which `nbgrader autograde` restores them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import nbformat

from .cli import EXIT_FAIL, EXIT_PASS, EXIT_USAGE
from .points import ASSIGNMENTS
from .submission import _is_test_cell
from .translate import TranslationError, edition_names, split_name, write_edition


def sync_points(notebook: Path, assignment: str) -> list[str]:
    """Set each test cell's points from the assignment's table; the grade ids changed."""
    points = {spec.id: spec.points for spec in ASSIGNMENTS[assignment]}
    nb = nbformat.read(str(notebook), as_version=4)
    changed = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if _is_test_cell(cell) and meta.get("grade_id") in points:
            if meta.get("points") != points[meta["grade_id"]]:
                meta["points"] = points[meta["grade_id"]]
                changed.append(meta["grade_id"])
    if changed:
        nbformat.write(nb, str(notebook))
    return changed


def with_interpreter_on_path(env: dict[str, str]) -> dict[str, str]:
    """`env` with this interpreter's bin/ first on PATH.

    nbgrader runs the `alembic` command to set up gradebook.db; it lives beside the
    interpreter, which is not on PATH when the venv is not activated.
    """
    return {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                            env.get("PATH", "")])}


def run_nbgrader(course: Path, *args: str, env: dict[str, str] | None = None,
                 **kwargs) -> subprocess.CompletedProcess:
    """`nbgrader ARGS` in the course directory, with this interpreter's bin/ on PATH."""
    env = with_interpreter_on_path(dict(os.environ if env is None else env))
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          **kwargs)


def cmd_release(args: argparse.Namespace) -> int:
    course = Path(args.course_dir)
    if not (course / "nbgrader_config.py").is_file():
        print(f"{course}: no nbgrader_config.py here; run from the course root", file=sys.stderr)
        return EXIT_USAGE
    if importlib.util.find_spec("nbgrader") is None:
        print("nbgrader is not installed: pip install 'mha-kit[dev]'", file=sys.stderr)
        return EXIT_USAGE
    sources = course / "solutions"
    names = args.assignment or sorted([p.name for p in sources.iterdir()
                                       if p.is_dir() and p.name in ASSIGNMENTS]
                                      + edition_names(course))
    unknown = [n for n in names if not (sources / split_name(n)[0]).is_dir()
               or split_name(n)[0] not in ASSIGNMENTS]
    if unknown:
        print(f"unknown assignment(s): {', '.join(unknown)}", file=sys.stderr)
        return EXIT_USAGE
    for name in names:
        base, lang = split_name(name)  # a translated edition is built from its English master
        for notebook in sorted((sources / base).glob("*.ipynb")):
            changed = sync_points(notebook, base)
            if changed:
                print(f"{notebook}: points updated for {', '.join(changed)}")
        try:
            for edition in write_edition(course, base, lang) if lang else []:
                print(f"wrote {edition.relative_to(course)}")
        except TranslationError as err:
            print(f"cannot build {name}: {err}", file=sys.stderr)
            return EXIT_FAIL
        if run_nbgrader(course, "generate_assignment", name, "--force").returncode:
            print(f"nbgrader generate_assignment {name} failed", file=sys.stderr)
            return EXIT_FAIL
        print(f"released assignments/{name}/")
    return EXIT_PASS


def add_release_command(commands: argparse._SubParsersAction) -> None:
    release = commands.add_parser(
        "release", help="sync test-cell points, then regenerate assignments/ with nbgrader"
    )
    release.add_argument("assignment", nargs="*",
                         help=f"which to release (default: all of {', '.join(ASSIGNMENTS)} "
                              "that have a folder in solutions/)")
    release.add_argument("--course-dir", default=".",
                         help="the nbgrader course directory (default: the current one)")
    release.set_defaults(run=cmd_release)
