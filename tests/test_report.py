"""The terminal table of `mha-kit check`: each message wrapped under its row to the terminal's
width, in English and Chinese, its words all there; Gradescope's output left on one line. The
results are built as the checks build them, without grading a file."""

from __future__ import annotations

import pytest
import torch
from conftest import table_entries

from mha_kit.checks.core import CheckResult
from mha_kit.checks.diagnosis import mistake_of
from mha_kit.checks.feedback import describe_mask
from mha_kit.grading.report import (
    MIN_MESSAGE_COLUMNS,
    NARROW_INDENT,
    format_table,
    gradescope_results,
)
from mha_kit.messages import LANG_VARIABLE, Message, display_width, msg, render


def failing() -> tuple[list[CheckResult], list[Message]]:
    """A failing llm_attention submission: a named mistake, an error, a drawn mask, the memory
    check's and NaN's long sentences, and an error while loading."""
    at_line = msg("runner.at_line", line=12, cell="")
    flash = msg("check.mistake", mistake=mistake_of("flash_acc_not_rescaled").sentence(),
                text=msg("values.wrong_heads", index=(0, 1, 37, 5), expected=0.318, got=-2.27,
                         error=2.59, heads="[0, 1, 3]", count=4))
    window = torch.ones(6, 6, dtype=torch.bool).tril().triu(-2)
    summary, drawing = describe_mask(torch.ones(6, 6, dtype=torch.bool).tril(), window)
    results = [
        CheckResult("llm_rope", 15, 15, msg("ok")),
        CheckResult("llm_repeat_kv", 0, 5, msg(
            "runner.raised_text", name="repeat_kv", type="RuntimeError", line=at_line,
            error="shape '[2, 8, 16, 64]' is invalid for input of size 8192")),
        CheckResult("llm_sliding_window", 0, 5, msg(
            "check.drawing", text=msg("check.case", text=summary, case="T=6, window=3"),
            drawing=drawing)),
        CheckResult("llm_flash_forward", 0, 15, msg("check.case", text=flash,
                                                    case=msg("case.llm_large_scores"))),
        CheckResult("llm_flash_memory", 0, 10, msg(
            "llm.keeps_in_ctx", name="flash_attention_autograd", elements=1048576,
            limit=1048576, where="ctx.scores", shape=(1, 4, 512, 512))),
        CheckResult("llm_flash_backward", 0, 10, msg("nonfinite.nan_rows", first=(0, 0, 3, 0))),
    ]
    problems = [msg("load.raised", where=msg("load.cell_defining", name="flash_attention"),
                    line=at_line, type="ValueError",
                    error="value cannot be converted to type float without overflow")]
    return results, problems


def message_column(table: str) -> int:
    """The column where the header says the messages start."""
    header = table.splitlines()[0]
    return display_width(header[:header.index(render(msg("report.message")))])


def assert_breaks_between_words(shown: list[str], text: str, skip: int) -> None:
    """`shown` (a row's lines, their first `skip` columns not the text's) holds every
    character of `text` in order, and breaks only at white space or beside Chinese text."""
    parts = ["".join(line[skip if i == 0 else 0:].split()) for i, line in enumerate(shown)]
    squeezed = "".join(text.split())
    assert "".join(parts) == squeezed
    spaced, count = set(), 0  # where the text had white space, as an index into `squeezed`
    for char in text:
        if char.isspace():
            spaced.add(count)
        else:
            count += 1
    at = 0
    for part in parts[:-1]:
        at += len(part)
        assert at in spaced or not (squeezed[at - 1].isascii() and squeezed[at].isascii()), (
            f"a word broken at {squeezed[at - 8:at]}|{squeezed[at:at + 8]}")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_failing_table_fits_80_columns_and_keeps_every_word(lang, monkeypatch):
    monkeypatch.setenv(LANG_VARIABLE, lang)
    results, problems = failing()
    table = format_table(results, problems, width=80)
    lines = table.splitlines()
    assert max(display_width(line) for line in lines) <= 80, table
    assert len(lines) > len(results) + len(problems) + 7  # the long messages took more lines
    column = message_column(table)
    *rows, problem = table_entries(table)
    assert [row[0].split()[1] for row in rows] == [r.id for r in results]
    for (first, *rest), r in zip(rows, results):
        assert all(line.startswith(" " * column) for line in rest), table  # under its message
        assert_breaks_between_words([first, *rest], render(r.message), column)
    assert len(problem) > 1  # wrapped too
    assert_breaks_between_words(problem, render(problems[0]), len("  - "))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_narrow_terminal_continues_under_a_small_indent(lang, monkeypatch):
    monkeypatch.setenv(LANG_VARIABLE, lang)
    results, problems = failing()
    table = format_table(results, problems, width=50)
    assert max(display_width(line) for line in table.splitlines()) <= 50, table
    column = message_column(table)
    assert 50 - column < MIN_MESSAGE_COLUMNS  # too little room in the message column
    rows = table_entries(table)[:len(results)]
    for (first, *rest), r in zip(rows, results):
        assert all(line.startswith(NARROW_INDENT) and not line.startswith(" " * column)
                   for line in rest), table
        assert_breaks_between_words([first, *rest], render(r.message), column)


def test_a_wide_terminal_keeps_short_messages_on_one_line(monkeypatch):
    monkeypatch.setenv(LANG_VARIABLE, "en")
    results, _ = failing()
    short = [r for r in results if display_width(render(r.message)) < 150]
    assert len(short) >= 2
    lines = format_table(short, width=200).splitlines()
    assert len(lines) == len(short) + 4  # the header, two rules and the total besides
    assert all(line.endswith(render(r.message)) for line, r in zip(lines[2:], short)), lines


def test_the_default_width_is_the_terminals_and_gradescope_is_not_wrapped(monkeypatch):
    monkeypatch.setenv(LANG_VARIABLE, "en")
    monkeypatch.setenv("COLUMNS", "64")  # what shutil.get_terminal_size reads first
    results, problems = failing()
    assert format_table(results, problems) == format_table(results, problems, width=64)
    payload = gradescope_results(results, problems)
    assert [t["output"] for t in payload["tests"]] == [render(r.message) for r in results]
    assert payload["output"].splitlines()[1] == render(problems[0])
