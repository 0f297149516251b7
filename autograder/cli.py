"""`mha-kit`: check one submission, and more (`mha-kit --help`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .points import CHECKS, POINTS

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def readable_submission(path: Path) -> str | None:
    """Why a path cannot be graded at all, or None. Reads, never runs, the file."""
    if not path.is_file():
        return f"{path}: no such file"
    if path.suffix not in (".py", ".ipynb"):
        return f"{path}: expected a .py file or an .ipynb notebook"
    try:
        if path.suffix == ".ipynb":
            import nbformat

            nbformat.read(str(path), as_version=4)
        else:
            path.read_text(encoding="utf-8")
    except Exception as err:  # any parse failure means unreadable
        return f"{path}: cannot be read ({type(err).__name__}: {err})"
    return None


def cmd_check(args: argparse.Namespace) -> int:
    from .checks import run_checks
    from .report import format_table, score_line, write_gradescope_json
    from .worker import WorkerSubmission

    path = Path(args.path)
    problem = readable_submission(path)
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    unknown = [name for name in args.only or [] if name not in POINTS]
    if unknown:
        print(f"unknown check id(s): {', '.join(unknown)}; choose from {', '.join(POINTS)}",
              file=sys.stderr)
        return EXIT_USAGE
    device = args.device or default_device()
    started = time.perf_counter()
    print(f"Grading {path} on {device} ...", flush=True)
    with WorkerSubmission(path, device) as sub:
        sub.ensure_loaded()

        def progress(result):
            if args.verbose:
                print(score_line(result), flush=True)

        results = run_checks(sub, only=args.only, device=device, on_result=progress)
        problems = sub.problems + ([f"your code printed: {sub.printed}"] if sub.printed else [])
    print(format_table(results, problems))
    print(f"\n({time.perf_counter() - started:.1f} s)")
    if args.json:
        write_gradescope_json(args.json, results, problems)
        print(f"wrote {args.json}")
    return EXIT_PASS if all(r.passed for r in results) else EXIT_FAIL


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mha-kit", description="Grade multi-head attention exercises against PyTorch."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="grade one .py file or .ipynb notebook")
    check.add_argument("path", help="the submission: a .py file or an .ipynb notebook")
    check.add_argument("--only", action="append", metavar="NAME",
                       help=f"run only this check (repeatable): {', '.join(c.id for c in CHECKS)}")
    check.add_argument("--json", metavar="RESULTS_JSON",
                       help="also write Gradescope's results.json format here")
    check.add_argument("--device", choices=("cpu", "cuda"),
                       help="where to run and time (default: cuda when available)")
    check.add_argument("-v", "--verbose", action="store_true",
                       help="print each check as it finishes")
    check.set_defaults(run=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_USAGE if exit_.code else EXIT_PASS
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
