"""Student code may not read the kit's own files (`refuse_kit_reads`, in the worker).

The kit's functions answer nothing for a student (`student_code.kit_answering`), which knows
them by the file their code was compiled from. Code of the kit's read at run time (its source,
its bytecode) and run under another name would pass for the student's: so, in the worker, an
audit hook refuses every opening of a file or folder inside the kit's package while student
code is on the stack, unless an import opens it (an import's code keeps the kit's own file
name). Copying the kit's code into an answer by hand stays the student's own work.

Audit hooks are no sandbox: they do not see a read through a folder's descriptor opened above
the kit's, nor through C (ctypes). See docs/trusted-grading.md.
"""

from __future__ import annotations

import linecache
import os
import sys
from types import FrameType
from typing import Any

from .student_code import KIT_FOLDER, is_students

_IMPORT = "<frozen importlib._bootstrap"  # the frozen import machinery's file names
_KIT = os.path.realpath(KIT_FOLDER) + os.sep  # as a path resolves: no link in it
_refused: list[str] = []  # the kit's files refused since `take_refused` last ran


class KitFileRead(PermissionError):
    """Student code opened one of the kit's files (`path`: inside the kit, "mha_kit/...")."""

    def __init__(self, path: str):
        super().__init__(f"graded code may not read the grading kit's files: {path}")
        self.path = path


def refuse_kit_reads() -> None:
    """From now on, in this process (the worker, before the student's file loads), student
    code that opens a path inside the kit raises KitFileRead (`take_refused` tells it)."""
    linecache.clearcache()  # lines of the kit's read before: `inspect.getsource` reads there
    sys.addaudithook(_on_audit)


def take_refused() -> str | None:
    """The first of the kit's files refused since the last call ("mha_kit/oracle.py"), or
    None; forgets them."""
    first = _refused[0] if _refused else None
    _refused.clear()
    return first


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open":  # every audit event comes here: the others at once
        return
    path = args[0]
    if isinstance(path, int):  # a descriptor already open
        return
    try:
        resolved = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):  # not a path: open() itself refuses it
        return
    if not (resolved + os.sep).startswith(_KIT) or not _student_reading(sys._getframe(1)):
        return
    inside = os.path.relpath(resolved, os.path.dirname(os.path.dirname(_KIT)))
    _refused.append(inside)
    raise KitFileRead(inside)


def _student_reading(frame: FrameType | None) -> bool:
    """Whether student code is on the stack from `frame` out, and no import between: an
    import's `get_code` reads the kit's source for code that keeps the kit's name."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(_IMPORT):
            if code.co_name == "get_code" and frame.f_back is not None and (
                    frame.f_back.f_code.co_filename.startswith(_IMPORT)):
                return False
        elif is_students(code.co_filename) or (code.co_filename.startswith("<")
                                               and not code.co_filename.startswith("<frozen ")):
            return True  # "<string>": code compiled without a file, a student's too
        frame = frame.f_back
    return False
