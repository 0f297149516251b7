"""`mha-kit`: one module per command, each with `add(subparsers)` and `run(args)`.

Nothing outside this package imports it. The command modules import torch, so `main` starts
`check`'s zygote (runner.zygote) before it imports them: the worker's imports then run beside
the grader's own, on another core.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import sys
import threading
from typing import NoReturn

from .. import catalog, settings
from ..messages import msg, render
from .exits import EXIT_PASS, EXIT_USAGE

COMMANDS = ("check", "grade", "autograde", "bench", "release", "new", "course",
            "gradescope")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mha-kit", description="Grade multi-head attention exercises against PyTorch."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        return _run(argv)
    except settings.SettingError as err:  # a variable's or a flag's value
        print(f"mha-kit: {err}", file=sys.stderr)
        return EXIT_USAGE


def _run(argv: list[str]) -> int:
    settings.current()  # a bad variable is said first, before anything starts
    if argv[:1] == ["check"] and not {"-h", "--help"} & set(argv):
        from ..runner import zygote

        zygote.prestart()
    parser = build_parser()
    for name, why in catalog.broken().items():  # one line each; the others work
        print(render(msg("cli.broken_assignment", name=name, why=why)), file=sys.stderr)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_USAGE if exit_.code else EXIT_PASS
    from .options import chosen_by_flags

    with settings.chosen(**chosen_by_flags(args)):
        return args.run(args)


def console() -> NoReturn:
    """The `mha-kit` command: `main`, then an exit without the interpreter's teardown of
    torch's modules (about 0.4 s of garbage collection, for nothing) once the other threads,
    the atexit handlers and the output are done."""
    code = main()
    threading._shutdown()  # what the interpreter does first: pools told to stop, threads joined
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):  # None, closed, a pipe
            stream.flush()
    os._exit(code)
