"""Presenting results: the terminal table and Gradescope's results.json, in the language of the
messages (`messages.language()`), rendered here."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

from ..checks.core import CheckResult
from ..checks.diagnosis import MISTAKES, mistake_of, named_in
from ..messages import Message, display_width, joined, msg, pad, render, wrap_lines


def score_line(result: CheckResult) -> str:
    """One friendly line: a tick or a cross, the check id, points and the message."""
    mark = "✓" if result.passed else "✗"
    return f"{mark} {result.id}: {result.score:g}/{result.max_score} {render(result.message)}"


# A message starts in its column while this many columns are left of the terminal's width;
# in a narrower terminal its lines continue under a small indent.
MIN_MESSAGE_COLUMNS = 30
NARROW_INDENT = "    "


def format_table(results: Iterable[CheckResult], problems: Iterable[Message | str] = (),
                 width: int | None = None) -> str:
    """The terminal table: one row per check, its message wrapped under it to `width` columns
    (default: the terminal's), then the problems met while loading the file."""
    results = list(results)
    width = width or shutil.get_terminal_size().columns
    check, points, message, total = (render(msg(f"report.{word}"))
                                     for word in ("check", "points", "message", "total"))
    id_width = max([len(r.id) for r in results] + [display_width(check), display_width(total)])
    column = id_width + 15  # where a message starts: after mark, id and points
    indent = " " * column if width - column >= MIN_MESSAGE_COLUMNS else NARROW_INDENT
    lines = [f"  {pad(check, id_width)}  {pad(points, 9, '>')}  {message}",
             "  " + "-" * (id_width + 22)]
    for r in results:
        mark = "✓" if r.passed else "✗"
        score = f"{r.score:g}/{r.max_score}"
        lines += wrap_lines(render(r.message), width, f"{mark} {r.id:<{id_width}}  {score:>9}  ",
                            indent)
    earned = sum(r.score for r in results)
    possible = sum(r.max_score for r in results)
    lines += ["  " + "-" * (id_width + 22), f"  {pad(total, id_width)}  {earned:>5g}/{possible:<3}"]
    problems = list(problems)
    if problems:
        lines += ["", render(msg("report.while_loading"))]
        for problem in problems:
            lines += wrap_lines(render(problem), width, "  - ", NARROW_INDENT)
    return "\n".join(lines)


HIDDEN_NAME = "{id} (hidden inputs)"


def gradescope_results(results: Iterable[CheckResult],
                       problems: Iterable[Message | str] = (),
                       hidden: Iterable[CheckResult] = (),
                       hidden_visibility: str = "after_published") -> dict:
    """Gradescope's format: score, max_score and one test per check, named by its id; with
    `hidden` (the checks on the hidden inputs), one more test per check, shown as
    `hidden_visibility` says, whose output names the mistake found and never the inputs or the
    numbers. A check earns the lower of its two scores, as a notebook's test cell does."""
    results, hidden = list(results), {r.id: r for r in hidden}
    tests = [_test(r.id, r, "visible") for r in results]
    tests += [_test(HIDDEN_NAME.format(id=r.id), _told_without_inputs(h), hidden_visibility)
              for r in results if (h := hidden.get(r.id)) is not None]
    earned = [min(r.score, hidden[r.id].score) if r.id in hidden else r.score for r in results]
    payload = {
        "score": round(sum(earned), 2),
        "max_score": sum(r.max_score for r in results),
        # Shown as plain text: no HTML or Markdown of a student's (an error's text) is rendered
        "output_format": "text",
        "test_output_format": "text",
        "tests": tests,
    }
    problems = list(problems)
    if problems:
        payload["output"] = "\n".join([render(msg("report.while_loading")),
                                       *(render(p) for p in problems)])
    return payload


def _test(name: str, r: CheckResult, visibility: str) -> dict:
    return {
        "name": name,
        "score": r.score,
        "max_score": r.max_score,
        "status": "passed" if r.passed else "failed",
        "output": render(r.message),
        "visibility": visibility,
        "extra_data": {"mistakes": named_in(r.message) if not r.passed else []},
    }


def _told_without_inputs(r: CheckResult) -> CheckResult:
    """A hidden-input result as a student may read it: passed, or failed with the known
    mistakes it names; its cases, values and pictures left out."""
    if r.passed:
        return r
    named = [mistake_of(m).sentence() for m in named_in(r.message)
             if m in MISTAKES]  # a scale read off the answer says its numbers: left out
    return CheckResult(r.id, r.score, r.max_score, msg(
        "report.hidden_failed", mistakes=joined(named) if named else msg("report.no_mistake")))


def write_results(path: str | Path, payload: dict) -> None:
    """A results.json (Gradescope's format) at `path`, its folder made if needed."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def write_gradescope_json(path: str | Path, results: Iterable[CheckResult],
                          problems: Iterable[Message | str] = ()) -> None:
    write_results(path, gradescope_results(results, problems))
