"""The assignments, one package each, found by name: `autograder/assignments/<name>/`.

A package holds everything of its exercise (docs/architecture.md, "Adding an assignment"):

- `contract.py`: `ENTRIES`, the names a submission defines, with their signatures (data);
- `messages.py`: `TEMPLATES`, its sentences by id, `{"en": {...}, "zh": {...}}` (data);
- its checks, in modules of its own, on the shared machinery of `autograder.checks`;
- `points.py`: `CHECKS`, its points table (a `CheckSpec` per graded check, 100 in all);
- `mistakes.py`, if it has mistakes of its own: `CATALOGUE`, their ids (data; each one's
  sentence is its message `mistake.<id>`). The mistakes of attention that several assignments
  name (splitting heads, scaling, masks) are shared, in `checks/diagnosis.py`.

The data modules are read by the lowest layers (`contract`, `messages`), the points tables by
`grading.registry`, each through `modules(part)`. An assignment imports no other assignment.
A course's own assignments may live elsewhere: each folder the `assignments` setting names holds
more `<name>/` packages, as in the test that adds one.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass
from functools import cache
from types import ModuleType

from .. import settings

__path__ += list(settings.current().assignments)


@dataclass(frozen=True)
class Entry:
    """One name a submission must define, in an assignment's `contract.ENTRIES`."""

    name: str
    signature: str
    forward: str = ""  # a module's forward, whose options the checks vary too


@cache
def names() -> tuple[str, ...]:
    """Every assignment, by its folder's name (also its folder under solutions/ and
    assignments/, and nbgrader's assignment name)."""
    return tuple(sorted({m.name for m in pkgutil.iter_modules(__path__) if m.ispkg}))


def modules(part: str, optional: bool = False) -> dict[str, ModuleType]:
    """Each assignment's module `part` ("contract", "messages", "points", "mistakes"), by
    name; with `optional`, of the assignments that have one."""
    return {name: importlib.import_module(f"{__name__}.{name}.{part}") for name in names()
            if not optional or importlib.util.find_spec(f"{__name__}.{name}.{part}")}
