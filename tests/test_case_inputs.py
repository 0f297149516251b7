"""Inputs reach the student's code as their case says: a case labelled non-contiguous passes
non-contiguous tensors, and self-attention one tensor three times, in process and through the
worker's pipe, so code that treats them differently is caught, or runs as it would."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import TEMPLATE

from autograder.grading.batch import grade_submission
from autograder.grading.registry import run_checks
from autograder.messages import ids_in
from autograder.runner.inprocess import InProcessSubmission
from autograder.runner.protocol import copy_as_given

NON_CONTIGUOUS = {"case.non_contiguous_input", "case.non_contiguous_inputs",
                  "case.non_contiguous_x"}

# The template with one function that scales any non-contiguous input by 1.5.
ODD_ON_STRIDES = {
    "split_heads": ("    b, t, e = x.shape\n",
                    "    b, t, e = x.shape\n    x = x if x.is_contiguous() else x * 1.5\n"),
    "output_projection": ("def output_projection(x, weight, bias=None):\n",
                          "def output_projection(x, weight, bias=None):\n"
                          "    x = x if x.is_contiguous() else x * 1.5\n"),
}


def odd_file(tmp_path: Path, check: str) -> Path:
    old, new = ODD_ON_STRIDES[check]
    text = TEMPLATE.read_text()
    assert text.count(old) == 1, check
    path = tmp_path / f"{check}.py"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize("check", sorted(ODD_ON_STRIDES))
def test_code_that_treats_non_contiguous_input_differently_is_caught(tmp_path, check):
    path = odd_file(tmp_path, check)
    (in_process,) = run_checks(InProcessSubmission.from_path(path), only=[check])
    through_worker = grade_submission(path, only=[check])[0][0]
    for result in (in_process, through_worker):
        assert not result.passed
        assert NON_CONTIGUOUS & ids_in(result.message)  # the case that shows it


def test_a_copy_keeps_the_strides_it_was_given():
    gapped = torch.arange(24.0).view(2, 12)[:, ::2]  # a view with gaps: clone() packs it
    assert gapped.clone().is_contiguous()
    copy = copy_as_given(gapped)
    assert copy.stride() == gapped.stride() and torch.equal(copy, gapped)
    assert copy.untyped_storage().data_ptr() != gapped.untyped_storage().data_ptr()
    expanded = torch.ones(3).expand(4, 3)  # overlapping: copied contiguous, as clone() does
    assert torch.equal(copy_as_given(expanded), expanded)


# The template's fused module finished for self-attention only, told apart by identity, as
# nn.MultiheadAttention's own fast path tells it (`query is key`).
SELF_ONLY = ("        key = query if key is None else key\n",
             "        if key is not None and (key is not query or value is not query):\n"
             "            raise NotImplementedError('cross-attention: later')\n"
             "        key = query if key is None else key\n")


def test_self_attention_passes_one_tensor_three_times(tmp_path):
    """`mha(x, x, x)`, in process and through the worker's pipe: a module that asks
    `key is query` runs its self-attention path, and only the cross-attention cases raise."""
    text = TEMPLATE.read_text()
    at = text.rindex(SELF_ONLY[0])  # the fused module: the file's last class
    path = tmp_path / "self_only.py"
    path.write_text(text[:at] + SELF_ONLY[1] + text[at + len(SELF_ONLY[0]):])
    checks = ["fused_mha", "fused_mha_masks", "fused_mha_contract"]
    for results in (run_checks(InProcessSubmission.from_path(path), only=checks),
                    grade_submission(path, only=checks)[0]):
        by_id = {r.id: r for r in results}
        assert by_id["fused_mha_masks"].passed and by_id["fused_mha_contract"].passed, results
        assert "cause.not_implemented" in ids_in(by_id["fused_mha"].message)  # cross only
