"""Feedback on almost-right modules: what a module does wrong besides its values."""

from __future__ import annotations

from pathlib import Path

from conftest import TEMPLATE

from autograder.grading.registry import run_checks
from autograder.messages import ids_in
from autograder.runner.inprocess import InProcessSubmission

# As a real tutorial writes it: the output projection built inside forward, on every call.
LINEAR_IN_FORWARD = ("        out = self.out_proj(merge_heads(torch.matmul(weights, v)))",
                     "        out = nn.Linear(v.shape[1] * v.shape[-1], query.shape[-1])("
                     "merge_heads(torch.matmul(weights, v)))")


def test_a_layer_built_in_forward_is_named_with_its_line(tmp_path: Path):
    source = TEMPLATE.read_text()
    assert source.count(LINEAR_IN_FORWARD[0]) == 1
    path = tmp_path / "linear_in_forward.py"
    path.write_text(source.replace(*LINEAR_IN_FORWARD))
    results = {r.id: r for r in run_checks(InProcessSubmission.from_path(path),
                                           only=["fused_mha", "fused_mha_masks", "attend"])}
    assert results["attend"].passed  # the functions are untouched
    for check in ("fused_mha", "fused_mha_masks"):
        message = results[check].message
        assert not results[check].passed
        assert {"runner.params_in_forward", "device.where_code"} <= ids_in(message), message
        assert "nn.Linear(v.shape[1]" in str(message)  # the line that builds it


def test_a_correct_module_makes_no_parameter_in_forward():
    results = run_checks(InProcessSubmission.from_path(TEMPLATE), only=["fused_mha"])
    assert results[0].passed and "runner.params_in_forward" not in ids_in(results[0].message)
