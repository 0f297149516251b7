"""The Chinese editions: generated from overlays, the same program and test cells as the English
notebooks with their prose, comments and printed words in Chinese, grader messages in Chinese
(what the nbgrader cycle gave each edition: test_nbgrader_cycle.py)."""

import copy
import io
import json
import os
import re
import shutil
import tokenize
import types
import warnings

import pytest
from conftest import HOSTILE, ROOT, STUBS, check_here
from notebook_helpers import read

from mha_kit import editions, notebook, oracle, settings
from mha_kit.assignments.mha import speed as speed_score
from mha_kit.grading.pictures import cjk_font
from mha_kit.grading.registry import ASSIGNMENTS, run_check, split_name
from mha_kit.messages import Message
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.policy import Limits
from mha_kit.runner.worker import WorkerSubmission

EDITIONS = editions.edition_names(ROOT)
CJK = re.compile(r"[\u4e00-\u9fff]")
# Chinese characters and full-width punctuation, between which a line break is a space in Jupyter.
CHINESE = "\u4e00-\u9fff\u3000-\u303f\uff00-\uffef"
SPACE_IN_A_SENTENCE = re.compile(
    rf"[{CHINESE}][*_]*\n[ \t]*[*_]*[{CHINESE}]"  # between two Chinese characters
    rf"|[\u3000-\u303f\uff00-\uffef][*_]*\n[ \t]*(?![-*+>#|][ \t]|\d+\.[ \t]|\$\$|```)\S"
    rf"|\S\n[ \t]*[\u3000-\u303f\uff00-\uffef]")  # after or before full-width punctuation
ENGLISH_PROSE = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,}")  # two words in a row


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


def test_overlays_translate_every_cell_a_student_reads_of_the_current_english():
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


def _llm_attention() -> tuple:
    """llm_attention's English master and its Chinese overlay."""
    master = ROOT / "solutions" / "llm_attention" / "llm_attention.ipynb"
    return read(master), editions.read_overlay(editions.overlay_path(ROOT, master, "zh"))


@pytest.mark.parametrize("cell_id", ["rope-intro", "gqa-demo", "flash-solution"])
def test_a_stale_translation_stops_the_edition(cell_id):
    nb, overlay = _llm_attention()
    cell = next(c for c in nb.cells if c.id == cell_id)
    cell.source += "\n# One more sentence."
    with pytest.raises(editions.TranslationError, match=f"{cell_id}: stale"):
        editions.translated_notebook(nb, overlay, "zh")


CHANGED_CODE = {  # cell id, what its translation changes -> the reason given
    "code": ("gqa-demo", "torch.randn(1, 9, 64)", "torch.randn(1, 9, 32)", "not the same program"),
    "a name in an f-string": ("rope-picture", "{speed}", "{i}", "not the same program"),
    "the solution's comment": ("flash-solution", "# (B, H, Tq, 1): m", "# (B, H, Tq, 1)：m",
                               "BEGIN SOLUTION"),
    "syntax": ("flash-meta", "out, lse =", "out, lse = =", "does not parse"),
}


@pytest.mark.parametrize("change", CHANGED_CODE)
def test_a_translation_that_changes_the_program_stops_the_edition(change):
    cell_id, old, new, reason = CHANGED_CODE[change]
    nb, overlay = _llm_attention()
    overlay = copy.deepcopy(overlay)
    assert old in overlay[cell_id]["zh"]
    overlay[cell_id]["zh"] = overlay[cell_id]["zh"].replace(old, new, 1)
    with pytest.raises(editions.TranslationError, match=f"{cell_id}: [^;]*{reason}"):
        editions.translated_notebook(nb, overlay, "zh")


def test_test_and_setup_cells_have_no_translation():
    nb, overlay = _llm_attention()
    for cell_id in ("setup", "rope-test"):
        cell = next(c for c in nb.cells if c.id == cell_id)
        wrong = {**overlay, cell_id: {"en": cell.source, "zh": cell.source + "  # 测试"}}
        with pytest.raises(editions.TranslationError, match=f"{cell_id}: no such cell"):
            editions.translated_notebook(nb, wrong, "zh")


@pytest.mark.parametrize(("english", "translation", "same"), [
    ("x = 1  # one\nprint('two', x)", "x = 1  # 一\nprint('二', x)", True),
    ('def f():\n    """Doc."""\n    return f"{x} of {y}"', 'def f():\n    """文档。"""\n'
     '    return f"{y} 的 {x}"', False),  # the same names, in another order
    ('f"pair {i}: {speed:g}"', 'f"第 {i} 对：{speed:g}"', True),
    ("%pip install -q kit", "%pip install -q other", False),  # a magic's words are code
    ("x = [1, 2]", "x = [1, 3]", False),
])
def test_a_translated_cell_may_change_only_comments_and_strings(english, translation, same):
    assert (editions.code_change(english, translation) is None) == same


def test_the_skeleton_adds_every_cell_to_translate_untranslated(tmp_path):
    master = tmp_path / "solutions" / "llm_attention" / "llm_attention.ipynb"
    master.parent.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "llm_attention" / master.name, master)
    editions.add_untranslated(tmp_path, master, "zh")
    overlay = editions.read_overlay(editions.overlay_path(tmp_path, master, "zh"))
    assert {"rope-intro", "gqa-demo", "flash-solution"} <= set(overlay)
    assert not {"setup", "rope-test"} & set(overlay)
    assert set(overlay) == {c.id for c in editions.translated_cells(read(master))}
    assert editions.problems(read(master), overlay, "zh") == [
        f"{cell_id}: not translated" for cell_id in overlay]


def _comments(source: str) -> list[str]:
    """A code cell's comments outside its solution region (which the release removes)."""
    tokens = tokenize.generate_tokens(io.StringIO(editions.SOLUTION_REGION.sub("", source)
                                                  ).readline)
    return [token.string for token in tokens if token.type == tokenize.COMMENT]


def _but_checksum(metadata: dict) -> dict:
    """A cell's metadata without the checksum nbgrader's release takes of its source."""
    nbgrader = {k: v for k, v in metadata.get("nbgrader", {}).items() if k != "checksum"}
    return {**metadata, "nbgrader": nbgrader} if "nbgrader" in metadata else metadata


@pytest.mark.parametrize("folder", ["solutions", "assignments"])
def test_an_editions_program_and_test_cells_are_the_english_ones(folder):
    for master, edition in masters_and_editions(folder):
        en, zh = read(master), read(edition)
        added = [c for c in zh.cells if c.id == editions.LANGUAGE_CELL_ID]
        assert [c.source for c in added] == [editions.language_cell("zh").source]
        zh_cells = [c for c in zh.cells if c.id != editions.LANGUAGE_CELL_ID]
        assert [(c.id, c.cell_type) for c in zh_cells] == [(c.id, c.cell_type) for c in en.cells]
        translated = {c.id for c in editions.translated_cells(en)}
        for a, b in zip(en.cells, zh_cells):
            where = (edition.name, a.id)
            assert _but_checksum(a.metadata) == _but_checksum(b.metadata), where
            if a.cell_type == "markdown":
                assert CJK.search(b.source) and b.source != a.source, where
            elif a.id in translated:
                assert editions.code_change(a.source, b.source) is None, where
                english_left = [c for c in _comments(b.source)  # (a release: # YOUR CODE HERE)
                                if ENGLISH_PROSE.search(c) and not CJK.search(c)]
                assert folder == "assignments" or english_left == [], where
            else:  # the setup and the test cells
                assert (a.source, a.metadata) == (b.source, b.metadata), where


def test_a_kernel_draws_chinese_from_the_language_cell_on(monkeypatch):
    """The titles a Chinese edition's picture cells draw show, where a Chinese font is
    installed; an English notebook's kernel is left as it was."""
    import matplotlib
    from IPython.core.events import EventManager, available_events
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    font = cjk_font()
    if font is None:
        pytest.skip("no font with Chinese characters on this machine")
    shell = types.SimpleNamespace(events=EventManager(None, available_events))
    with matplotlib.rc_context():
        notebook.draw_chinese_in(shell)
        monkeypatch.setenv("MHA_KIT_LANG", "en")
        shell.events.trigger("pre_run_cell", None)
        assert font not in matplotlib.rcParams["font.family"]
        monkeypatch.setenv("MHA_KIT_LANG", "zh")  # the language cell has run
        shell.events.trigger("pre_run_cell", None)
        assert shell.events.callbacks["pre_run_cell"] == []  # once is enough
        figure = Figure()
        figure.suptitle("蓝色：可以关注 (blue: may attend)")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "Glyph ... missing from font(s)"
            FigureCanvasAgg(figure).draw()


def test_chinese_prose_has_no_line_break_inside_a_sentence():
    """Jupyter shows a line break inside a paragraph as a space, which Chinese does not have."""
    for master, _ in masters_and_editions("solutions"):
        overlay = editions.read_overlay(editions.overlay_path(ROOT, master, "zh"))
        for cell in read(master).cells:
            if cell.cell_type == "markdown":
                found = SPACE_IN_A_SENTENCE.search(overlay[cell.id]["zh"])
                assert found is None, (master.name, cell.id, found and found.group())


def test_token_is_called_词元():
    """One word for token in the Chinese prose and comments; code spans keep their names."""
    for master, _ in masters_and_editions("solutions"):
        overlay = editions.read_overlay(editions.overlay_path(ROOT, master, "zh"))
        for cell in editions.translated_cells(read(master)):
            zh = overlay[cell.id]["zh"]
            prose = (re.sub(r"`[^`]*`", "", zh) if cell.cell_type == "markdown"
                     else " ".join(_comments(zh)))
            assert not re.search(r"\btokens?\b", prose), (master.name, cell.id)


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


def test_cli_speaks_chinese_with_the_option_or_the_variable(monkeypatch, tmp_path):
    def check(*args, **env):
        monkeypatch.setenv("MHA_KIT_LANG", "en")  # each call starts in English
        return check_here(str(STUBS), "--only", "attend", *args, **env)

    by_option = check("--lang", "zh")
    assert "`attend` 还没有实现" in by_option.stdout and "总分" in by_option.stdout
    results = tmp_path / "results.json"
    by_variable = check("--json", str(results), MHA_KIT_LANG="zh")
    assert "`attend` 还没有实现" in by_variable.stdout
    assert json.loads(results.read_text())["tests"][0]["output"] == "`attend` 还没有实现"


def test_cli_speaks_the_language_of_an_editions_notebook(capsys, monkeypatch):
    """Without --lang or MHA_KIT_LANG, a Chinese edition's notebook is graded in Chinese (the
    language its kernel speaks); --lang still decides."""
    from mha_kit.cli import main

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
