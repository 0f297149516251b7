"""Messages by id: every id in both languages, what crosses the worker's pipe, and no English
prose left under `zh` in what the grader says about the stubs and the hostile submissions
(the mutants' messages: test_corpus.py, test_llm_attention.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import DETERMINISTIC, HOSTILE, KILL_REFUSED, STUBS

from mha_kit.checks.core import CheckResult
from mha_kit.grading.batch import grade_submission
from mha_kit.grading.registry import run_checks
from mha_kit.grading.report import format_table, gradescope_results
from mha_kit.messages import (
    LANG_VARIABLE,
    TEMPLATES,
    Message,
    display_width,
    fields,
    joined,
    msg,
    pad,
)
from mha_kit.release import stale_translations
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.policy import Limits

# --------------------------------------------------------------------------- English prose

# Code as the grader writes it: `spans`, and tokens with any of these characters or a digit
# (identifiers with _ or ., calls, dims like B=2, shapes, numbers, operators).
CODE_SPAN = re.compile(r"`[^`]*`")
CODE_CHARS = re.compile(r"[_.()\[\]{}=/*@'\"<>|~^→×≥\d-]")
WORD = re.compile(r"[A-Za-z]{3,}")


def english_prose(text: str) -> list[str]:
    """Runs of two or more English words of three letters or more, outside code.

    Code spans (`...`) are removed first; what is left is cut at every non-ASCII character
    (Chinese text and punctuation end a run), then into tokens at white space. A token, its
    trailing , ; : ! ? removed, is a word if it is letters only, at least three of them; a
    token with a digit or a code character (_ . ( ) = / * ...) is code and ends a run."""
    found = []
    for segment in re.split(r"[^\x00-\x7f]+", CODE_SPAN.sub(" ", text)):
        run: list[str] = []
        for token in segment.split():
            token = token.strip(",;:!?")
            if WORD.fullmatch(token) and not CODE_CHARS.search(token):
                run.append(token)
                continue
            if len(run) >= 2:
                found.append(" ".join(run))
            run = []
        if len(run) >= 2:
            found.append(" ".join(run))
    return found


def test_the_prose_detector_finds_english_and_leaves_code_alone():
    assert english_prose("speed not scored: the run sent no outputs") == [
        "speed not scored the run sent"]  # "no" is too short to count
    assert english_prose("`split_heads` 还没有实现 (is your code very slow?)") == [
        "your code very"]  # "(is" and "slow?)" hold code characters
    assert english_prose("形状是 (2, 5)，应当是 x.transpose(1, 2) 而不是 B=2, T=5 float32") == []
    assert english_prose("`name 'x' is not defined` 抛出了 NameError（第 3 行）") == []
    assert english_prose("inf / inf 得到 NaN：请用 torch.softmax") == []


def rendered(results: list[CheckResult], problems: list, lang: str,
             monkeypatch: pytest.MonkeyPatch) -> str:
    """Everything a student reads: the table, its notes and Gradescope's outputs."""
    monkeypatch.setenv(LANG_VARIABLE, lang)
    payload = gradescope_results(results, problems)
    outputs = [t["output"] for t in payload["tests"]] + [payload.get("output", "")]
    return "\n".join([format_table(results, problems), *outputs])


def assert_chinese(results: list[CheckResult], problems: list,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    zh = rendered(results, problems, "zh", monkeypatch)
    assert english_prose(zh) == [], zh
    # The same messages in English are prose: what the test sees is what a student reads.
    assert english_prose(rendered(results, problems, "en", monkeypatch))


# --------------------------------------------------------------------------- the corpus


def test_stub_messages_are_chinese(monkeypatch):
    sub = InProcessSubmission.from_path(STUBS)
    results = run_checks(sub)
    assert [r.id for r in results if r.id in DETERMINISTIC] == DETERMINISTIC
    assert_chinese(results, sub.problems, monkeypatch)


HOSTILE_FILES = sorted(p.name for p in HOSTILE.iterdir() if p.suffix in (".py", ".ipynb"))


@pytest.mark.parametrize("name", HOSTILE_FILES)
def test_hostile_messages_are_chinese(name: str, tiny, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # some write fake grade sheets where the grader works
    if name == "kills_grader.py" and not KILL_REFUSED:  # it would kill this process: its row
        results = [CheckResult("split_heads", 0, 7, msg("batch.grader_died"))]
        assert_chinese(results, [msg("batch.grader_died")], monkeypatch)
        return
    limits = Limits(call_s=1, load_s=2, total_s=5)  # a hang costs a second, the cap 5 s
    results, problems = grade_submission(HOSTILE / name, limits=limits)
    if all(r.passed for r in results) and not problems:
        pytest.fail(f"{name} gets full marks")
    zh = rendered(results, problems, "zh", monkeypatch)
    assert english_prose(zh) == [], zh


# --------------------------------------------------------------------------- the catalogue


def test_every_id_has_a_chinese_template_with_the_same_fields():
    english, chinese = TEMPLATES["en"], TEMPLATES["zh"]
    assert set(chinese) == set(english)
    for message_id, template in english.items():
        assert fields(chinese[message_id]) == fields(template), message_id
        assert re.fullmatch(r"[a-z]+(\.[a-z0-9_]+)?", message_id), message_id


TRANSLATED_FROM = Path(__file__).resolve().parents[1] / "translations" / "zh" / "messages.json"


def test_every_chinese_template_translates_todays_english():
    """Babel's "fuzzy", without Babel: change an English template and this fails until its
    Chinese is updated and marked (`python scripts/mark_translated.py ID`)."""
    recorded = json.loads(TRANSLATED_FROM.read_text(encoding="utf-8"))
    stale = stale_translations(TEMPLATES["en"], recorded)
    assert not stale, ("the Chinese of these ids translates an older English; update "
                       f"messages/zh*.py, then run scripts/mark_translated.py: {stale}")


def test_a_reworded_english_template_is_found_stale():
    recorded = json.loads(TRANSLATED_FROM.read_text(encoding="utf-8"))
    reworded = {**TEMPLATES["en"], "files.none": TEMPLATES["en"]["files.none"] + " (reworded)"}
    assert stale_translations(reworded, recorded) == ["files.none"]


def test_a_message_checks_its_fields_where_it_is_written():
    with pytest.raises(KeyError, match="no message"):
        msg("no.such_message")
    with pytest.raises(KeyError, match="needs name"):
        msg("runner.not_implemented")


def test_messages_cross_the_pipe_as_plain_data():
    message = msg("runner.raised_text", name="f", type="KeyError",
                  line=msg("runner.at_line", line=3, cell=""), error="boom")
    data = message.to_data()
    assert data == {"id": "runner.raised_text", "params": {
        "name": "f", "type": "KeyError",
        "line": {"id": "runner.at_line", "params": {"line": 3, "cell": ""}}, "error": "boom"}}
    assert Message.from_data(data) == message
    shapes = msg("runner.param_shape", owner="M", param="w", got=(2, 3), expected=(3, 2))
    assert str(Message.from_data(shapes.to_data())).endswith("(2, 3), expected (3, 2)")
    upper = Message.from_data(data, text=str.upper)
    assert upper.render("en") == "`F` raised KEYERROR, line 3: BOOM"


def nested(depth: int) -> dict:
    data: dict = {"id": "text", "params": {"text": "x"}}
    for _ in range(depth):
        data = {"id": "text", "params": {"text": data}}
    return data


@pytest.mark.parametrize("junk", [
    None, "ok", ["ok"], {"id": "ok"}, {"id": "no.such_id", "params": {}},
    {"id": ["ok"], "params": {}}, {"id": "ok", "params": []}, {"id": "ok", "params": {1: "x"}},
    {"id": "ok", "params": {}, "extra": 1},
    {"id": "runner.not_implemented", "params": {}},  # a field is missing
    {"id": "text", "params": {"text": {1, 2}}},  # not a value to_data writes
    {"id": "text", "params": {"text": ("a", "b")}},
    {"id": "worker.cap", "params": {"limit": "a while"}},  # {limit:g} on a string
    {"id": "text", "params": {"text": ["x"] * 1000}},
    {"id": "text", "params": {f"p{i}": "x" for i in range(100)} | {"text": "x"}},
    nested(50),
])
def test_from_data_rejects_junk(junk):
    with pytest.raises(ValueError):
        Message.from_data(junk)


def test_from_data_bounds_the_length_it_accepts():
    data = msg("text", text="x" * 100).to_data()
    assert Message.from_data(data, keep=100)
    with pytest.raises(ValueError, match="longer"):
        Message.from_data(data, keep=99)


# --------------------------------------------------------------------------- layout


def test_chinese_pads_by_display_width():
    assert display_width("检查项") == 6 and pad("检查项", 8) == "检查项  "
    header = msg("mask.header", yours=msg("mask.yours"), expected=msg("mask.expected"), width=9)
    assert display_width(header.render("zh").split("（")[0]) == 9 + 3 + 9 + 3


def test_the_chinese_table_lines_up(monkeypatch):
    results = [CheckResult("split_heads", 0, 7, msg("runner.not_implemented", name="x")),
               CheckResult("attend", 10, 10, msg("ok"))]
    monkeypatch.setenv(LANG_VARIABLE, "zh")
    header, _, first, *_ = format_table(results).splitlines()
    assert header.startswith("  检查项")
    # The points column ends at the same screen column in the header and in each row.
    assert display_width(header[:header.index("得分") + 2]) == display_width(first[:first.index(
        "0/7") + 3])


def test_lists_and_parts_are_joined_in_each_language():
    parts = joined(["B=2, T=5", msg("case.no_mask"), "", "float32"])
    assert parts.render("en") == "B=2, T=5, no mask, float32"
    assert parts.render("zh") == "B=2, T=5，无掩码，float32"
    sizes = msg("shape.wrong", got=(2, 3), expected=(2, 4), cause=[
        msg("shape.size", dim="T", got=3, expected=4)] * 2)
    assert sizes.render("en").endswith("T is 3 instead of 4; T is 3 instead of 4")
    assert sizes.render("zh").endswith("T 是 3，应当是 4；T 是 3，应当是 4")


def test_the_shared_catalogue_holds_only_what_shared_code_or_several_assignments_say():
    """A sentence one assignment alone says is that assignment's (its messages.py): the shared
    catalogue's speed sentences are the timing verdict's, or said by two assignments or more."""
    from mha_kit.messages import en

    kit = Path(__file__).resolve().parents[1] / "mha_kit"
    catalogues = ("messages.py", "messages_zh.py")
    sources = {path: path.read_text(encoding="utf-8") for path in kit.rglob("*.py")
               if "messages" not in path.parts and path.name not in catalogues}
    for message_id in (i for i in en.TEMPLATES if i.startswith("speed.")):
        users = {path.relative_to(kit).parts[:2] for path, text in sources.items()
                 if f'"{message_id}"' in text}
        shared = any(part[0] != "assignments" for part in users)
        assert shared or len(users) >= 2, (message_id, sorted(users))
