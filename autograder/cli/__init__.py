"""`mha-kit`: one module per command, each with `add(subparsers)` and `run(args)`.

Nothing outside this package imports it.
"""

from __future__ import annotations

import argparse

from . import bench, check, grade, release
from .exits import EXIT_PASS, EXIT_USAGE

COMMANDS = (check, grade, bench, release)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mha-kit", description="Grade multi-head attention exercises against PyTorch."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_USAGE if exit_.code else EXIT_PASS
    return args.run(args)
