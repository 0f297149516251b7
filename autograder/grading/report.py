"""Presenting results: the terminal table and Gradescope's results.json, in the language of the
messages (`messages.language()`), rendered here."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ..checks.core import CheckResult
from ..checks.diagnosis import named_in
from ..messages import Message, display_width, msg, pad, render


def score_line(result: CheckResult) -> str:
    """One friendly line: a tick or a cross, the check id, points and the message."""
    mark = "✓" if result.passed else "✗"
    return f"{mark} {result.id}: {result.score:g}/{result.max_score} {render(result.message)}"


def format_table(results: Iterable[CheckResult], problems: Iterable[Message | str] = ()) -> str:
    results = list(results)
    check, points, message, total = (render(msg(f"report.{word}"))
                                     for word in ("check", "points", "message", "total"))
    width = max([len(r.id) for r in results] + [display_width(check), display_width(total)])
    lines = [f"  {pad(check, width)}  {pad(points, 9, '>')}  {message}",
             "  " + "-" * (width + 22)]
    for r in results:
        mark = "✓" if r.passed else "✗"
        score = f"{r.score:g}/{r.max_score}"
        lines.append(f"{mark} {r.id:<{width}}  {score:>9}  {render(r.message)}")
    earned = sum(r.score for r in results)
    possible = sum(r.max_score for r in results)
    lines += ["  " + "-" * (width + 22), f"  {pad(total, width)}  {earned:>5g}/{possible:<3}"]
    problems = list(problems)
    if problems:
        lines += ["", render(msg("report.while_loading"))] + [f"  - {render(p)}"
                                                              for p in problems]
    return "\n".join(lines)


def gradescope_results(results: Iterable[CheckResult],
                       problems: Iterable[Message | str] = ()) -> dict:
    """Gradescope's format: score, max_score and one test per check, named by its id."""
    results = list(results)
    tests = [
        {
            "name": r.id,
            "score": r.score,
            "max_score": r.max_score,
            "status": "passed" if r.passed else "failed",
            "output": render(r.message),
            "visibility": "visible",
            "extra_data": {"mistakes": named_in(r.message) if not r.passed else []},
        }
        for r in results
    ]
    payload = {
        "score": round(sum(r.score for r in results), 2),
        "max_score": sum(r.max_score for r in results),
        "tests": tests,
    }
    problems = list(problems)
    if problems:
        payload["output"] = "\n".join([render(msg("report.while_loading")),
                                       *(render(p) for p in problems)])
    return payload


def write_results(path: str | Path, payload: dict) -> None:
    """A results.json (Gradescope's format) at `path`, its folder made if needed."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def write_gradescope_json(path: str | Path, results: Iterable[CheckResult],
                          problems: Iterable[Message | str] = ()) -> None:
    write_results(path, gradescope_results(results, problems))
