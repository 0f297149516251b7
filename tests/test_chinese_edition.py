"""The Chinese editions: generated from overlays, the same code and test cells as the English
notebooks, grader messages in Chinese (what the nbgrader cycle gave each edition:
test_nbgrader_cycle.py)."""

import json
import os
import re
import shutil

import pytest
from conftest import HOSTILE, ROOT, STUBS, check_here
from notebook_helpers import read

from autograder import editions, oracle, settings
from autograder.assignments.mha import speed as speed_score
from autograder.grading.registry import ASSIGNMENTS, run_check, split_name
from autograder.messages import Message
from autograder.runner.inprocess import InProcessSubmission
from autograder.runner.policy import Limits
from autograder.runner.worker import WorkerSubmission

EDITIONS = editions.edition_names(ROOT)
CJK = re.compile(r"[\u4e00-\u9fff]")


def masters_and_editions(folder: str) -> list[tuple]:
    """(English notebook, its edition) pairs under solutions/ or assignments/.

    The edition's file name is spelled as in `editions.write_edition`, which has no function
    of its own for it.
    """
    pairs = []
    for name in EDITIONS:
        base, lang = split_name(name)
        for master in editions.masters(ROOT, base):
            pairs.append((ROOT / folder / base / master.name,
                          ROOT / folder / name / f"{master.stem}_{lang}.ipynb"))
    return pairs


def test_there_is_an_edition_of_every_assignment():
    assert sorted(EDITIONS) == sorted(f"{name}_zh" for name in ASSIGNMENTS)


def test_overlays_translate_every_markdown_cell_of_the_current_english():
    for master, _ in masters_and_editions("solutions"):
        overlay = editions.read_overlay(editions.overlay_path(ROOT, master, "zh"))
        assert editions.problems(read(master), overlay, "zh") == [], master.name


def test_committed_editions_are_what_the_overlays_generate(tmp_path):
    for name in EDITIONS:
        base, lang = split_name(name)
        shutil.copytree(ROOT / "solutions" / base, tmp_path / "solutions" / base)
        shutil.copytree(ROOT / "translations", tmp_path / "translations", dirs_exist_ok=True)
        for fresh in editions.write_edition(tmp_path, base, lang):
            assert read(fresh) == read(ROOT / fresh.relative_to(tmp_path)), fresh.name


def test_a_stale_translation_stops_the_edition(tmp_path):
    master, _ = masters_and_editions("solutions")[0]
    nb = read(master)
    cell = next(c for c in nb.cells if c.cell_type == "markdown")
    cell.source += "\n\nOne more sentence."
    overlay = editions.read_overlay(editions.overlay_path(ROOT, master, "zh"))
    with pytest.raises(editions.TranslationError, match=f"{cell.id}: stale"):
        editions.translated_notebook(nb, overlay, "zh")


@pytest.mark.parametrize("folder", ["solutions", "assignments"])
def test_code_and_test_cells_are_the_english_ones(folder):
    for master, edition in masters_and_editions(folder):
        en, zh = read(master), read(edition)
        added = [c for c in zh.cells if c.id == editions.LANGUAGE_CELL_ID]
        assert [c.source for c in added] == [editions.language_cell("zh").source]
        zh_cells = [c for c in zh.cells if c.id != editions.LANGUAGE_CELL_ID]
        assert [(c.id, c.cell_type) for c in zh_cells] == [(c.id, c.cell_type) for c in en.cells]
        for a, b in zip(en.cells, zh_cells):
            if a.cell_type == "code":
                assert (a.source, a.metadata) == (b.source, b.metadata), (edition.name, a.id)
            else:
                assert CJK.search(b.source) and b.source != a.source, (edition.name, a.id)


def _message(namespace: dict, check_id: str = "split_heads") -> Message:
    return run_check(check_id, InProcessSubmission(namespace, kit_code=True)).message


def _not_implemented(x, num_heads):
    raise NotImplementedError


def _timed_out() -> Message:
    """The worker's words when a call outlives its time limit."""
    with WorkerSubmission(HOSTILE / "infinite_loop.py", limits=Limits(call_s=1)) as sub:
        return run_check("split_heads", sub).message


COMMON_MESSAGES = {  # what the grader writes -> a phrase the Chinese must drop
    "not implemented": (lambda: _message({"split_heads": _not_implemented}), "not implemented"),
    "not defined": (lambda: _message({}), "is not defined"),
    "wrong shape": (lambda: _message({"split_heads": lambda x, h: x}), "got shape"),
    "wrong values": (lambda: _message({"split_heads": lambda x, h: oracle.split_heads(x, h) + 1}),
                     "wrong values"),
    "timed out": (_timed_out, "timed out"),
    "ok": (lambda: _message({"split_heads": oracle.split_heads}), "ok"),
    "speed": (lambda: speed_score.speed_message({"student": 1e-3, "looped": 4e-3,
                                                 "fused": 9e-4}, 4.0, "cpu"), "faster"),
}


@pytest.mark.parametrize("kind", COMMON_MESSAGES)
def test_common_messages_come_out_in_chinese(kind):
    make, english_phrase = COMMON_MESSAGES[kind]
    message = make()
    english = message.render("en")
    assert english_phrase in english
    zh = message.render("zh")
    assert CJK.search(zh) and english_phrase not in zh, zh
    for name in re.findall(r"`[^`]+`", english):  # code names stay as they are
        assert name in zh


def test_cli_speaks_chinese_with_the_option_or_the_variable(capsys, monkeypatch, tmp_path):
    def check(*args, **env):
        monkeypatch.setenv("MHA_KIT_LANG", "en")  # each call starts in English
        return check_here(capsys, monkeypatch, str(STUBS), "--only", "attend", *args, **env)

    by_option = check("--lang", "zh")
    assert "`attend` 还没有实现" in by_option.stdout and "总分" in by_option.stdout
    results = tmp_path / "results.json"
    by_variable = check("--json", str(results), MHA_KIT_LANG="zh")
    assert "`attend` 还没有实现" in by_variable.stdout
    assert json.loads(results.read_text())["tests"][0]["output"] == "`attend` 还没有实现"


def test_cli_speaks_the_language_of_an_editions_notebook(capsys, monkeypatch):
    """Without --lang or MHA_KIT_LANG, a Chinese edition's notebook is graded in Chinese (the
    language its kernel speaks); --lang still decides."""
    from autograder.cli import main

    monkeypatch.delenv("MHA_KIT_LANG", raising=False)
    notebook = str(ROOT / "assignments" / "mha_zh" / "multi_head_attention_zh.ipynb")
    assert main(["check", notebook, "--only", "split_heads"]) == 1
    assert "`split_heads` 还没有实现" in capsys.readouterr().out
    assert main(["check", notebook, "--only", "split_heads", "--lang", "en"]) == 1
    assert "`split_heads` is not implemented yet" in capsys.readouterr().out
    # The language travels as an argument: nothing is left in the environment, or chosen.
    assert "MHA_KIT_LANG" not in os.environ and settings.current().lang == "en"


def test_concepts_zh_follows_the_english_outline():
    def outline(path):
        lines = path.read_text(encoding="utf-8").splitlines()
        headings = [re.match(r"#+ (\d*)", line).group(0) for line in lines if line.startswith("#")]
        return headings, sum(line.startswith("|") for line in lines), lines.count("```")

    english, chinese = ROOT / "docs" / "concepts.md", ROOT / "docs" / "concepts_zh.md"
    assert outline(chinese) == outline(english)
    assert len(CJK.findall(chinese.read_text(encoding="utf-8"))) > 1000
