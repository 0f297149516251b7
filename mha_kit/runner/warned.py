"""Warnings raised while student code runs, put at the student's own line.

PyTorch warns from C++ (`x.T` on a tensor of more than 2 dims, softmax without `dim`), and
Python then blames whichever Python frame called into torch: often the kit's own code.
`capture` collects the warnings raised inside it and finds the student's line on the stack.
The warnings the kit can explain become messages (a failing check shows them); any other
warning is shown again at the student's line, once per process as Python would (nbgrader
gives 0 to a test cell that writes to stderr: a warning repeated in every cell would cost
points).
"""

from __future__ import annotations

import linecache
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import torch

from ..messages import Message, msg
from .student_code import CODE_KEEP, cell_of, is_students, shown

# The start of a warning's text, and the message that explains it.
KNOWN = (
    ("The use of `x.T` on tensors of dimension other than 2", "warning.x_t"),
    ("Implicit dimension choice for softmax has been deprecated", "warning.softmax_dim"),
)
_SHOWN: dict[Any, Any] = {}  # the other warnings shown so far, by text, category and line


def _student_place(frame: FrameType | None) -> tuple[str, int, Message | str] | None:
    """The file, line and cell (`cell_of`) of the innermost frame from `frame` out that is the
    student's."""
    while frame is not None:
        if is_students(frame.f_code.co_filename):
            return frame.f_code.co_filename, frame.f_lineno, cell_of(frame.f_code)
        frame = frame.f_back
    return None


@contextmanager
def capture(into: list[Message]) -> Iterator[None]:
    """Collect the warnings raised inside: explained ones go `into` (each once), the others are
    shown at the student's line, once."""
    seen: list[tuple[str, type[Warning], str, int, Message | str]] = []

    def note(message: Any, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: Any = None) -> None:
        found = _student_place(sys._getframe(1))
        seen.append((str(message), category, *(found or (filename, lineno, ""))))

    always = torch.is_warn_always_enabled()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = note
            torch.set_warn_always(True)  # torch warns some things once per process otherwise
            try:
                yield
            finally:
                torch.set_warn_always(always)
    finally:  # the student's code may have raised: what it warned about before counts too
        _sort(seen, into)


def _sort(seen: list[tuple[str, type[Warning], str, int, Message | str]],
          into: list[Message]) -> None:
    for text, category, filename, lineno, cell in seen:
        known = next((m for start, m in KNOWN if text.startswith(start)), None)
        if known is None:
            warnings.warn_explicit(text, category, filename, lineno, registry=_SHOWN)
            continue
        code = shown(linecache.getline(filename, lineno), CODE_KEEP)
        warned = (msg("runner.warned_code", line=lineno, cell=cell, code=code,
                      warning=msg(known)) if code
                  else msg("runner.warned", line=lineno, cell=cell, warning=msg(known)))
        if warned not in into:
            into.append(warned)
