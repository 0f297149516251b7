"""`mha-kit check FILE`: grade one .py file or .ipynb notebook and print the table."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from .. import settings
from ..grading.batch import grade_submission
from ..grading.files import detect_assignment, edition_language, readable_submission
from ..grading.registry import ASSIGNMENTS
from ..grading.report import format_table, score_line, write_gradescope_json
from ..messages import Message, msg, render
from ..runner import sandbox
from ..runner.worker import WorkerStartError
from .exits import EXIT_FAIL, EXIT_PASS, EXIT_USAGE
from .options import (
    add_device_flag,
    add_lang_flag,
    add_limit_flags,
    chosen_device,
)


def add(commands: Any) -> None:
    check = commands.add_parser("check", help="grade one .py file or .ipynb notebook")
    check.add_argument("path", help="the submission: a .py file or an .ipynb notebook")
    check.add_argument("--only", action="append", metavar="NAME",
                       help="run only this check (repeatable): an id of the assignment's points "
                            "table, e.g. fused_mha")
    check.add_argument("--assignment", choices=tuple(ASSIGNMENTS),
                       help="which checks (default: from a notebook's test cells or the names "
                            "a .py file defines, else mha)")
    add_lang_flag(check)
    check.add_argument("--json", metavar="RESULTS_JSON",
                       help="also write Gradescope's results.json format here")
    add_device_flag(check)
    check.add_argument("-v", "--verbose", action="store_true",
                       help="say what protects the grading (the sandbox, or nothing) and print "
                            "each check as it finishes")
    add_limit_flags(check)
    check.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    problem = readable_submission(path)
    edition = None if problem else edition_language(path)
    with settings.chosen(lang=settings.unless_given("lang", edition)):  # an edition's language
        return _graded(args, path, problem)


def _graded(args: argparse.Namespace, path: Path, problem: Message | None) -> int:
    if problem:
        print(render(problem), file=sys.stderr)
        return EXIT_USAGE
    assignment = args.assignment or detect_assignment(path)
    ids = [spec.id for spec in ASSIGNMENTS[assignment]]
    unknown = [name for name in args.only or [] if name not in ids]
    if unknown:
        print(render(msg("cli.unknown_checks", assignment=assignment, unknown=", ".join(unknown),
                         ids=", ".join(ids))), file=sys.stderr)
        return EXIT_USAGE
    device = chosen_device(args)
    if device is None:
        return EXIT_USAGE
    started = time.perf_counter()
    print(render(msg("cli.grading", path=str(path), assignment=assignment, device=device)),
          flush=True)
    if args.verbose:  # one's own code: what protects it is said when asked, never warned of
        print(render(sandbox.protection()), flush=True)

    def progress(result):
        if args.verbose:
            print(score_line(result), flush=True)

    try:
        results, problems = grade_submission(path, device, assignment=assignment,
                                             only=args.only, on_result=progress)
    except WorkerStartError as err:
        print(f"mha-kit: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(format_table(results, problems))
    print("\n" + render(msg("cli.seconds", seconds=time.perf_counter() - started)))
    if args.json:
        write_gradescope_json(args.json, results, problems)
        print(render(msg("cli.wrote", path=args.json)))
    return EXIT_PASS if all(r.passed for r in results) else EXIT_FAIL
