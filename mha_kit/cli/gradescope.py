"""`mha-kit gradescope [OUT.zip]`: the autograder zip to upload to Gradescope, for one
assignment (mha_kit.gradescope)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import settings
from ..catalog import KIT_FOLDER, folder
from ..grading.registry import assignment_names, split_name
from ..messages import msg
from ..settings import HIDDEN_VISIBILITIES
from .written import refused, wrote


def add(commands: argparse._SubParsersAction) -> None:
    gradescope = commands.add_parser(
        "gradescope", help="write the autograder zip to upload to Gradescope for one "
                           "assignment: the kit, its entry point and the course's secret")
    gradescope.add_argument("out", nargs="?", type=Path, default=Path("autograder.zip"),
                            metavar="OUT.zip", help="the zip to write (default: autograder.zip)")
    gradescope.add_argument("--assignment",
                            help="the assignment it grades, or an edition such as mha_zh "
                                 "(default: the default_assignment setting, "
                                 f"${settings.variable('default_assignment')})")
    gradescope.add_argument("--hidden", default="after_published", metavar="VISIBILITY",
                            help="when students see the hidden-input tests: "
                                 f"{', '.join(HIDDEN_VISIBILITIES)} (none: no such tests; "
                                 "default: after_published)")
    gradescope.set_defaults(run=run)


def zippable_assignments() -> list[str]:
    """The assignments and editions a zip can grade: the kit's own, which it carries."""
    return [name for name in assignment_names()
            if folder(split_name(name)[0]).is_relative_to(KIT_FOLDER)]


def run(args: argparse.Namespace) -> int:
    from ..course_settings import from_folder  # imports traitlets
    from ..gradescope import write_zip

    with settings.chosen(**from_folder(Path("."))) as chosen:  # the course's, if here
        assignment = args.assignment or chosen.default_assignment
        known = zippable_assignments()
        if assignment not in known:
            return refused(msg("gradescope.no_assignment", assignment=assignment,
                               known=", ".join(known)))
        if args.hidden not in HIDDEN_VISIBILITIES:
            return refused(msg("gradescope.no_visibility", visibility=args.hidden,
                               known=", ".join(HIDDEN_VISIBILITIES)))
        write_zip(args.out, assignment, args.hidden, chosen.secret)
    return wrote([args.out], [])
