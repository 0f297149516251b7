"""The assignments, found and loaded by name: `mha_kit/assignments/<name>/` and the packages
in each folder the `assignments` setting names (a course's own). The bottom layer: it imports
no kit module above it, and what it loads is an assignment's data (`contract`, `messages`,
`mistakes`) or, for `grading.registry`, its points table.

An assignment that cannot be loaded (a syntax error), or whose data cannot be used (message ids,
check ids or contract names that another assignment declares first: `claimed_once`; a points
module without its table: `reject`), is left out of what `modules` returns, and `broken()` says
why, once per assignment: every other one keeps working.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from . import assignments as package
from . import settings

_broken: dict[str, str] = {}  # assignment -> why it cannot be loaded
Data = TypeVar("Data")  # what an assignment declares (its module, or what was read from it)


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
    package.__path__ += [f for f in settings.read("assignments") if f not in package.__path__]
    return tuple(sorted({m.name for m in pkgutil.iter_modules(package.__path__) if m.ispkg}))


def folder(name: str) -> Path:
    """Assignment `name`'s package folder: in the kit (`KIT_FOLDER`) or in a course's."""
    spec = importlib.util.find_spec(f"{package.__name__}.{name}") if name in names() else None
    if spec is None or spec.origin is None:
        raise KeyError(f"no assignment {name!r}")
    return Path(spec.origin).parent


KIT_FOLDER = Path(package.__file__).parent  # the kit's own assignments


def _why(err: BaseException) -> str:
    """An error in one line: its type, message, and where in the assignment's files."""
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if "assignments" in f.filename] or traceback.extract_tb(err.__traceback__)[-1:]
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    if isinstance(err, SyntaxError) and err.filename:
        where = f" ({err.filename}:{err.lineno})"
    return f"{type(err).__name__}: {err}{where}"


def load(name: str, part: str) -> ModuleType:
    """Assignment `name`'s module `part`; ImportError naming the assignment if it cannot load."""
    try:
        return importlib.import_module(f"{package.__name__}.{name}.{part}")
    except Exception as err:
        _broken.setdefault(name, _why(err))
        raise ImportError(f"assignment {name!r} cannot be loaded: {_broken[name]}") from err


def modules(part: str, optional: bool = False) -> dict[str, ModuleType]:
    """Each assignment's module `part` ("contract", "messages", "points", "mistakes"), by
    name, but those that cannot be loaded (`broken`); with `optional`, of the assignments
    that have one."""
    found = {}
    for name in names():
        if name in _broken:
            continue
        try:
            if optional and not importlib.util.find_spec(f"{package.__name__}.{name}.{part}"):
                continue
            found[name] = load(name, part)
        except ImportError:
            continue
    return found


def reject(name: str, why: str) -> None:
    """Leave assignment `name` out from now on: its data, though it loaded, cannot be used."""
    _broken.setdefault(name, why)


def broken() -> dict[str, str]:
    """assignment -> why it cannot be loaded, for those `modules` left out so far."""
    return dict(_broken)


def _kits_own() -> frozenset[str]:
    return frozenset(m.name for m in pkgutil.iter_modules([str(KIT_FOLDER)]) if m.ispkg)


def claimed_once(found: dict[str, Data], keys: Callable[[Data], Iterable[str]], what: str,
                 taken: Iterable[str] = ()) -> dict[str, Data]:
    """`found` (assignment -> what it declares) but the assignments that declare a key (its
    `keys`) twice, or one in `taken` or declared by an assignment before it: the kit's own
    first, then the others by name. Those are rejected, said as `what` and the keys
    ("points.py redeclares check ids: [...]"): a key never overwrites another silently."""
    claimed = set(taken)
    kept = set()
    own = _kits_own()
    for name in sorted(found, key=lambda n: (n not in own, n)):
        declared = Counter(keys(found[name]))
        clash = sorted({k for k, n in declared.items() if n > 1 or k in claimed})
        if clash:
            reject(name, f"{what}: {clash}")
            continue
        claimed |= declared.keys()
        kept.add(name)
    return {name: data for name, data in found.items() if name in kept}
