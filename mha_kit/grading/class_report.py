"""A class at a glance: the score histogram, the pass rate of every check, and the mistakes
the grader named most often (for example "31% scaled by √embed_dim"), as a CSV and a PNG.

It reads the Gradescope payloads of `mha-kit grade` (one per student), whose tests carry the
ids of the known mistakes each message named (`extra_data.mistakes`).
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..messages import Message, msg, render

BINS = 10  # the histogram's bars: 0-9, 10-19, ..., 90-100 for a total of 100


@dataclass(frozen=True)
class ClassReport:
    """What `write` puts in the CSV and the PNG."""

    students: int
    max_score: float
    histogram: list[int]  # students per bin of the total, BINS bins
    pass_rates: dict[str, float]  # check id -> share of students with full points
    mistakes: list[tuple[str, int]]  # mistake id -> students whose messages named it, most first


def summarise(payloads: list[dict]) -> ClassReport:
    """The report of a class from its students' Gradescope payloads."""
    max_score = max((p["max_score"] for p in payloads), default=100) or 100
    histogram = [0] * BINS
    passed: Counter[str] = Counter()
    checks: list[str] = []
    named: Counter[str] = Counter()
    for payload in payloads:
        histogram[min(BINS - 1, int(BINS * payload["score"] / max_score))] += 1
        seen = set()
        for test in payload["tests"]:
            if test["name"] not in checks:
                checks.append(test["name"])
            passed[test["name"]] += test["status"] == "passed"
            seen.update(test.get("extra_data", {}).get("mistakes", ()))
        named.update(seen)
    count = len(payloads)
    return ClassReport(count, max_score, histogram,
                       {c: passed[c] / count for c in checks} if count else {},
                       named.most_common())


def write(report: ClassReport, prefix: Path) -> tuple[Path, Path]:
    """`prefix`.csv and `prefix`.png; returns both paths."""
    table, picture = prefix.with_suffix(".csv"), prefix.with_suffix(".png")
    with open(table, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["section", "item", "students", "share"])
        width = report.max_score / BINS
        for i, n in enumerate(report.histogram):
            writer.writerow(["score", f"{i * width:g}-{(i + 1) * width:g}", n,
                             _share(n, report.students)])
        for check, rate in report.pass_rates.items():
            writer.writerow(["check passed", check, round(rate * report.students),
                             f"{rate:.2f}"])
        for mistake, n in report.mistakes:
            writer.writerow(["mistake named", mistake, n, _share(n, report.students)])
    _plot(report, picture)
    return table, picture


def mistake_label(mistake_id: str, share: float, lang: str | None = None) -> str:
    """"31% scale_by_embed_dim": the share of the class and the catalogue id
    (`checks.diagnosis.CATALOGUE`, whose message says what the mistake is)."""
    return render(msg("report.class_mistake", share=share * 100, mistake=mistake_id), lang)


def _share(n: int, total: int) -> str:
    return f"{n / total:.2f}" if total else "0"


def mistakes_title(shown: int) -> Message:
    """The title of the mistakes panel, which says so when no known mistake was named."""
    return msg("report.class_mistakes", top=shown) if shown else msg("report.class_no_mistakes")


def _plot(report: ClassReport, path: Path, top: int = 8) -> None:
    """class.png, its words as a picture of a failure has them (`pictures.drawing_language`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .pictures import drawing_language

    with drawing_language() as lang:
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.2),
                                 gridspec_kw={"width_ratios": [1, 1.2, 1.6]})
        width = report.max_score / BINS
        axes[0].bar([i * width for i in range(BINS)], report.histogram, width=width * 0.9,
                    align="edge")
        axes[0].set_title(render(msg("report.class_histogram", students=report.students), lang))
        axes[0].yaxis.get_major_locator().set_params(integer=True)  # students: whole numbers
        axes[0].set_xlabel(render(msg("report.class_total", max=report.max_score), lang))
        checks = list(report.pass_rates)[::-1]
        axes[1].barh(checks, [report.pass_rates[c] * 100 for c in checks], color="tab:green")
        axes[1].set_xlim(0, 100)
        axes[1].set_title(render(msg("report.class_pass_rates"), lang))
        shown = report.mistakes[:top][::-1]
        labels = [mistake_label(m, n / report.students, lang) for m, n in shown]
        axes[2].barh(range(len(shown)), [n / report.students * 100 for _, n in shown],
                     color="tab:red")
        axes[2].set_yticks(range(len(shown)), labels, fontsize=8)
        axes[2].set_xlim(0, 100)
        axes[2].set_title(render(mistakes_title(len(shown)), lang))
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
