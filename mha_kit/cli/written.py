"""What a command that writes files prints: the files, then what to do next; or why it wrote
none."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from ..messages import Message, msg, render
from .exits import EXIT_PASS, EXIT_USAGE


def wrote(paths: Iterable[Path], next_steps: Iterable[Message]) -> int:
    for path in paths:
        print(render(msg("cli.wrote", path=path)))
    for step in next_steps:
        print(render(step))
    return EXIT_PASS


def refused(why: Message) -> int:
    print(render(why), file=sys.stderr)
    return EXIT_USAGE
