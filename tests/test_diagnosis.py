"""The catalogue of known mistakes: right when no knob is turned, wrong by exactly one mistake
when one is, and matched only by the answer (or the error) it reproduces."""

from __future__ import annotations

import pytest
import torch

from mha_kit import oracle
from mha_kit.assignments.mha import modules
from mha_kit.checks import diagnosis
from mha_kit.checks.core import TIGHT
from mha_kit.checks.diagnosis import CATALOGUE, MHA_VARIANTS, Diagnosis, Knobs, named_in
from mha_kit.checks.inputs import Attn, draw_inputs
from mha_kit.messages import msg
from mha_kit.runner.protocol import StudentCodeError

GEN = torch.Generator().manual_seed(0)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=GEN, dtype=torch.float64)


def run_mha(c: Attn, knobs: Knobs | None = None) -> tuple:
    inp = draw_inputs(c, torch.Generator().manual_seed(c.Tq), "cpu")
    knobs = knobs or Knobs()
    got = diagnosis.attention(inp.params, inp.query, inp.key, inp.value, c.H, inp.mask, knobs)
    return got, modules.expected_mha(c, inp)


def test_ids_and_sentences_are_unique_and_found_in_messages():
    assert len({m.id for m in CATALOGUE}) == len(CATALOGUE)
    for mistake in CATALOGUE:
        message = msg("check.case", case="B=1, T=2", text=msg(
            "check.mistake", mistake=mistake.sentence(), text="wrong values"))
        assert named_in(message) == [mistake.id]
        assert named_in(str(message)) == []  # words name nothing: a student's text could
    assert named_in(msg("check.case", case="B=1", text="wrong values")) == []


@pytest.mark.parametrize("c", [Attn(2, 5, 12, 3), Attn(2, 3, 12, 4, Tk=6, kdim=5, vdim=7),
                               Attn(1, 4, 6, 2, mask="causal"), Attn(2, 4, 8, 2, bias=False,
                                                                     mask="random")],
                         ids=str)
def test_with_no_knob_turned_it_is_torch_multi_head_attention(c: Attn):
    (out, weights), (want_out, want_weights) = run_mha(c)
    torch.testing.assert_close(weights, want_weights)
    torch.testing.assert_close(out, want_out)


def test_with_one_head_and_no_out_proj_it_is_one_attention_head():
    c = Attn(2, 4, 6, 1, Tk=5, kdim=3, vdim=4, mask="random")
    inp = draw_inputs(c, torch.Generator().manual_seed(1), "cpu")
    head = {k: v[:4] for k, v in inp.params.items() if k[0] in "qkv" and v is not None}
    out, weights = diagnosis.attention(head, inp.query, inp.key, inp.value, 1, inp.mask)
    want_out, want_weights = oracle.attention_head(head, inp.query, inp.key, inp.value, inp.mask)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(weights, want_weights)


# The mistakes whose candidates raise on float64 inputs, and what PyTorch says: x @ weight
# with a non-square weight, float32 weights times float64 values.
RAISES = {"weight_not_transposed": "cannot be multiplied",
          "float32_cast": "expected scalar type Float but found Double",
          "dims_from_the_front": "Dimension out of range"}

# Self-attention with a causal mask, cross-attention (same sizes) with a random one, and
# large logits: every variant must change the answer in at least one of them. T = 5, H = 3
# and D = 4 keep √T, √H, √D and √E apart.
PROBES = (Attn(2, 5, 12, 3, mask="causal"), Attn(2, 5, 12, 3, Tk=5, mask="random"),
          Attn(2, 5, 12, 3, mask="causal", logit_scale=1e3))


@pytest.mark.parametrize("mistake_id,knobs", MHA_VARIANTS, ids=[m for m, _ in MHA_VARIANTS])
def test_every_module_variant_is_a_real_mistake(mistake_id: str, knobs: Knobs):
    changed = False
    for c in PROBES:
        try:
            (out, weights), (want_out, want_weights) = run_mha(c, knobs)
        except RuntimeError as err:  # heads and tokens swapped: the (T, T) mask cannot broadcast
            if knobs.split == "tokens_first":
                assert "must match the size" in str(err)
            else:
                assert mistake_id in RAISES and RAISES[mistake_id] in str(err), (mistake_id, err)
            changed = True
            continue
        changed |= (out.shape != want_out.shape or not torch.allclose(out, want_out)
                    or weights.shape != want_weights.shape
                    or not torch.allclose(weights, want_weights, equal_nan=True))
    assert changed, f"{mistake_id} {knobs} gives the right answer"


def _step_candidates() -> list[tuple[str, str, torch.Tensor, object]]:
    x, q, k = randn(2, 5, 12), randn(2, 3, 4, 5), randn(2, 3, 6, 5)
    q3, k3 = q[:, 0], k[:, 0]  # one head's (B, T, D)
    scores, v, mask = randn(2, 3, 4, 4), randn(2, 3, 4, 5), oracle.causal_mask(4)
    weight, bias = randn(7, 12), randn(7)
    split, merged = oracle.split_heads(x, 3), oracle.merge_heads(randn(2, 3, 5, 4))
    cases = [
        ("split_heads", diagnosis.split_heads(x, 3), split),
        ("merge_heads", diagnosis.merge_heads(oracle.split_heads(merged, 3)), merged),
        ("scaled_scores", diagnosis.scaled_scores(q, k), oracle.scaled_scores(q, k)),
        ("scaled_scores", diagnosis.scaled_scores(q3, k3), oracle.scaled_scores(q3, k3)),
        ("causal_mask", diagnosis.causal_mask(4), oracle.causal_mask(4)),
        ("attend", diagnosis.attend(scores, v, mask), oracle.attend(scores, v, mask)),
        ("output_projection", diagnosis.output_projection(x, weight, bias),
         oracle.output_projection(x, weight, bias)),
    ]
    return [(name, mistake_id, make, expected) for name, candidates, expected in cases
            for mistake_id, make in candidates]


@pytest.mark.parametrize("name,mistake_id,make,expected", _step_candidates(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_every_step_candidate_is_a_real_mistake(name, mistake_id, make, expected):
    try:
        got = make()
    except (RuntimeError, IndexError) as err:
        assert mistake_id in RAISES and RAISES[mistake_id] in str(err), (mistake_id, err)
        return
    pairs = zip(got, expected) if isinstance(expected, tuple) else [(got, expected)]
    assert any(g.shape != e.shape or not torch.equal(g, e) for g, e in pairs), mistake_id


def test_a_matching_answer_is_named_and_a_different_one_is_not():
    x = randn(2, 3, 8)
    candidates = diagnosis.split_heads(x, 2)
    no_transpose = x.reshape(2, 2, 3, 4)
    assert Diagnosis(no_transpose, candidates, TIGHT).mistake.id == "split_no_transpose"
    assert Diagnosis(no_transpose + 1e-3, candidates, TIGHT).mistake is None
    assert Diagnosis(oracle.split_heads(x, 2), candidates, TIGHT).mistake is None


def test_a_mistake_that_raises_the_same_error_is_named():
    x, weight = randn(2, 3, 6), randn(4, 6)
    try:
        x @ weight
    except RuntimeError as err:
        student_error = StudentCodeError("raised", msg(  # the student's text, the kit's words
            "runner.raised_text", name="output_projection", type="RuntimeError", line="",
            error=str(err)))
    found = Diagnosis(student_error, diagnosis.output_projection(x, weight), TIGHT)
    assert found.mistake.id == "weight_not_transposed"
    other = StudentCodeError("raised", "`output_projection` raised RuntimeError: shape '[2, 3]' "
                                       "is invalid")
    assert Diagnosis(other, diagnosis.output_projection(x, weight), TIGHT).mistake is None


def test_candidates_run_only_when_asked():
    calls = []
    candidate = ("no_scaling", lambda: calls.append(1) or randn(2, 2))
    found = Diagnosis(randn(2, 2), [candidate], TIGHT)
    assert calls == []
    assert found.mistake is None and found.mistake is None
    assert calls == [1]


def test_combined_masks_cover_each_way_of_mixing_attn_mask_and_is_causal():
    attn = torch.tensor([[False, True, False], [False, False, True], [True, False, False]])
    causal = oracle.causal_mask(3)
    masks = dict(diagnosis.combined_masks(attn, True, 3))
    assert torch.equal(masks["masks_and"], attn & causal)
    assert torch.equal(masks["attn_mask_ignored"], causal)
    assert torch.equal(masks["is_causal_ignored"], attn)
    assert torch.equal(masks["mask_shifted"], attn | torch.ones(3, 3, dtype=torch.bool).triu(2))
    assert dict(diagnosis.combined_masks(None, True, 3))["is_causal_ignored"] is None
    assert diagnosis.combined_masks(attn, False, 3) == []


def test_right_values_in_the_wrong_dtype_name_only_a_mistake_of_that_dtype():
    """Only the dtype is wrong: a mistake is named when it gives that dtype too (cos and sin
    left in float64 promote a float32 rotation), not for its values alone."""
    want = torch.arange(6.0).reshape(2, 3)  # float32
    got = want.double()
    candidates = [("rope_interleaved", lambda: want.clone()),
                  ("rope_float64_angles", lambda: want.double())]
    assert Diagnosis(got, candidates, TIGHT, same_dtype=True).matches == ("rope_float64_angles",)
    assert Diagnosis(got, candidates, TIGHT).matches == ("rope_interleaved",
                                                         "rope_float64_angles")
