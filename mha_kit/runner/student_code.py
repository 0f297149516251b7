"""Where the student's code is, for the messages that point at it: which files are the
student's, the line to name (from the stack or from a traceback), the cell that line counts
from in a notebook, and an error's text that a student's exception cannot break.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import re
import sysconfig
from collections.abc import Collection
from types import CodeType, FrameType

from ..messages import Message, msg

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
KIT_FOLDER = os.path.dirname(os.path.dirname(__file__)) + os.sep
_HARNESS = re.compile(r"runner/[^/]+\.py|assignments/[^/]+/jobs\.py|speed/timing\.py")
_LIBRARY = tuple(prefix for prefix in _NOT_STUDENT if prefix != KIT_FOLDER)
_KINDS: dict[str, str] = {}


def _kind(filename: str) -> str:
    """"harness" or "answer" for the kit's files, "library" for torch's, Python's and installed
    packages', else "student"."""
    kind = _KINDS.get(filename)
    if kind is None:
        if filename.startswith(KIT_FOLDER):
            inside = filename[len(KIT_FOLDER):].replace(os.sep, "/")
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
            module = frame.f_code.co_filename[len(KIT_FOLDER) - len("mha_kit/"):-len(".py")]
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
