"""`CheckSpec`: one graded check in an assignment's points table (`points.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..runner.protocol import Submission
from .core import Context

CheckFunction = Callable[[Submission, Context], float]


@dataclass(frozen=True)
class CheckSpec:
    """A graded check: its stable id, its points, the contract names it exercises, the function
    that grades it, and the checks it relies on (it is not run until they pass), with the id of
    the message that says what waits for them. `stand_ins` names the contract's pieces the
    student's code under test may call (`apply_rope` inside `GroupedQueryAttention`): one that
    fails one of its own checks (those before this one that use it) is replaced, while this
    check runs, by the kit's (PyTorch's) version, the assignment's `standins` module, so that
    one mistake costs only its own checks. `consults` names checks whose results this one
    reads (`ctx.results`), run first where they have not run yet (a notebook's test cell runs
    one check), never waited on. A `timed` check measures speed on fresh inputs every run: it
    has no hidden variant."""

    id: str
    points: int
    uses: tuple[str, ...]
    function: CheckFunction
    needs: tuple[str, ...] = ()
    waiting: str = ""
    stand_ins: tuple[str, ...] = ()
    consults: tuple[str, ...] = ()
    timed: bool = False
