"""Presenting results: the terminal table and Gradescope's results.json."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ..checks.core import CheckResult
from ..i18n import label, translate


def score_line(result: CheckResult) -> str:
    """One friendly line: a tick or a cross, the check id, points and the message."""
    mark = "✓" if result.passed else "✗"
    return f"{mark} {result.id}: {result.score:g}/{result.max_score} {translate(result.message)}"


def format_table(results: Iterable[CheckResult], problems: Iterable[str] = ()) -> str:
    results = list(results)
    width = max([len(r.id) for r in results] + [len(label("check"))])
    lines = [f"  {label('check'):<{width}}  {label('points'):>9}  {label('message')}",
             "  " + "-" * (width + 22)]
    for r in results:
        mark = "✓" if r.passed else "✗"
        points = f"{r.score:g}/{r.max_score}"
        lines.append(f"{mark} {r.id:<{width}}  {points:>9}  {translate(r.message)}")
    total = sum(r.score for r in results)
    possible = sum(r.max_score for r in results)
    lines += ["  " + "-" * (width + 22), f"  {label('total'):<{width}}  {total:>5g}/{possible:<3}"]
    problems = list(problems)
    if problems:
        lines += ["", label("While loading your file:")] + [f"  - {p}" for p in problems]
    return "\n".join(lines)


def gradescope_results(results: Iterable[CheckResult], problems: Iterable[str] = ()) -> dict:
    """Gradescope's format: score, max_score and one test per check, named by its id."""
    results = list(results)
    tests = [
        {
            "name": r.id,
            "score": r.score,
            "max_score": r.max_score,
            "status": "passed" if r.passed else "failed",
            "output": translate(r.message),
            "visibility": "visible",
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
        payload["output"] = label("While loading your file:") + "\n" + "\n".join(problems)
    return payload


def write_results(path: str | Path, payload: dict) -> None:
    """A results.json (Gradescope's format) at `path`, its folder made if needed."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def write_gradescope_json(path: str | Path, results: Iterable[CheckResult],
                          problems: Iterable[str] = ()) -> None:
    write_results(path, gradescope_results(results, problems))
