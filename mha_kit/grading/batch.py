"""`mha-kit grade`: a folder of submissions, graded in parallel, one CSV row per student.

Each submission is graded exactly as `mha-kit check` grades it (`grade_submission`), in a
pool of grader processes; each of those starts its own worker for the student's code. If
student code manages to kill a grader process, the submissions that process's pool was
holding are graded again, each in a process of its own, so one hostile submission costs
only its own row.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import multiprocessing
import os
import re
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    as_completed,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeVar

from .. import settings
from ..checks import search
from ..checks.core import HIDDEN_SALT, CheckResult
from ..messages import Message, msg, render
from ..runner.policy import Limits
from ..runner.student_code import shown, shown_printed
from ..runner.worker import WorkerStartError, WorkerSubmission
from ..runtime import freeze_imports
from .files import StudentFile, detect_assignment, readable_submission
from .registry import ASSIGNMENTS, run_checks
from .report import gradescope_results

# Python (3.11+) puts no script or current folder on the import path when this is set.
SAFE_PATH = "PYTHONSAFEPATH"
T = TypeVar("T")  # what a batch is made of: a student's file, a student's id
R = TypeVar("R")  # what grading one gives

# --------------------------------------------------------------------------- grading


@contextlib.contextmanager
def loaded_worker(path: Path, device: str, limits: Limits | None,
                  kit_code: bool = False) -> Iterator[WorkerSubmission]:
    """A worker with the file loaded: its code runs only there (`kit_code`: as for
    `WorkerSubmission`)."""
    search.warm_up()  # while this process's zygote (`zygote.prestart`) still imports
    freeze_imports()
    with WorkerSubmission(path, device, limits, kit_code) as sub:
        sub.start()
        sub.ensure_loaded()
        yield sub


def worker_problems(sub: WorkerSubmission) -> list:
    """What went wrong outside the checks: loading problems, the worker's trouble, prints."""
    printed = [msg("report.printed", printed=sub.printed)] if sub.printed else []
    return sub.problems + printed


def grade_submission(path: Path, device: str = "cpu", *, assignment: str | None = None,
                     only: list[str] | None = None, limits: Limits | None = None,
                     on_result: Callable | None = None, salt: str = "",
                     kit_code: bool = False) -> tuple[list, list[str]]:
    """(results, problems) for one file (of `assignment`, else the one it answers): its code
    runs only in a worker process."""
    assignment = assignment or detect_assignment(path)
    with loaded_worker(path, device, limits, kit_code) as sub:
        results = run_checks(sub, only=only, device=device, on_result=on_result,
                             assignment=assignment, salt=salt)
        return results, worker_problems(sub)


def not_graded(assignment: str, message: Message | str) -> dict:
    """Gradescope's results for a submission that could not be graded at all: 0, and why."""

    results = [CheckResult(s.id, 0.0, s.points, message) for s in ASSIGNMENTS[assignment]]
    return gradescope_results(results, [message])


def grade_entry(entry: StudentFile, device: str, assignment: str, limits: Limits,
                hidden_visibility: str = "none", kit_code: bool = False) -> dict:
    """Gradescope's results for one student, whatever their submission does; unless
    `hidden_visibility` is "none", with every untimed check also on the hidden inputs."""

    problem = entry.problem or readable_submission(entry.path)
    if problem:
        return not_graded(assignment, problem)
    try:
        if hidden_visibility == "none":
            return gradescope_results(*grade_submission(entry.path, device,
                                                        assignment=assignment, limits=limits,
                                                        kit_code=kit_code))
        with loaded_worker(entry.path, device, limits, kit_code) as sub:
            results = run_checks(sub, device=device, assignment=assignment)
            problems = worker_problems(sub)  # not after: what it prints of hidden inputs
            sub.restart_clock()  # each run gets the whole cap
            hidden = run_checks(sub, device=device, assignment=assignment, salt=HIDDEN_SALT,
                                only=[c.id for c in ASSIGNMENTS[assignment] if not c.timed])
        return gradescope_results(results, problems, hidden, hidden_visibility)
    except WorkerStartError:  # the grader's setup: no submission can be graded, stop
        raise
    except Exception as err:  # the grader's own failure: this row says so, the batch goes on
        return not_graded(assignment, msg("batch.grader_failed", type=type(err).__name__,
                                          error=str(err)))


def _prepare_grader(scratch: str, chosen: settings.Settings, safe_path: str | None) -> None:
    """In each grader process: the batch's settings; the grader's own PYTHONSAFEPATH (`_pool`)
    for what it starts; worker folders go into the batch's scratch folder (removed at the end,
    even those of a grader that was killed); its workers' zygote, started at once (its sandbox
    lets them write there); and one torch thread, since the grader's side is small tensors and
    the workers need the cores."""
    import torch

    from ..runner import zygote

    settings.adopt(chosen)
    if safe_path is None:
        os.environ.pop(SAFE_PATH, None)
    else:
        os.environ[SAFE_PATH] = safe_path
    tempfile.tempdir = scratch
    zygote.prestart()
    torch.set_num_threads(1)


@contextlib.contextmanager
def _safe_path() -> Iterator[str | None]:
    """Python's safe path (PYTHONSAFEPATH, from Python 3.11) while a batch starts graders.
    Python starts each with `-c`, which puts the folder the grader runs in first on the import
    path: a folder of submissions, maybe, where a student's `multiprocessing.py` would run as
    the grader before a line of the kit does. Set once for the whole batch, the graders that
    run alone on threads at its end included (each pool's own setting and restoring let one
    thread start a grader without it while another restored it: review 53b). Yields the value
    it had, which `_prepare_grader` puts back for what a grader starts."""
    before = os.environ.get(SAFE_PATH)
    os.environ[SAFE_PATH] = "1"
    try:
        yield before
    finally:
        if before is None:
            os.environ.pop(SAFE_PATH, None)
        else:
            os.environ[SAFE_PATH] = before


@contextlib.contextmanager
def _pool(jobs: int, scratch: str, safe_path: str | None) -> Iterator[ProcessPoolExecutor]:
    """`jobs` grader processes, started within `_safe_path` (`safe_path`: what it yielded)."""
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_prepare_grader,
                             initargs=(scratch, settings.current(), safe_path)) as pool:
        yield pool


@contextlib.contextmanager
def scratch_folder(prefix: str) -> Iterator[str]:
    """A batch's scratch folder, removed at the end, even what a killed grader left there."""
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        os.chmod(scratch, 0o711)  # a worker running as another account reaches its own folder
        yield scratch


def _alone(item: T, task: Callable[[T], R], died: Callable[[T], R], scratch: str,
           safe_path: str | None) -> R:
    """task(item) in a grader process of its own; died(item) if that process dies."""
    with _pool(1, scratch, safe_path) as pool:
        try:
            return pool.submit(task, item).result()
        except BrokenProcessPool:
            return died(item)


def in_parallel(items: list[T], jobs: int, task: Callable[[T], R], died: Callable[[T], R],
                scratch: str) -> Iterator[tuple[T, R]]:
    """(item, task(item)) as each finishes, `jobs` at a time, in grader processes whose
    temporary files go into `scratch`; `task` must pickle (a function, or a partial of one).

    At most `jobs` items are in the pool at once, so when a grader process dies only those are
    suspects: they run again at the end, each alone (died(item) if it dies again); a new
    pool goes on.
    """
    with _safe_path() as safe_path:
        queue, suspects = list(items), []
        while queue:
            with _pool(jobs, scratch, safe_path) as pool:
                running: dict[Future, T] = {}
                while queue or running:
                    broken = False
                    while queue and len(running) < jobs and not broken:
                        try:
                            running[pool.submit(task, queue[0])] = queue[0]
                            queue.pop(0)
                        except (BrokenProcessPool, RuntimeError):  # a process died since the last
                            broken = True  # result (RuntimeError: while the pool shuts down)
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        item = running.pop(future)
                        try:
                            yield item, future.result()
                        except BrokenProcessPool:
                            suspects.append(item)
                            broken = True
                    if broken:  # all the pool still holds is suspect too; a new pool goes on
                        suspects += running.values()
                        break
        with ThreadPoolExecutor(jobs) as threads:
            alone = {threads.submit(_alone, item, task, died, scratch, safe_path): item
                     for item in suspects}
            for future in as_completed(alone):
                yield alone[future], future.result()


def grade_all(entries: list[StudentFile], jobs: int, device: str, assignment: str,
              limits: Limits, kit_code: bool = False) -> Iterator[tuple[StudentFile, dict]]:
    """(entry, results) as each finishes, `jobs` at a time (`in_parallel`); `kit_code` as for
    `WorkerSubmission`."""
    task = functools.partial(grade_entry, device=device, assignment=assignment, limits=limits,
                             kit_code=kit_code)
    with scratch_folder("mha-kit-grade-") as scratch:
        yield from in_parallel(entries, jobs, task,
                               lambda _: not_graded(assignment, msg("batch.grader_died")), scratch)


# --------------------------------------------------------------------------- output


def safe_name(student: str) -> str:
    return re.sub(r"[^\w.-]", "_", student) or "student"


# What a spreadsheet reads as a formula at the start of a cell (OWASP's list).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def sheet_cell(text: str, keep: int = 500) -> str:
    """Text a student chose (a file's name, what their code printed) as a grade sheet's cell:
    one line with no terminal escapes (`shown_printed`), and a quote before a first character
    that would make it a formula (`=HYPERLINK(...)`)."""
    cell = shown_printed(text, keep)
    return "'" + cell if cell.startswith(FORMULA_START) else cell


def write_csv(path: Path, rows: dict[str, tuple[StudentFile, dict]], ids: list[str]) -> None:
    """One row per student: each check's score, the total, the ids of the known mistakes the
    messages named (as in Gradescope's `extra_data`) and any loading problems."""
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["student", "file", *ids, "total", "mistakes", "notes"])
        for student in sorted(rows):
            entry, payload = rows[student]
            scores = {t["name"]: t["score"] for t in payload["tests"]}
            named = dict.fromkeys(m for t in payload["tests"]
                                  for m in t.get("extra_data", {}).get("mistakes", ()))
            notes = payload.get("output", "").replace("\n", " | ")
            writer.writerow([sheet_cell(student), sheet_cell(entry.path.name if entry.path
                                                             else ""),
                             *(f"{scores.get(i, 0):g}" for i in ids), f"{payload['score']:g}",
                             " ".join(named), sheet_cell(notes)])


class Progress:
    """One line that updates in place on a terminal; a line per submission otherwise."""

    def __init__(self, total: int, stream: Any = None):
        self.total, self.done = total, 0
        self.stream = sys.stderr if stream is None else stream  # the one in use now
        self.live = self.stream.isatty()

    def update(self, student: str, payload: dict, notes: Sequence[str] = ()) -> None:
        """One more done: its score out of its maximum, and `notes` on lines of their own."""
        self.done += 1
        width = 24
        filled = width * self.done // self.total
        bar = "#" * filled + "-" * (width - filled)
        line = (f"[{bar}] {self.done}/{self.total}  {shown(student, 80)}: "
                f"{payload['score']:g}/{payload['max_score']:g}")
        below = "".join(f"  {note}\n" for note in notes)
        if self.live:  # the notes stay above the bar
            self.stream.write("\r\033[K" + below + line
                              + ("\n" if self.done == self.total else ""))
        else:
            self.stream.write(line + "\n" + below)
        self.stream.flush()


def summary(rows: dict[str, tuple[StudentFile, dict]], seconds: float, jobs: int) -> str:
    """The batch in a few lines, in the language of the messages."""
    totals = [payload["score"] for _, payload in rows.values()]
    lines = [msg("batch.summary", count=len(rows), seconds=float(seconds), jobs=jobs)]
    if totals:
        lines.append(msg("batch.totals", mean=float(statistics.mean(totals)),
                         median=statistics.median(totals), min=min(totals), max=max(totals)))
    missing = sorted(s for s, (entry, _) in rows.items() if entry.path is None)
    if missing:
        lines.append(msg("batch.no_file", students=", ".join(missing)))
    return "\n".join(render(line) for line in lines)
