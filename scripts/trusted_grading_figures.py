"""The figures in docs/trusted-grading.md: batch wall time, the worker's overhead, and the
share of the worker's CPU time that honest speed measurements report.

    .venv/bin/python scripts/trusted_grading_figures.py [--submissions 50] [--jobs 2]

Numbers depend on the machine and on what else runs on it: say so next to them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "tests" / "corpus" / "template.py"
STUBS = ROOT / "tests" / "corpus" / "stubs.py"
FAKE_TIMER = ROOT / "tests" / "hostile" / "fake_timer.py"


def batch_wall_time(count: int, jobs: int) -> float:
    """`mha-kit grade` over `count` submissions: four in five complete, one in five stubs."""
    with tempfile.TemporaryDirectory() as folder:
        for i in range(count):
            source = (STUBS if i % 5 == 4 else TEMPLATE).read_text()
            Path(folder, f"student_{i:03d}.py").write_text(f"# student {i}\n{source}")
        started = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "mha_kit.cli", "grade", folder,
                              "--jobs", str(jobs), "--csv", str(Path(folder, "grades.csv"))],
                             capture_output=True, text=True, cwd=folder)
        wall = time.perf_counter() - started
        print(run.stdout.strip())
        if run.returncode:
            raise SystemExit(run.stderr)
    return wall


def overhead(repeats: int) -> None:
    """The same submission and checks, in this process and through a worker."""
    from mha_kit.grading.registry import ASSIGNMENTS, run_checks
    from mha_kit.runner.inprocess import InProcessSubmission
    from mha_kit.runner.worker import WorkerSubmission

    # the speed check's timing varies by itself
    only = [c.id for c in ASSIGNMENTS["mha"] if c.id != "speed_fused_vs_looped"]
    rows: dict[str, list[float]] = {"in-process": [], "worker": [], "worker start": [],
                                    "call in-process": [], "call worker": []}
    for _ in range(repeats):
        started = time.perf_counter()
        sub = InProcessSubmission.from_path(TEMPLATE)
        run_checks(sub, only=only)
        rows["in-process"].append(time.perf_counter() - started)
        rows["call in-process"].append(per_call(sub))

        started = time.perf_counter()
        with WorkerSubmission(TEMPLATE) as worker:
            worker.ensure_loaded()
            rows["worker start"].append(time.perf_counter() - started)
            run_checks(worker, only=only)
            rows["worker"].append(time.perf_counter() - started)
            rows["call worker"].append(per_call(worker))
    for name, values in rows.items():
        unit, scale = ("ms", 1e3) if name.startswith("call") else ("s", 1)
        print(f"  {name:>16}: median {statistics.median(values) * scale:.2f} {unit} "
              f"(min {min(values) * scale:.2f}, max {max(values) * scale:.2f}, n={len(values)})")


def per_call(sub, calls: int = 200) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        sub.call("causal_mask", 4)
    return (time.perf_counter() - started) / calls


def timed_share(path: Path, repeats: int) -> list[float]:
    """Reported time over the worker's CPU time read from /proc, one speed run at a time."""
    from mha_kit.assignments.mha.speed import timed_run, total_measured
    from mha_kit.runner.worker import WorkerSubmission

    shares = []
    with WorkerSubmission(path) as sub:
        for seed in range(repeats):
            run = timed_run(sub, "cpu", seed)  # as the speed check measures it
            shares.append(total_measured(run.measurement) / run.cpu)
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    wall = batch_wall_time(args.submissions, args.jobs)
    print(f"batch: {args.submissions} submissions with --jobs {args.jobs}: {wall:.1f} s wall "
          f"({wall / args.submissions:.2f} s per submission)")
    print("worker overhead (template, every check but speed):")
    overhead(args.repeats)
    for path in (TEMPLATE, FAKE_TIMER):
        shares = timed_share(path, args.repeats)
        print(f"speed check, reported / worker CPU, {path.name}: min {min(shares):.3f}, "
              f"median {statistics.median(shares):.3f}, max {max(shares):.3f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
