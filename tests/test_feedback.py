"""Messages and pictures: shapes named, NaN explained, masks drawn, shapes searched."""

from __future__ import annotations

import math
import re
import warnings

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from conftest import TEMPLATE, messages_with

from mha_kit.checks.core import Context, Picture
from mha_kit.checks.diagnosis import CATALOGUE, OPENINGS, named_in
from mha_kit.checks.feedback import (
    describe_mismatch,
    describe_shape,
    draw_masks,
    explain_nonfinite,
)
from mha_kit.grading import pictures
from mha_kit.grading.registry import run_check
from mha_kit.messages import ids_in, msg, render
from mha_kit.runner.inprocess import InProcessSubmission

matplotlib.use("Agg")


def searched(message, case: str) -> bool:
    """Whether `message` names `case` as the smallest failing case of a shape search."""
    return msg("case.searched", case=case) in messages_with(message, "case.searched")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def grade_one(tmp_path, check_id: str, source: str):
    path = tmp_path / "submission.py"
    path.write_text("import math\nimport torch\n\n" + source)
    return run_check(check_id, InProcessSubmission.from_path(path), Context())


# --------------------------------------------------------------------------- text


def test_a_missing_transpose_is_named_by_its_dims():
    described = describe_shape((2, 5, 4, 3), (2, 4, 5, 3), ("B", "H", "T", "D"))
    assert described.params["cause"] == msg(
        "shape.transposed", yours=msg("shape.dims", dims="B, T, H, D"), a="T", b="H")


def test_other_wrong_shapes_say_which_dim():
    dims = ("B", "H", "Tq", "Tk")
    assert describe_shape((2, 5, 7), (2, 3, 5, 7), dims).params["cause"] == msg(
        "shape.missing", dim="H")
    assert describe_shape((6, 5, 7), (2, 3, 5, 7), dims).params["cause"] == msg(
        "shape.flattened", a="B", b="H")
    assert describe_shape((2, 3, 5, 5), (2, 3, 5, 7), dims).params["cause"] == [
        msg("shape.size", dim="Tk", got=5, expected=7)]
    merged = describe_shape((2, 3, 5, 4), (2, 5, 12), ("B", "T", "H*D"))
    assert merged.params["cause"] == msg("shape.ndim", got=4, expected=3)


def test_nan_on_whole_rows_points_at_a_fully_blocked_query():
    got = torch.tensor([[0.5, 0.5], [math.nan, math.nan]])
    explained = explain_nonfinite(got, torch.tensor([[0.5, 0.5], [1.0, 0.0]]))
    assert explained == msg("nonfinite.nan_rows", first=(1, 0))  # every key blocked, or exp


def test_scattered_nan_points_at_zero_times_inf_and_overflow():
    got = torch.tensor([[0.5, math.nan], [1.0, 0.0]])
    explained = explain_nonfinite(got, torch.tensor([[0.5, 0.5], [1.0, 0.0]]))
    assert explained == msg("nonfinite.nan", first=(0, 1))  # 0 * inf, or exp overflowing


def test_inf_is_explained_and_finite_answers_are_not():
    got = torch.tensor([1.0, math.inf])
    assert explain_nonfinite(got, torch.tensor([1.0, 2.0])) == msg("nonfinite.inf", first=(1,))
    assert explain_nonfinite(torch.ones(2), torch.zeros(2)) is None


def test_a_mismatch_gives_index_values_and_the_heads_that_differ():
    expected = torch.zeros(1, 3, 2, 2, dtype=torch.float64)
    got = expected.clone()
    got[0, 1, 1, 0] = 0.25
    described = describe_mismatch(got, expected, torch.isclose(got, expected),
                                  ("B", "H", "T", "D"))
    assert described == msg("values.wrong_heads", index=(0, 1, 1, 0), expected=0.0, got=0.25,
                            error=0.25, heads="[1]", count=3)


def test_every_known_mistake_has_a_chinese_sentence():
    for mistake in CATALOGUE:
        chinese = mistake.sentence().render("zh")
        assert chinese.startswith(OPENINGS["zh"]) and "This matches" not in chinese, mistake.id
        assert mistake.sentence().render("en").startswith(OPENINGS["en"]), mistake.id


def test_masks_are_drawn_side_by_side():
    expected = torch.ones(3, 3, dtype=torch.bool).triu(1)
    lines = str(draw_masks(expected.T, expected)).splitlines()
    assert lines[0].split()[:2] == ["yours", "expected"]
    assert [line.split() for line in lines[1:]] == [
        [".", ".", ".", ".", "x", "x"],
        ["x", ".", ".", ".", ".", "x"],
        ["x", "x", ".", ".", ".", "."],
    ]


# --------------------------------------------------------------------------- real checks


def test_a_wrong_mask_is_drawn_in_the_message_and_pictured(tmp_path):
    result = grade_one(tmp_path, "causal_mask", (
        "def causal_mask(seq_len, device=None):\n"
        "    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(0)\n"))
    assert result.score == 0
    # At seq_len=1 inverting and shifting agree; the fixed cases tell them apart.
    assert named_in(result.message) == ["mask_shifted"]
    assert searched(result.message, "seq_len=1")
    message = render(result.message, "en")
    yours_then_expected = message.splitlines()[-1].split()
    assert yours_then_expected == ["x", "."]
    # In Chinese the named mistake and its hint are Chinese too; the drawn masks stay.
    chinese = render(result.message, "zh")
    assert chinese.startswith("这与“因果掩码错开了一条对角线”的结果一致")
    assert chinese.splitlines()[-1] == message.splitlines()[-1]
    # The picture shows the same mistake at 8 tokens, where the shifted diagonal is visible.
    assert result.picture.title == "causal_mask(8)"
    assert torch.equal(result.picture.got, torch.ones(8, 8, dtype=torch.bool).triu(0))
    assert torch.equal(result.picture.expected, torch.ones(8, 8, dtype=torch.bool).triu(1))


def test_memorised_answers_are_caught_by_the_search(tmp_path):
    # Right for every fixed case (1, 2, 5, 16) and nothing else.
    result = grade_one(tmp_path, "causal_mask", (
        "def causal_mask(seq_len, device=None):\n"
        "    known = {n: torch.ones(n, n, dtype=torch.bool).triu(1) for n in (1, 2, 5, 16)}\n"
        "    return known[seq_len].to(device)\n"))
    assert result.score == 0
    raised = messages_with(result.message, "runner.raised_text")
    assert [r.params["type"] for r in raised] == ["KeyError"], result.message
    assert searched(result.message, "seq_len=3")


def test_square_only_code_gets_the_smallest_counterexample(tmp_path):
    source = (
        "def scaled_scores(q, k):\n"
        "    t = q.shape[-2]  # assumes as many keys as queries\n"
        "    scores = q @ k[..., :t, :].transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
        "    return scores.expand(*scores.shape[:-1], t)\n")
    first = grade_one(tmp_path, "scaled_scores", source)
    assert first.score == 0
    assert searched(first.message, "B=1, T=1, Tk=2, H=1, D=1")
    assert msg("shape.size", dim="Tk", got=1, expected=2) in messages_with(first.message,
                                                                         "shape.size")
    assert grade_one(tmp_path, "scaled_scores", source).message == first.message  # derandomised


def test_a_wrong_module_shows_heatmaps_per_head_and_hypothesis_prints_nothing(tmp_path, capfd):
    template = tmp_path / "template.py"
    template.write_text(TEMPLATE.read_text().replace(
        "self.dropout(F.softmax(scores, dim=-1))", "self.dropout(F.softmax(scores, dim=-2))"))
    result = run_check("fused_mha", InProcessSubmission.from_path(template), Context())
    assert capfd.readouterr().out == ""
    assert "mistake.softmax_wrong_dim" in ids_in(result.message), result.message
    picture = result.picture
    assert picture.expected.shape == picture.got.shape and picture.expected.dim() == 4
    # The text names the search's smallest case; the picture a larger one, and says so.
    assert "case.searched" in ids_in(result.message)
    assert "picture.larger_case" in ids_in(picture.title)
    pictures.show(picture)
    assert len(plt.gcf().axes) == 2 * 3 * picture.expected.shape[1]  # 3 images + colour bars
    images = [ax for ax in plt.gcf().axes if ax.get_images() and ax.get_title()]
    assert {(ax.get_ylabel(), ax.get_xlabel()) for ax in images} == {("query i", "key j")}


def test_a_mask_picture_has_two_panels():
    expected = torch.ones(4, 4, dtype=torch.bool).triu(1)
    pictures.show(Picture("causal_mask(4)", expected, expected.T))
    assert [ax.get_title() for ax in plt.gcf().axes] == ["yours (black = blocked)",
                                                      "expected (black = blocked)"]


def test_a_batch_of_outputs_is_drawn_by_batch_element_not_by_head():
    """A (B, T, E) output's heatmaps are one row per batch element, and say so; a (B, H, T, T)
    tensor's, one row per head of the first batch element."""
    def titles(dims: tuple[str, ...], *shape: int) -> list[str]:
        fig = pictures.draw(Picture("out", torch.zeros(*shape), torch.ones(*shape), dims=dims))
        return [ax.get_title() for ax in fig.axes]

    assert {"expected, B=1", "yours, B=1"} <= set(titles(("B", "T", "E"), 2, 3, 4))
    assert not any("head" in t for t in titles(("B", "T", "E"), 2, 3, 4))
    assert "expected, head 1" in titles(("B", "H", "Tq", "Tk"), 1, 2, 3, 3)


@pytest.mark.parametrize("dims, rows, cols", [(("B", "T", "E"), "token t", "feature"),
                                              (("B", "H", "Tq", "Tk"), "query i", "key j"),
                                              (("B", "H", "T", "D"), "token t", "feature")])
def test_a_heatmaps_axes_say_what_they_run_over(dims, rows, cols):
    shape = (1, 2, 3, 3)[-len(dims):]
    fig = pictures.draw(Picture("out", torch.zeros(shape), torch.ones(shape), dims=dims))
    assert {(ax.get_ylabel(), ax.get_xlabel()) for ax in fig.axes if ax.get_images()
            and ax.get_title()} == {(rows, cols)}


def _drawn_in_chinese(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """A mask picture drawn under MHA_KIT_LANG=zh: its panels' titles, and the warnings that
    rendering it gave."""
    monkeypatch.setenv("MHA_KIT_LANG", "zh")
    expected = torch.ones(4, 4, dtype=torch.bool).triu(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = pictures.draw(Picture("causal_mask(4)", expected, expected.T))
        fig.canvas.draw()
    return [ax.get_title() for ax in fig.axes], [str(w.message) for w in caught]


def test_a_chinese_picture_without_a_chinese_font_is_drawn_in_english(monkeypatch):
    """No rows of empty boxes, and no warning per missing glyph (a fresh Colab runtime)."""
    monkeypatch.setattr(pictures, "CJK_FONTS", ())
    titles, warned = _drawn_in_chinese(monkeypatch)
    assert titles == ["yours (black = blocked)", "expected (black = blocked)"]
    assert warned == []


@pytest.mark.skipif(pictures.cjk_font() is None, reason="no font with Chinese characters here "
                    "(CI installs fonts-wqy-microhei)")
def test_a_chinese_font_installed_after_matplotlib_listed_its_fonts_is_found(monkeypatch):
    """matplotlib caches its font list on disk and never adds a font installed later (this
    machine's list predates fonts-wqy-microhei): the kit adds it from the system's fonts."""
    from matplotlib import font_manager

    found = pictures.cjk_font()
    monkeypatch.setattr(font_manager.fontManager, "ttflist", [
        f for f in font_manager.fontManager.ttflist if f.name not in pictures.CJK_FONTS])
    pictures._add_installed_cjk_fonts.cache_clear()
    assert pictures.cjk_font() == found


@pytest.mark.skipif(pictures.cjk_font() is None, reason="no font with Chinese characters here "
                    "(CI installs fonts-wqy-microhei)")
def test_a_chinese_picture_uses_a_font_with_chinese_characters(monkeypatch):
    titles, warned = _drawn_in_chinese(monkeypatch)
    assert all(re.search("[\u4e00-\u9fff]", title) for title in titles), titles
    assert warned == []


@pytest.mark.parametrize("shape", [(2, 512, 16), (2, 16, 512)])
def test_a_long_thin_tensor_fills_its_panels(shape):
    """FlashAttention's memory check compares (B, H, 512, 16) outputs: drawn with square cells
    each panel would be a strip 32 times longer than wide. Each panel's heatmap is drawn at
    least half as wide as high and half as high as wide."""
    fig = pictures.draw(Picture("out", torch.zeros(shape), torch.ones(shape),
                                dims=("H", "T", "D")))
    fig.canvas.draw()
    panels = [ax.get_window_extent() for ax in fig.axes if ax.get_images() and ax.get_title()]
    assert len(panels) == 6
    for box in panels:
        assert box.height / 2 <= box.width <= box.height * 2, (box.width, box.height)


@pytest.mark.parametrize("shape", [(5,), (3, 4)])
def test_low_dimensional_pictures_are_drawn(shape):
    expected = torch.zeros(shape)
    pictures.show(Picture("output_projection", expected, expected + 1))
    assert len(plt.gcf().axes) == 6


def test_dropout_left_on_in_eval_mode_is_told_so(tmp_path):
    """F.dropout(w, p) drops whatever the mode: its `training` defaults to True."""
    result = grade_template(tmp_path, "fused_mha_contract",
                            "self.dropout(F.softmax(scores, dim=-1))",
                            "F.dropout(F.softmax(scores, dim=-1), self.dropout.p)")
    assert not result.passed
    assert result.message.params["text"] == msg("dropout.in_eval", name="MultiHeadAttention",
                                                p=0.5), result.message


def test_a_dropout_that_drops_nothing_is_told_so(tmp_path):
    """The causal mask's zeros are not dropped weights: a module without dropout is named."""
    path = tmp_path / "no_dropout.py"
    path.write_text(TEMPLATE.read_text().replace("self.dropout = nn.Dropout(dropout)",
                                                 "self.dropout = nn.Dropout(0.0)"))
    result = run_check("fused_mha_contract", InProcessSubmission.from_path(path), Context())
    assert result.score == 0
    assert result.message.params["text"] == msg("dropout.none_dropped", p=0.5), result.message


def test_a_float32_output_with_the_right_values_names_no_mistake(tmp_path):
    """Only the dtype is wrong: a mistake that leaves the values right (a softmax by hand, on
    logits too small to overflow) must not be named for it."""
    path = tmp_path / "float32_out.py"
    path.write_text(_template_with("out = self.out_proj(merge_heads(torch.matmul(weights, v)))",
                                   "out = self.out_proj(merge_heads(torch.matmul(weights, v)))"
                                   ".float()"))
    result = run_check("fused_mha_contract", InProcessSubmission.from_path(path), Context())
    assert result.score == 0
    assert result.message.params["text"] == msg(
        "check.what", what=msg("what.output", name="MultiHeadAttention"),
        detail=msg("tensor.dtype", dtype="torch.float32", expected="torch.float64")), \
        result.message


_SOFTMAX = "weights = self.dropout(F.softmax(scores, dim=-1))"
_MIX = "out = self.out_proj(merge_heads(torch.matmul(weights, v)))"
_DROPPED_OUT = "out = self.dropout(self.out_proj(merge_heads(torch.matmul(weights, v))))"


@pytest.mark.parametrize("edits,told", [
    # d2l's MultiHeadAttention: it keeps the weights from before its dropout
    ([(_SOFTMAX, "weights = F.softmax(scores, dim=-1)"),
      (_MIX, "out = self.out_proj(merge_heads(torch.matmul(self.dropout(weights), v)))")],
     "dropout.weights_not_returned"),
    # dropout on the values: the weights returned are the softmax, and rightly so
    ([(_MIX, "out = self.out_proj(merge_heads(torch.matmul(weights, self.dropout(v))))"),
      (_SOFTMAX, "weights = F.softmax(scores, dim=-1)")],
     "dropout.weights_not_returned"),
    # dropout on the scores before the softmax: no weight is 0, and none is the softmax's
    ([(_SOFTMAX, "weights = F.softmax(self.dropout(scores), dim=-1)")], "dropout.none_dropped"),
    # nanoGPT's CausalSelfAttention: resid_dropout after c_proj as well
    ([(_MIX, _DROPPED_OUT)], "dropout.on_output"),
    # ViT-CIFAR's MultiHeadSelfAttention: dropout after the projection only
    ([(_SOFTMAX, "weights = F.softmax(scores, dim=-1)"), (_MIX, _DROPPED_OUT)],
     "dropout.on_output"),
], ids=["weights from before dropout", "values dropped", "scores dropped", "output dropped too",
        "output dropped instead"])
def test_dropout_in_the_wrong_place_is_told_where(tmp_path, edits, told):
    """Dropout that acts, but not on the weights returned: the message says where it acts."""
    text = TEMPLATE.read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "misplaced_dropout.py"
    path.write_text(text)
    result = run_check("fused_mha_contract", InProcessSubmission.from_path(path), Context())
    assert result.score == 0
    assert result.message.params["text"] == msg(told, p=0.5), result.message


# --------------------------------------------------------------------------- one explanation


def _template_with(old: str, new: str) -> str:
    text = TEMPLATE.read_text()
    assert text.count(old) == 1, old
    return text.replace(old, new)


def grade_template(tmp_path, check_id: str, old: str, new: str):
    path = tmp_path / "mutant.py"
    path.write_text(_template_with(old, new))
    return run_check(check_id, InProcessSubmission.from_path(path), Context())


TRIL = ("torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device), diagonal=1)",
        "torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device))")


def test_a_tril_causal_mask_is_told_the_fix_in_causal_mask(tmp_path):
    found = ids_in(grade_template(tmp_path, "causal_mask", *TRIL).message)
    assert "mistake.mask_inverted_causal_mask" in found  # True marks a blocked pair: torch.triu
    assert "mistake.mask_inverted" not in found  # the attend-side fix (not ~mask)
    # The module that calls it is graded with the kit's causal_mask, and told so.
    fused = grade_template(tmp_path, "fused_mha_masks", *TRIL)
    assert fused.passed and ids_in(fused.message) == {"standin.note", "ok"}


def test_an_ambiguous_shape_gets_no_guess():
    dims = ("B", "H", "Tq", "Tk")
    # (1, 1, 1) is any dim missing, or any two flattened: no guess, only the shapes.
    assert describe_shape((1, 1, 1), (1, 1, 1, 1), dims) == msg(
        "shape.wrong_named_bare", got=(1, 1, 1), expected=(1, 1, 1, 1),
        dims=msg("shape.dims", dims="B, H, Tq, Tk"))
    # Repeated sizes: several orders fit, so no "did you forget to transpose": no cause at all.
    assert describe_shape((1, 2, 1, 1), (1, 1, 1, 2), dims).id == "shape.wrong_named_bare"
    assert describe_shape((2, 5, 5), (2, 4, 5, 5)).params["cause"] == msg(
        "shape.missing_index", dim=msg("shape.dim", i=1))


def test_weights_averaged_over_heads_get_one_explanation(tmp_path):
    averaged = ("return out, weights if need_weights else None",
                "return out, weights.mean(dim=1) if need_weights else None")
    for check_id in ("fused_mha", "fused_mha_contract"):
        message = grade_template(tmp_path, check_id, *averaged).message
        assert named_in(message) == ["weights_averaged"], message
        # one explanation: no two dims flattened, no dim missing but H (not "the dim 1 dim")
        assert "shape.flattened" not in ids_in(message), message
        assert all(m.params["dim"] == "H" for m in messages_with(message, "shape.missing"))
    assert messages_with(message, "shape.missing") == [msg("shape.missing", dim="H")]
    assert messages_with(message.params["case"], "case.eval_dropout") == [
        msg("case.eval_dropout", p=0.5)]


def test_k_dot_T_on_4d_tensors_is_explained_by_torchs_warning(tmp_path):
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        result = grade_template(tmp_path, "scaled_scores", "k.transpose(-2, -1)) / math",
                                "k.T) / math")
    assert result.message.id == "check.warned", result.message  # the warning comes first
    assert result.message.params["warned"] == msg(
        "runner.warned_code", line=21, cell="",
        code="return torch.matmul(q, k.T) / math.sqrt(q.shape[-1])", warning=msg("warning.x_t"))
    assert "shape.transposed" not in ids_in(result.message)  # no "did you forget to transpose"
    assert not [w for w in shown if "mha_kit" in w.filename]  # none blamed on the kit


def test_a_warning_in_a_notebook_names_the_cell_its_line_counts_from(tmp_path):
    """A notebook numbers each cell's lines from 1: "line 2" alone would point anywhere."""
    import nbformat

    cells = ["import math\nimport torch\n",
             "def scaled_scores(q, k):\n    return q @ k.T / math.sqrt(q.shape[-1])\n"]
    path = tmp_path / "warns.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]),
                   str(path))
    result = run_check("scaled_scores", InProcessSubmission.from_path(path))
    assert result.message.id == "check.warned", result.message  # the warning comes first
    assert result.message.params["warned"] == msg(
        "runner.warned_code", line=2, cell=msg("line.cell", function="scaled_scores"),
        code="return q @ k.T / math.sqrt(q.shape[-1])", warning=msg("warning.x_t"))


def test_the_missing_bias_names_its_projection(tmp_path):
    result = grade_template(tmp_path, "fused_mha",
                            "self.out_proj(merge_heads(torch.matmul(weights, v)))",
                            "merge_heads(torch.matmul(weights, v)) @ self.out_proj.weight.t()")
    assert named_in(result.message) == ["bias_ignored"]
    assert "mistake.bias_ignored_o" in ids_in(result.message)  # out_proj's, by name
    assert render(result.message, "zh").startswith("这与“out_proj 漏掉了偏置”的结果一致")


# --------------------------------------------------------------------------- several causes


def test_each_cause_is_told_the_most_informative_first(tmp_path):
    result = grade_template(
        tmp_path, "fused_mha", "        scores = scaled_scores(q, k)\n",
        "        if key.shape[1] != query.shape[1] or key.shape[2] != query.shape[2]:\n"
        "            raise NotImplementedError('self-attention only')\n"
        "        scores = q @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])\n")
    several = result.message
    assert several.id == "cause.several" and several.params["count"] == 2, several
    first, second = messages_with(several, "cause.item_on")
    assert (first.params["n"], first.params["where"]) == (1, msg("trait.cross"))
    raised = first.params["text"].params["text"]
    assert raised.id == "cause.not_implemented", raised  # with its line and its text
    assert raised.params["raised"].params["error"] == "self-attention only"
    assert (second.params["n"], second.params["where"]) == (2, msg("trait.self"))
    assert second.params["text"].params["text"].params["mistake"] == msg(
        "mistake.scale_by_embed_dim")  # scaling by √embed_dim instead of √d_head
    assert "runner.not_implemented" not in ids_in(result.message)
    assert result.picture is not None  # the wrong values, pictured


def test_a_mistake_is_named_only_when_it_reproduces_every_failing_case(tmp_path):
    # Divides by d when B = 1 (as scale_by_d would) and by d + 1 otherwise (no known mistake).
    result = grade_one(tmp_path, "scaled_scores", (
        "def scaled_scores(q, k):\n"
        "    d = q.shape[-1]\n"
        "    return q @ k.transpose(-2, -1) / (d if q.shape[0] == 1 else d + 1)\n"))
    assert result.score == 0
    assert "check.mistake" not in ids_in(result.message), result.message


# --------------------------------------------------------------------------- pictures


def test_split_heads_is_pictured_with_labelled_cells(tmp_path):
    result = grade_template(tmp_path, "split_heads",
                            "x.reshape(b, t, num_heads, e // num_heads).permute(0, 2, 1, 3)",
                            "x.reshape(b, num_heads, t, e // num_heads)")
    picture = result.picture
    assert picture.cells and tuple(picture.source.shape) == (1, 6, 6)
    assert picture.got.shape == picture.expected.shape == (1, 2, 6, 3)
    assert float(picture.expected[0, 1, 2, 0]) == 210  # token 2, head 1, feature 0
    pictures.show(picture)
    texts = [t.get_text() for ax in plt.gcf().axes for t in ax.texts]
    assert "t2\nh1 f0" in texts


@pytest.mark.parametrize("check_id", ["attend", "fused_mha"])
def test_a_mask_ignored_is_pictured_as_masks_on_eight_tokens(tmp_path, check_id):
    if check_id == "attend":
        old = '        scores = scores.masked_fill(mask, float("-inf"))\n    weights'
    else:
        old = '            scores = scores.masked_fill(mask, float("-inf"))\n        weights'
    result = grade_template(tmp_path, check_id, old, old.replace("scores = scores.", "scores."))
    assert "mistake.mask_ignored" in ids_in(result.message), result.message
    picture = result.picture
    assert picture.expected.dtype == torch.bool and picture.expected.shape == (8, 8)
    assert torch.equal(picture.expected, torch.ones(8, 8, dtype=torch.bool).triu(1))
    assert not picture.got.any()  # no weight is 0: nothing blocked


def test_a_module_that_raises_on_some_ways_of_masking_names_each_by_its_label(tmp_path):
    """Not the tensors the case carries (it printed `{'attn_mask': tensor([[False, ...`)."""
    result = grade_template(
        tmp_path, "fused_mha_masks",
        "        mask = _combined_mask(attn_mask, is_causal, query.shape[1], query.device)\n"
        "        scores = scaled_scores(q, k)\n",
        "        if attn_mask is not None:\n"
        "            raise NotImplementedError('masks')\n"
        "        mask = _combined_mask(attn_mask, is_causal, query.shape[1], query.device)\n"
        "        scores = scaled_scores(q, k)\n")
    assert not result.passed
    assert {"case.attn_mask_only", "case.both_masks"} <= ids_in(result.message)
    assert "tensor(" not in result.message.render("en")
