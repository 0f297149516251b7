"""Matplotlib's font list, for the fresh home of every worker and kernel.

Student code runs with a new, empty home each time (`worker`, `sandboxed_kernel`), so
matplotlib would build its font list again before each one's first plot: a quarter of a
second, every submission, twice under nbgrader. The grader's own list (built once, by the
grader) is copied in instead. It is the grader's file, never one a worker wrote. Only time
depends on it: without it, matplotlib builds its own as before.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
from pathlib import Path


@functools.cache
def font_list() -> Path | None:
    """The grader's matplotlib font list for the installed matplotlib (importing its font
    manager builds one where there is none); None without matplotlib or a file."""
    try:
        import matplotlib
        from matplotlib.font_manager import FontManager
    except ImportError:
        return None
    path = Path(matplotlib.get_cachedir()) / f"fontlist-v{FontManager.__version__}.json"
    return path if path.is_file() else None


def seed(config_dir: Path) -> None:
    """Put the font list, readable by any account, where matplotlib looks with
    MPLCONFIGDIR=config_dir."""
    source = font_list()
    if source is None:
        return
    with contextlib.suppress(OSError):
        target = config_dir / source.name
        shutil.copyfile(source, target)
        os.chmod(target, 0o644)
