"""The kit's code that runs beside a student's, by name: an assignment's jobs and stand-ins.
The runner imports them only by these names, and knows no assignment."""

from __future__ import annotations

import importlib
import re
from typing import Any

from ..contract import ENTRIES
from .protocol import StandIns

# Kit code that runs beside the student's code, by name: the functions of an assignment's `jobs`
# module, named by its checks (the runner never imports them, and knows no assignment).
ASSIGNMENT_JOB = re.compile(r"mha_kit\.assignments\.[a-z_][a-z0-9_]*\.jobs:[a-z][a-z0-9_]*")
# Where an assignment keeps the kit's versions of its pieces (`StandIns`).
STAND_INS_MODULE = re.compile(r"mha_kit\.assignments\.[a-z_][a-z0-9_]*\.standins")


def is_job(job: str) -> bool:
    return ASSIGNMENT_JOB.fullmatch(job) is not None


def stand_in_values(stand_ins: StandIns) -> dict[str, Any]:
    """The kit's versions of the pieces `stand_ins` names, by name: only contract names, from
    an assignment's `standins` module."""
    if STAND_INS_MODULE.fullmatch(stand_ins.module) is None or not all(
            name in ENTRIES for name in stand_ins.names):
        raise ValueError(f"not the kit's stand-ins: {stand_ins!r}")
    module = importlib.import_module(stand_ins.module)
    return {name: getattr(module, name) for name in stand_ins.names}
