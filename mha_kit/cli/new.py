"""`mha-kit new NAME`: write a new assignment that grades as written (mha_kit.scaffold)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .written import refused, wrote


def add(commands: argparse._SubParsersAction) -> None:
    new = commands.add_parser(
        "new", help="write a new assignment: its package and its English master notebook, "
                    "graded 100/100 as written")
    new.add_argument("name", help="the assignment's name: its package, its folder in "
                                  "solutions/ and nbgrader's assignment")
    new.add_argument("--into", type=Path, metavar="DIR",
                     help="the folder of assignment packages to write it in, one a course "
                          "names in its `assignments` setting (default: the kit's own, "
                          "mha_kit/assignments)")
    new.add_argument("--course-dir", type=Path, default=Path("."),
                     help="the nbgrader course directory of its notebook (default: the "
                          "current one)")
    new.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..scaffold import ScaffoldError, next_steps, scaffold  # imports nbformat

    try:
        written = scaffold(args.name, args.into, args.course_dir)
    except ScaffoldError as err:
        return refused(err.message)
    return wrote(written, next_steps(args.name, args.into, args.course_dir))
