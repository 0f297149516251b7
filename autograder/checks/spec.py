"""`CheckSpec`: one graded check in an assignment's points table (`points.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..runner.protocol import Submission
from .core import Context

CheckFunction = Callable[[Submission, Context], float]


@dataclass(frozen=True)
class CheckSpec:
    """A graded check: its stable id, its points, the contract names it exercises, the function
    that grades it, and the checks it relies on (it is not run until they pass), with the id of
    the message that says what waits for them. A `timed` check measures speed on fresh inputs
    every run: it has no hidden variant."""

    id: str
    points: int
    uses: tuple[str, ...]
    function: CheckFunction
    needs: tuple[str, ...] = ()
    waiting: str = ""
    timed: bool = False
