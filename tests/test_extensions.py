"""The extension track: each seed tutorial's formulation gets full marks, and mistakes lose
points on the check that names them."""

import json

import pytest
from conftest import CORPUS, ROOT, check_here

from mha_kit.grading import registry
from mha_kit.grading.files import detect_assignment
from mha_kit.grading.registry import run_check, run_checks, split_name
from mha_kit.messages import msg
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.policy import Limits
from mha_kit.runner.worker import WorkerSubmission

SEEDS = sorted((CORPUS / "extensions").glob("seed*.py"))
EXTENSION_IDS = [c.id for c in registry.ASSIGNMENTS["mha_extensions"]]


def grade(path):
    return run_checks(InProcessSubmission.from_path(path), assignment="mha_extensions")


def test_every_seed_has_a_formulation_in_the_corpus():
    assert [p.name[:7] for p in SEEDS] == [f"seed00{i}" for i in range(5)]


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.stem)
def test_seed_formulation_gets_full_marks(path):
    results = grade(path)
    assert [r.id for r in results] == EXTENSION_IDS
    assert all(r.passed for r in results), [(r.id, r.message) for r in results if not r.passed]
    assert sum(r.score for r in results) == 100


# (label, seed file, text in it, replacement, the checks that must fail)
MUTANTS = [
    ("scale by the value head size", "seed004_buffer.py",
     "attn_scores / keys.shape[-1] ** 0.5", "attn_scores / values.shape[-1] ** 0.5",
     {"ext_qk_v_head_dims", "ext_causal_buffer"}),
    ("a new mask in forward instead of the buffer", "seed004_buffer.py",
     "mask_bool = self.mask.bool()[:num_tokens, :num_pairs]",
     "mask_bool = torch.ones(num_tokens, num_pairs, dtype=torch.bool).triu(1)",
     {"ext_causal_buffer"}),
    ("mask read as True = allowed", "seed003_five_steps.py",
     "attn_scores.masked_fill(self.mask[:L, :S]", "attn_scores.masked_fill(~self.mask[:L, :S]",
     {"ext_causal_buffer", "ext_dropout"}),
    ("no dropout", "seed002_qk_v.py",
     "score = self.dropout(torch.softmax(score, dim=-1))", "score = torch.softmax(score, dim=-1)",
     {"ext_dropout"}),
    ("value defaults to query", "seed001_weights.py",
     "value = key if value is None else value", "value = query if value is None else value",
     {"ext_cross_dims"}),
    ("an assert, not a ValueError", "seed001_weights.py",
     "raise ValueError(", "raise AssertionError(", {"ext_size_errors"}),
    ("out_dim ignored", "seed000_bmm.py",
     "nn.Linear(v_head_dim * num_heads, out_dim or query_dim)",
     "nn.Linear(v_head_dim * num_heads, query_dim)", {"ext_cross_dims", "ext_qk_v_head_dims"}),
    ("the view-without-transpose split", "seed003_five_steps.py",
     "Q = Q.reshape(batch_size, L, self.h, self.d_k).transpose(1, 2)",
     "Q = Q.reshape(batch_size, self.h, L, self.d_k)", set(EXTENSION_IDS) - {"ext_size_errors"}),
]


@pytest.mark.parametrize("label,seed,old,new,failing", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_a_mistake_fails_its_own_checks(tmp_path, label, seed, old, new, failing):
    source = (CORPUS / "extensions" / seed).read_text()
    assert source.count(old) == 1, f"{label}: the text to mutate is not in {seed}"
    path = tmp_path / "mutant.py"
    path.write_text(source.replace(old, new))
    assert {r.id for r in grade(path) if not r.passed} == failing


def test_the_cli_grades_a_seed_in_a_worker(tmp_path):
    results = tmp_path / "results.json"
    # the names it defines say which assignment it answers
    run = check_here(str(SEEDS[0]), "--json", str(results))
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Grading {SEEDS[0]} as mha_extensions on " in run.stdout
    data = json.loads(results.read_text())
    assert [t["name"] for t in data["tests"]] == EXTENSION_IDS
    assert data["score"] == data["max_score"] == 100


def test_the_cli_tells_the_assignment_from_a_notebooks_test_cells():
    released = sorted((ROOT / "assignments").glob("*/*.ipynb"))
    assert {split_name(nb.parent.name)[0] for nb in released} == set(registry.ASSIGNMENTS)
    for notebook in released:
        assert detect_assignment(notebook) == split_name(notebook.parent.name)[0], notebook


def test_a_py_file_is_of_the_assignment_whose_names_it_defines(tmp_path):
    """A self-learner's .py has no test cells: the contract names it defines tell (it was
    graded as mha, 0 points with a "not defined" line per check)."""
    assert {detect_assignment(seed) for seed in SEEDS} == {"mha_extensions"}
    files = {
        "warmup.py": "def split_heads_view(x, num_heads): ...\n"
                     "merge_heads_transpose = lambda x: x\n",
        "guarded.py": "try:\n    from einops import rearrange\n\n"
                      "    def split_heads_rearrange(x, num_heads): ...\n"
                      "except ImportError:\n    pass\n",
        "mostly.py": "def split_heads_view(x, num_heads): ...\ndef view_quiz(): ...\n"
                     "def split_heads(x, num_heads): ...\n",  # two of the warm-up's, one of mha's
        "broken.py": "def split_heads_view(x, num_heads):\n    return x\n\n"
                     "def merge_heads_transpose(x)\n    return x\n",  # one block loads
        "both.py": "def split_heads(x, num_heads): ...\ndef view_quiz(): ...\n",  # a tie
        "nothing.py": "import torch\n",
    }
    for name, source in files.items():
        (tmp_path / name).write_text(source)
    assert {name: detect_assignment(tmp_path / name) for name in files} == {
        "warmup.py": "shapes", "guarded.py": "shapes", "mostly.py": "shapes",
        "broken.py": "shapes", "both.py": "mha", "nothing.py": "mha"}



def test_a_hanging_constructor_is_reported_as_a_timeout_not_a_missing_error(tmp_path):
    path = tmp_path / "hangs.py"
    path.write_text("class GeneralMultiHeadAttention:\n"
                    "    def __init__(self, *args, **kwargs):\n"
                    "        while True:\n"
                    "            pass\n")
    with WorkerSubmission(path, limits=Limits(call_s=1)) as sub:
        result = run_check("ext_size_errors", sub)
    assert result.score == 0
    assert result.message == msg("worker.timeout", what="GeneralMultiHeadAttention", limit=1), \
        result.message
