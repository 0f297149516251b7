"""The in-notebook API: `check` for the test cells, `compare` for timing your own modules,
`train` for training your fused module beside nn.MultiheadAttention, `decoding_work` for what
the decoding speed check measures of your KV cache.

A test cell is `check("split_heads")`. It grades the names the notebook has defined, prints
one line (✓, or ✗ and the message), shows a picture of the failure when there is one, and
either raises AssertionError (no points) or returns the points earned, which nbgrader reads
as the cell's partial credit.

Imported in a kernel (the setup cell), it gives matplotlib a font with Chinese characters once
the messages are Chinese (`draw_chinese_in`), so that a Chinese edition's picture cells, whose
titles the edition translates, draw them.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from .assignments.llm_attention.decode_speed import counted_run, decide
from .assignments.mha.bench import compare_in_notebook as compare
from .checks.core import HIDDEN_SALT, CheckResult, Context
from .grading.pictures import chinese_fallback, show
from .grading.registry import POINTS, run_check
from .grading.report import score_line
from .messages import language, msg, render, wrap_lines
from .runner.inprocess import InProcessSubmission
from .runner.protocol import StudentCodeError
from .runtime import default_device
from .training import plot_losses, shown, train_side_by_side

__all__ = ["check", "compare", "decoding_work", "train"]


def draw_chinese_in(shell: Any) -> None:
    """From the first cell of an IPython `shell` run with Chinese messages on (a Chinese
    edition's cells after its language cell), matplotlib has a font with Chinese characters,
    where one is installed: the titles its picture cells draw are Chinese. A notebook in
    English never imports matplotlib for it."""
    def before_cell(*_: Any) -> None:
        if language() == "zh":
            shell.events.unregister("pre_run_cell", before_cell)
            chinese_fallback()

    shell.events.register("pre_run_cell", before_cell)


def check(check_id: str, *, hidden: bool = False) -> float:
    """Grade one check against the caller's globals (the notebook's namespace)."""
    if check_id not in POINTS:
        raise ValueError(render(msg("notebook.unknown_check", check=check_id,
                                    ids=", ".join(POINTS))))
    namespace = inspect.currentframe().f_back.f_globals
    context = Context(device=default_device(), salt=HIDDEN_SALT if hidden else "")
    result = run_check(check_id, InProcessSubmission(namespace), context)
    print(wrap(score_line(result)))
    if result.picture is not None:
        show(result.picture)
    if result.score <= 0:
        raise CheckFailedHere.of(result)
    return result.score


class CheckFailedHere(AssertionError):
    """A check that earned nothing, raised in a test cell: nbgrader sees an error and gives 0.
    The ✗ line printed above says why, so IPython shows one short line (`_render_traceback_`)
    instead of a traceback into the kit; str() is the whole message."""

    def __init__(self, message: str, short: str):
        super().__init__(message)
        self.short = short

    @classmethod
    def of(cls, result: CheckResult) -> CheckFailedHere:
        """The error for a result that earned nothing."""
        return cls(render(result.message), render(msg(
            "notebook.failed", check=result.id, points=result.max_score)))

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[0;31mAssertionError\x1b[0m: {self.short}"]


# The error output's name stays "AssertionError", as before and as `trusted_autograde` writes it.
CheckFailedHere.__name__ = CheckFailedHere.__qualname__ = "AssertionError"


# Display columns per line of a message in a notebook, a Chinese character counting two: 100,
# what JupyterLab's output area holds beside its file browser at 1280 pixels. (At 120, a
# Chinese line with English words in it was wider, and the browser broke it again, inside a
# number.)
WIDTH = {"en": 100, "zh": 100}


def wrap(text: str, width: int | None = None) -> str:
    """`text` in lines of at most `width` display columns (default: the language's), broken as
    `messages.wrap_lines` breaks them; continuation lines are indented."""
    return "\n".join(wrap_lines(text, width or WIDTH[language()], rest="  "))


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


def decoding_work(layer_cls: type, cache_cls: type) -> None:
    """Decode through your KVCache as llm_decode_speed does, at its sizes, the work counted
    against the kit's count of recomputing the prefix; print what the check would say, the
    factor it needs included (not graded)."""
    sub = InProcessSubmission({"GroupedQueryAttention": layer_cls, "KVCache": cache_cls})
    try:
        _, message = decide(counted_run(sub, 0))
    except StudentCodeError as err:
        message = err.message
    print(wrap(render(message)))


if "IPython" in sys.modules and (_shell := sys.modules["IPython"].get_ipython()) is not None:
    draw_chinese_in(_shell)  # in a kernel only: the grader's worker draws no picture cell
