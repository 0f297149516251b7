"""Student code in this interpreter: `InProcessSubmission`, for notebooks, the kit's tests
and the worker process (which wraps one).

Everything student code hands back passes `vetted`; every call into it passes `guard`, which
turns any failure, or a forbidden torch API, into a `StudentCodeError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import re
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from types import CodeType
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ..contract import ENTRIES, signature_of
from ..messages import Message, msg
from ..runtime import one_thread
from .backward import (
    Forward,
    InPlace,
    InPlaceRecorder,
    backward_failure,
    connect,
    differentiate,
    leaves_for,
    needs_no_grad,
    needs_no_grad_failure,
    parameters,
)
from .devices import DeviceWatch, on_meta
from .error_hints import hint_after
from .kit_names import is_job, stand_in_values
from .loading import load_source
from .made_in_forward import ParametersMade
from .policy import Refused, forbidden_functions
from .protocol import Backward, Call, ModuleRun, StandIns, StudentCodeError, copy_as_given
from .student_code import at_line, first_line, kit_answering, reads_told, type_name
from .warned import capture

# --------------------------------------------------------------------------- calling

_ABSENT = object()  # a name the student's namespace did not have before a stand-in


MAX_DEPTH = 3  # (out, weights) is depth 1; nothing in the contract nests deeper


def vetted(value: Any, name: str, depth: int = 0, meta: bool = False) -> Any:
    """Detached plain tensors in plain containers; anything else is the student's mistake.

    The grader applies it to everything student code hands back, in this process and again
    on the grader's side of the worker's pipe. `type()` is used throughout, never
    `isinstance`, which a crafted class can answer with its own code. Meta tensors (no data)
    pass only with `meta`: where the grader gave meta inputs, for the device check.
    """
    kind = type(value)
    if kind in (torch.Tensor, nn.Parameter):
        if value.layout != torch.strided or value.device.type == "meta" and not meta:
            raise StudentCodeError("bad_return", msg("runner.bad_layout", name=name,
                                                     layout=str(value.layout),
                                                     device=str(value.device)))
        return value.detach()  # a fresh plain tensor: no subclass, no attributes, no graph
    if issubclass(kind, torch.Tensor):
        raise StudentCodeError("bad_return", msg("runner.subclass", name=name,
                                                 type=type_name(value)))
    if kind in (tuple, list) and depth < MAX_DEPTH:
        return tuple(vetted(v, name, depth + 1, meta) for v in value)
    if value is None or kind in (bool, int, float, str):
        return value
    raise StudentCodeError("bad_return", msg("runner.too_deep", name=name) if kind in (tuple, list)
                           else msg("runner.bad_type", name=name, type=type_name(value)))


def _clone(values: tuple, copies: dict[int, torch.Tensor] | None = None) -> tuple:
    """Copies of the tensors among `values` (`copy_as_given`); a tensor passed twice, here or
    in the same call's `copies`, is copied once and passed twice: `mha(x, x, x)`."""
    copies = {} if copies is None else copies
    for value in values:
        if isinstance(value, torch.Tensor) and id(value) not in copies:
            copies[id(value)] = copy_as_given(value)
    return tuple(copies[id(v)] if isinstance(v, torch.Tensor) else v for v in values)


def _clone_call(args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """A call's arguments copied as `_clone` does, one copy per tensor across both."""
    copies: dict[int, torch.Tensor] = {}
    return _clone(args, copies), dict(zip(kwargs, _clone(tuple(kwargs.values()), copies)))


def _tensors(values: tuple) -> tuple[torch.Tensor, ...]:
    return tuple(v for v in values if isinstance(v, torch.Tensor))


def _with_kwargs_after(call: Call, kwargs: dict[str, Any]) -> Call:
    """`call` whose inputs afterwards go on with the tensors passed by keyword, in order."""
    return dataclasses.replace(call, inputs_after=call.inputs_after
                               + _tensors(tuple(kwargs.values())))


_ALLOCATION = re.compile(r"tried to allocate ([\d.]+) ?(bytes|[KMGT]iB)", re.IGNORECASE)
_UNITS = {"bytes": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _out_of_memory(name: str, err: BaseException, limit_gib: float | None) -> StudentCodeError:
    """torch's allocator failures and MemoryError, in one plain sentence."""
    found = _ALLOCATION.search(first_line(err))
    size: Message | str = ""
    if found:
        gib = float(found.group(1)) * _UNITS[found.group(2).lower()] / 2**30
        size = msg("runner.asked_for", gib=gib)
    limit = msg("runner.memory_limit", gib=float(limit_gib)) if limit_gib else ""
    return StudentCodeError("memory", msg("runner.out_of_memory", name=name, size=size,
                                          limit=limit), type_name(err))


def _describe_failure(name: str, err: BaseException,
                      memory_limit_gib: float | None = None) -> StudentCodeError:
    if isinstance(err, StudentCodeError):
        return err
    text, exc_type, line = first_line(err), type_name(err), at_line(err)
    hint = hint_after(text)
    error = text.rstrip(".!") if hint else text  # the hint's sentence ends torch's
    raised = (msg("runner.raised_text", name=name, type=exc_type, line=line, error=error) if text
              else msg("runner.raised", name=name, type=exc_type, line=line))
    if isinstance(err, Refused):
        return StudentCodeError("refused", msg(f"runner.refused_{err.what}", name=name,
                                               line=line), exc_type)
    if isinstance(err, NotImplementedError):  # a stub; `raised` is told where others run
        return StudentCodeError("not_implemented", msg("runner.not_implemented", name=name,
                                                       raised=raised), "NotImplementedError")
    if isinstance(err, MemoryError) or "can't allocate memory" in text or (
        "out of memory" in text.lower() and isinstance(err, RuntimeError)
    ):
        return _out_of_memory(name, err, memory_limit_gib)
    if hint:
        raised = msg(hint, raised=raised)
    return StudentCodeError("raised", raised, exc_type)



def _aten_name(func: Any) -> str | None:
    """"aten::<op>" for a `torch.ops` callable (an op or one of its overloads), else None."""
    name = getattr(func, "_qualified_op_name", None) or getattr(
        getattr(func, "_schema", None), "name", None)
    return name if type(name) is str else None


class _Noting:
    """What a watch notes: the name a student knows of the first forbidden call it sees."""

    def __init__(self, forbidden: dict[Callable | str, str]):
        super().__init__()
        self.forbidden = forbidden
        self.used: str | None = None


class _Watch(_Noting, TorchFunctionMode):
    """Active while student code runs: notes the first forbidden torch function it calls, by
    identity or, for `torch.ops`, by its ATen name; and the first of the kit's own functions
    that computes for it (`kit_answering`: the oracle's steps, a stand-in outside its check)."""

    def __init__(self, forbidden: dict[Callable | str, str], stand_ins: frozenset[CodeType],
                 kit_code: bool):
        super().__init__(forbidden)
        self.stand_ins = stand_ins
        self.kit_code = kit_code  # the kit's code may compute (the kit's own styles)
        self.kit: str | None = None
        self.seen: set[CodeType] = set()  # the stand-ins that made torch calls

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.used is None:
            with contextlib.suppress(TypeError):  # an unhashable func is never forbidden
                self.used = self.forbidden.get(func) or self.forbidden.get(_aten_name(func))
        if self.kit is None and (self.stand_ins or not self.kit_code):
            kit = kit_answering(sys._getframe(1), self.stand_ins, self.seen)
            self.kit = None if self.kit_code else kit
        return func(*args, **(kwargs or {}))


class _OpWatch(_Noting, TorchDispatchMode):
    """`_Watch` at the dispatcher: every ATen op student code runs, however it was reached
    (torch.ops, a C binding, TorchScript, with torch's function modes switched off)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.used is None:
            self.used = self.forbidden.get(_aten_name(func))
        return func(*args, **(kwargs or {}))


class InProcessSubmission:
    """A submission whose code lives in a namespace of this interpreter.

    `forbidden` maps torch functions a graded implementation may not call to their names
    (default: `policy.forbidden_functions()`, which instructors configure). `kit_code`: the
    kit's own code may compute for it (the kit grading its own style set, never a student).
    """

    def __init__(self, namespace: dict[str, Any], problems: list[Message] | None = None,
                 forbidden: dict[Callable | str, str] | None = None, kit_code: bool = False):
        self.namespace = namespace
        self.kit_code = kit_code
        self.problems = list(problems or [])
        self.forbidden = forbidden_functions() if forbidden is None else forbidden
        self.memory_limit_gib: float | None = None  # set by the worker, for messages
        self.warnings: list[Message] = []  # what PyTorch warned about, in the current check
        self._replaced: dict[str, Any] = {}  # the student's own values under stand-ins
        self._stand_in_code: dict[CodeType, str] = {}  # what the kit may run for it, by piece
        self.stand_ins_ran: set[str] = set()  # those of the last `stand_in` that computed

    @classmethod
    def from_path(cls, path: str | Path, forbidden: dict[Callable | str, str] | None = None,
                  skip: Collection[str] = (), on_chunk: Callable[[str], None] | None = None,
                  kit_code: bool = False) -> InProcessSubmission:
        """The file loaded here (`load_source`: `skip` and `on_chunk` are its)."""
        loaded = load_source(path, skip, on_chunk)
        return cls(loaded.namespace, loaded.problems, forbidden, kit_code)

    def ensure_loaded(self) -> None:
        """Ready to answer at once (the code is already here; a worker may need starting)."""

    def start_check(self, check_id: str) -> None:
        """A check begins. In-process there is no time limit to reset (a worker has one)."""
        self.warnings = []

    def stand_in(self, stand_ins: StandIns | None) -> None:
        """The kit's versions of `stand_ins` in the student's namespace, in place of theirs,
        which come back at the next call."""
        self._put_own()
        self._replaced, self._stand_in_code = {}, {}
        if stand_ins is not None:
            self.stand_ins_ran = set()
            for name, value in stand_in_values(stand_ins).items():
                self._replaced[name] = self.namespace.get(name, _ABSENT)
                self.namespace[name] = value
                self._stand_in_code |= dict.fromkeys(_code_of(value), name)

    @contextlib.contextmanager
    def own_code(self) -> Iterator[None]:
        """The student's own versions in the namespace while it lasts; the kit's back after."""
        kit = {name: self.namespace[name] for name in self._replaced}
        self._put_own()
        try:
            yield
        finally:
            self.namespace.update(kit)

    def _put_own(self) -> None:
        """The student's values back where the kit's stand in (a name they lacked, removed)."""
        for name, value in self._replaced.items():
            if value is _ABSENT:
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = value

    def cpu_seconds(self) -> None:
        """None: no cross-check of the reported times against this process's CPU time. In
        process (a notebook's kernel, `pytest mha_kit`) the grade is the student's own,
        untrusted by design, and this process's CPU time also counts the kernel's threads, a
        slow constructor and the first calls: the bound could only accuse correct code."""
        return None

    def clean_worker(self) -> None:
        """None: in process, kit jobs run here too (the grade is the student's own)."""
        return None

    def lookup(self, name: str) -> Any:
        if name not in self.namespace:
            which = "runner.missing_after_problems" if self.problems else "runner.missing"
            raise StudentCodeError("missing", msg(which, name=name, signature=signature_of(name)))
        return self.namespace[name]

    def guard(self, name: str, action: Callable[[], Any], *, watch: bool = True) -> Any:
        """Run student code; any failure, or a forbidden API, becomes a StudentCodeError, and
        what PyTorch warns about is noted (`warned`). `watch=False` skips the forbidden-API
        watch and the notes, which cost time on every torch call (timing runs)."""
        watchers = (_OpWatch(self.forbidden),
                    _Watch(self.forbidden, frozenset(self._stand_in_code), self.kit_code)
                    ) if watch else ()
        failure = None
        try:
            with reads_told(name), contextlib.ExitStack() as stack:
                if watch:
                    stack.enter_context(capture(self.warnings))
                for watcher in watchers:
                    stack.enter_context(watcher)
                value = action()
        except BaseException as err:  # SystemExit, KeyboardInterrupt and the like included
            failure = _describe_failure(name, err, self.memory_limit_gib)
        used = next((w.used for w in reversed(watchers) if w.used), None)
        if used:
            raise StudentCodeError("forbidden", msg("runner.forbidden", name=name, api=used))
        kit = watchers[1].kit if watchers else None
        if watchers:
            self.stand_ins_ran |= {self._stand_in_code[code] for code in watchers[1].seen}
        if kit:
            raise StudentCodeError("forbidden", msg("runner.kit_code", name=name, function=kit))
        if failure is not None:
            raise failure
        return value

    @one_thread()  # the checks' tensors are tiny: a pool of threads only costs time
    def call(self, name: str, *args: Any, **kwargs: Any) -> Call:
        """Call a contract function on copies of the inputs (on meta inputs: a device check,
        see `devices`)."""
        fn, (passed, kwargs) = self.lookup(name), _clone_call(args, kwargs)
        return _with_kwargs_after(self._forward(name, lambda a: fn(*a, **kwargs), passed,
                                                on_meta((args, kwargs))), kwargs)

    def call_backward(self, name: str, args: tuple, kwargs: dict, backward: Backward) -> Call:
        """`call` with autograd on, then `backward`: the gradients come back in the Call."""
        fn, (passed, kwargs) = self.lookup(name), _clone_call(args, kwargs)
        return _with_kwargs_after(self._backward(name, lambda a: fn(*a, **kwargs), passed,
                                                 backward, fn), kwargs)

    def _forward(self, name: str, forward: Forward, args: tuple, meta: bool) -> Call:
        """The student's code on `args`; on meta inputs (`meta`), under the device watch: a
        tensor it makes on another device is a StudentCodeError of kind "device"."""
        if not meta:
            return Call(vetted(self.guard(name, lambda: forward(args)), name), _tensors(args))
        watch, failure = DeviceWatch(), None
        try:
            value = self.guard(name, lambda: watch.run(lambda: forward(args)))
        except StudentCodeError as err:  # a device mix, or what meta tensors cannot do
            failure = err
        mixed = watch.failure(name)
        if mixed is not None:
            raise StudentCodeError("device", mixed)
        if failure is not None:
            raise failure
        return Call(vetted(value, name, meta=True), _tensors(args))

    def _backward(self, name: str, forward: Forward, args: tuple, backward: Backward,
                  source: Any, module: nn.Module | None = None) -> Call:
        """Forward with autograd on, then backward (see `runner.backward`)."""
        leaves, passed = leaves_for(args, backward)
        refused: list[BaseException] = []

        def run() -> Any:
            try:
                return forward(passed)
            except RuntimeError as err:
                if not needs_no_grad(err):
                    raise
                refused.append(err)

        with torch.enable_grad():
            value = self.guard(name, run)
        if refused:  # autograd refuses this forward: run it without, for the forward check
            passed = _clone(args)
            with torch.no_grad():
                value = self.guard(name, lambda: forward(passed))
            return Call(vetted(value, name), _tensors(passed),
                        backward_failure=needs_no_grad_failure(name, refused[0]))
        result, after = vetted(value, name), _tensors(passed)
        loss, failure = connect(name, value, backward)
        if loss is None:
            return Call(result, after, backward_failure=failure)
        wanted = {**leaves, **parameters(module, backward.params)}
        errors: list[BaseException] = []

        def run_backward() -> Any:
            try:
                return differentiate(loss, wanted)
            except Exception as err:  # told apart below; running out of memory is not
                if _describe_failure(name, err).kind == "memory":
                    raise
                errors.append(err)

        grads = self.guard(f"{name} (backward)", run_backward, watch=False)
        if errors:
            return Call(result, after, backward_failure=backward_failure(
                name, errors[0], self._in_place_ops(name, forward, args, backward), source))
        return Call(result, after, grads={k: vetted(g, name) for k, g in grads.items()})

    def _in_place_ops(self, name: str, forward: Forward, args: tuple,
                      backward: Backward) -> list[InPlace]:
        """The forward again, noting every in-place op on a tensor in the graph."""
        recorder = InPlaceRecorder()
        _, passed = leaves_for(args, backward)

        def run() -> Any:
            with recorder:
                return forward(passed)

        with contextlib.suppress(StudentCodeError), torch.enable_grad():
            self.guard(name, run, watch=False)
        return recorder.found

    def construct(self, name: str, *args: Any, **kwargs: Any) -> nn.Module:
        cls = self.lookup(name)
        module = self.guard(name, lambda: cls(*args, **kwargs))
        if not isinstance(module, nn.Module):
            raise StudentCodeError("bad_return", msg("runner.not_module", name=name))
        return module

    @one_thread()
    def check_constructor(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Build a module and throw it away: used to see which error a bad config raises."""
        self.construct(name, *args, **kwargs)

    @one_thread()
    def run_module(self, run: ModuleRun) -> Call:
        """Build, load the grader's weights, run forward once."""
        module = self.construct(run.class_name, *run.init_args, **run.init_kwargs)
        args, kwargs = _clone_call(run.forward_args, run.forward_kwargs)
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)

        def prepare() -> None:  # student code too: a module may override to() or train()
            with torch.no_grad():
                module.to(device=device, dtype=run.dtype)  # where the grader's inputs are
                load_weights(module, run.class_name, run.params)
            module.train(run.training)

        self.guard(run.class_name, prepare)
        if run.seed is not None:
            torch.manual_seed(run.seed)
        name = f"{run.class_name}.forward"
        failure: StudentCodeError | None = None
        with ParametersMade() as made:
            try:
                if run.backward is not None:
                    call = self._backward(name, lambda a: module(*a, **kwargs), args,
                                          run.backward, type(module), module)
                else:
                    with torch.no_grad():
                        call = self._forward(name, lambda a: module(*a, **kwargs), args,
                                             on_meta(args))
            except StudentCodeError as err:
                failure = err
        made_there = made.message(name)
        if made_there is not None:  # the cause of whatever else went wrong
            raise StudentCodeError("bad_module", made_there)
        if failure is not None:
            raise failure
        return _with_kwargs_after(call, kwargs)

    def run_job(self, job: str, what: Message | str, **kwargs: Any) -> Any:
        """Run the kit function `job` (a "module:function" of an assignment's `jobs` module)
        with this submission as its first argument."""
        if not is_job(job):
            raise ValueError(f"not a kit job: {job!r}")
        module_name, _, function = job.partition(":")
        return getattr(importlib.import_module(module_name), function)(self, **kwargs)


def _code_of(value: Any) -> list[CodeType]:
    """The code a stand-in runs first: a function's, or a class's own methods'."""
    if isinstance(value, type):
        return [f.__code__ for f in vars(value).values() if hasattr(f, "__code__")]
    return [value.__code__] if hasattr(value, "__code__") else []


def load_weights(module: nn.Module, owner: str, params: dict[str, torch.Tensor | None]) -> None:
    """Copy the grader's weights into a student module by dotted name, checking shapes."""
    for dotted, value in params.items():
        holder_name, _, attr = dotted.rpartition(".")
        try:
            holder = module.get_submodule(holder_name) if holder_name else module
        except AttributeError:
            raise StudentCodeError("bad_module", msg(
                "runner.no_submodule", owner=owner, holder=holder_name,
                signature=ENTRIES[owner].signature)) from None
        current = getattr(holder, attr, None)
        if value is None:
            if current is not None:
                raise StudentCodeError("bad_module", msg("runner.not_none", owner=owner,
                                                         param=dotted))
            continue
        if not isinstance(current, torch.Tensor):
            raise StudentCodeError("bad_module", msg("runner.no_param", owner=owner, param=dotted,
                                                     shape=tuple(value.shape)))
        if tuple(current.shape) != tuple(value.shape):
            raise StudentCodeError("bad_module", msg("runner.param_shape", owner=owner,
                                                     param=dotted, got=tuple(current.shape),
                                                     expected=tuple(value.shape)))
        current.copy_(value.to(current.device))

