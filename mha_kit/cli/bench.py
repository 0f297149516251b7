"""`mha-kit bench`: the attention implementations timed side by side, or the speed check's
calibration (`--calibrate [N]`) and reliability (`--reliability N`): docs/speed.md."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..assignments.mha import bench
from ..assignments.mha.speed import SPEED_CHECK
from ..runner.inprocess import InProcessSubmission
from ..runner.protocol import StudentCodeError
from .exits import EXIT_FAIL, EXIT_PASS, EXIT_USAGE
from .options import add_device_flag, chosen_device

CALIBRATE_N = 20  # checks per style when --calibrate is given without N


def add(commands: Any) -> None:
    parser = commands.add_parser(
        "bench", help="time looped, fused, einops, einsum, SDPA and nn.MultiheadAttention",
        description="Median time per forward call at the graded config and a larger one, "
        "with the speedup over the looped version (docs/speed.md).",
    )
    parser.add_argument("--submission", metavar="PATH",
                       help="also time this file's MultiHeadAttention (run in this process)")
    parser.add_argument("--plot", metavar="OUT_PNG", help="draw the tables as a bar chart")
    add_device_flag(parser, "run")
    parser.add_argument("--calibrate", type=int, nargs="?", const=CALIBRATE_N, metavar="N",
                       help="run the style set through the speed check N times each (default "
                       f"{CALIBRATE_N}); print each style's speedups, the dead band, the "
                       "threshold it supports and its margins")
    parser.add_argument("--under-load", action="store_true",
                       help="with --calibrate: while `mha-kit grade --jobs 2` keeps both cores "
                       "busy grading, and one more process does torch work")
    parser.add_argument("--reliability", type=int, metavar="N",
                       help="run the speed check N times on each style of a small set, alone, "
                       "with one CPU core busy and inside `mha-kit grade --jobs 2` with one "
                       "more core busy; print the points each earned")
    parser.set_defaults(run=run)


def _style_files(folder: str, names: list[str], n: int) -> None:
    """n submission files per style, interleaved: each a style of the set, as `MultiHeadAttention`
    (`r<i>_s<j>.py`: round i, style j of `names`)."""
    Path(folder).chmod(0o755)  # a worker running as another account reads the files
    for i in range(n):
        for j, name in enumerate(names):
            path = Path(folder, f"r{i:04d}_s{j:02d}.py")
            path.write_text("from mha_kit.assignments.mha.styleset import STYLES\n\n"
                            f"MultiHeadAttention = STYLES[{name!r}]\n", encoding="utf-8")
            path.chmod(0o644)


def grade_batch(names: list[str], n: int, device: str) -> dict[str, list[tuple[float, str]]]:
    """The styles graded as submissions by `mha-kit grade --jobs 2` (its pool of graders, each
    with its workers, every check of the assignment): n files per style, interleaved. For each
    style: (the fraction of the speed points, the speed check's message), n times."""
    from ..grading.batch import grade_all
    from ..grading.files import discover
    from ..runner.policy import Limits

    graded: dict[str, list[tuple[float, str]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="mha-kit-reliability-") as folder:
        _style_files(folder, names, n)
        limits = Limits.from_settings()  # as `mha-kit grade` without limit flags
        for entry, payload in grade_all(discover(Path(folder)), 2, device, "mha", limits,
                                        kit_code=True):  # the kit's own styles
            test = next(t for t in payload["tests"] if t["name"] == SPEED_CHECK)
            graded[names[int(entry.student.rpartition("_s")[2])]].append(
                (test["score"] / test["max_score"], test["output"]))
    return graded


@contextlib.contextmanager
def grading_load(device: str) -> Iterator[None]:
    """While the block runs, `mha-kit grade --jobs 2` grades the reliability styles over and
    over (its graders and their workers are processes: both cores busy, while a thread of this
    one waits for them), and one more process does torch work (`busy_core`)."""
    from ..assignments.mha.styleset import RELIABILITY
    from ..grading.batch import grade_all
    from ..grading.files import discover
    from ..runner.policy import Limits
    from ..speed.calibration import busy_core

    stop = threading.Event()

    def grade(entries: list) -> None:
        while not stop.is_set():
            for _ in grade_all(entries, 2, device, "mha", Limits.from_settings()):
                if stop.is_set():
                    break

    with tempfile.TemporaryDirectory(prefix="mha-kit-load-") as folder, busy_core():
        _style_files(folder, list(RELIABILITY), 1)
        thread = threading.Thread(target=grade, args=(discover(Path(folder)),))
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


def run(args: argparse.Namespace) -> int:
    # The calibration code (the style set) loads only here: `mha-kit check` never imports it.
    from ..assignments.mha import calibration as reliability

    device = chosen_device(args)
    if device is None:
        return EXIT_USAGE
    if args.calibrate:
        with grading_load(device) if args.under_load else contextlib.nullcontext():
            report, ok = reliability.calibrate(args.calibrate, device)
        print(report)
        return EXIT_PASS if ok else EXIT_FAIL
    if args.reliability:
        report, ok = reliability.reliability(args.reliability, device, grade_batch)
        print(report)
        return EXIT_PASS if ok else EXIT_FAIL
    sub = None
    if args.submission:
        sub = InProcessSubmission.from_path(args.submission, forbidden={},
                                            kit_code=True)  # not grading: beside the kit's
        for problem in sub.problems:
            print(f"while loading {args.submission}: {problem}")
    tables = {}
    for label, cfg in bench.bench_configs(device).items():
        rows = bench.kit_rows(cfg, device)
        if sub is not None:
            try:
                rows["your MultiHeadAttention"] = bench.student_row(sub, cfg, device)
            except StudentCodeError as err:
                print(f"your MultiHeadAttention is left out: {err}")
                sub = None
        title = f"{label} config: {bench.describe(cfg)} ({device}, 1 thread)"
        tables[title] = bench.time_rows(rows, cfg, device)
        print(bench.bench_table(title, tables[title], "looped"), "\n", flush=True)
    if args.plot:
        bench.plot_tables(tables, "looped", args.plot)
        print(f"wrote {args.plot}")
    return EXIT_PASS
