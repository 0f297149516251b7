"""`mha-kit grade FOLDER`: every submission in a folder, in parallel, into a CSV."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from .. import settings
from ..grading import class_report
from ..grading.batch import Progress, grade_all, safe_name, summary, write_csv
from ..grading.files import MixedAssignments, StudentFile, class_assignment, discover
from ..grading.registry import ASSIGNMENTS, assignment_names, split_name
from ..grading.report import write_results
from ..messages import msg, render
from ..runner.policy import Limits
from ..runner.worker import WorkerStartError
from .exits import EXIT_PASS, EXIT_USAGE
from .options import (
    add_device_flag,
    add_limit_flags,
    chosen_device,
    warn_if_unprotected,
)


def add(commands: Any) -> None:
    grade = commands.add_parser(
        "grade", help="grade a folder of submissions in parallel into a CSV",
        description="Grade every submission in a folder: one .py/.ipynb per student, or one "
                    "folder per student (nbgrader's submitted/STUDENT/... layout included).")
    grade.add_argument("submissions", help="the folder of submissions")
    grade.add_argument("--jobs", "-j", type=int, default=2, help="submissions graded at once")
    grade.add_argument("--csv", default="kit-grades.csv",
                       help="where to write the grade sheet (not grades.csv: nbgrader "
                            "export's)")
    grade.add_argument("--report", metavar="PREFIX",
                       help="also write a class report: PREFIX.csv and PREFIX.png (score "
                            "histogram, pass rate per check, the mistakes named most often)")
    grade.add_argument("--json-dir", metavar="DIR",
                       help="also write one Gradescope results.json per student here")
    grade.add_argument("--assignment", choices=assignment_names(),
                       help="which checks, and in nbgrader's layout which of a student's "
                            "folders (an edition, such as mha_zh: its assignment's checks, "
                            "its language; default: from the notebooks' test cells, else mha)")
    add_device_flag(grade)
    add_limit_flags(grade)
    grade.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.submissions)
    if args.jobs < 1:
        print(render(msg("cli.jobs")), file=sys.stderr)
        return EXIT_USAGE
    if not root.is_dir():
        print(render(msg("cli.not_a_folder", path=str(root))), file=sys.stderr)
        return EXIT_USAGE
    entries = discover(root, args.assignment)
    if not entries:
        print(render(msg("cli.no_submissions", path=str(root))), file=sys.stderr)
        return EXIT_USAGE
    try:
        folder = args.assignment or class_assignment(entries)
    except MixedAssignments as mixed:
        print(render(msg("cli.mixed_assignments", path=str(root), found=str(mixed))),
              file=sys.stderr)
        return EXIT_USAGE
    if not args.assignment:  # now known: each student's folder of it, in nbgrader's layout
        entries = discover(root, folder)
    assignment, lang = split_name(folder)
    with settings.chosen(lang=settings.unless_given("lang", lang)):  # an edition's language
        return _graded(args, entries, assignment)


def _graded(args: argparse.Namespace, entries: list[StudentFile], assignment: str) -> int:
    device = chosen_device(args)
    if device is None:
        return EXIT_USAGE
    ids = [spec.id for spec in ASSIGNMENTS[assignment]]
    started = time.perf_counter()
    progress = Progress(len(entries))
    # Before the first result, which takes a while (grader processes, workers).
    print(render(msg("batch.started", count=len(entries), assignment=assignment, jobs=args.jobs,
                     device=device)), file=progress.stream, flush=True)
    warn_if_unprotected()
    rows: dict[str, tuple[StudentFile, dict]] = {}
    try:
        for entry, payload in grade_all(entries, args.jobs, device, assignment,
                                        Limits.from_settings()):
            rows[entry.student] = (entry, payload)
            progress.update(entry.student, payload)
    except WorkerStartError as err:
        print(f"\nmha-kit: {err}", file=sys.stderr)
        return EXIT_USAGE
    # Written last, after every worker is gone: nothing a student wrote can outlive this.
    write_csv(Path(args.csv), rows, ids)
    if args.json_dir:
        for student, (_, payload) in rows.items():
            write_results(Path(args.json_dir) / f"{safe_name(student)}.json", payload)
    if args.report:
        report = class_report.summarise([payload for _, payload in rows.values()])
        table, picture = class_report.write(report, Path(args.report))
        print(render(msg("report.class_written", table=str(table), picture=str(picture))))
    print(summary(rows, time.perf_counter() - started, args.jobs))
    print(render(msg("cli.wrote_both", path=args.csv, count=len(rows), folder=args.json_dir)
                 if args.json_dir else msg("cli.wrote", path=args.csv)))
    return EXIT_PASS
