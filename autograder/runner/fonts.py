"""Matplotlib's font list, for the fresh home of every worker and kernel.

Student code runs with a new, empty home each time (`worker`, `sandboxed_kernel`), so
matplotlib would build its font list again before each one's first plot: a quarter of a
second, every submission, twice under nbgrader. The grader's own list (built once, by the
grader) is copied in instead. It is the grader's file, never one a worker wrote.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path


@functools.cache
def font_list() -> Path | None:
    """The grader's matplotlib font list, built now if there is none; None without
    matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return None
    folder = Path(matplotlib.get_cachedir())
    if not any(folder.glob("fontlist-v*.json")):
        import matplotlib.font_manager  # noqa: F401  builds the list and writes it there
    found = sorted(folder.glob("fontlist-v*.json"))
    return found[-1] if found else None


def seed(config_dir: Path) -> None:
    """Put the font list where matplotlib looks with MPLCONFIGDIR=config_dir."""
    source = font_list()
    if source is not None:
        shutil.copyfile(source, config_dir / source.name)
