"""`mha-kit`: check one submission, and more (`mha-kit --help`)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .batch import add_grade_command, add_limit_flags
from .i18n import LANG_VARIABLE, LANGUAGES
from .points import ASSIGNMENTS, CHECKS

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


def detect_assignment(path: Path) -> str:
    """The assignment whose check ids name a notebook's nbgrader test cells; else "mha"."""
    if path.suffix == ".ipynb":
        import nbformat

        cells = nbformat.read(str(path), as_version=4).cells
        grade_ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in cells}
        for name, table in ASSIGNMENTS.items():
            if grade_ids & {spec.id for spec in table}:
                return name
    return "mha"


def cmd_check(args: argparse.Namespace) -> int:
    from .batch import grade_submission
    from .policy import Limits
    from .report import format_table, score_line, write_gradescope_json
    from .worker import WorkerStartError

    path = Path(args.path)
    problem = readable_submission(path)
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    if args.lang:
        os.environ[LANG_VARIABLE] = args.lang  # read by the report, and by the worker's notebook
    assignment = args.assignment or detect_assignment(path)
    ids = [spec.id for spec in ASSIGNMENTS[assignment]]
    unknown = [name for name in args.only or [] if name not in ids]
    if unknown:
        print(f"unknown check id(s) for {assignment}: {', '.join(unknown)}; choose from "
              f"{', '.join(ids)}", file=sys.stderr)
        return EXIT_USAGE
    device = args.device or default_device()
    started = time.perf_counter()
    print(f"Grading {path} on {device} ...", flush=True)

    def progress(result):
        if args.verbose:
            print(score_line(result), flush=True)

    limits = Limits.from_env(call_s=args.timeout, check_s=args.check_timeout,
                             total_s=args.total_timeout, memory_gib=args.memory_gib)
    try:
        results, problems = grade_submission(path, device, assignment=assignment,
                                             only=args.only, limits=limits, on_result=progress)
    except WorkerStartError as err:
        print(f"mha-kit: {err}", file=sys.stderr)
        return EXIT_USAGE
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
    check.add_argument("--assignment", choices=tuple(ASSIGNMENTS),
                       help="which checks (default: from a notebook's test cells, else mha)")
    check.add_argument("--lang", choices=LANGUAGES,
                       help=f"language of the messages (default: ${LANG_VARIABLE}, else en)")
    check.add_argument("--json", metavar="RESULTS_JSON",
                       help="also write Gradescope's results.json format here")
    check.add_argument("--device", choices=("cpu", "cuda"),
                       help="where to run and time (default: cuda when available)")
    check.add_argument("-v", "--verbose", action="store_true",
                       help="print each check as it finishes")
    add_limit_flags(check)
    check.set_defaults(run=cmd_check)
    add_grade_command(commands)

    from .release import add_release_command

    add_release_command(commands)

    from .bench import add_parser as add_bench_parser

    add_bench_parser(commands)
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
