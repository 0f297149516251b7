"""Where the student's code is, for the messages that point at it: which files are the
student's, the line to name (from the stack or from a traceback), the cell that line counts
from in a notebook, and an error's text that a student's exception cannot break. And which
code is not the student's: the kit's answering for it (`kit_answering`), or read from the
kit's files while it runs (`refuse_kit_reads`).
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import linecache
import os
import re
import sys
import sysconfig
from collections.abc import Collection, Iterator
from types import CodeType, FrameType
from typing import Any

from ..messages import Message, msg
from .protocol import StudentCodeError

CODE_KEEP = 80  # characters of the student's line quoted in a message
ERROR_KEEP = 300  # characters of an exception's text kept in a message
PRINTED_KEEP = 600  # characters of what the student's code printed, as a message quotes it
NAME_KEEP = 80  # characters of a class's name (an exception's, a returned value's)
CUT = "…"  # ends a text cut to its bound
# A terminal's escape sequences: CSI (colours, cursor moves, clearing), OSC (titles, links),
# and any other ESC with the character after it. Left out of what a message quotes.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|.?)"
                      r"|\x9b[0-?]*[ -/]*[@-~]?")
_NAME = vars(type)["__name__"]  # a class's own name, which no metaclass can replace
CELL_LABEL = re.compile(r"cell (\d+)")  # a notebook cell's code, compiled under its label
# How ipykernel names the code of a cell: <temp>/ipykernel_<pid>/<hash>.py.
_KERNEL_CELL = re.compile(r"ipykernel_\d+[/\\]\d+\.py$")
# The folders of the kit's files, torch's, the standard library's and installed packages'.
_NOT_STUDENT = tuple({os.path.dirname(os.path.dirname(__file__)) + os.sep,
                      os.path.dirname(importlib.util.find_spec("torch").origin) + os.sep}
                     | {sysconfig.get_paths()[k] + os.sep
                        for k in ("stdlib", "purelib", "platlib")})
_PASSED_ON = re.compile(r"device\s*=\s*device\b")

# A student's line: its number, its code, and what the number counts from (`cell_of`).
StudentLine = tuple[int | None, str, Message | str]


# The kit's own code by what it may do while student code runs: the harness (the runner, the
# jobs that drive student code) calls it; anything else of the kit's (the oracle, the variants,
# the baselines, the stand-ins outside the check they stand in for) answers nothing for a
# student.
_KIT = os.path.dirname(os.path.dirname(__file__)) + os.sep
_HARNESS = re.compile(r"runner/[^/]+\.py|assignments/[^/]+/jobs\.py|speed/timing\.py")
_LIBRARY = tuple(prefix for prefix in _NOT_STUDENT if prefix != _KIT)
_KINDS: dict[str, str] = {}


def _kind(filename: str) -> str:
    """"harness" or "answer" for the kit's files, "library" for torch's, Python's and installed
    packages', else "student"."""
    kind = _KINDS.get(filename)
    if kind is None:
        if filename.startswith(_KIT):
            inside = filename[len(_KIT):].replace(os.sep, "/")
            kind = "harness" if _HARNESS.fullmatch(inside) else "answer"
        elif filename.startswith(_LIBRARY) or filename.startswith("<"):
            kind = "library"
        else:
            kind = "student"
        _KINDS[filename] = kind
    return kind


def kit_answering(frame: FrameType | None, allowed: Collection[CodeType] = (),
                  seen: set[CodeType] | None = None) -> str | None:
    """The kit's function ("mha_kit.oracle.split_heads") that made a torch call, from its
    caller's `frame` out, for student code (or as its answer: `split_heads = oracle.split_heads`);
    None where the student's code, a library or the kit's harness made it, or code `allowed`
    (the stand-ins of the check that runs: the one found is added to `seen`). Code of the
    kit's reached through torch or Python (a `vmap`, a `map`) is found too."""
    found = None
    while frame is not None:
        if frame.f_code in allowed:
            if seen is not None:
                seen.add(frame.f_code)
            return None
        kind = _kind(frame.f_code.co_filename)
        if kind in ("student", "harness"):  # a kit function may be the answer itself
            return found
        if kind != "library" and found is None:
            module = frame.f_code.co_filename[len(_KIT) - len("mha_kit/"):-len(".py")]
            name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
            found = f"{module.replace(os.sep, '.')}.{name}"
        frame = frame.f_back
    return found


def is_students(filename: str) -> bool:
    """Code of the student's: a worker's "cell N", a kernel's cell, a file of theirs; not the
    kit's, torch's, an installed package's or Python's own (nor "<string>", "<frozen ...>")."""
    return not filename.startswith(_NOT_STUDENT) and not filename.startswith("<")


def error_text(err: BaseException) -> str:
    """str(err), or "" where a student's exception cannot say it."""
    try:
        return str(err)
    except BaseException:  # a student's exception whose __str__ fails, or returns no str
        return ""


def shown(text: str, keep: int = ERROR_KEEP) -> str:
    """A student's text as a message quotes it: its first line with any text in it, without a
    terminal's escape sequences, any space (a tab, an ideographic space) as a plain one, each
    other unprintable character written as its escape (`\\x08`), at most `keep` characters
    (CUT ends a text cut short, never inside an escape). Nothing in it can move
    the cursor, colour a terminal or start a line of its own."""
    line = next((part for part in _ESCAPES.sub("", text).split("\n") if part.strip()), "")
    return _bounded(line.strip(), keep)


def shown_printed(text: str, keep: int = PRINTED_KEEP) -> str:
    """What a student's code printed, as a message quotes it: as `shown`, but every line, each
    line break written as its escape (`\\n`), so that no printed line can pass for one of the
    grader's (a fake `total 100/100`)."""
    return _bounded(_ESCAPES.sub("", text).strip(), keep)


def _bounded(text: str, keep: int) -> str:
    pieces = ["\\n" if c == "\n" else " " if c.isspace()
              else c if c.isprintable() else c.encode("unicode_escape").decode()
              for c in text[:keep + 1]]  # one more: a cut is told
    if sum(map(len, pieces)) <= keep:
        return "".join(pieces)
    kept, size = [], len(CUT)
    for piece in pieces:  # whole characters and whole escapes only
        if size + len(piece) > keep:
            break
        kept.append(piece)
        size += len(piece)
    return "".join(kept) + CUT


def first_line(err: BaseException) -> str:
    """An error's text as a message quotes it (`shown`); "" if it has none."""
    return shown(error_text(err))


def type_name(value: object) -> str:
    """The name of a value's class (an exception's, a returned value's), as `shown`: read off
    the class itself, never through code of the student's."""
    return shown(_NAME.__get__(type(value)), NAME_KEEP)


def cell_of(code: CodeType) -> Message | str:
    """What a line number in `code` counts from, when it is not the file's first line: in a
    notebook's cell (the worker's "cell N", or a Jupyter kernel's), the cell that defines the
    function the line is in (`line.cell`). "" for a file, and outside a function."""
    if not (CELL_LABEL.fullmatch(code.co_filename) or _KERNEL_CELL.search(code.co_filename)):
        return ""
    name = getattr(code, "co_qualname", code.co_name).split(".<locals>")[0]
    named = all(part.isidentifier() for part in name.split("."))
    return msg("line.cell", function=name) if named else ""


def frame_line(frame: FrameType | None, passed_on: bool = False) -> StudentLine:
    """The line number, code and cell (`cell_of`) of the innermost frame from `frame` out that
    is the student's; (None, "", "") if none is.

    With `passed_on`, a line that passes a device on (`device=device`) is skipped for its
    caller's: a helper such as `causal_mask(n, device=device)` makes the tensor where it was
    told to, and the call that left out the device is the line to fix."""
    found: StudentLine = (None, "", "")
    while frame is not None:
        if is_students(frame.f_code.co_filename):
            code = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
            here = (frame.f_lineno, shown(code, CODE_KEEP), cell_of(frame.f_code))
            found = found if found[0] else here
            if not (passed_on and _PASSED_ON.search(code)):
                return here
        frame = frame.f_back
    return found


def traceback_line(err: BaseException, filename: str | None = None
                   ) -> tuple[int, CodeType] | None:
    """The line and code of the deepest frame of the student's own code in a traceback (only
    code compiled under `filename`, when given), or None."""
    found = None
    tb = err.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == filename if filename else is_students(code.co_filename):
            found = (tb.tb_lineno, code)
        tb = tb.tb_next
    return found


def at_line(err: BaseException, filename: str | None = None) -> Message | str:
    """", line N" (`runner.at_line`) for the student's line in a traceback, or ""."""
    found = traceback_line(err, filename)
    return msg("runner.at_line", line=found[0], cell=cell_of(found[1])) if found else ""


# Reading the kit's files. `kit_answering` knows the kit's code by the file it was compiled
# from: code of the kit's read at run time (its source, its bytecode) and run under another
# name would pass for the student's. So in the worker an audit hook refuses every opening of a
# file or folder inside the kit for reading while student code is on the stack, unless an
# import opens it (an import's code keeps the kit's own file name). Copying the kit's code
# into an answer by hand stays the student's own work; a write is left to the sandbox. Audit
# hooks are no sandbox: a read through C (ctypes), or through a folder's descriptor opened
# above the kit's, is not seen (docs/trusted-grading.md).
_IMPORT = "<frozen importlib._bootstrap"  # the frozen import machinery's file names
_KIT_RESOLVED = os.path.realpath(_KIT) + os.sep  # as a path resolves: no link in it
_REFUSED: list[str] = []  # the kit's files refused since `take_refused` last ran


class KitFileRead(PermissionError):
    """Student code opened one of the kit's files to read it (`filename`: "mha_kit/...")."""

    def __init__(self, path: str):
        super().__init__(errno.EACCES, "graded code may not read the grading kit's files", path)


def refuse_kit_reads() -> None:
    """From now on, in this process (the worker, before the student's file loads), student
    code that opens a path inside the kit to read it raises KitFileRead (`take_refused`)."""
    linecache.clearcache()  # lines of the kit's read before: `inspect.getsource` reads there
    sys.addaudithook(_on_audit)


def take_refused() -> str | None:
    """The first of the kit's files refused since the last call ("mha_kit/oracle.py"), or
    None; forgets them."""
    first = _REFUSED[0] if _REFUSED else None
    _REFUSED.clear()
    return first


@contextlib.contextmanager
def reads_told(name: str) -> Iterator[None]:
    """Around a call of `name`: a failure after a refused read of the kit's files is that read
    (`runner.kit_read`), whatever the student's code made of the PermissionError."""
    take_refused()
    try:
        yield
    except BaseException:
        read = take_refused()
        if read:
            raise StudentCodeError("forbidden", msg("runner.kit_read", name=name, path=read)
                                   ) from None
        raise


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open":  # every audit event comes here: the others at once
        return
    path, flags = args[0], args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    if isinstance(path, int) or flags & os.O_ACCMODE == os.O_WRONLY:  # no read: the OS decides
        return
    try:
        resolved = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):  # not a path: open() itself refuses it
        return
    if not (resolved + os.sep).startswith(_KIT_RESOLVED) or not _student_reading(
            sys._getframe(1)):
        return
    inside = os.path.relpath(resolved, os.path.dirname(os.path.dirname(_KIT_RESOLVED)))
    _REFUSED.append(inside)
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
