"""The shape search: a derandomised hypothesis search for the smallest failing case, then
the fixed cases. The same submission always meets the same cases.
"""

from __future__ import annotations

import getpass
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..messages import Message, joined, msg
from ..runner.protocol import StudentCodeError
from ..runtime import one_thread
from .core import CheckFailed

# --------------------------------------------------------------------------- shape search

# Student errors that may depend on the case, so the search shrinks them; any other (missing,
# not implemented, timeouts, crashes, memory, forbidden calls) ends the search at once.
_SHRINKABLE = ("bad_return", "bad_module", "inputs_after")
# Hypothesis keeps caches (constants it read from source files) in `.hypothesis/` of the
# working folder, which is the student's; here they go to the system's temporary folder.
HYPOTHESIS_HOME = Path(tempfile.gettempdir()) / f"mha-kit-hypothesis-{getpass.getuser()}"


def search_shapes(one_case: Callable[[Any], None], shapes: Any, examples: int) -> Any | None:
    """The smallest case drawn from `shapes` that fails, or None.

    A derandomised hypothesis search with no example database, so a grade is the same on
    every run; it shrinks the first failure it finds to a minimal one.
    """
    from hypothesis import HealthCheck, Phase, Verbosity, find, settings
    from hypothesis.configuration import set_hypothesis_home_dir
    from hypothesis.errors import NoSuchExample

    set_hypothesis_home_dir(HYPOTHESIS_HOME)  # its caches, never in the student's folder

    fatal: list[StudentCodeError] = []

    def fails(case: Any) -> bool:
        if fatal:
            return False
        try:
            one_case(case)
        except CheckFailed:
            return True
        except StudentCodeError as err:
            if err.kind in _SHRINKABLE:
                return True
            fatal.append(err)
            return False
        return False

    quiet = settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                     phases=(Phase.generate, Phase.shrink), verbosity=Verbosity.quiet,
                     suppress_health_check=list(HealthCheck))
    try:
        found = find(shapes, fails, settings=quiet)
    except NoSuchExample:
        found = None
    if fatal:
        raise fatal[0]
    return found


def warm_up() -> None:
    """Hypothesis's one-time costs in this process, ahead of the first check: its import, and
    registering torch's random generator (a gc.collect). The batch pays them while a worker
    loads its file."""
    from hypothesis import strategies

    search_shapes(lambda case: None, strategies.just(0), 1)


def run_cases(one_case: Callable[[Any], None], fixed: Any, shapes: Any = None,
              examples: int = 20) -> None:
    """A shape search first (its smallest failure is the most telling), then the fixed cases.

    When several mistakes reproduce the smallest failure, the first failing fixed case, with
    its less ambiguous sizes, picks among them.
    """
    with one_thread():
        _run_cases(one_case, fixed, shapes, examples)


def _run_cases(one_case: Callable[[Any], None], fixed: Any, shapes: Any, examples: int) -> None:
    found = None if shapes is None else search_shapes(one_case, shapes, examples)
    if found is not None:
        try:
            one_case(found)
        except CheckFailed as err:
            err.case = msg("case.searched", case=err.case or _label(found))
            if err.diagnosis and len(err.diagnosis.matches) > 1:
                err.diagnosis.among = _narrow(err.diagnosis.matches, one_case, fixed)
            raise
    for case in fixed:
        one_case(case)


def _label(case: Any) -> Message | str:
    """A case drawn by the search, for a message: its label, or its parts' labels."""
    if hasattr(case, "label"):
        return case.label()
    if isinstance(case, tuple):
        return joined([_label(part) for part in case])
    return str(case)


def _narrow(matches: tuple[str, ...], one_case: Callable[[Any], None],
            fixed: Any) -> tuple[str, ...]:
    """The mistakes that also reproduce the failing fixed cases, as far as one does."""
    for case in fixed:
        if len(matches) == 1:
            break
        try:
            one_case(case)
        except CheckFailed as err:
            agreed = tuple(m for m in matches if err.diagnosis and m in err.diagnosis.matches)
            matches = agreed or matches
        except StudentCodeError:
            break
    return matches

