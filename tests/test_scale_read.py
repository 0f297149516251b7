"""A wrong scale is read off the answer, any constant, and said in numbers; a right one never."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from conftest import TEMPLATE, messages_with

from mha_kit.checks.core import tolerance
from mha_kit.checks.diagnosis import named_in
from mha_kit.checks.scale import (
    ScaleReading,
    scale_of_scores,
    scale_of_weights,
    scale_reading,
    scale_sentence,
)
from mha_kit.grading.registry import run_checks
from mha_kit.messages import ids_in, msg
from mha_kit.runner.inprocess import InProcessSubmission

B, H, T, D = 2, 4, 5, 8
E = H * D
SCALES = {"1/√3": 1 / math.sqrt(3), "1/D": 1 / D, "1/√E": 1 / math.sqrt(E),
          "1/(2√D)": 1 / (2 * math.sqrt(D)), "none": 1.0, "0.1": 0.1}


def raw(dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(B, H, T, D, generator=gen, dtype=dtype) for _ in range(2))
    return q @ k.transpose(-2, -1)  # (B, H, T, T)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", SCALES)
def test_any_constant_scale_is_read_off_scores_and_weights(name: str, dtype: torch.dtype):
    scores, scale, tol = raw(dtype), SCALES[name], tolerance(dtype)
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    weights = torch.softmax((scores * scale).masked_fill(causal, -math.inf), dim=-1)
    assert scale_of_scores(scores * scale, scores, tol) == pytest.approx(scale, rel=1e-3)
    assert scale_of_weights(weights, scores, tol) == pytest.approx(scale, rel=1e-3)
    sentence = scale_sentence([scale_reading(scale, D, E)])
    assert sentence is not None and sentence.params["divisor"] == pytest.approx(1 / scale)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_right_scale_is_never_told(dtype: torch.dtype):
    scores, tol = raw(dtype), tolerance(dtype)
    right = 1 / math.sqrt(D)
    assert scale_reading(scale_of_scores(scores * right, scores, tol), D, E) is None
    weights = torch.softmax(scores * right, dim=-1)
    assert scale_reading(scale_of_weights(weights, scores, tol), D, E) is None


def test_what_no_constant_explains_is_not_read_as_a_scale():
    scores = raw(torch.float64)
    tol = tolerance(torch.float64)
    assert scale_of_weights(torch.softmax(scores, dim=-2), scores, tol) is None  # wrong dim
    assert scale_of_scores(scores + 1.0, scores, tol) is None


def test_the_names_of_the_divisor_and_the_hint_about_k_dim():
    sentence = scale_sentence([scale_reading(1 / math.sqrt(3), D, E)])
    assert sentence.params["named"].params["expression"] == "√3"
    assert "mistake.scale_dims" in ids_in(sentence)  # k.dim() taken for k.size(-1)
    assert scale_sentence([scale_reading(0.1, D, E)]).params["named"] == ""  # by its value
    assert scale_sentence([scale_reading(1 / math.sqrt(E), D, E)]).params["named"] == msg(
        "mistake.scale_named", expression="2·√8 = √32")


def test_a_scale_is_said_only_when_every_failing_case_follows_one_rule():
    """Divided by d in some cases and by d + 1 in others is no one scale; by d in all is."""
    by_d = [ScaleReading(4.0, 4), ScaleReading(8.0, 8)]
    assert scale_sentence(by_d) is not None
    assert scale_sentence([ScaleReading(4.0, 4), ScaleReading(9.0, 8)]) is None
    assert scale_sentence([ScaleReading(10.0, 4), ScaleReading(10.0, 8)]) is not None


def test_a_module_scaled_by_a_constant_is_told_the_constant(tmp_path: Path):
    """The same constant in scaled_scores, AttentionHead and the fused module (the looped
    module is graded with the kit's AttentionHead, since that one fails its check)."""
    path = tmp_path / "tenth.py"
    path.write_text(TEMPLATE.read_text().replace(
        "torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])",
        "torch.matmul(q, k.transpose(-2, -1)) * 0.1").replace(
        "return attend(scaled_scores(q, k), v, attn_mask)",
        "return attend(q @ k.transpose(-2, -1) * 0.1, v, attn_mask)").replace(
        "scores = scaled_scores(q, k)", "scores = q @ k.transpose(-2, -1) * 0.1"))
    for result in run_checks(InProcessSubmission.from_path(path),
                             only=["scaled_scores", "attention_head", "fused_mha"]):
        assert not result.passed
        assert named_in(result.message) == ["scale_read"], result.message
        said = messages_with(result.message, "mistake.scale_read")
        assert [m.params["divisor"] for m in said] == [pytest.approx(10, rel=1e-4)]  # {:.4g}
        assert "除以 10" in result.message.render("zh")
