"""The decoding speed check, a count of work: the solution earns the points through the real
worker; every correct style of tests/corpus/llm/decode_styles.py earns them and every one that
recomputes the prefix does not, each far from the threshold (the count is the same on every
run: scripts/decode_speed_reliability.py shows it under load); work hidden from the counter
earns nothing. Run at the kit's test config, MHA_KIT_SPEED_CONFIG=small (tests/conftest.py),
which counts at the graded sizes."""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import pytest
import torch
from conftest import CORPUS

from mha_kit.assignments.llm_attention.decode_config import decode_config
from mha_kit.assignments.llm_attention.decode_speed import (
    DECODE_SPEED_CHECK,
    LESS_WORK_NEEDED,
    Run,
    counted_run,
    decide,
    decoded,
    judge,
    recomputing_work,
)
from mha_kit.assignments.llm_attention.jobs import WorkCount
from mha_kit.grading.batch import grade_submission
from mha_kit.messages import ids_in
from mha_kit.notebook import decoding_work
from mha_kit.runner.inprocess import InProcessSubmission

sys.path.insert(0, str(CORPUS / "llm"))
from decode_styles import _TOKENS_CACHE, REFERENCE, STYLES, source  # noqa: E402

MARGIN = 1.5  # the least factor between any style and the threshold (docs/speed.md)


@cache
def counted(text: str) -> Run:
    """A submission of this text, its decoding counted in this process."""
    namespace: dict = {}
    exec(compile(text, "<style>", "exec"), namespace)
    return counted_run(InProcessSubmission(namespace), 7)


def ratio(run: Run) -> float:
    return recomputing_work(decode_config()) / decode_config().N / run.work


def test_the_solution_earns_the_points_through_the_worker(tmp_path: Path):
    path = tmp_path / "solution.py"
    path.write_text(REFERENCE.read_text())
    results, problems = grade_submission(path, assignment="llm_attention",
                                         only=["llm_kv_cache", DECODE_SPEED_CHECK])
    assert not problems and all(r.passed for r in results)
    message = results[-1].message
    assert "llm.speed_passed" in ids_in(message) and "llm.speed_measured" in ids_in(message)



def test_the_notebook_prints_what_the_check_measures(capsys):
    namespace: dict = {}
    exec(compile(REFERENCE.read_text(), "<solution>", "exec"), namespace)
    decoding_work(namespace["GroupedQueryAttention"], namespace["KVCache"])
    said = " ".join(capsys.readouterr().out.split())
    assert f"{ratio(counted(REFERENCE.read_text())):.1f}× less" in said
    assert f"needed: at least {LESS_WORK_NEEDED:g}× less" in said

@pytest.mark.parametrize("style", STYLES)
def test_each_style_gets_its_points_far_from_the_threshold(style: str):
    correct = STYLES[style][0]
    run = counted(source(style))
    fraction, message = decide(run)
    assert fraction == (1.0 if correct else 0.0), message
    assert ("llm.speed_passed" if correct else "llm.speed_too_slow") in ids_in(message)
    if correct:
        assert ratio(run) >= MARGIN * LESS_WORK_NEEDED
    else:
        assert ratio(run) <= LESS_WORK_NEEDED / MARGIN


def test_a_cache_that_saves_nothing_loses_however_slow_its_forward_without_one():
    """Issue 40: a KVCache that keeps the tokens and a forward that recomputes everything
    with it, but does its work 12 times without one, measured 12.2x "faster" and got the
    points. The kit's count of recomputing is the baseline now, never the student's forward."""
    style = "recomputes everything; without a cache, does it 12 times"
    assert not STYLES[style][0]
    run = counted(source(style))
    assert decide(run)[0] == 0.0 and ratio(run) < 1.05
    # The kit's count is the matrix products alone: what recomputing counts, and a little less.
    assert ratio(counted(source("recomputes everything, keeps the new rows"))) > 0.97


PUBLISHED = [*sorted((CORPUS / "llm" / "alternatives").glob("*.py")),
             CORPUS / "llm" / "public" / "hf_transformers_llama.py"]


@pytest.mark.parametrize("path", PUBLISHED, ids=lambda p: p.name)
def test_correct_code_of_the_corpus_earns_the_points(path: Path):
    """Every op that correct modules run, written in other styles, is one the count knows."""
    fraction, message = decide(counted(path.read_text()))
    assert fraction == 1.0, message


_WHOLE = "\n_whole = GroupedQueryAttention.forward\n"
HIDDEN = [  # work on the prefix that the counter would not see, or cannot count
    ("numpy", "llm.speed_reads", _TOKENS_CACHE + _WHOLE + '''

def _numpy(self, x, cache=None):
    if cache is None:
        return _whole(self, x)
    tokens = cache.update(x).numpy()  # (B, L, E)
    return _whole(self, torch.from_numpy(tokens))[:, -x.shape[1]:]


GroupedQueryAttention.forward = _numpy
'''),
    ("int() of a correct cache's length", "llm.speed_reads", '''

_length = KVCache.__len__
KVCache.__len__ = lambda self: int(torch.tensor(_length(self)))
'''),
    ("an embedding bag", "llm.speed_uncounted", _TOKENS_CACHE + _WHOLE + '''
import torch.nn.functional as F


def _embedding_bag(self, x, cache=None):
    """The prefix's keys as an embedding bag: L·E·E multiply-adds, L·E + E·E elements."""
    if cache is None:
        return _whole(self, x)
    tokens = cache.update(x)  # (B, L, E)
    L, E = tokens.shape[1:]
    F.embedding_bag(torch.arange(E).repeat(L), self.k_proj.weight.t(), torch.arange(0, L * E, E),
                    mode="sum", per_sample_weights=tokens.reshape(-1))  # (L, Hkv·D)
    return _whole(self, tokens)[:, -x.shape[1]:]


GroupedQueryAttention.forward = _embedding_bag
'''),
    ("dispatch modes switched off", "llm.speed_unseen", _TOKENS_CACHE + _WHOLE + '''
from torch.utils._python_dispatch import _disable_current_modes


def _unseen(self, x, cache=None):
    if cache is None:
        return _whole(self, x)
    with _disable_current_modes():
        return _whole(self, cache.update(x))[:, -x.shape[1]:]


GroupedQueryAttention.forward = _unseen
'''),
]


@pytest.mark.parametrize(("said", "text"), [h[1:] for h in HIDDEN], ids=[h[0] for h in HIDDEN])
def test_work_hidden_from_the_count_earns_nothing(said: str, text: str):
    fraction, message = decide(counted(REFERENCE.read_text() + text))
    assert fraction == 0.0 and said in ids_in(message), message


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b.t()


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_the_count_sees_products_written_elementwise_and_through_torchscript():
    x, w = torch.randn(6, 32), torch.randn(16, 32)
    scripted = torch.jit.script(_product)
    works = {}
    for name, product in (("mm", lambda: _product(x, w)), ("torchscript", lambda: scripted(x, w)),
                          ("elementwise", lambda: (x[:, None, :] * w).sum(-1))):
        with WorkCount() as count:
            product()
        works[name] = count.work
    assert works["mm"] == works["torchscript"] == 2 * 6 * 16 * 32
    assert works["elementwise"] >= works["mm"]
    with WorkCount() as count:
        x.t().contiguous().view(-1)[:10].view(2, 5).unsqueeze(0)  # a copy, then views
        x.sort()
        x[0, 0].item()
    assert count.work == 2 * x.numel() and count.uncounted == {"aten::sort"}
    assert count.reads == {"aten::_local_scalar_dense"}


def test_a_report_that_is_not_counts_is_not_scored():
    rounds = decode_config().rounds
    right = {"work": 1, "uncounted": [], "reads": [], "outputs": [], "cpu": [0.1] * rounds,
             "wall": [0.1] * rounds}
    for junk in (None, {**right, "work": 1.5}, {**right, "work": -1}, {**right, "reads": "x"},
                 {**right, "cpu": [0.1] * (rounds + 1)}, {**right, "wall": [float("nan")]}):
        run = judge(junk, 1)
        assert run.problem is not None and "llm.speed_malformed" in ids_in(run.problem)


def test_the_outputs_are_those_of_the_seed():
    cfg = decode_config()
    report = {"work": 10**9, "uncounted": [], "reads": [], "cpu": [0.1] * cfg.rounds,
              "wall": [0.1] * cfg.rounds,
              "outputs": list(decoded(cfg, 7).float().split(1, dim=1))}
    assert judge(report, 7).problem is None
    assert "llm.speed_spot" in ids_in(judge(report, 8).problem)
