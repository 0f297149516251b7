"""Loading a student's file: a .py module, or the code cells of a notebook.

A file is run chunk by chunk (a notebook's cells; a .py file whole, or block by block when it
does not parse), so one broken chunk costs only what it defines. Problems are recorded, never
fatal.
"""

from __future__ import annotations

import ast
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUBMISSION_MODULE = "submission"


@dataclass
class LoadedSource:
    """A student's namespace and the problems met while running their file."""

    namespace: dict[str, Any]
    problems: list[str]


class _QuietIPython:
    """Stands in for `get_ipython()` so that magics and shell lines in a notebook do nothing."""

    def run_line_magic(self, *args: Any, **kwargs: Any) -> None:
        return None

    def run_cell_magic(self, *args: Any, **kwargs: Any) -> None:
        return None

    def system(self, *args: Any, **kwargs: Any) -> None:
        return None

    getoutput = system


# A notebook cell with this tag only shows something (a timing, a demo) and defines nothing a
# check needs: `mha-kit check` leaves it out. nbgrader, which runs the whole notebook, runs it.
SKIP_TAG = "mha-kit-skip"


def is_test_cell(cell: Any) -> bool:
    """nbgrader's locked test cells: graded, not a solution. The grader runs its own checks."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def _notebook_chunks(path: Path) -> list[tuple[str, str]]:
    import nbformat
    from IPython.core.inputtransformer2 import TransformerManager

    notebook = nbformat.read(str(path), as_version=4)
    to_python = TransformerManager().transform_cell
    chunks = []
    for number, cell in enumerate(notebook.cells, start=1):
        if (cell.cell_type != "code" or is_test_cell(cell) or not cell.source.strip()
                or SKIP_TAG in cell.get("metadata", {}).get("tags", ())):
            continue
        chunks.append((f"cell {number}", to_python(cell.source)))
    return chunks


_CONTINUATION = ("else", "elif", "except", "finally", ")", "]", "}", "#")


def _python_chunks(path: Path) -> list[tuple[str, str]]:
    """The whole file as one chunk; if it does not parse, its top-level blocks one by one.

    Blocks keep their line numbers (they are padded with blank lines), so a syntax error in
    one function is reported at its line and loses only what that block defines.
    """
    source = path.read_text(encoding="utf-8", errors="replace")
    try:
        ast.parse(source)
        return [(path.name, source)]
    except (SyntaxError, ValueError):  # ValueError: a null byte, before Python 3.12
        pass
    lines = source.splitlines(keepends=True)
    starts = [
        i
        for i, line in enumerate(lines)
        if line.strip() and not line[0].isspace() and not line.startswith(_CONTINUATION)
    ]
    # A decorator belongs to the block it decorates.
    starts = [s for s in starts if s == 0 or not lines[s - 1].startswith("@")]
    bounds = list(zip(starts, starts[1:] + [len(lines)]))
    return [(path.name, "\n" * a + "".join(lines[a:b])) for a, b in bounds]


def load_source(path: str | Path) -> LoadedSource:
    """Run a .py file or the code cells of an .ipynb; failures are recorded, never fatal."""
    path = Path(path)
    if path.suffix == ".ipynb":
        chunks = _notebook_chunks(path)
    elif path.suffix == ".py":
        chunks = _python_chunks(path)
    else:
        raise ValueError(f"{path}: expected a .py file or an .ipynb notebook")
    namespace: dict[str, Any] = {"__name__": SUBMISSION_MODULE, "get_ipython": _QuietIPython}
    problems = []
    for label, source in chunks:
        try:
            code = compile(source, label, "exec")
        except SyntaxError as err:
            problems.append(f"{label}: syntax error at line {err.lineno}: {err.msg}")
            continue
        except ValueError as err:
            problems.append(f"{label}: cannot be compiled: {err}")
            continue
        try:
            exec(code, namespace)
        except BaseException as err:  # a failing cell is reported, never fatal
            where = student_line(err, label)
            problems.append(f"{label}{where} raised {type(err).__name__}: {err}")
    namespace["get_ipython"] = _QuietIPython
    return LoadedSource(namespace, problems)


def student_line(err: BaseException, filename: str | None = None) -> str:
    """', line N' for the deepest frame of the student's own code in a traceback."""
    student_files = {filename} if filename else None
    line = None
    for frame in traceback.extract_tb(err.__traceback__):
        in_student = frame.filename in student_files if student_files else (
            frame.filename.startswith("cell ") or frame.filename.endswith(".py")
            and "site-packages" not in frame.filename and "/autograder/" not in frame.filename
        )
        if in_student:
            line = frame.lineno
    return f", line {line}" if line else ""

