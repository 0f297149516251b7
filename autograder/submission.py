"""Loading a student's file and calling into it.

A `Submission` is what every check talks to. It offers three operations (call a function,
build and run a module, time the fused module) and turns anything that goes wrong in
student code into a `StudentCodeError` with a plain message. `InProcessSubmission` runs
the code in this interpreter (notebooks, the kit's tests); `autograder.worker` runs the
very same operations in a separate process for `mha-kit check`.
"""

from __future__ import annotations

import ast
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from .contract import ENTRIES, signature_of

SUBMISSION_MODULE = "submission"


class StudentCodeError(Exception):
    """Student code could not produce a value. `kind` is a stable tag; str() is the message."""

    def __init__(self, kind: str, message: str, exc_type: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.exc_type = exc_type


@dataclass
class Call:
    """What one call into student code gave back, and its tensor inputs afterwards."""

    value: Any
    inputs_after: tuple[torch.Tensor, ...] = ()


@dataclass
class ModuleRun:
    """Build a student module, load the grader's weights into it and run forward once.

    `params` maps dotted parameter names to values; a value of None means the module must
    have no such parameter (for example `q_proj.bias` when bias=False).
    """

    class_name: str
    init_args: tuple = ()
    init_kwargs: dict = field(default_factory=dict)
    params: dict[str, torch.Tensor | None] = field(default_factory=dict)
    forward_args: tuple = ()
    forward_kwargs: dict = field(default_factory=dict)
    dtype: torch.dtype = torch.float64
    training: bool = False
    seed: int | None = None


# --------------------------------------------------------------------------- loading


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


def _is_test_cell(cell: Any) -> bool:
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
        if cell.cell_type != "code" or _is_test_cell(cell) or not cell.source.strip():
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
    except SyntaxError:
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
        try:
            exec(code, namespace)
        except BaseException as err:  # a failing cell is reported, never fatal
            where = _student_line(err, label)
            problems.append(f"{label}{where} raised {type(err).__name__}: {err}")
    namespace["get_ipython"] = _QuietIPython
    return LoadedSource(namespace, problems)


def _student_line(err: BaseException, filename: str | None = None) -> str:
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


# --------------------------------------------------------------------------- calling


def _plain(value: Any, name: str) -> Any:
    """Detached plain tensors in plain containers; anything else is the student's mistake."""
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, nn.Parameter):
            raise StudentCodeError(
                "bad_return",
                f"`{name}` returned a {type(value).__name__} (a tensor subclass); "
                "return a plain torch.Tensor",
            )
        return value.detach()
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v, name) for v in value)
    if value is None or type(value) in (bool, int, float, str):
        return value
    raise StudentCodeError(
        "bad_return", f"`{name}` returned a {type(value).__name__}; return a torch.Tensor"
    )


def _clone(values: tuple) -> tuple:
    return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in values)


def _tensors(values: tuple) -> tuple[torch.Tensor, ...]:
    return tuple(v for v in values if isinstance(v, torch.Tensor))


def _describe_failure(name: str, err: BaseException) -> StudentCodeError:
    if isinstance(err, StudentCodeError):
        return err
    if isinstance(err, NotImplementedError):
        return StudentCodeError(
            "not_implemented", f"`{name}` is not implemented yet", "NotImplementedError"
        )
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return StudentCodeError(
        "raised",
        f"`{name}` raised {type(err).__name__}{_student_line(err)}: {text}".rstrip(": "),
        type(err).__name__,
    )


class InProcessSubmission:
    """A submission whose code lives in a namespace of this interpreter."""

    def __init__(self, namespace: dict[str, Any], problems: list[str] | None = None):
        self.namespace = namespace
        self.problems = list(problems or [])

    @classmethod
    def from_path(cls, path: str | Path) -> InProcessSubmission:
        loaded = load_source(path)
        return cls(loaded.namespace, loaded.problems)

    def lookup(self, name: str) -> Any:
        if name not in self.namespace:
            after = " (and your file had problems loading: see below)" if self.problems else ""
            raise StudentCodeError(
                "missing", f"`{name}` is not defined: expected {signature_of(name)}{after}"
            )
        return self.namespace[name]

    def guard(self, name: str, action: Callable[[], Any]) -> Any:
        """Run student code; any failure becomes a StudentCodeError naming `name`."""
        try:
            return action()
        except (Exception, SystemExit, KeyboardInterrupt) as err:
            raise _describe_failure(name, err) from None

    def call(self, name: str, *args: Any, **kwargs: Any) -> Call:
        """Call a contract function on copies of the inputs."""
        fn = self.lookup(name)
        args = _clone(args)
        value = self.guard(name, lambda: fn(*args, **kwargs))
        return Call(_plain(value, name), _tensors(args))

    def construct(self, name: str, *args: Any, **kwargs: Any) -> nn.Module:
        cls = self.lookup(name)
        module = self.guard(name, lambda: cls(*args, **kwargs))
        if not isinstance(module, nn.Module):
            raise StudentCodeError("bad_return", f"`{name}(...)` is not an nn.Module")
        return module

    def check_constructor(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Build a module and throw it away: used to see which error a bad config raises."""
        self.construct(name, *args, **kwargs)

    def run_module(self, run: ModuleRun) -> Call:
        """Build, load the grader's weights, run forward once."""
        module = self.construct(run.class_name, *run.init_args, **run.init_kwargs)
        with torch.no_grad():
            module.to(run.dtype)
            load_weights(module, run.class_name, run.params)
        module.train(run.training)
        args = _clone(run.forward_args)
        if run.seed is not None:
            torch.manual_seed(run.seed)
        with torch.no_grad():
            value = self.guard(
                f"{run.class_name}.forward", lambda: module(*args, **run.forward_kwargs)
            )
        return Call(_plain(value, f"{run.class_name}.forward"), _tensors(args))

    def time_speed(self, device: str, seed: int) -> dict[str, Any]:
        """Time the student's fused module against the kit's baselines (see `timing`)."""
        from .timing import measure_speed

        return measure_speed(self, device, seed)


def load_weights(module: nn.Module, owner: str, params: dict[str, torch.Tensor | None]) -> None:
    """Copy the grader's weights into a student module by dotted name, checking shapes."""
    for dotted, value in params.items():
        holder_name, _, attr = dotted.rpartition(".")
        try:
            holder = module.get_submodule(holder_name) if holder_name else module
        except AttributeError:
            raise StudentCodeError(
                "bad_module",
                f"`{owner}` has no submodule `{holder_name}`: the grader reads and writes "
                f"weights through it ({ENTRIES[owner].signature})",
            ) from None
        current = getattr(holder, attr, None)
        if value is None:
            if current is not None:
                raise StudentCodeError(
                    "bad_module", f"`{owner}.{dotted}` should be None when bias=False"
                )
            continue
        if not isinstance(current, torch.Tensor):
            raise StudentCodeError(
                "bad_module", f"`{owner}.{dotted}` is missing: expected a parameter of shape "
                f"{tuple(value.shape)}"
            )
        if tuple(current.shape) != tuple(value.shape):
            raise StudentCodeError(
                "bad_module",
                f"`{owner}.{dotted}` has shape {tuple(current.shape)}, expected "
                f"{tuple(value.shape)}",
            )
        current.copy_(value.to(current.device))

