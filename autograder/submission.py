"""Loading a student's file and calling into it.

A `Submission` is what every check talks to. It offers three operations (call a function,
build and run a module, time the fused module) and turns anything that goes wrong in
student code into a `StudentCodeError` with a plain message. `InProcessSubmission` runs
the code in this interpreter (notebooks, the kit's tests); `autograder.worker` runs the
very same operations in a separate process for `mha-kit check`.
"""

from __future__ import annotations

import ast
import contextlib
import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .contract import ENTRIES, signature_of
from .policy import forbidden_functions

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


# A notebook cell with this tag only shows something (a timing, a demo) and defines nothing a
# check needs: `mha-kit check` leaves it out. nbgrader, which runs the whole notebook, runs it.
SKIP_TAG = "mha-kit-skip"


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
        if (cell.cell_type != "code" or _is_test_cell(cell) or not cell.source.strip()
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


MAX_DEPTH = 3  # (out, weights) is depth 1; nothing in the contract nests deeper
MESSAGE_KEEP = 300  # characters of an exception's text kept in a message


def _plain(value: Any, name: str, depth: int = 0) -> Any:
    """Detached plain tensors in plain containers; anything else is the student's mistake.

    The grader applies it to everything student code hands back, in this process and again
    on the grader's side of the worker's pipe. `type()` is used throughout, never
    `isinstance`, which a crafted class can answer with its own code.
    """
    kind = type(value)
    if kind in (torch.Tensor, nn.Parameter):
        if value.layout != torch.strided or value.device.type == "meta":
            raise StudentCodeError("bad_return", f"`{name}` returned a {value.layout} tensor on "
                                   f"{value.device}; return an ordinary dense tensor")
        return value.detach()  # a fresh plain tensor: no subclass, no attributes, no graph
    if issubclass(kind, torch.Tensor):
        raise StudentCodeError("bad_return", f"`{name}` returned a tensor subclass, "
                               f"{kind.__name__}; return a plain torch.Tensor")
    if kind in (tuple, list) and depth < MAX_DEPTH:
        return tuple(_plain(v, name, depth + 1) for v in value)
    if value is None or kind in (bool, int, float, str):
        return value
    what = ("lists or tuples nested too deeply" if kind in (tuple, list)
            else f"a value of type {kind.__name__}")
    raise StudentCodeError("bad_return", f"`{name}` returned {what}; return a torch.Tensor")


def _clone(values: tuple) -> tuple:
    return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in values)


def _tensors(values: tuple) -> tuple[torch.Tensor, ...]:
    return tuple(v for v in values if isinstance(v, torch.Tensor))


def _first_line(err: BaseException) -> str:
    try:
        text = str(err).strip()
    except BaseException:  # a student's exception whose __str__ fails
        return ""
    return text.splitlines()[0][:MESSAGE_KEEP] if text else ""


_ALLOCATION = re.compile(r"tried to allocate ([\d.]+) ?(bytes|[KMGT]iB)", re.IGNORECASE)
_UNITS = {"bytes": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _out_of_memory(name: str, err: BaseException, limit_gib: float | None) -> StudentCodeError:
    """torch's allocator failures and MemoryError, in one plain sentence."""
    found = _ALLOCATION.search(_first_line(err))
    size = ""
    if found:
        gib = float(found.group(1)) * _UNITS[found.group(2).lower()] / 2**30
        size = f" (it asked for {gib:,.1f} GiB at once)"
    limit = f"; the grader allows {limit_gib:g} GiB" if limit_gib else ""
    return StudentCodeError(
        "memory", f"`{name}` ran out of memory{size}{limit}: tensors the size of the inputs "
        "are all this exercise needs", type(err).__name__,
    )


def _describe_failure(name: str, err: BaseException,
                      memory_limit_gib: float | None = None) -> StudentCodeError:
    if isinstance(err, StudentCodeError):
        return err
    if isinstance(err, NotImplementedError):
        return StudentCodeError(
            "not_implemented", f"`{name}` is not implemented yet", "NotImplementedError"
        )
    text = _first_line(err)
    if isinstance(err, MemoryError) or "can't allocate memory" in text or (
        "out of memory" in text.lower() and isinstance(err, RuntimeError)
    ):
        return _out_of_memory(name, err, memory_limit_gib)
    return StudentCodeError(
        "raised",
        f"`{name}` raised {type(err).__name__}{_student_line(err)}: {text}".rstrip(": "),
        type(err).__name__,
    )


class _Watch(TorchFunctionMode):
    """Active while student code runs: notes the first forbidden torch function it calls."""

    def __init__(self, forbidden: dict[Callable, str]):
        super().__init__()
        self.forbidden = forbidden
        self.used: str | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.used is None:
            with contextlib.suppress(TypeError):  # an unhashable func is never forbidden
                self.used = self.forbidden.get(func)
        return func(*args, **(kwargs or {}))


class InProcessSubmission:
    """A submission whose code lives in a namespace of this interpreter.

    `forbidden` maps torch functions a graded implementation may not call to their names
    (default: `policy.forbidden_functions()`, which instructors configure).
    """

    def __init__(self, namespace: dict[str, Any], problems: list[str] | None = None,
                 forbidden: dict[Callable, str] | None = None):
        self.namespace = namespace
        self.problems = list(problems or [])
        self.forbidden = forbidden_functions() if forbidden is None else forbidden
        self.memory_limit_gib: float | None = None  # set by the worker, for messages
        self.watching = True

    @classmethod
    def from_path(cls, path: str | Path, forbidden: dict[Callable, str] | None = None
                  ) -> InProcessSubmission:
        loaded = load_source(path)
        return cls(loaded.namespace, loaded.problems, forbidden)

    def ensure_loaded(self) -> None:
        """Ready to answer at once (the code is already here; a worker may need starting)."""

    def start_check(self, check_id: str) -> None:
        """A check begins. In-process there is no time limit to reset (a worker has one)."""

    def cpu_seconds(self) -> float | None:
        """CPU time the student's process has used so far: this one."""
        return time.process_time()

    def lookup(self, name: str) -> Any:
        if name not in self.namespace:
            after = " (and your file had problems loading: see below)" if self.problems else ""
            raise StudentCodeError(
                "missing", f"`{name}` is not defined: expected {signature_of(name)}{after}"
            )
        return self.namespace[name]

    def guard(self, name: str, action: Callable[[], Any]) -> Any:
        """Run student code; any failure, or a forbidden API, becomes a StudentCodeError."""
        watch = _Watch(self.forbidden) if self.forbidden and self.watching else None
        failure = None
        try:
            with watch or contextlib.nullcontext():
                value = action()
        except BaseException as err:  # SystemExit, KeyboardInterrupt and the like included
            failure = _describe_failure(name, err, self.memory_limit_gib)
        if watch is not None and watch.used:
            raise StudentCodeError(
                "forbidden", f"`{name}` uses {watch.used}, which this exercise asks you to write "
                "yourself: graded code may not call it",
            )
        if failure is not None:
            raise failure
        return value

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
        args = _clone(run.forward_args)
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)

        def prepare() -> None:  # student code too: a module may override to() or train()
            with torch.no_grad():
                module.to(device=device, dtype=run.dtype)  # where the grader's inputs are
                load_weights(module, run.class_name, run.params)
            module.train(run.training)

        self.guard(run.class_name, prepare)
        if run.seed is not None:
            torch.manual_seed(run.seed)
        with torch.no_grad():
            value = self.guard(
                f"{run.class_name}.forward", lambda: module(*args, **run.forward_kwargs)
            )
        return Call(_plain(value, f"{run.class_name}.forward"), _tensors(args))

    def time_speed(self, device: str, seed: int) -> dict[str, Any]:
        """Time the student's fused module against the kit's baselines (see `timing`).

        The forbidden-API watch costs time on every torch call, so it is off while timing;
        one watched forward of the timed shape follows instead.
        """
        from .timing import config_for, measure_speed, speed_input

        self.watching = False
        try:
            measurement = measure_speed(self, device, seed)
        finally:
            self.watching = True
        cfg = config_for(device)
        x = speed_input(cfg, seed, 0).to(device)  # (B, T, E)
        self.run_module(ModuleRun("MultiHeadAttention", (cfg.E, cfg.H), forward_args=(x,),
                                  forward_kwargs={"is_causal": True, "need_weights": False},
                                  dtype=torch.float32))
        return measurement


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

