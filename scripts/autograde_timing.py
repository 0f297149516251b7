"""Time three ways of autograding the same K submissions, side by side, on this machine:

    .venv/bin/python scripts/autograde_timing.py [-k 10] [--jobs 2]

(a) `nbgrader autograde mha` with nbgrader's default preprocessors: the stock Execute runs
    every cell, test cells included, and the points are what the student's kernel printed;
(b) `nbgrader autograde mha` with the repository's nbgrader_config.py: the kernel runs the
    student's cells only, the kit's worker grades (StudentCells, TrustedGrades);
(c) `mha-kit autograde mha --jobs N`: (b)'s configuration, N submissions at once.

The scratch course is released with `mha-kit release mha`; its submissions are the release
with every answer pasted in, with three steps answered, as released, and with a test cell
edited and another deleted (tests/notebook_helpers.py builds them). Each way gets its own copy.
Every gradebook is then checked cell by cell against `mha-kit grade`'s CSV for the same files;
the speed check is timed in every run, so only whether it earned its points is compared.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mha_kit import settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import nbformat  # noqa: E402
from notebook_helpers import (  # noqa: E402
    MHA_CHECK_IDS,
    PARTIAL,
    SOLUTION,
    read,
    recorded_grades,
    solved,
    tampered,
)

from mha_kit.assignments.mha import speed_config  # noqa: E402
from mha_kit.assignments.mha.speed import SPEED_CHECK as SPEED  # noqa: E402
from mha_kit.release import with_interpreter_on_path  # noqa: E402
from mha_kit.speed.config import TEST_CONFIGS  # noqa: E402

VARIANTS = ("complete", "partial", "complete", "empty", "complete", "tampered")
# nbgrader's own autograde preprocessors: the stock Execute, points from the kernel's outputs.
PLAIN = '\ndel c.Autograde["autograde_preprocessors"]  # nbgrader\'s default list\n'
STARTED = re.compile(r"^(\d+\.\d+) Creating/updating student with ID '([^']+)'", re.MULTILINE)


SPEED_CONFIG = "graded"  # set by --speed-config; never inherited from the test helpers


def env() -> dict[str, str]:
    """The instructor's environment: the venv's bin/ on PATH, no headless matplotlib, and the
    speed config this script states (the test helpers it imports set the `small` one)."""
    kept = {k: v for k, v in os.environ.items()
            if k not in ("MPLBACKEND", settings.variable("speed_config"))}
    if SPEED_CONFIG != "graded":
        kept[settings.variable("speed_config")] = SPEED_CONFIG
    return with_interpreter_on_path(kept)


def run(course: Path, *command: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", *command], cwd=course, env=env(),
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def build(course: Path, count: int) -> dict[str, str]:
    """A released course with `count` submissions; student -> variant."""
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(SOLUTION.parent, course / "solutions" / "mha")
    run(course, "mha_kit.cli", "release", "mha")
    release = read(course / "assignments" / "mha" / SOLUTION.name)
    notebooks = {"complete": solved(release), "partial": solved(release, PARTIAL),
                 "empty": release, "tampered": tampered(solved(release, PARTIAL))}
    students = {f"s{i:03d}_{VARIANTS[i % len(VARIANTS)]}": VARIANTS[i % len(VARIANTS)]
                for i in range(count)}
    for student, variant in students.items():
        folder = course / "submitted" / student / "mha"
        folder.mkdir(parents=True)
        nbformat.write(notebooks[variant], str(folder / SOLUTION.name))
    return students


def per_student(log: str, finished: float) -> list[float]:
    """Seconds per submission, from the times nbgrader logged each one's start."""
    starts = [float(t) for t, _ in STARTED.findall(log)]
    return [b - a for a, b in zip(starts, [*starts[1:], finished])]


def timed(course: Path, *command: str) -> tuple[float, list[float]]:
    """(wall seconds, seconds per submission where the log tells) for one command."""
    started = time.perf_counter()
    done = run(course, *command)
    wall = time.perf_counter() - started
    return wall, per_student(done.stderr, time.time())


def kit_csv(course: Path, jobs: int) -> dict[str, dict[str, float]]:
    """`mha-kit grade`'s scores for the same submitted files."""
    sheet = course.parent / "kit.csv"
    run(course, "mha_kit.cli", "grade", "submitted", "--jobs", str(jobs), "--csv", str(sheet),
        "--assignment", "mha")
    with open(sheet, newline="", encoding="utf-8") as f:
        return {row["student"]: {i: float(row[i]) for i in MHA_CHECK_IDS}
                for row in csv.DictReader(f)}


def differences(recorded: dict, expected: dict) -> list[str]:
    """student: check recorded/expected, for every cell that differs (speed: earned or not)."""
    found = []
    for student, scores in sorted(recorded.items()):
        for check_id, score in scores.items():
            want = expected[student][check_id]
            same = (score > 0) == (want > 0) if check_id == SPEED else score == want
            if not same:
                found.append(f"{student}: {check_id} {score:g}/{want:g}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", "--submissions", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--speed-config", choices=("graded", *TEST_CONFIGS),
                        default="graded", help="the speed check's config (default: graded)")
    args = parser.parse_args()
    global SPEED_CONFIG
    SPEED_CONFIG = args.speed_config
    print(f"speed check config: {SPEED_CONFIG} (cpu: {speed_config.CONFIGS['cpu']})")
    with tempfile.TemporaryDirectory(prefix="mha-kit-timing-") as tmp:
        base = Path(tmp) / "base"
        students = build(base, args.submissions)
        ways = {"(a) nbgrader autograde, nbgrader's preprocessors": "plain",
                "(b) nbgrader autograde, the kit's nbgrader_config.py": "kit",
                f"(c) mha-kit autograde --jobs {args.jobs}": "parallel"}
        for name in ways.values():
            shutil.copytree(base, Path(tmp) / name)
        with open(Path(tmp) / "plain" / "nbgrader_config.py", "a") as config:
            config.write(PLAIN)
        nbgrader = ("nbgrader", "autograde", "mha", "--Application.log_level=INFO",
                    "--Application.log_format=%(created)f %(message)s")
        times = {}
        for label, name in ways.items():
            command = (("mha_kit.cli", "autograde", "mha", "--jobs", str(args.jobs))
                       if name == "parallel" else nbgrader)
            times[label] = timed(Path(tmp) / name, *command)
        expected = kit_csv(base, args.jobs)
        cores = os.cpu_count()
        counts = {v: list(students.values()).count(v) for v in dict.fromkeys(VARIANTS)}
        print(f"{len(students)} submissions ({', '.join(f'{n} {v}' for v, n in counts.items())})"
              f" on {cores} cores")
        print(f"  {'':54} {'total':>9} {'per submission':>15} {'median in log':>14}")
        for label, (wall, each) in times.items():
            median = f"{statistics.median(each):13.1f}s" if each else f"{'':14}"
            print(f"  {label:54} {wall:8.1f}s {wall / len(students):14.1f}s {median}")
        print("gradebooks against `mha-kit grade`'s CSV (the speed check: earned or not):")
        for label, name in ways.items():
            recorded = recorded_grades(Path(tmp) / name, students)
            totals = [f"{s} {sum(g.values()):g}/{sum(expected[s].values()):g}"
                      for s, g in sorted(recorded.items())
                      if sum(g.values()) != sum(expected[s].values())]
            found = differences(recorded, expected)
            print(f"  {label}: totals " + ("identical" if not totals else
                                           "differ: " + ", ".join(totals)))
            print("    cells: " + ("identical" if not found else
                                   f"{len(found)} differ: " + "; ".join(found)))


if __name__ == "__main__":
    main()
