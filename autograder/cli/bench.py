"""`mha-kit bench`: the attention implementations timed side by side, or the speed check's
reliability (`--reliability N`)."""

from __future__ import annotations

import argparse
from typing import Any

from ..runner.inprocess import InProcessSubmission
from ..runner.protocol import StudentCodeError
from ..runtime import default_device
from ..speed import bench
from .exits import EXIT_FAIL, EXIT_PASS
from .options import add_device_flag


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
    parser.add_argument("--reliability", type=int, metavar="N",
                       help="run the speed check N times on the kit's fused module and on a "
                       "loop in disguise, alone and with one CPU core busy; print pass counts")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    device = args.device or default_device()
    if args.reliability:
        report, ok = bench.reliability(args.reliability, device)
        print(report)
        return EXIT_PASS if ok else EXIT_FAIL
    sub = None
    if args.submission:
        sub = InProcessSubmission.from_path(args.submission, forbidden={})  # not grading
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
