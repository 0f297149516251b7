"""What every check talks to: the `Submission` protocol, and what crosses it.

A submission offers a few operations (call a function, build and run a module, run a kit job
beside the student's code) and turns anything that goes wrong in student code into a
`StudentCodeError` with a message (`messages.Message`). `InProcessSubmission`
(runner.inprocess) runs the code in this interpreter; `WorkerSubmission` (runner.worker)
runs the same operations in a separate process.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn

from ..messages import Message, msg


class StudentCodeError(Exception):
    """Student code could not produce a value. `kind` is a stable tag, `message` says what
    happened (a plain string is taken as it is); str() renders it in the current language."""

    def __init__(self, kind: str, message: Message | str, exc_type: str | None = None):
        message = message if isinstance(message, Message) else msg("text", text=message)
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.exc_type = exc_type

    def __str__(self) -> str:
        return str(self.message)


@dataclass
class Backward:
    """After the forward, backward of loss = Σ_i (output_i · cotangents[i]).sum() (an output whose
    cotangent is None is left out: it need not be differentiable): the
    gradients of the positional inputs named in `inputs` (position → name) and of the module
    parameters named in `params` (dotted). `outputs` names the outputs, for messages."""

    cotangents: tuple[torch.Tensor | None, ...]
    outputs: tuple[str, ...]
    inputs: dict[int, str] = field(default_factory=dict)
    params: tuple[str, ...] = ()


@dataclass
class Call:
    """What one call into student code gave back, and its tensor inputs afterwards: those
    passed by position, then those passed by keyword, each in the order given.

    After a `Backward`: `grads` by input or parameter name (None where one got no gradient),
    or `backward_failure`, why there are none (the outputs are not connected to the inputs,
    backward() failed); both None when the outputs do not have the shapes asked for.
    """

    value: Any
    inputs_after: tuple[torch.Tensor, ...] = ()
    grads: dict[str, torch.Tensor | None] | None = None
    backward_failure: Message | None = None


def copy_as_given(tensor: torch.Tensor) -> torch.Tensor:
    """A copy with the given tensor's strides, so that a case's non-contiguous input reaches
    the student's code non-contiguous (`clone()` makes a view with gaps contiguous). A tensor
    whose elements overlap (an expanded one) is copied contiguous, as `clone()` does."""
    if tensor.is_contiguous():
        return tensor.clone()
    copy = torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype,
                               device=tensor.device)
    try:
        return copy.copy_(tensor)
    except RuntimeError:  # overlapping memory: no copy can keep these strides
        return tensor.clone()


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
    backward: Backward | None = None  # forward with autograd on, then this backward


@dataclass(frozen=True)
class StandIns:
    """Pieces of the contract replaced by the kit's versions while one check runs: the names,
    and the module that holds them (an assignment's `standins`)."""

    module: str
    names: tuple[str, ...]


class Submission(Protocol):
    """Where student code runs, as the checks see it."""

    problems: list[Message]  # what went wrong while loading the file
    warnings: list[Message]  # what PyTorch warned about in the student's code, this check
    stand_ins_ran: set[str]  # the pieces of the last `stand_in` whose kit's versions computed

    def ensure_loaded(self) -> None:
        """Ready to answer at once (a worker may need starting: not part of any timing)."""

    def start_check(self, check_id: str) -> None:
        """A check begins (a worker resets its per-check time budget)."""

    def stand_in(self, stand_ins: StandIns | None) -> None:
        """From now on, and until the next call, the student's code that looks these names up
        finds the kit's versions (None: its own again)."""

    def own_code(self) -> AbstractContextManager[None]:
        """While it lasts, the student's own versions answer where the kit's stand in: what
        a failing piece gives, to compare with (the stand-ins come back after)."""

    def cpu_seconds(self) -> float | None:
        """CPU seconds the student's process has used so far, where readable."""

    def clean_worker(self) -> Submission | None:
        """Where kit jobs run that must not run beside student code (a speed check's
        baselines): a worker that loads none; None where there is no such place (in process)."""

    def call(self, name: str, *args: Any, **kwargs: Any) -> Call:
        """Call a contract function on copies of the inputs.

        Inputs on the `meta` device ask for a device check: a tensor the code makes on another
        device raises StudentCodeError kind "device"; outputs may then be meta tensors."""

    def call_backward(self, name: str, args: tuple, kwargs: dict, backward: Backward) -> Call:
        """`call`, with autograd on, then `backward`: the gradients come back in the Call."""

    def run_module(self, run: ModuleRun) -> Call:
        """Build a contract module, load the grader's weights, run forward once."""

    def check_constructor(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Build a module and throw it away (to see which error a bad config raises)."""

    def run_job(self, job: str, what: Message | str, **kwargs: Any) -> Any:
        """Run a kit job ("module:function", `runner.kit_names.is_job`) beside the student's
        code, with the submission as its first argument; its result. `what` names the student
        code it runs, for messages."""


class LocalSubmission(Submission, Protocol):
    """A submission whose code lives in this interpreter: kit jobs run here use these."""

    def construct(self, name: str, *args: Any, **kwargs: Any) -> nn.Module:
        """Build a contract module."""

    def guard(self, name: str, action: Callable[[], Any], *, watch: bool = True) -> Any:
        """Run student code; a failure (or a forbidden API, when watched) is a StudentCodeError."""
