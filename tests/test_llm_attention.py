"""The llm_attention grader against its corpus, in both directions, and its oracle against
PyTorch written other ways.

Every single-mistake mutant of tests/corpus/llm/reference.py fails exactly its checks and the
grader names its mistake (or says what is wrong where no value is) for at least 90% of them;
the reference and every alternative correct style pass with no diagnosis. Checks run in
process, as in test_corpus.py; a mutant is graded on the checks its edits reach, and has the
reference's results on the others (`checks_reaching_edits`).
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import pytest
import reach
import torch
import torch.nn.functional as F
from conftest import (
    CORPUS,
    assert_every_point_unexplained,
    assert_fails_exactly,
    messages_with,
    renders_recorded,
)
from test_messages import assert_chinese  # noqa: E402

from mha_kit.assignments.llm_attention import oracle
from mha_kit.assignments.llm_attention.jobs import MEMORY_JOB
from mha_kit.assignments.llm_attention.mistakes import CATALOGUE
from mha_kit.checks.core import CheckResult
from mha_kit.checks.diagnosis import named_in
from mha_kit.grading.registry import ASSIGNMENTS, run_checks
from mha_kit.messages import ids_in, msg
from mha_kit.runner.inprocess import InProcessSubmission

LLM = CORPUS / "llm"
sys.path.insert(0, str(LLM))
from decode_styles import HOLDING, STYLES, TOO_LARGE  # noqa: E402
from decode_styles import source as decoding_source  # noqa: E402
from llm_mutants import MUTANTS, REFERENCE, Mutant  # noqa: E402

ALTERNATIVES = sorted((LLM / "alternatives").glob("*.py"))
# Every check but the timed one (test_decode_speed.py times): the same results every run.
CHECK_IDS = [c.id for c in ASSIGNMENTS["llm_attention"] if not c.timed]
RATE_NEEDED = 0.9


def grade(path: Path) -> list[CheckResult]:
    return run_checks(InProcessSubmission.from_path(path), assignment="llm_attention",
                      only=CHECK_IDS)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("llm_mutants")


RENDERED: dict[str, list[str]] = {}  # mutant label -> the messages rendered while grading it


def checks_reaching_edits(source: str) -> list[str]:
    return reach.checks_reaching_edits(REFERENCE.read_text(), source,
                                       ASSIGNMENTS["llm_attention"], CHECK_IDS)


@cache
def graded_reference() -> dict[str, CheckResult]:
    return {r.id: r for r in grade(REFERENCE)}


@cache
def graded_mutant(mutant: Mutant, folder: Path) -> list[CheckResult]:
    """The mutant graded on the checks its edits reach; the reference's results elsewhere."""
    path = folder / f"mutant_{MUTANTS.index(mutant)}.py"
    path.write_text(mutant.source())
    reached = checks_reaching_edits(mutant.source())
    with renders_recorded() as RENDERED[mutant.label]:
        own = {r.id: r for r in run_checks(InProcessSubmission.from_path(path),
                                           assignment="llm_attention", only=reached)}
    return [own.get(check_id) or graded_reference()[check_id] for check_id in CHECK_IDS]


def said(results: list[CheckResult]) -> set[str]:
    """The mistakes named and the message ids of the failing checks, mistakes by their id."""
    return {i.removeprefix("mistake.") for r in results if not r.passed
            for i in ids_in(r.message)}


def test_the_corpus_is_big_enough_and_covers_the_catalogue():
    assert len(MUTANTS) >= 20
    assert len({m.label for m in MUTANTS}) == len(MUTANTS)
    named = set().union(*(m.named for m in MUTANTS))
    assert set(CATALOGUE) <= named  # every known mistake is made by some mutant
    for mutant in MUTANTS:
        assert mutant.source() != REFERENCE.read_text()
        assert mutant.fails <= set(CHECK_IDS), mutant.label


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.label for m in MUTANTS])
def test_each_mutant_fails_exactly_its_checks(mutant: Mutant, folder: Path):
    results = graded_mutant(mutant, folder)
    assert_fails_exactly(results, mutant.fails, mutant.label)


def test_a_module_is_graded_with_the_kits_piece_in_place_of_a_failing_one(folder: Path):
    """Llama's interleaved RoPE pairing costs llm_rope alone: the module is graded with the
    kit's apply_rope, and says so."""
    (mutant,) = [m for m in MUTANTS if m.named == {"rope_interleaved"}]
    results = {r.id: r for r in graded_mutant(mutant, folder)}
    for check_id in ("llm_gqa", "llm_kv_cache"):
        (note,) = messages_with(results[check_id].message, "standin.note")
        assert note.params == {"text": msg("ok"), "pieces": "`apply_rope`",
                               "checks": "llm_rope"}, check_id


def test_a_case_that_crashes_hides_no_other(tmp_path: Path):
    """A sum written as a matmul with float32 ones crashes on every float64 case; the wrong
    scale still shows on the float32 case, and both are told."""
    path = tmp_path / "crashes_on_float64.py"
    path.write_text(REFERENCE.read_text().replace(
        "p.sum(dim=-1, keepdim=True)", "p @ torch.ones(p.shape[-1], 1, device=q.device)"
    ).replace("    scale = 1 / math.sqrt(D)\n    row_max", "    scale = 1 / D\n    row_max"))
    (result,) = run_checks(InProcessSubmission.from_path(path), assignment="llm_attention",
                           only=["llm_flash_forward"])
    assert ids_in(result.message) >= {"cause.several", "runner.raised_text", "llm.flash_out"}
    (raised,) = messages_with(result.message, "runner.raised_text")
    assert raised.params["type"] == "RuntimeError"


def test_the_grader_names_the_mistake_for_90_percent(folder: Path, capsys):
    right = [m for m in MUTANTS if m.named <= said(graded_mutant(m, folder))]
    with capsys.disabled():
        print(f"\nllm_attention: the mistake named for {len(right)}/{len(MUTANTS)} mutants")
    assert len(right) / len(MUTANTS) >= RATE_NEEDED, [m.label for m in MUTANTS
                                                      if m not in right]


def test_keys_rotated_after_the_update_are_not_taken_for_a_square_mask(folder: Path):
    """Keys rotated after cache.update raise, on a call of several tokens, torch's broadcast
    error of L keys against T angles at dim 2: the very error an (L, L) mask raises there.
    Only the mask also raises on single-token steps: the rotation is named, not the mask."""
    (mutant,) = [m for m in MUTANTS if m.label == "decoding caches the keys before RoPE"]
    code: dict = {}
    exec(compile(mutant.source(), "mutant", "exec"), code)
    module, cache = code["GroupedQueryAttention"](16, 4, 2), code["KVCache"]()
    module(torch.randn(1, 4, 16), cache)
    with pytest.raises(RuntimeError, match=r"tensor a \(7\) .* tensor b \(3\) .* dimension 2"):
        module(torch.randn(1, 3, 16), cache)
    named = said(graded_mutant(mutant, folder))
    assert "cache_keys_rotated_after" in named and "cache_square_mask" not in named


def test_a_mutant_is_graded_again_on_every_check_its_edits_reach():
    """A RoPE edit reaches the module's checks (the module calls apply_rope) and no flash
    check; an edit of flash_attention reaches the backward too (its Function calls it)."""
    rope = REFERENCE.read_text().replace("def apply_rope(x, positions, base=10000.0):",
                                         "def apply_rope(x, positions, base=500000.0):", 1)
    assert rope != REFERENCE.read_text()
    assert checks_reaching_edits(rope) == ["llm_rope", "llm_gqa", "llm_kv_cache"]
    flash = REFERENCE.read_text().replace("scale = 1 / math.sqrt(D)", "scale = 1 / D", 1)
    assert checks_reaching_edits(flash) == ["llm_flash_forward", "llm_flash_memory",
                                            "llm_flash_backward"]
    assert checks_reaching_edits(REFERENCE.read_text() + "\nprint('top level')\n") == CHECK_IDS


@pytest.mark.parametrize("path", [REFERENCE, *ALTERNATIVES], ids=lambda p: p.stem)
def test_correct_implementations_pass_without_a_diagnosis(path: Path):
    results = list(graded_reference().values()) if path == REFERENCE else grade(path)
    assert_every_point_unexplained(results, CHECK_IDS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.label for m in MUTANTS])
def test_mutant_messages_are_chinese(mutant: Mutant, folder: Path, monkeypatch):
    assert_chinese([r for r in graded_mutant(mutant, folder) if not r.passed], [], monkeypatch)


def test_words_decide_nothing(folder: Path):
    """Grading renders no message: the templates' words decide no input, point or name."""
    for mutant in MUTANTS:
        graded_mutant(mutant, folder)
        assert RENDERED[mutant.label] == [], mutant.label


# Published code through thin adapters (tests/corpus/llm/public): the checks each passes, and
# the mistake named where it follows another convention than the kit's.
PUBLIC = {
    "hf_transformers_llama.py": ({"llm_rope", "llm_repeat_kv", "llm_gqa", "llm_kv_cache"}, {}),
    "litgpt.py": ({"llm_rope", "llm_repeat_kv", "llm_sliding_window"}, {}),
    "mistral_one_file_ref.py": ({"llm_repeat_kv", "llm_sliding_window"},
                                {"llm_rope": ["rope_interleaved"]}),
}


@pytest.mark.parametrize("name", PUBLIC)
def test_published_code_gets_what_it_earns(name: str):
    results = grade(LLM / "public" / name)
    passes, named = PUBLIC[name]
    assert {r.id for r in results if r.passed} == passes
    assert {r.id: named_in(r.message) for r in results
            if not r.passed and named_in(r.message)} == named


def test_the_memory_check_alone_knows_that_flash_attention_failed_its_own(folder: Path):
    """A notebook's test cell runs one check: the memory check runs flash_attention's check
    first (`consults`), so a tiled loop with wrong values loses llm_flash_forward alone."""
    mutant = next(m for m in MUTANTS if m.label.startswith("neither the running sum"))
    path = folder / "memory_alone.py"
    path.write_text(mutant.source())
    (result,) = run_checks(InProcessSubmission.from_path(path), assignment="llm_attention",
                           only=["llm_flash_memory"])
    assert result.passed, result.message


def test_the_memory_watch_sees_a_full_matrix_and_passes_a_tiled_loop(folder: Path):
    """On meta, at T = 4096: the tiled reference makes nothing larger than a block of scores
    (2 heads x 4096 x 256); the same function with the scores built once makes 2 x 4096^2."""
    full = next(m for m in MUTANTS if m.label.startswith("the full score matrix"))
    shape = (1, 2, 4096, 64)
    sizes = {}
    for name, path in (("tiled", REFERENCE), ("full", folder / "full.py")):
        if name == "full":
            path.write_text(full.source())
        report = InProcessSubmission.from_path(path).run_job(
            MEMORY_JOB, "flash_attention", name="flash_attention", q_shape=shape,
            k_shape=shape, is_causal=False, block_size=256, backward=False)
        sizes[name] = report["forward"]["largest"]
    assert sizes["tiled"] == 2 * 4096 * 256
    assert sizes["full"] == 2 * 4096 * 4096


def test_a_module_laid_out_as_a_mistake_meets_the_same_error_across_the_pipe():
    """Weights that do not fit a module whose k_proj and v_proj are embed_dim wide: only the
    layout of that mistake meets the very same kit error, also once the message has crossed
    the worker's pipe (where a shape is text); a k_proj of another width meets none."""
    from mha_kit.assignments.llm_attention.gqa import GQA_CASES, _weights
    from mha_kit.assignments.llm_attention.jobs import MODULE
    from mha_kit.assignments.llm_attention.variants import projection_candidates
    from mha_kit.checks.core import TIGHT
    from mha_kit.checks.diagnosis import Diagnosis
    from mha_kit.messages import Message
    from mha_kit.runner.inprocess import load_weights
    from mha_kit.runner.protocol import StudentCodeError

    c = GQA_CASES[0]
    params = _weights(c.params(torch.Generator().manual_seed(0), "cpu"))
    candidates = projection_candidates(params, MODULE, c.E, c.H, c.Hkv)

    def error_of(k_rows: int) -> StudentCodeError:
        student = torch.nn.Module()
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            rows = k_rows if name in ("k_proj", "v_proj") else c.E
            student.add_module(name, torch.nn.Linear(c.E, rows, bias=False))
        with pytest.raises(StudentCodeError) as raised, torch.no_grad():
            load_weights(student, MODULE, params)
        return raised.value

    err = error_of(c.E)
    piped = StudentCodeError(err.kind, Message.from_data(err.message.to_data()))
    for got in (err, piped):
        assert Diagnosis(got, candidates, TIGHT).matches == ("gqa_kv_proj_width",)
    assert Diagnosis(error_of(c.E - 1), candidates, TIGHT).matches == ()


@pytest.mark.parametrize("error, named", [
    ("The size of tensor a (8) must match the size of tensor b (4) at non-singleton "
     "dimension 3", True),
    ("Expected size for first two dimensions of batch2 tensor to be: [4, 9] but got: [4, 4].",
     True),
    ("Sizes of tensors must match except in dimension 2. Expected size 4 but got size 1 for "
     "tensor number 2 in the list.", True),
    ("expected m1 and m2 to have the same dtype, but got: float != double", False)])
def test_a_size_mismatch_in_flash_attention_names_its_likely_causes(error: str, named: bool):
    from mha_kit.assignments.llm_attention.flash_variants import size_mismatch
    from mha_kit.checks.core import TIGHT
    from mha_kit.checks.diagnosis import Diagnosis
    from mha_kit.runner.protocol import StudentCodeError

    err = StudentCodeError("raised", msg("runner.raised_text", name="flash_attention",
                                         type="RuntimeError", line="", error=error))
    found = Diagnosis(err, [size_mismatch("flash_size_mismatch")], TIGHT)
    assert found.matches == (("flash_size_mismatch",) if named else ())


# --------------------------------------------------------------------------- the oracle


def test_rope_oracle_is_a_rotation_by_explicit_2x2_matrices():
    x, base, half = torch.randn(2, 5, 8, dtype=torch.float64), 50.0, 4
    positions = torch.tensor([0, 3, 4, 9, 1])
    theta = base ** (-torch.arange(half, dtype=torch.float64) * 2 / 8)
    rotated = torch.empty_like(x)
    for t, m in enumerate(positions.tolist()):
        for i in range(half):
            a = m * theta[i]
            R = torch.tensor([[a.cos(), -a.sin()], [a.sin(), a.cos()]], dtype=torch.float64)
            pair = torch.stack([x[:, t, i], x[:, t, i + half]], dim=-1)  # (2, 2)
            turned = pair @ R.T
            rotated[:, t, i], rotated[:, t, i + half] = turned[:, 0], turned[:, 1]
    torch.testing.assert_close(oracle.rope(x, positions, base), rotated)


def test_gqa_oracle_with_every_head_and_no_rope_is_nn_multihead_attention():
    E, H, T = 16, 4, 6
    mha = torch.nn.MultiheadAttention(E, H, bias=False, batch_first=True).double()
    q_w, k_w, v_w = mha.in_proj_weight.detach().chunk(3)
    params = {"q_proj.weight": q_w, "k_proj.weight": k_w, "v_proj.weight": v_w,
              "out_proj.weight": mha.out_proj.weight.detach()}
    x = torch.randn(2, T, E, dtype=torch.float64)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    want, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    torch.testing.assert_close(oracle.gqa(params, x, H, H, None), want)


def test_attention_oracle_repeats_heads_as_sdpa_with_enable_gqa():
    q, k, v = (torch.randn(2, heads, T, 4, dtype=torch.float64)
               for heads, T in ((6, 5), (2, 7), (2, 7)))
    blocked = oracle.causal_blocked(5, 7)
    by_hand = F.scaled_dot_product_attention(q, k.repeat_interleave(3, 1),
                                             v.repeat_interleave(3, 1), attn_mask=~blocked)
    torch.testing.assert_close(oracle.attention(q, k, v, blocked), by_hand)
    assert blocked[0].tolist() == [False, False, False, True, True, True, True]  # bottom-right


def test_a_decoding_step_is_the_matching_row_of_whole_sequence_attention():
    from mha_kit.assignments.llm_attention.variants import gqa_steps
    E, H, Hkv = 16, 4, 2
    params = {f"{n}.weight": torch.randn(E if n in ("q_proj", "out_proj") else Hkv * E // H, E,
                                         dtype=torch.float64) / 4
              for n in ("q_proj", "k_proj", "v_proj", "out_proj")}
    x = torch.randn(2, 9, E, dtype=torch.float64)
    steps = gqa_steps(params, list(x.split((4, 1, 3, 1), dim=1)), H, Hkv, 100.0)
    torch.testing.assert_close(torch.cat(steps, dim=1), oracle.gqa(params, x, H, Hkv, 100.0))


# The messages that say a KVCache holds no keys and values (red team n10)
NOT_A_CACHE = {"llm.cache_not_updated", "llm.cache_update_reply", "llm.cache_keys"}


@pytest.mark.parametrize("style", [*STYLES, *HOLDING, *TOO_LARGE])
def test_the_cache_check_asks_for_the_keys_and_values_themselves(style: str):
    """Every style decodes the right values. A cache that keeps the tokens (and recomputes
    their keys and values) loses llm_kv_cache, saying why, and so does one that holds them for
    every query head (n_rep times the memory); a cache that holds the keys and values of the
    Hkv heads earns it, in whatever form: a buffer longer than the tokens, the keys rotated or
    not, a class with __slots__."""
    holds = style in HOLDING or style in STYLES and STYLES[style][0]
    namespace: dict = {}
    exec(compile(decoding_source(style), "<style>", "exec"), namespace)
    (result,) = run_checks(InProcessSubmission(namespace), assignment="llm_attention",
                           only=["llm_kv_cache"])
    assert result.passed == holds, result.message
    if not holds:
        said = set(ids_in(result.message))
        assert (NOT_A_CACHE if style in STYLES else {"llm.cache_heads"}) & said, result.message
        assert not {"llm.cached_output", "llm.step_output"} & said


def _two_loop_flash(q, k, v, block: int, stop) -> torch.Tensor:
    """FlashAttention-2's causal loop, queries in blocks too, its key range for the queries
    [qs, qe) ending at stop(qs, qe, hi), hi = min(Tk, qe + Tk - Tq) being right."""
    Tq, Tk = q.shape[2], k.shape[2]
    out = torch.empty_like(q)
    for qs in range(0, Tq, block):
        qe = min(qs + block, Tq)
        end = stop(qs, qe, min(Tk, qe + Tk - Tq))
        scores = q[:, :, qs:qe] @ k[:, :, :end].transpose(-2, -1) / q.shape[-1] ** 0.5
        blocked = torch.arange(end)[None, :] > torch.arange(qs, qe)[:, None] + (Tk - Tq)
        out[:, :, qs:qe] = scores.masked_fill(blocked, float("-inf")).softmax(-1) @ v[:, :, :end]
    return out


@pytest.mark.parametrize("stop", [lambda qs, qe, hi: hi - 1, lambda qs, qe, hi: hi - 4,
                                  lambda qs, qe, hi: qs + hi - qe])
@pytest.mark.parametrize("Tq, Tk", [(9, 9), (3, 11)])
def test_a_causal_key_range_cut_short_is_named(stop, Tq: int, Tk: int):
    """One key early, one block early, the diagonal block left out, as a two-loop
    FlashAttention writes them: a candidate of flash_causal_keys_cut reproduces each."""
    from mha_kit.assignments.llm_attention.flash_variants import flash_candidates
    q, k, v = (torch.randn(1, 2, T, 4, dtype=torch.float64) for T in (Tq, Tk, Tk))
    got = _two_loop_flash(q, k, v, 4, stop)
    cut = [make()[0] for name, make in flash_candidates(q, k, v, True, 4)
           if name == "flash_causal_keys_cut"]
    assert any(torch.allclose(got, out, equal_nan=True) for out in cut)
    assert not torch.allclose(got, oracle.flash(q, k, v, True)[0], equal_nan=True)
