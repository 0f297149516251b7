"""`mha-kit release`: sync the test cells' points, then regenerate assignments/ with nbgrader."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from ..grading.registry import ASSIGNMENTS
from ..messages import msg, render
from ..settings import SOURCE_VARIABLE
from .exits import EXIT_FAIL, EXIT_PASS, EXIT_USAGE


def add(commands: argparse._SubParsersAction) -> None:
    release = commands.add_parser(
        "release", help="sync test-cell points, then regenerate assignments/ with nbgrader"
    )
    release.add_argument("assignment", nargs="*",
                         help=f"which to release (default: all of {', '.join(ASSIGNMENTS)} "
                              "that have a folder in solutions/, and their editions)")
    release.add_argument("--course-dir", default=".",
                         help="the nbgrader course directory (default: the current one)")
    release.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: they import nbformat, which takes seconds that `check` should not pay.
    from ..editions import TranslationError, edition_names, write_edition
    from ..grading.registry import split_name
    from ..release import PLACEHOLDER_SOURCE, run_nbgrader, sync_points, todo

    course = Path(args.course_dir)
    if not (course / "nbgrader_config.py").is_file():
        print(f"{course}: no nbgrader_config.py here; run from the course root", file=sys.stderr)
        return EXIT_USAGE
    if importlib.util.find_spec("nbgrader") is None:
        print("nbgrader is not installed: pip install 'mha-kit[course]'", file=sys.stderr)
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
        for notebook in sorted((course / "assignments" / name).glob("*.ipynb")):
            if PLACEHOLDER_SOURCE in notebook.read_text(encoding="utf-8"):
                print(f"warning: {notebook.relative_to(course)} installs the kit from the "
                      f"placeholder address {PLACEHOLDER_SOURCE}: students without the kit "
                      f"(Colab) stop at its setup cell. Set {SOURCE_VARIABLE} in the setup cell of "
                      f"solutions/{split_name(name)[0]}/ to where your students install the "
                      "kit from, and release again.", file=sys.stderr)
    for base in sorted({split_name(name)[0] for name in names}):
        for what in todo(course, base):
            print(render(msg("release.todo", assignment=base, what=what)), file=sys.stderr)
    return EXIT_PASS
