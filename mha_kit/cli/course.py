"""`mha-kit course init DIR [ASSIGNMENT...]`: a course folder apart from the kit
(mha_kit.course_folder)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..course_folder import CONFIG, CourseError, init
from ..messages import msg
from ..settings import SOURCE_VARIABLE
from .written import refused, wrote


def add(commands: argparse._SubParsersAction) -> None:
    course = commands.add_parser("course", help="set up an nbgrader course folder apart from "
                                                "the kit")
    actions = course.add_subparsers(dest="action", required=True)
    init = actions.add_parser(
        "init", help="write a course folder: nbgrader_config.py, the kit's masters in "
                     "solutions/ and their translations in translations/")
    init.add_argument("course", type=Path, metavar="DIR", help="the course folder (made if "
                                                                "missing)")
    init.add_argument("assignment", nargs="*", help="the assignments it teaches, each with its "
                                                    "editions (default: every one of the kit)")
    init.add_argument("--force", action="store_true", help="overwrite files that exist")
    init.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        written = init(args.course, args.assignment, args.force)
    except CourseError as err:
        return refused(err.message)
    return wrote(written, [msg("course.next", course=args.course, variable=SOURCE_VARIABLE,
                               config=args.course / CONFIG)])
