"""The kit that grades, findable as the distribution `mha-kit` where it runs from a source tree
with no metadata installed (a checkout on `PYTHONPATH`, as ../shared/gpu/run.sh runs it). A
notebook's setup cell asks `importlib.metadata` for that distribution and stops when it is
missing: without this, such a grader failed every notebook's answers with a NameError (20/100 for
the reference on an H200, 2026-11-29). A grade must not depend on how the kit was installed.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import sys
from collections.abc import Iterator
from pathlib import Path

DISTRIBUTION = "mha-kit"
_ROOT = Path(__file__).resolve().parents[2]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class RunningKit(importlib.metadata.Distribution):
    """The running kit's own metadata: its name, and where its files lie."""

    def read_text(self, filename: str) -> str | None:
        if filename == "METADATA":
            return f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0+source\n"
        return None

    def locate_file(self, path: str | Path) -> Path:
        return _ROOT / path


class RunningKitFinder(importlib.metadata.DistributionFinder):
    """Finds no module; finds `RunningKit` when `mha-kit` is asked for by name."""

    def find_spec(self, *args: object) -> None:
        return None

    def find_distributions(self, context: importlib.metadata.DistributionFinder.Context | None
                           = None) -> Iterator[importlib.metadata.Distribution]:
        name = getattr(context, "name", None)
        if name is not None and _normalized(name) == DISTRIBUTION:
            yield RunningKit()


@functools.cache
def make_findable() -> None:
    """Once per process: where `mha-kit` has no metadata installed, the running kit stands in."""
    try:
        importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        sys.meta_path.append(RunningKitFinder())
