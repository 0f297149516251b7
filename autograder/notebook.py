"""The in-notebook API: `check` for the test cells, `compare` for timing your own modules,
`train` for training your fused module beside nn.MultiheadAttention, `decoding_work` for what
the decoding speed check measures of your KV cache.

A test cell is `check("split_heads")`. It grades the names the notebook has defined, prints
one line (✓, or ✗ and the message), shows a picture of the failure when there is one, and
either raises AssertionError (no points) or returns the points earned, which nbgrader reads
as the cell's partial credit.
"""

from __future__ import annotations

import inspect
import re
import textwrap

from .assignments.llm_attention.decode_speed import counted_run, decide
from .checks.core import HIDDEN_SALT, CheckResult, Context
from .grading.pictures import show
from .grading.registry import POINTS, run_check
from .grading.report import score_line
from .messages import language, msg, render
from .runner.inprocess import InProcessSubmission
from .runner.protocol import StudentCodeError
from .runtime import default_device
from .speed.bench import compare_in_notebook as compare
from .training import plot_losses, shown, train_side_by_side

__all__ = ["check", "compare", "decoding_work", "train"]


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


WIDTH = {"en": 100, "zh": 60}  # characters per line of a message in a notebook
_GLUED = "\ue000"  # a space inside code, while wrapping
# Code that stays on one line: `spans`, calls such as torch.triu(..., diagonal=1) (one level of
# nested parentheses, and the assignment before it: scores = scores.masked_fill(...)), and
# shapes such as (B, H, T, D).
_CODE = re.compile(r"`[^`]*`|(?:\w+ = )?[\w.\]]+\((?:[^()]|\([^()]*\))*\)"
                   r"|\((?:[^()\s]+, )+[^()\s]+\)")
_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef"


class _Wrapper(textwrap.TextWrapper):
    """Breaks at spaces, and between Chinese characters, which have none (never before
    Chinese punctuation)."""

    def _split(self, text: str) -> list[str]:
        return [c for c in re.split(rf"(\s+)|(?<=[{_CJK}])|(?=[\u4e00-\u9fff])", text) if c]


def wrap(text: str, width: int | None = None) -> str:
    """`text` in lines of at most `width` characters, broken at word boundaries, code kept
    whole; continuation lines are indented. Lines that start with a space (a drawn mask)
    stay as they are."""
    wrapper = _Wrapper(width or WIDTH[language()], subsequent_indent="  ",
                       break_long_words=False, break_on_hyphens=False)
    lines = []
    for line in text.splitlines() or [""]:
        if line.startswith(" ") or len(line) <= wrapper.width:
            lines.append(line)
            continue
        glued = _CODE.sub(lambda code: code.group(0).replace(" ", _GLUED), line)
        lines += [part.replace(_GLUED, " ") for part in wrapper.wrap(glued)]
    return "\n".join(lines)


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
