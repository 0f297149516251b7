"""The device check without a GPU: student code run on `meta` tensors.

A meta tensor has a shape, a dtype and a device but no data, so every op runs at no cost and
a tensor the code makes on the CPU meets the inputs' device at once, as it would meet a GPU's.
`DeviceWatch` runs the code and tells a genuine device mix (a CPU tensor of one element or
more beside a meta tensor in one op, or an error naming both devices) from what is only a
limit of meta tensors (no data: `.item()`, `if mask.any():`, copying out, data-dependent
shapes), which costs nothing: those work on a GPU.

Some meta kernels do not check devices (`meta @ cpu` gives a meta or even a CPU tensor), so
the watch looks at every op's tensors itself, as a `TorchDispatchMode`, with a GPU's rule:
a 0-dim CPU tensor may join a GPU tensor (a scalar), any other may not, except in the ops
that move data between devices or index with CPU indices.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakTensorKeyDictionary

from ..messages import Message, msg
from .student_code import StudentLine, error_text, frame_line

META = "meta"

# Errors of a genuine device mix: PyTorch names both devices.
_MIX = re.compile(r"Expected all tensors to be on the same device|is not on the expected device"
                  r"|Expected .*? to be on the same device|on different devices", re.IGNORECASE)
# Ops that may take tensors on two devices: copies between devices, CPU indices.
_MOVES = frozenset({"_to_copy", "copy_", "copy", "to", "lift_fresh", "lift_fresh_copy",
                    "index", "index_put", "index_put_", "_index_put_impl_", "_unsafe_index",
                    "_local_scalar_dense", "_has_compatible_shallow_copy_type", "set_"})


def on_meta(values: Any) -> bool:
    """Whether any tensor among `values` (nested in tuples, lists, dicts) is a meta tensor, or
    a `device=` among them names meta (`causal_mask(5, device="meta")`)."""
    if isinstance(values, dict) and str(values.get("device")) == META:
        return True
    return any(isinstance(v, torch.Tensor) and v.device.type == META or
               isinstance(v, dict) and str(v.get("device")) == META
               for v in tree_leaves(values, is_leaf=lambda v: isinstance(v, dict)))


def warm_up() -> None:
    """A few meta ops, once: the first meta `masked_fill` imports torch._dynamo and sympy,
    about a second. The zygote runs this before it says ready, while the grader imports and
    warms up its own side (`grading.batch.grade_submission`), so no worker pays for it in
    its first device check."""
    x = torch.empty(1, 2, 2, device=META)
    blocked = torch.empty(2, 2, dtype=torch.bool, device=META)
    torch.softmax((x @ x).masked_fill(blocked, float("-inf")), dim=-1)


def is_device_mix(text: str) -> bool:
    return bool(_MIX.search(text))


class DeviceWatch(TorchDispatchMode):
    """Runs code on meta inputs and notes the first op that mixes devices: `mix` holds the
    student's line (number and code) where the CPU tensor in it was made, else where it met
    the meta tensors."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else the first op imports torch._dynamo: seconds, and nothing to skip

    def __init__(self) -> None:
        super().__init__()
        self.mix: StudentLine | None = None
        self._made: WeakTensorKeyDictionary = WeakTensorKeyDictionary()  # CPU tensor → line

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        cpu = [t for t in tensors if t.device.type == "cpu" and t.dim()]
        if (self.mix is None and cpu and func.__name__.split(".")[0] not in _MOVES
                and any(t.device.type == META for t in tensors)):
            self.mix = self._made.get(cpu[0]) or frame_line(sys._getframe(1))
        out = func(*args, **kwargs)
        made = next((self._made[t] for t in cpu if t in self._made), None)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dim():
                self._made[t] = made = made or frame_line(sys._getframe(1), True)
        return out

    def run(self, action: Callable[[], Any]) -> Any:
        """`action()` under the watch; an error that names two devices is noted as a mix."""
        with self:
            try:
                return action()
            except Exception as err:
                if self.mix is None and is_device_mix(error_text(err)):
                    tb = err.__traceback__
                    while tb is not None and tb.tb_next is not None:
                        tb = tb.tb_next
                    self.mix = frame_line(tb.tb_frame if tb is not None else None)
                raise

    def failure(self, name: str) -> Message | None:
        """The device message for what the watch saw, or None."""
        if self.mix is None:
            return None
        line, code, cell = self.mix
        where = (msg("device.where_code", line=line, cell=cell, code=code) if line and code
                 else msg("device.where", line=line, cell=cell) if line else "")
        return msg("device.cpu_tensor", name=name, where=where)


