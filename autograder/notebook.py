"""The in-notebook API: `check` for the test cells, `compare` for timing your own modules,
`train` for training your fused module beside nn.MultiheadAttention.

A test cell is `check("split_heads")`. It grades the names the notebook has defined, prints
one line (✓, or ✗ and the message), shows a picture of the failure when there is one, and
either raises AssertionError (no points) or returns the points earned, which nbgrader reads
as the cell's partial credit.
"""

from __future__ import annotations

import inspect

from .checks.core import HIDDEN_SALT, Context
from .grading.pictures import show
from .grading.registry import POINTS, run_check
from .grading.report import score_line
from .messages import msg, render
from .runner.inprocess import InProcessSubmission
from .runtime import default_device
from .speed.bench import compare_in_notebook as compare
from .training import plot_losses, shown, train_side_by_side

__all__ = ["check", "compare", "train"]



def check(check_id: str, *, hidden: bool = False) -> float:
    """Grade one check against the caller's globals (the notebook's namespace)."""
    if check_id not in POINTS:
        raise ValueError(render(msg("notebook.unknown_check", check=check_id,
                                    ids=", ".join(POINTS))))
    namespace = inspect.currentframe().f_back.f_globals
    context = Context(device=default_device(), salt=HIDDEN_SALT if hidden else "")
    result = run_check(check_id, InProcessSubmission(namespace), context)
    print(score_line(result))
    if result.picture is not None:
        show(result.picture)
    if result.score <= 0:
        raise AssertionError(render(result.message))
    return result.score


def train(module_cls: type, *, steps: int = 60) -> dict[str, list[float]]:
    """Train `module_cls` and nn.MultiheadAttention from the same weights on the same batches;
    print both final losses, draw both curves, return them (not graded)."""
    import matplotlib.pyplot as plt

    losses = train_side_by_side(module_cls, steps=steps)
    for name, curve in losses.items():
        print(render(msg("training.losses", name=shown(name), first=curve[0], last=curve[-1],
                         steps=len(curve))))
    plot_losses(losses)
    plt.show()
    return losses
