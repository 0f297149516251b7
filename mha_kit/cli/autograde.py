"""`mha-kit autograde ASSIGNMENT`: nbgrader's autograde for a course, in parallel, into
gradebook.db (mha_kit/course_autograde.py)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ..messages import msg, render
from .exits import EXIT_FAIL, EXIT_PASS, EXIT_USAGE
from .options import warn_if_unprotected


def add(commands: Any) -> None:
    autograde = commands.add_parser(
        "autograde", help="nbgrader autograde for a whole course, in parallel, into gradebook.db",
        description="Autograde every submitted/STUDENT/ASSIGNMENT/ of an nbgrader course "
                    "several at a time, with the course's nbgrader configuration, and record "
                    "the grades in its gradebook as `nbgrader autograde ASSIGNMENT` does; "
                    "`nbgrader generate_feedback` and `nbgrader export` then work as usual.")
    autograde.add_argument("assignment", help="the assignment, as nbgrader names it (e.g. mha)")
    autograde.add_argument("--jobs", "-j", type=int, default=2,
                           help="submissions graded at once")
    autograde.add_argument("--course", "--course-dir", default=".",
                           help="the nbgrader course directory (default: the current one)")
    autograde.add_argument("--force", "-f", action="store_true",
                           help="grade again the submissions autograded already")
    autograde.add_argument("--report", metavar="PREFIX",
                           help="also write a class report: PREFIX.csv and PREFIX.png")
    autograde.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: nbgrader and torch take seconds that other commands should not pay.
    from ..course_autograde import CourseAutograde, CourseError
    from ..grading import class_report
    from ..grading.batch import Progress

    if args.jobs < 1:
        print(render(msg("cli.jobs")), file=sys.stderr)
        return EXIT_USAGE
    started = time.perf_counter()
    try:
        course = CourseAutograde(Path(args.course), args.assignment, force=args.force)
    except CourseError as err:
        print(render(err.message), file=sys.stderr)
        return EXIT_USAGE
    if course.skipped:
        print(render(msg("autograde.skipped", count=len(course.skipped),
                         students=", ".join(course.skipped))), file=sys.stderr)
    if not course.students:
        if args.report and course.skipped:
            print(render(msg("autograde.no_report")), file=sys.stderr)
        if not course.skipped:
            print(render(msg("autograde.no_submissions", assignment=args.assignment,
                             path=str(course.root))), file=sys.stderr)
        return EXIT_PASS if course.skipped else EXIT_USAGE
    progress = Progress(len(course.students))
    # Before the first result, which takes a while (grader processes, kernels, workers).
    print(render(msg("autograde.started", count=len(course.students),
                     assignment=args.assignment, jobs=args.jobs)),
          file=progress.stream, flush=True)
    everyone = []
    with course:  # the course's settings (c.MhaKit) from here: the sandbox's too
        warn_if_unprotected()  # for the kernels and the workers, after the start line
        for graded in course.grade(args.jobs):
            course.record(graded)
            notes = [render(msg("autograde.note", student=graded.student, note=note))
                     for note in graded.notes]
            progress.update(graded.student, {"score": graded.score,
                                             "max_score": course.max_score}, notes)
            everyone.append(graded)
    payloads = [payload for graded in everyone for payload in graded.payloads]
    if args.report and not payloads:
        print(render(msg("autograde.no_report")), file=sys.stderr)
    elif args.report:
        table, picture = class_report.write(class_report.summarise(payloads), Path(args.report))
        print(render(msg("report.class_written", table=str(table), picture=str(picture))))
        if course.skipped:
            print(render(msg("autograde.report_leaves_out", count=len(course.skipped))),
                  file=sys.stderr)
    recorded = [graded for graded in everyone if graded.recorded]
    print(render(msg("autograde.summary", count=len(everyone), assignment=args.assignment,
                     seconds=time.perf_counter() - started, jobs=args.jobs,
                     recorded=len(recorded), gradebook=str(course.gradebook))))
    failed = sorted(graded.student for graded in everyone if not graded.recorded)
    if failed:
        print(render(msg("autograde.failures", count=len(failed), students=", ".join(failed))),
              file=sys.stderr)
        return EXIT_FAIL
    return EXIT_PASS
