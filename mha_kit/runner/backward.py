"""Forward and backward through student code, for the gradient checks.

`InProcessSubmission` runs a call or a module with a `Backward` request through these
helpers. The inputs named in it become leaves that require grad; the student's code gets a
copy of each that is not a leaf, so that changing an input in place is seen afterwards as it
always was. Forward runs with autograd on, then loss = Σ (output_i · cotangent_i).sum() goes
backward, and the gradients of those inputs and of the module's parameters come back, None
where one gets none.

When there can be no gradients a message says why, naming the cause: an output not connected
to the graph (`.detach()`, `.data`, `torch.no_grad()`, `.numpy()`, `torch.tensor(x)`), a
forward that works only with autograd off, or backward() failing because a tensor it needs
was changed in place, with the op and its line when they can be found: the forward is run
again while every in-place op is noted, and matched with the tensor PyTorch's error names;
failing that, the source of the student's function or class is searched for in-place ops.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ..messages import Message, msg
from .protocol import Backward, copy_as_given
from .student_code import (
    CODE_KEEP,
    cell_of,
    error_text,
    first_line,
    frame_line,
    shown,
    type_name,
)

Tensor = torch.Tensor

# A forward that autograd refuses outright, where it runs with autograd off.
_NEEDS_NO_GRAD = re.compile(r"requires grad|require grad|requires_grad", re.IGNORECASE)
_IN_PLACE_ERROR = "modified by an inplace operation"
# autograd's check of a custom Function's backward: one gradient per argument of forward
_GRADIENT_COUNT = re.compile(r"incorrect number of gradients \(expected (\d+), got (\d+)\)")
# "[torch.DoubleTensor [2, 3, 5, 7]], which is output 0 of SoftmaxBackward0, is at version 1"
_SAVED = re.compile(r"\[torch\.\w+ \[([\d, ]*)\]\](?:, which is output \d+ of (\w+))?")
# Tensor methods whose name ends in _ but change nothing a backward pass saved.
_NOT_IN_PLACE = frozenset({"requires_grad_", "share_memory_", "retain_grad_"})
_AUGMENTED = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@",
              ast.Pow: "**", ast.FloorDiv: "//", ast.BitOr: "|", ast.BitAnd: "&"}


def leaves_for(args: tuple, backward: Backward) -> tuple[dict[str, Tensor], tuple]:
    """A leaf requiring grad for each input name in `backward`, and the arguments to pass: a
    non-leaf copy of its leaf for each input named (in place of the input), the other
    arguments as they are. Positions with one name share one leaf and one copy: self-
    attention's query, key and value are one tensor (`mha(x, x, x)`), whose gradient sums the
    three paths, as in real use."""
    leaves: dict[str, Tensor] = {}
    for i, name in backward.inputs.items():
        if name not in leaves and i < len(args) and isinstance(args[i], Tensor):
            leaves[name] = copy_as_given(args[i].detach()).requires_grad_()
    copies = {name: copy_as_given(leaf) for name, leaf in leaves.items()}
    passed = tuple(copies[backward.inputs[i]] if backward.inputs.get(i) in leaves else a
                   for i, a in enumerate(args))
    return leaves, passed


def needs_no_grad(err: BaseException) -> bool:
    """A forward error that autograd causes (`.numpy()` on a tensor that requires grad, an
    in-place change of a leaf): the same code runs with autograd off."""
    return isinstance(err, RuntimeError) and bool(_NEEDS_NO_GRAD.search(error_text(err)))


def needs_no_grad_failure(name: str, err: BaseException) -> Message:
    return msg("grad.needs_no_grad", name=name, error=first_line(err) or type_name(err))


def connect(name: str, value: Any, backward: Backward) -> tuple[Tensor | None, Message | None]:
    """The loss Σ (output_i · cotangent_i).sum() of the student's outputs, or why there is
    none: (None, a message) when an output is not connected to the graph, (None, None) when
    the outputs are not what was asked for (the forward comparison says what is wrong)."""
    outputs = value if type(value) is tuple else (value,)
    if len(outputs) != len(backward.cotangents):
        return None, None
    taken = [(o, c, n) for o, c, n in zip(outputs, backward.cotangents, backward.outputs)
             if c is not None]
    if any(type(o) not in (Tensor, nn.Parameter) or o.shape != c.shape or o.dtype != c.dtype
           or o.device != c.device for o, c, _ in taken):
        return None, None
    detached = [n for o, _, n in taken if not o.requires_grad]
    if detached:
        return None, (msg("grad.detached", name=name) if len(outputs) == 1 else
                      msg("grad.detached_part", name=name, output=detached[0]))
    return sum((o * c).sum() for o, c, _ in taken), None


def parameters(module: nn.Module | None, names: tuple[str, ...]) -> dict[str, Tensor | None]:
    """The module's tensors by dotted name, as the grader loaded them (None: not a tensor)."""
    found: dict[str, Tensor | None] = {}
    for dotted in names:
        holder_name, _, attr = dotted.rpartition(".")
        try:
            holder = module.get_submodule(holder_name) if holder_name else module
        except AttributeError:
            holder = None
        value = getattr(holder, attr, None)
        found[dotted] = value if isinstance(value, Tensor) else None
    return found


def differentiate(loss: Tensor, wanted: dict[str, Tensor | None]) -> dict[str, Tensor | None]:
    """The gradient of `loss` for each tensor in `wanted`; None for a tensor that does not
    require grad (a weight kept out of autograd) or that the loss does not reach."""
    targets = {k: v for k, v in wanted.items() if v is not None and v.requires_grad}
    grads = torch.autograd.grad(loss, list(targets.values()), allow_unused=True) if targets else ()
    found = dict(zip(targets, grads))
    return {k: found.get(k) for k in wanted}


def backward_failure(name: str, err: BaseException, found: list[InPlace],
                     source: Any) -> Message:
    """Why backward() failed, for the student: the in-place op that broke it, if found."""
    text = first_line(err) or type_name(err)
    count = _GRADIENT_COUNT.search(text)
    if count:
        return msg("grad.gradient_count", name=name, type=type_name(err), error=text,
                   expected=int(count.group(1)), got=int(count.group(2)))
    if _IN_PLACE_ERROR not in text:
        return msg("grad.raised", name=name, type=type_name(err), error=text)
    culprit = _match(text, found) or next(iter(in_source(source)), None)
    if culprit is None:
        return msg("grad.inplace_unknown", name=name, error=_short(text))
    where = msg("grad.at_line", line=culprit.line, cell=culprit.cell) if culprit.line else ""
    which = "grad.inplace_clone" if culprit.fix.endswith(".clone()") else "grad.inplace"
    return msg(which, name=name, code=culprit.code, where=where, fix=culprit.fix,
               error=_short(text))


# --------------------------------------------------------------------------- in-place ops

class InPlace:
    """An in-place op of the student's: its code and line, a fix, and (when seen running) the
    shape and the grad_fn of the tensor it changed."""

    def __init__(self, code: str, line: int | None, shape: tuple | None = None,
                 grad_fn: str | None = None, *, cell: Message | str = ""):
        self.code, self.line, self.cell = code, line, cell  # cell: `student_code.cell_of`
        self.shape, self.grad_fn = shape, grad_fn
        self.fix = out_of_place(code)


def is_in_place(func: Any, kwargs: dict | None) -> bool:
    name = getattr(func, "__name__", "")
    return (name.endswith("_") and not name.startswith("_") and name not in _NOT_IN_PLACE
            or name == "__setitem__" or bool(kwargs and kwargs.get("out") is not None))


class InPlaceRecorder(TorchFunctionMode):
    """Notes every in-place op on a tensor that takes part in autograd, as it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[InPlace] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        target = args[0] if args else None
        if (len(self.found) < 20 and is_in_place(func, kwargs) and isinstance(target, Tensor)
                and target.requires_grad):
            line, code, cell = frame_line(sys._getframe(1))
            if code:
                grad_fn = type(target.grad_fn).__name__ if target.grad_fn is not None else None
                self.found.append(InPlace(code, line, tuple(target.shape), grad_fn, cell=cell))
        return func(*args, **(kwargs or {}))


def _match(text: str, found: list[InPlace]) -> InPlace | None:
    """The recorded op that changed the tensor PyTorch's error names: its shape and the
    backward node that saved it; else the first with its shape; else the first of all."""
    saved = _SAVED.search(text)
    if saved:
        shape = tuple(int(n) for n in saved[1].split(",") if n.strip())
        for wanted in ((shape, _node(saved[2])), (shape, None)):
            for op in found:
                if op.shape == wanted[0] and (wanted[1] is None or _node(op.grad_fn) == wanted[1]):
                    return op
    return found[0] if found else None


def _node(name: str | None) -> str | None:
    """A backward node's name as errors give it: SoftmaxBackward0 and Softmax are one."""
    return None if name is None else re.sub(r"Backward\d*$", "", name)


def in_source(source: Any) -> list[InPlace]:
    """In-place ops in the source of a function or a class (its methods), in order."""
    functions = ([source] if inspect.isfunction(source) else
                 [v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
                  for v in vars(source).values()] if inspect.isclass(source) else [])
    found = []
    for fn in functions:
        if not inspect.isfunction(fn):
            continue
        try:
            lines, start = inspect.getsourcelines(fn)
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if _in_place_node(node):
                line = start + node.lineno - 1
                found.append(InPlace(shown(lines[node.lineno - 1], CODE_KEEP), line,
                                     cell=cell_of(fn.__code__)))
    return sorted(found, key=lambda op: op.line or 0)


def _in_place_node(node: ast.AST) -> bool:
    if isinstance(node, ast.AugAssign):
        return True
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Subscript) for t in node.targets)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr.endswith("_") and not node.func.attr.startswith("_")
            and node.func.attr not in _NOT_IN_PLACE)


def out_of_place(code: str) -> str:
    """The statement `code` written out of place, as a suggestion: `x.op_(a)` becomes
    `x = x.op(a)`, `x += y` becomes `x = x + y`. A change through an index (`x[m] = v`,
    `x[..., 0] *= s`) has no out-of-place twin: the suggestion is `x = x.clone()`, to write
    before it (`clone_first`)."""
    try:
        statement = ast.parse(code).body[0]
    except (SyntaxError, IndexError, ValueError):
        return "x = x.masked_fill(mask, value)" if "fill" in code else "x = x * s"
    targets = (statement.targets if isinstance(statement, ast.Assign) else
               [statement.target] if isinstance(statement, ast.AugAssign) else [])
    if targets and isinstance(targets[0], ast.Subscript):
        holder = ast.unparse(targets[0].value)
        return f"{holder} = {holder}.clone()"
    if isinstance(statement, ast.AugAssign) and type(statement.op) in _AUGMENTED:
        target = ast.unparse(statement.target)
        return f"{target} = {target} {_AUGMENTED[type(statement.op)]} " \
               f"{ast.unparse(statement.value)}"
    for node in ast.walk(statement):
        if _in_place_node(node) and isinstance(node, ast.Call):
            func = node.func
            assert isinstance(func, ast.Attribute)
            holder = ast.unparse(func.value)
            call = ast.unparse(ast.Call(ast.Attribute(func.value, func.attr[:-1], ast.Load()),
                                        node.args, node.keywords))
            if isinstance(statement, ast.Expr) and statement.value is node:
                return f"{holder} = {call}"
            return ast.unparse(statement).replace(ast.unparse(node), call, 1)
    return "x = x * s"


def _short(text: str) -> str:
    """PyTorch's error without its hint (which suggests anomaly detection)."""
    return text.split(" Hint:")[0]


Forward = Callable[[tuple], Any]  # the student's code, called on these arguments
