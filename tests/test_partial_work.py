"""Feedback on almost-right modules: what a module does wrong besides its values."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TEMPLATE, messages_with

from autograder.checks.diagnosis import named_in
from autograder.grading.batch import grade_submission
from autograder.grading.registry import run_checks
from autograder.messages import ids_in
from autograder.runner.inprocess import InProcessSubmission
from autograder.runner.policy import Limits

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


# Half-finished modules, as students and published code leave them: the fused module raises
# NotImplementedError for one kind of case and hides one of the catalogue's mistakes in the
# cases that run. Each: (the guard, the mistake's edit of template.py's fused module, the
# mistake, what fused_mha_contract says).
_FORWARD_START = """        key = query if key is None else key
        value = key if value is None else value
        q = split_heads(self.q_proj(query), self.num_heads)"""
HALF_FINISHED = {
    "cross-attention": ("""        if key is not None and key.shape != query.shape:
            raise NotImplementedError("cross-attention: later")
""", ("scaled_scores(q, k)", "scaled_scores(q, k) * math.sqrt(q.shape[-1]) / "
      "math.sqrt(query.shape[-1])"), "scale_by_embed_dim", "scale_by_embed_dim"),
    "masks": ("""        if attn_mask is not None or is_causal:
            raise NotImplementedError("masks: later")
""", ("scaled_scores(q, k)", "torch.matmul(q, k.transpose(-2, -1))"), "no_scaling",
              "cause.not_implemented_here"),
    "bias=False": ("""        if self.q_proj.bias is None:
            raise NotImplementedError("bias=False: later")
""", ("k = split_heads(self.k_proj(key), self.num_heads)",
      "k = split_heads(self.q_proj(key), self.num_heads)"), "q_proj_on_key", "q_proj_on_key"),
    "dropout": ("""        if self.training and self.dropout.p > 0:
            raise NotImplementedError("dropout: later")
""", ("v = split_heads(self.v_proj(value), self.num_heads)",
      "v = split_heads(self.k_proj(value), self.num_heads)"), "k_proj_on_value",
                "k_proj_on_value"),
}


def half_finished(kind: str) -> str:
    guard, (old, new), _, _ = HALF_FINISHED[kind]
    source = TEMPLATE.read_text()
    assert source.count(_FORWARD_START) == 1
    source = source.replace(_FORWARD_START, guard + _FORWARD_START)
    at = source.rindex(old)  # the fused module is the file's last class
    return source[:at] + new + source[at + len(old):]


@pytest.mark.parametrize("kind", HALF_FINISHED)
def test_a_half_finished_module_is_graded_on_what_runs(kind: str, tmp_path: Path):
    """The mistake in the cases that run is named, and the cases left out are said as such:
    never "not implemented yet" for code that runs."""
    path = tmp_path / "half.py"
    path.write_text(half_finished(kind))
    results = {r.id: r for r in run_checks(InProcessSubmission.from_path(
        path), only=["fused_mha", "fused_mha_masks", "fused_mha_contract"])}
    _, _, mistake, contract = HALF_FINISHED[kind]
    assert mistake in named_in(results["fused_mha"].message), results["fused_mha"].message
    for result in results.values():
        assert "runner.not_implemented" not in ids_in(result.message), result.message
    said = results["fused_mha_contract"]
    assert contract in ids_in(said.message) | set(named_in(said.message)), said.message


def test_a_module_that_hangs_on_one_kind_of_case_is_told_the_case(tmp_path: Path):
    """An infinite loop for cross-attention only: the time limit names the case it met (key
    and query of other lengths), and the checks that never meet it are earned."""
    path = tmp_path / "hangs.py"
    hang = ("        if key is not None and key.shape != query.shape:\n"
            "            while True:\n"
            "                pass\n")
    path.write_text(TEMPLATE.read_text().replace(_FORWARD_START, hang + _FORWARD_START))
    results, _ = grade_submission(path, only=["fused_mha", "fused_mha_masks"],
                                  limits=Limits(call_s=1))
    hung, masks = results
    assert not hung.passed and masks.passed
    assert [m.params["limit"] for m in messages_with(hung.message, "worker.timeout")] == [1]
    case = messages_with(hung.message, "check.case")[0].params["case"]
    assert "Tk=" in str(case), case  # the cross-attention case, by its sizes
