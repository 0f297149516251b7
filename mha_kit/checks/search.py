"""The shape search: a derandomised hypothesis search for the smallest failing case, then
the fixed cases. The same submission always meets the same cases.
"""

from __future__ import annotations

import dataclasses
import getpass
import tempfile
from collections.abc import Callable
from pathlib import Path
from random import Random
from typing import Any

from ..messages import msg
from ..runner.protocol import StudentCodeError
from ..runtime import one_thread
from .causes import Failure, label, verdict
from .core import CheckFailed, Picture, secret_seed

# --------------------------------------------------------------------------- shape search

# Student errors that may depend on the case, so the search shrinks them; any other (missing,
# not implemented, timeouts, crashes, memory, forbidden calls) ends the search at once.
_SHRINKABLE = ("bad_return", "bad_module", "inputs_after")
# Errors after which no other case runs: the worker is gone or out of time, or the code cannot
# run at all. After any other (an exception, running out of memory) the other cases still run,
# so that code which crashes on float64 is also told what it gets wrong on float32.
_ENDS_CASES = ("timeout", "total_timeout", "crash", "load", "missing", "forbidden", "bad_reply")
# Hypothesis keeps caches (constants it read from source files) in `.hypothesis/` of the
# working folder, which is the student's; here they go to the system's temporary folder.
HYPOTHESIS_HOME = Path(tempfile.gettempdir()) / f"mha-kit-hypothesis-{getpass.getuser()}"


def search_shapes(one_case: Callable[[Any], None], shapes: Any,
                  examples: int) -> tuple[Any | None, Failure | None]:
    """The smallest case drawn from `shapes` that fails, or None; and the first case whose
    code raised an error the search does not shrink, if the search met one.

    A derandomised hypothesis search with no example database, so a grade is the same on
    every run (its shapes drawn from the course's secret where one is set: `secret_seed`); it
    shrinks the first failure it finds to a minimal one. An error of the
    student's code ends the search (the fixed cases tell a stub from code that refuses some
    cases, and which cases raise); one after which no case can run is raised at once.
    """
    from hypothesis import HealthCheck, Phase, Verbosity, find, settings
    from hypothesis.configuration import set_hypothesis_home_dir
    from hypothesis.errors import NoSuchExample

    set_hypothesis_home_dir(HYPOTHESIS_HOME)  # its caches, never in the student's folder

    fatal: list[Failure] = []

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
            fatal.append((case, err))
            return False
        return False

    quiet = settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                     phases=(Phase.generate, Phase.shrink), verbosity=Verbosity.quiet,
                     suppress_health_check=list(HealthCheck))
    seed = secret_seed(b"shapes")
    try:
        found = find(shapes, fails, settings=quiet, random=None if seed is None else Random(seed))
    except NoSuchExample:
        found = None
    if fatal and fatal[0][1].kind in _ENDS_CASES:
        raise on_case(*fatal[0])
    return found, fatal[0] if fatal else None


def on_case(case: Any, err: StudentCodeError) -> StudentCodeError:
    """A fatal error of the student's code; one call past its time limit told with the case it
    met (code that hangs on cross-attention only says so), any other as it is (a check's or a
    submission's overall cap is not the case's)."""
    if err.message.id != "worker.timeout":
        return err
    return StudentCodeError(err.kind, msg("check.case", text=err.message, case=label(case)),
                            err.exc_type)


def warm_up() -> None:
    """Hypothesis's one-time costs in this process, ahead of the first check: its import, and
    registering torch's random generator (a gc.collect). The batch pays them while a worker
    loads its file."""
    from hypothesis import strategies

    search_shapes(lambda case: None, strategies.just(0), 1)


def run_cases(one_case: Callable[[Any], None], fixed: Any, shapes: Any = None,
              examples: int = 20, picture: Callable[[], Picture | None] | None = None) -> None:
    """A shape search first (its smallest failure is the most telling), then every fixed case.

    When cases fail, one failure is raised that tells each distinct cause (`causes.verdict`);
    a mistake is named only when it reproduces every failing case of its cause. `picture`,
    if given, draws the failure on a representative case (the search's smallest case is
    often too small to show a pattern).
    """
    with one_thread():
        _run_cases(one_case, fixed, shapes, examples, picture)


def _run_cases(one_case: Callable[[Any], None], fixed: Any, shapes: Any, examples: int,
               picture: Callable[[], Picture | None] | None) -> None:
    failures: list[Failure] = []
    passed: list[Any] = []  # the cases that pass
    found, raising = (None, None) if shapes is None else search_shapes(one_case, shapes,
                                                                       examples)
    if found is not None:
        try:
            one_case(found)
            passed.append(found)  # flaky code: the search's failure did not repeat
        except CheckFailed as err:
            err.case = msg("case.searched", case=err.case or label(found))
            failures.append((found, err))
    if raising is not None:
        failures.append(raising)
    for case in fixed:
        try:
            one_case(case)
            passed.append(case)
        except CheckFailed as err:
            failures.append((case, err))
        except StudentCodeError as err:
            if err.kind in _ENDS_CASES:  # a timeout, a crash: the cases end here
                if not failures:
                    raise on_case(case, err) from None
                failures.append((case, err))
                break
            failures.append((case, err))
    if not failures:
        return
    failed = verdict(failures, passed)
    if picture is not None and isinstance(failed, CheckFailed):
        drawn, own = _drawn(picture), failed.picture
        if drawn is not None and own is not None and drawn.expected.shape == own.expected.shape:
            failed.picture = drawn
        elif drawn is not None:  # not the case the text names: its title says so
            failed.picture = dataclasses.replace(drawn, title=msg("picture.larger_case",
                                                                  title=drawn.title))
    raise failed


def pictured(one_case: Callable[[Any], None], case: Any) -> Callable[[], Picture | None]:
    """Draws a failure on `case`: the picture its failure has, if it fails there."""

    def draw() -> Picture | None:
        try:
            one_case(case)
        except CheckFailed as err:
            return err.picture
        return None

    return draw


def _drawn(picture: Callable[[], Picture | None]) -> Picture | None:
    try:
        return picture()
    except (CheckFailed, StudentCodeError):
        return None
