"""Loading a student's file: a .py module, or the code cells of a notebook.

A file is run chunk by chunk (a notebook's cells; a .py file whole, or block by block when it
does not parse), so one broken chunk costs only what it defines. Problems are recorded, never
fatal.
"""

from __future__ import annotations
import __future__

import ast
import json
import linecache
import symtable
import sys
import types
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contract import ENTRIES
from ..messages import Message, msg
from .kit_distribution import make_findable
from .student_code import at_line, first_line, take_refused, type_name

SUBMISSION_MODULE = "submission"
# Modules an assignment needs that the kit installs only as an extra (`pip install
# "mha-kit[triton]"`): a submission that imports one where it is missing is told how to
# install it, in one sentence.
OPTIONAL_EXTRAS = ("triton",)
# The compiler flags of `from __future__` imports: a chunk's carry over to the chunks after it,
# as a file's do and IPython's cells do, and the kit's own never reach student code.
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag


@dataclass
class LoadedSource:
    """A student's namespace and the problems met while running their file."""

    namespace: dict[str, Any]
    problems: list[Message]


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
# check needs: the grader's worker leaves it out, and so does the kernel under nbgrader's
# autograde (`trusted_autograde.StudentCells`, unless run_demos); Validate runs it.
SKIP_TAG = "mha-kit-skip"
# A cell with this tag only draws a picture of what earlier cells defined, and imports
# matplotlib itself. The grader's worker leaves such cells out (importing matplotlib and
# drawing were half a second of every check) unless another cell or a check may read what one
# binds (`pictures_needed`). nbgrader's kernel runs them, so the feedback shows the pictures.
PICTURE_TAG = "mha-kit-picture"
# Builtins that read globals by name: a cell that calls one may read anything.
_READS_ANY = frozenset({"globals", "vars", "locals", "eval", "exec"})


def has_tag(cell: Any, tag: str) -> bool:
    """Whether a cell has this tag (tags that are not a list count as none)."""
    tags = cell.get("metadata", {}).get("tags")
    return isinstance(tags, list) and tag in tags


def is_demo(cell: Any) -> bool:
    """A cell tagged SKIP_TAG."""
    return has_tag(cell, SKIP_TAG)


def is_test_cell(cell: Any) -> bool:
    """nbgrader's locked test cells: graded, not a solution. The grader runs its own checks."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def notebook_cells(path: str | Path) -> list[dict[str, Any]]:
    """A notebook's cells, as plain dicts whose `source` is one string.

    Format 4 (Jupyter's since 2015) is read as JSON: importing nbformat takes a second or more
    (its schema checkers), on the way of every `mha-kit check`. nbformat reads anything else:
    it converts older formats, and refuses what is not a notebook with its own error.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError:
        data = None
    if not (isinstance(data, dict) and data.get("nbformat") == 4
            and isinstance(data.get("cells"), list)
            and all(isinstance(cell, dict) for cell in data["cells"])):
        import nbformat

        data = nbformat.read(str(path), as_version=4)
    return [{**cell, "source": "".join(cell.get("source") or "")} for cell in data["cells"]]


def _bound_in_order(source: str) -> list[str]:
    """The names a cell's top-level statements bind, functions and classes first, then
    assigned names, then imports, each in the order they appear ([] if it does not parse)."""
    try:
        body = ast.parse(source).body
    except (SyntaxError, ValueError):
        return []
    ranked = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            ranked.append((0, node.name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            ranked += [(2, (alias.asname or alias.name).split(".")[0]) for alias in node.names]
        else:
            targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
            ranked += [(1, n.id) for t in targets if t is not None for n in ast.walk(t)
                       if isinstance(n, ast.Name)]
    return [name for _, name in sorted(ranked, key=lambda item: item[0])]


def cell_name(cell: dict[str, Any], cells: Collection[dict[str, Any]] = ()) -> Message:
    """How a message names a notebook's code cell (JupyterLab numbers none): by the name it
    defines (an entry of the contract first, `_bound_in_order`); else by its `In [n]`; else
    by its first line.
    Where another of `cells` defines that name too, its `In [n]` tells them apart."""
    source = "".join(cell.get("source") or "")
    bound = _bound_in_order(source)
    named = [name for name in bound if name in ENTRIES] or bound
    count = cell.get("execution_count")
    count = count if isinstance(count, int) and not isinstance(count, bool) else None
    if named and (count is None or not any(
            other is not cell and named[0] in _bound_in_order("".join(other.get("source") or ""))
            for other in cells if other.get("cell_type") == "code")):
        return msg("load.cell_defining", name=named[0])
    if count is not None:
        return msg("load.cell_ran", count=count)
    line = next((line.strip() for line in source.splitlines()
                 if line.strip() and not line.lstrip().startswith("#")), "")
    return msg("load.cell_starting", line=line[:40] + ("…" if len(line) > 40 else ""))


def cell_names(path: Path) -> dict[str, Message]:
    """`cell_name` of each code cell of a notebook, by its chunk label ("cell N")."""
    try:
        cells = notebook_cells(path)
    except Exception:  # an unreadable notebook's cells are named by their labels
        return {}
    return {f"cell {number}": cell_name(cell, cells)
            for number, cell in enumerate(cells, start=1) if cell.get("cell_type") == "code"}


def _notebook_chunks(path: Path) -> list[tuple[str, str]]:
    """(label, source) for each code cell that runs; the label is "cell N", its file name."""
    from IPython.core.inputtransformer2 import TransformerManager

    to_python = TransformerManager().transform_cell
    cells = []
    for number, cell in enumerate(notebook_cells(path), start=1):
        if (cell.get("cell_type") != "code" or is_test_cell(cell) or not cell["source"].strip()
                or is_demo(cell)):
            continue
        cells.append((f"cell {number}", to_python(cell["source"]), has_tag(cell, PICTURE_TAG)))
    keep = pictures_needed([(source, picture) for _, source, picture in cells])
    return [(label, source) for label, source, picture in cells if keep or not picture]


def pictures_needed(cells: list[tuple[str, bool]]) -> bool:
    """Whether the picture cells among (source, is picture) must run too: one of them binds a
    name of the contract, or a name that another cell reads without binding it (a student who
    uses `plt` in an answer, or fixes a function in a picture cell), or a cell reads globals
    by name. Otherwise leaving them out changes nothing a check sees."""
    if not any(picture for _, picture in cells):
        return False
    scopes = [(*_scopes(source), picture) for source, picture in cells]
    bound = set().union(*(own for own, _, picture in scopes if picture))
    if bound & ENTRIES.keys():
        return True
    return any((reads - own) & (bound | _READS_ANY) for own, reads, picture in scopes
               if not picture)


def _scopes(source: str) -> tuple[set[str], set[str]]:
    """The names a cell binds at its top level, and the globals it reads in any scope (none
    for a cell that does not compile: it runs nowhere)."""
    try:
        table = symtable.symtable(source, "cell", "exec")
    except (SyntaxError, ValueError):
        return set(), set()
    own = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    reads, tables = set(), [table]
    while tables:
        scope = tables.pop()
        reads |= {s.get_name() for s in scope.get_symbols() if s.is_global() and s.is_referenced()}
        tables += scope.get_children()
    return own, reads


def defined_names(path: Path) -> set[str]:
    """The names a .py file binds at its top level, in every block that parses (as it loads)."""
    return set().union(*(_scopes(source)[0] for _, source in _python_chunks(path)))


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


def load_source(path: str | Path, skip: Collection[str] = (),
                on_chunk: Callable[[str], None] | None = None) -> LoadedSource:
    """Run a .py file or the code cells of an .ipynb; failures are recorded, never fatal.
    The chunks labelled in `skip` (a notebook's "cell N") are left out; `on_chunk(label)` is
    told of each chunk before it runs."""
    path = Path(path)
    if path.suffix == ".ipynb":
        chunks = _notebook_chunks(path)
        make_findable()  # the setup cell asks for the kit's distribution
    elif path.suffix == ".py":
        chunks = _python_chunks(path)
    else:
        raise ValueError(f"{path}: expected a .py file or an .ipynb notebook")
    module = submission_module(path)
    namespace = module.__dict__
    problems: list[Message] = []
    if path.suffix == ".py":  # its lines, for quoting one in a message (`warned`)
        _remember(path.name, path.read_text(encoding="utf-8", errors="replace"))
    names = cell_names(path) if path.suffix == ".ipynb" else {}
    future = 0
    for label, source in chunks:
        if label in skip:
            continue
        if on_chunk is not None:
            on_chunk(label)
        if path.suffix == ".ipynb":
            _remember(label, source)
        where = names.get(label, label)
        try:
            code = compile(source, label, "exec", flags=future, dont_inherit=True)
        except SyntaxError as err:
            problems.append(msg("load.syntax", where=where, line=err.lineno, error=err.msg))
            continue
        except ValueError as err:
            problems.append(msg("load.not_compiled", where=where, error=str(err)))
            continue
        future |= code.co_flags & _FUTURE_FLAGS
        take_refused()
        try:
            exec(code, namespace)
        except BaseException as err:  # a failing cell is reported, never fatal
            text, line = first_line(err), at_line(err, label)
            extra, read = _optional_extra(err), take_refused()
            problems.append(msg("load.kit_read", where=where, line=line, path=read) if read else
                            msg("load.not_installed", where=where, line=line, module=extra,
                                extra=extra) if extra else
                            msg("load.raised", where=where, line=line, type=type_name(err),
                                error=text) if text else
                            msg("load.raised_bare", where=where, line=line, type=type_name(err)))
    namespace["get_ipython"] = _QuietIPython
    return LoadedSource(namespace, problems)


def _optional_extra(err: BaseException) -> str | None:
    """The kit's optional extra that installs the module `err` found missing, if any."""
    if type(err) is not ModuleNotFoundError or not isinstance(err.name, str):
        return None
    top = err.name.partition(".")[0]
    return top if top in OPTIONAL_EXTRAS else None


def submission_module(path: Path) -> types.ModuleType:
    """The module student code runs in, as a real one: in `sys.modules` under its `__name__`
    (dataclasses, pickling, `typing.get_type_hints` and `inspect` look a class's module up
    there), with `__file__` for a .py file, as an import of it has."""
    module = types.ModuleType(SUBMISSION_MODULE)
    if path.suffix == ".py":
        module.__file__ = str(path.resolve())
    module.get_ipython = _QuietIPython
    sys.modules[SUBMISSION_MODULE] = module
    return module


def _remember(name: str, text: str) -> None:
    """Source compiled under `name`, kept where `linecache` (and tracebacks) find its lines."""
    linecache.cache[name] = (len(text), None, text.splitlines(keepends=True), name)

