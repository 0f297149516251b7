"""Parameters made while a module's forward runs: a layer built inside `forward` (as a real
tutorial writes `nn.Linear(...)(x)` there) has random weights on every call, that the grader
cannot load its own into and training never sees, and a float32 layer inside float64 code."""

from __future__ import annotations

import sys
from typing import Any

from torch import nn
from torch.nn.modules.module import register_module_parameter_registration_hook

from ..messages import Message, msg
from .student_code import frame_line


class ParametersMade:
    """Counts the parameters registered on any module while it is entered, and where the
    first one was made (the student's line)."""

    def __enter__(self) -> ParametersMade:
        self.count, self.layer, self.where = 0, "", (None, "", "")
        self._handle = register_module_parameter_registration_hook(self._noted)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._handle.remove()

    def _noted(self, module: nn.Module, name: str, param: Any) -> None:
        if param is None:
            return
        self.count += 1
        if self.count == 1:
            self.layer, self.where = type(module).__name__, frame_line(sys._getframe(1))

    def message(self, name: str) -> Message | None:
        """What to tell the student, or None when forward made no parameter."""
        if not self.count:
            return None
        line, code, cell = self.where
        where = (msg("device.where_code", line=line, cell=cell, code=code) if line and code
                 else msg("device.where", line=line, cell=cell) if line else "")
        return msg("runner.params_in_forward", name=name, layer=self.layer, where=where,
                   count=self.count)
