"""`mha-kit grade`: a folder of submissions, graded in parallel, one CSV row per student.

Each submission is graded exactly as `mha-kit check` grades it (`grade_submission`), in a
pool of grader processes; each of those starts its own worker for the student's code. If
student code manages to kill a grader process, the submissions that process's pool was
holding are graded again, each in a process of its own, so one hostile submission costs
only its own row.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    as_completed,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .points import ASSIGNMENTS
from .policy import Limits

SUFFIXES = (".ipynb", ".py")


@dataclass(frozen=True)
class Entry:
    """One student: the file to grade, or why there is none."""

    student: str
    path: Path | None
    problem: str | None = None


# --------------------------------------------------------------------------- finding files


def _visible(path: Path, root: Path) -> bool:
    return not any(part.startswith((".", "__")) for part in path.relative_to(root).parts)


def find_submission(folder: Path) -> Path:
    """The one notebook (else the one .py file) anywhere in a student's folder.

    nbgrader's `submitted/STUDENT/ASSIGNMENT/NOTEBOOK.ipynb` and a Gradescope upload both fit.
    Raises LookupError with a message for the grade sheet when there is none, or several.
    """
    for suffix in SUFFIXES:
        found = sorted(p for p in folder.rglob(f"*{suffix}")
                       if p.is_file() and _visible(p, folder))
        if len(found) == 1:
            return found[0]
        if found:
            names = ", ".join(str(p.relative_to(folder)) for p in found)
            raise LookupError(f"{len(found)} {suffix} files, expected one: {names}")
    raise LookupError(f"no {' or '.join(SUFFIXES)} file found")


def discover(root: Path) -> list[Entry]:
    """Students in `root`: each .py/.ipynb directly in it, and each folder in it."""
    items = [p for p in sorted(root.iterdir()) if _visible(p, root)]
    files = [p for p in items if p.is_file() and p.suffix in SUFFIXES]
    stems = Counter(p.stem for p in files)  # alice.py beside alice.ipynb: keep the suffixes
    entries = [Entry(p.stem if stems[p.stem] == 1 else p.name, p) for p in files]
    for folder in (p for p in items if p.is_dir()):
        try:
            entries.append(Entry(folder.name, find_submission(folder)))
        except LookupError as err:
            entries.append(Entry(folder.name, None, str(err)))
    return sorted(entries, key=lambda e: e.student)


# --------------------------------------------------------------------------- grading


def grade_submission(path: Path, device: str = "cpu", *, assignment: str = "mha",
                     only: list[str] | None = None, limits: Limits | None = None,
                     on_result: Callable | None = None) -> tuple[list, list[str]]:
    """(results, problems) for one file: its code runs only in a worker process."""
    from .checks import run_checks
    from .i18n import label
    from .worker import WorkerSubmission

    with WorkerSubmission(path, device, limits) as sub:
        sub.ensure_loaded()
        results = run_checks(sub, only=only, device=device, on_result=on_result,
                             assignment=assignment)
        printed = [f"{label('your code printed:')} {sub.printed}"] if sub.printed else []
        return results, sub.problems + printed


def not_graded(assignment: str, message: str) -> dict:
    """Gradescope's results for a submission that could not be graded at all: 0, and why."""
    from .checks import CheckResult
    from .report import gradescope_results

    results = [CheckResult(s.id, 0.0, s.points, message) for s in ASSIGNMENTS[assignment]]
    return gradescope_results(results, [message])


def grade_entry(entry: Entry, device: str, assignment: str, limits: Limits) -> dict:
    """Gradescope's results for one student, whatever their submission does."""
    from .cli import readable_submission
    from .report import gradescope_results
    from .worker import WorkerStartError

    problem = entry.problem or readable_submission(entry.path)
    if problem:
        return not_graded(assignment, problem)
    try:
        return gradescope_results(*grade_submission(entry.path, device, assignment=assignment,
                                                    limits=limits))
    except WorkerStartError:  # the grader's setup: no submission can be graded, stop
        raise
    except Exception as err:  # the grader's own failure: this row says so, the batch goes on
        return not_graded(assignment, f"the grader failed: {type(err).__name__}: {err}")


def _prepare_grader(scratch: str) -> None:
    """In each grader process: worker folders go into the batch's scratch folder (removed at
    the end, even those of a grader that was killed), and one torch thread, since the
    grader's side is small tensors and the workers need the cores."""
    import torch

    tempfile.tempdir = scratch
    torch.set_num_threads(1)


def _pool(jobs: int, scratch: str) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_prepare_grader, initargs=(scratch,))


def _alone(entry: Entry, device: str, assignment: str, limits: Limits, scratch: str) -> dict:
    """Grade one entry in a grader process of its own."""
    with _pool(1, scratch) as pool:
        try:
            return pool.submit(grade_entry, entry, device, assignment, limits).result()
        except BrokenProcessPool:
            return not_graded(assignment, "the grading process died while grading this "
                                          "submission (did its code kill the grader?)")


def grade_all(entries: list[Entry], jobs: int, device: str, assignment: str,
              limits: Limits) -> Iterator[tuple[Entry, dict]]:
    """(entry, results) as each finishes, `jobs` at a time.

    At most `jobs` submissions are in the pool at once, so when a grader process dies only
    those are suspects: they are graded again at the end, each alone; a new pool goes on.
    """
    args = (device, assignment, limits)
    queue, suspects = list(entries), []
    with tempfile.TemporaryDirectory(prefix="mha-kit-grade-") as scratch:
        os.chmod(scratch, 0o711)  # a worker running as another account reaches its own folder
        while queue:
            with _pool(jobs, scratch) as pool:
                running: dict[Future, Entry] = {}
                while queue or running:
                    while queue and len(running) < jobs:
                        entry = queue.pop(0)
                        running[pool.submit(grade_entry, entry, *args)] = entry
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    broken = False
                    for future in done:
                        entry = running.pop(future)
                        try:
                            yield entry, future.result()
                        except BrokenProcessPool:
                            suspects.append(entry)
                            broken = True
                    if broken:  # all the pool still holds is suspect too; a new pool goes on
                        suspects += running.values()
                        break
        with ThreadPoolExecutor(jobs) as threads:
            alone = {threads.submit(_alone, e, *args, scratch): e for e in suspects}
            for future in as_completed(alone):
                yield alone[future], future.result()


# --------------------------------------------------------------------------- output


def _safe_name(student: str) -> str:
    return re.sub(r"[^\w.-]", "_", student) or "student"


def write_csv(path: Path, rows: dict[str, tuple[Entry, dict]], ids: list[str]) -> None:
    """One row per student: each check's score, the total and any loading problems."""
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["student", "file", *ids, "total", "notes"])
        for student in sorted(rows):
            entry, payload = rows[student]
            scores = {t["name"]: t["score"] for t in payload["tests"]}
            notes = payload.get("output", "").replace("\n", " | ")
            writer.writerow([student, entry.path.name if entry.path else "",
                             *(f"{scores.get(i, 0):g}" for i in ids), f"{payload['score']:g}",
                             notes[:500]])


class Progress:
    """One line that updates in place on a terminal; a line per submission otherwise."""

    def __init__(self, total: int, stream: Any = sys.stderr):
        self.total, self.done, self.stream = total, 0, stream
        self.live = stream.isatty()

    def update(self, student: str, payload: dict) -> None:
        self.done += 1
        width = 24
        filled = width * self.done // self.total
        bar = "#" * filled + "-" * (width - filled)
        line = (f"[{bar}] {self.done}/{self.total}  {student}: "
                f"{payload['score']:g}/{payload['max_score']}")
        if self.live:
            self.stream.write("\r\033[K" + line + ("\n" if self.done == self.total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def summary(rows: dict[str, tuple[Entry, dict]], seconds: float, jobs: int) -> str:
    totals = [payload["score"] for _, payload in rows.values()]
    lines = [f"graded {len(rows)} submissions in {seconds:.1f} s with {jobs} jobs"]
    if totals:
        lines.append(f"  total: mean {statistics.mean(totals):.1f}, median "
                     f"{statistics.median(totals):g}, min {min(totals):g}, max {max(totals):g}")
    missing = sorted(s for s, (entry, _) in rows.items() if entry.path is None)
    if missing:
        lines.append(f"  no submission file: {', '.join(missing)}")
    return "\n".join(lines)


def cmd_grade(args: argparse.Namespace) -> int:
    from .cli import EXIT_PASS, EXIT_USAGE, default_device, detect_assignment
    from .worker import WorkerStartError

    root = Path(args.submissions)
    if args.jobs < 1:
        print("--jobs must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if not root.is_dir():
        print(f"{root}: not a folder", file=sys.stderr)
        return EXIT_USAGE
    entries = discover(root)
    if not entries:
        print(f"{root}: no submissions (.py, .ipynb or one folder per student)", file=sys.stderr)
        return EXIT_USAGE
    notebooks = [e.path for e in entries if e.path is not None and e.path.suffix == ".ipynb"]
    assignment = args.assignment or (detect_assignment(notebooks[0]) if notebooks else "mha")
    limits = Limits.from_env(call_s=args.timeout, check_s=args.check_timeout,
                             total_s=args.total_timeout, memory_gib=args.memory_gib)
    device = args.device or default_device()
    ids = [spec.id for spec in ASSIGNMENTS[assignment]]
    started = time.perf_counter()
    progress = Progress(len(entries))
    rows: dict[str, tuple[Entry, dict]] = {}
    try:
        for entry, payload in grade_all(entries, args.jobs, device, assignment, limits):
            rows[entry.student] = (entry, payload)
            progress.update(entry.student, payload)
    except WorkerStartError as err:
        print(f"\nmha-kit: {err}", file=sys.stderr)
        return EXIT_USAGE
    # Written last, after every worker is gone: nothing a student wrote can outlive this.
    write_csv(Path(args.csv), rows, ids)
    if args.json_dir:
        from .report import write_results

        for student, (_, payload) in rows.items():
            write_results(Path(args.json_dir) / f"{_safe_name(student)}.json", payload)
    print(summary(rows, time.perf_counter() - started, args.jobs))
    print(f"wrote {args.csv}" + (f" and {len(rows)} files in {args.json_dir}"
                                 if args.json_dir else ""))
    return EXIT_PASS


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """--timeout, --check-timeout, --total-timeout and --memory-gib, for `check` and `grade`."""
    defaults = Limits()
    parser.add_argument("--timeout", type=float, metavar="S",
                        help=f"seconds for one call into student code (default "
                             f"{defaults.call_s:g}; ${Limits.ENV['call_s']})")
    parser.add_argument("--check-timeout", type=float, metavar="S",
                        help=f"seconds for all the calls of one check (default "
                             f"{defaults.check_s:g}; ${Limits.ENV['check_s']})")
    parser.add_argument("--total-timeout", type=float, metavar="S",
                        help=f"seconds for a whole submission (default {defaults.total_s:g}; "
                             f"${Limits.ENV['total_s']})")
    parser.add_argument("--memory-gib", type=float, metavar="G",
                        help=f"memory for student code (default {defaults.memory_gib:g}; "
                             f"${Limits.ENV['memory_gib']})")


def add_grade_command(commands: Any) -> None:
    grade = commands.add_parser(
        "grade", help="grade a folder of submissions in parallel into a CSV",
        description="Grade every submission in a folder: one .py/.ipynb per student, or one "
                    "folder per student (nbgrader's submitted/STUDENT/... layout included).")
    grade.add_argument("submissions", help="the folder of submissions")
    grade.add_argument("--jobs", "-j", type=int, default=2, help="submissions graded at once")
    grade.add_argument("--csv", default="grades.csv", help="where to write the grade sheet")
    grade.add_argument("--json-dir", metavar="DIR",
                       help="also write one Gradescope results.json per student here")
    grade.add_argument("--assignment", choices=tuple(ASSIGNMENTS),
                       help="which checks (default: from the notebooks' test cells, else mha)")
    grade.add_argument("--device", choices=("cpu", "cuda"),
                       help="where to run and time (default: cuda when available)")
    add_limit_flags(grade)
    grade.set_defaults(run=cmd_grade)
