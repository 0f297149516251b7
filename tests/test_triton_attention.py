"""The triton_attention grader against its corpus, in both directions, through Triton's
interpreter on the CPU; its oracle against PyTorch written other ways; and Triton's setup:
the interpreter's switch, re-imported Triton, a missing Triton told in one sentence.

Every single-mistake mutant of tests/corpus/triton/reference.py fails exactly its checks and
the grader names its mistake (or says what is wrong where no value is) for at least 90% of
them; the reference and every alternative correct answer get every point with no diagnosis.
Checks run in process (one grading per submission, shared by the tests: the interpreter is
slow), as in test_llm_attention.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
import torch
from conftest import (
    CORPUS,
    ROOT,
    assert_every_point_unexplained,
    assert_fails_exactly,
    renders_recorded,
)
from test_messages import assert_chinese

pytest.importorskip("triton")  # the dev extra installs it; without it there is nothing to grade

from mha_kit import (
    runtime,  # noqa: E402
    settings,  # noqa: E402
)
from mha_kit.assignments.triton_attention import (  # noqa: E402,E501
    calibration,
    forward,
    jobs,
    oracle,
    speed,
    variants,
)
from mha_kit.assignments.triton_attention.forward import Flash  # noqa: E402
from mha_kit.assignments.triton_attention.mistakes import CATALOGUE  # noqa: E402
from mha_kit.checks.core import CheckResult, Context  # noqa: E402
from mha_kit.grading.registry import ASSIGNMENTS, run_checks  # noqa: E402
from mha_kit.messages import ids_in, msg  # noqa: E402
from mha_kit.runner import sandbox  # noqa: E402
from mha_kit.runner.inprocess import InProcessSubmission  # noqa: E402
from mha_kit.runner.loading import load_source  # noqa: E402
from mha_kit.runner.worker import WorkerSubmission, worker_environment  # noqa: E402
from mha_kit.runner.zygote import worker_env  # noqa: E402
from mha_kit.runtime import triton_as_configured, triton_environment  # noqa: E402

TRITON = CORPUS / "triton"
sys.path.insert(0, str(TRITON))
import published  # noqa: E402
from speed_styles import STYLES  # noqa: E402
from triton_mutants import ALTERNATIVES, MUTANTS, REFERENCE, Mutant  # noqa: E402

# Every check but the timed one, which is not scored on the CPU: the same results every run.
CHECK_IDS = [c.id for c in ASSIGNMENTS["triton_attention"] if not c.timed]
RATE_NEEDED = 0.9


@pytest.fixture(scope="module", autouse=True)
def interpreted() -> Iterator[None]:
    """Triton's interpreter on in this process while these tests run, as a grader's worker
    on the CPU has it (`runtime.triton_environment`)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        triton_as_configured()
        yield


def grade(path: Path) -> list[CheckResult]:
    return run_checks(InProcessSubmission.from_path(path), assignment="triton_attention",
                      only=CHECK_IDS)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("triton_mutants")


RENDERED: dict[str, list[str]] = {}  # label -> the messages rendered while grading it


@cache
def graded(mutant: Mutant, folder: Path) -> list[CheckResult]:
    path = folder / f"submission_{abs(hash(mutant.label))}.py"
    path.write_text(mutant.source())
    with renders_recorded() as RENDERED[mutant.label]:
        return grade(path)


def said(results: list[CheckResult]) -> set[str]:
    """The mistakes named and the message ids of the failing checks, mistakes by their id."""
    return {i.removeprefix("mistake.") for r in results if not r.passed
            for i in ids_in(r.message)}


def test_the_corpus_is_big_enough_and_covers_the_catalogue():
    assert len(MUTANTS) >= 15
    assert len({m.label for m in MUTANTS}) == len(MUTANTS)
    assert set(CATALOGUE) <= set().union(*(m.named for m in MUTANTS))
    for mutant in (*MUTANTS, *ALTERNATIVES):
        assert mutant.source() != REFERENCE.read_text()
        assert mutant.fails <= set(CHECK_IDS), mutant.label


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.label for m in MUTANTS])
def test_each_mutant_fails_exactly_its_checks(mutant: Mutant, folder: Path):
    results = graded(mutant, folder)
    assert_fails_exactly(results, mutant.fails, mutant.label)


def test_the_grader_names_the_mistake_for_90_percent(folder: Path, capsys):
    right = [m for m in MUTANTS if m.named and m.named <= said(graded(m, folder))]
    with capsys.disabled():
        print(f"\ntriton_attention: the mistake named for {len(right)}/{len(MUTANTS)} mutants")
    assert len(right) / len(MUTANTS) >= RATE_NEEDED, [m.label for m in MUTANTS
                                                      if m not in right]


@pytest.mark.parametrize("mutant", [Mutant("reference", ()), *ALTERNATIVES],
                         ids=lambda m: m.label)
def test_correct_answers_get_every_point_without_a_diagnosis(mutant: Mutant, folder: Path):
    results = graded(mutant, folder)
    assert_every_point_unexplained(results, CHECK_IDS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.label for m in MUTANTS])
def test_mutant_messages_are_chinese(mutant: Mutant, folder: Path, monkeypatch):
    assert_chinese([r for r in graded(mutant, folder) if not r.passed], [], monkeypatch)


def test_words_decide_nothing(folder: Path):
    """Grading renders no message: the templates' words decide no input, point or name."""
    for mutant in MUTANTS:
        graded(mutant, folder)
        assert RENDERED[mutant.label] == [], mutant.label


def test_the_speed_check_says_why_it_is_not_scored_and_costs_nothing(monkeypatch):
    """In the interpreter, and on a GPU until a threshold is calibrated: full points, and a
    note that says why (it runs only once the backward passes: the stubs get 0)."""
    for device, interpret, reason in (("cpu", "1", "triton.speed_interpreted"),
                                      ("cuda", "0", "triton.speed_uncalibrated")):
        monkeypatch.setenv("TRITON_INTERPRET", interpret)
        ctx = Context(device=device)
        assert speed.check_speed(None, ctx) == 1.0
        assert ids_in(ctx.notes) == {"triton.speed_not_scored", reason}
    (spec,) = [c for c in ASSIGNMENTS["triton_attention"] if c.id == "triton_speed"]
    assert spec.timed and spec.needs == ("triton_flash_backward",)


def test_the_speed_check_scores_on_a_gpu_only_once_calibrated(monkeypatch):
    for device, interpret, needed, reason in (
            ("cpu", "1", 0.5, "triton.speed_interpreted"),
            ("cuda", "1", 0.5, "triton.speed_interpreted"),
            ("cuda", "0", None, "triton.speed_uncalibrated"),
            ("cuda", "0", 0.5, None)):
        monkeypatch.setenv("TRITON_INTERPRET", interpret)
        assert speed.not_scored_because(device, needed) == reason


def _verdict(share: float) -> speed.Verdict:
    return speed.Verdict(None, share, {"student": 2e-3, "sdpa": 2e-3 * share, "pytorch": 9e-3})


def test_the_speed_decision_is_all_or_nothing_around_the_threshold():
    needed = 0.5
    for share, fraction, said_id in ((needed * 1.3, 1.0, "triton.speed_passed"),
                                     (needed, 1.0, "triton.speed_passed"),
                                     (needed / 1.3, 0.0, "triton.speed_too_slow")):
        got, message = speed.decide([_verdict(share)], "cuda", needed)
        assert got == fraction and {said_id, "triton.speed_measured"} <= ids_in(message)
    assert speed.wants_another([_verdict(needed * 1.1)], needed)
    assert not speed.wants_another([_verdict(needed * 1.3)], needed)
    assert not speed.wants_another([_verdict(needed * 1.1)] * speed.MAX_RUNS, needed)
    # the median of three runs decides
    assert speed.decide([_verdict(needed * 1.1), _verdict(needed / 1.1), _verdict(needed / 2)],
                        "cuda", needed)[0] == 0.0


@pytest.fixture
def tiny_speed(monkeypatch) -> None:
    monkeypatch.setenv(settings.variable("speed_config"), "tiny")


def test_the_timing_job_runs_the_kernels_and_its_judge_checks_them(tiny_speed):
    """The speed check's job on the reference, in the interpreter at the TINY config: the
    judge accepts its form and spot check; a wrong output, a missing candidate or another
    seed is not scored."""
    sub = InProcessSubmission.from_path(REFERENCE)
    seed = 7
    measured = jobs.measure_speed(sub, "cpu", seed)
    verdict = speed.judge(measured, seed)
    assert verdict.problem is None and verdict.speedup > 0
    assert set(verdict.medians) == set(speed.CANDIDATES)
    assert speed.judge(measured, seed + 1).problem is not None  # another seed
    wrong = {**measured, "outputs": {i: [o * 1.5 for o in out]
                                     for i, out in measured["outputs"].items()}}
    assert ids_in(speed.judge(wrong, seed).problem) >= {"speed.not_scored_spot",
                                                       "speed.wrong_output"}
    missing = {**measured, "times": {k: v for k, v in measured["times"].items() if k != "sdpa"}}
    assert ids_in(speed.judge(missing, seed).problem) >= {"speed.malformed_times"}


def test_the_speed_styles_are_correct_and_skip_what_they_say(tmp_path: Path):
    """Each style of the calibration gives the oracle's output (causal, Tq != Tk), and the
    one without block skipping does every key block's work."""
    c = Flash(1, 2, 24, 40, 16, causal=True)
    q, k, v = c.draw(torch.Generator().manual_seed(0))
    want = oracle.flash(q.double(), k.double(), v.double(), True)[0].float()
    for i, style in enumerate(STYLES):
        path = tmp_path / f"style_{i}.py"
        path.write_text(style.source())
        sub = InProcessSubmission.from_path(path)
        torch.testing.assert_close(sub.lookup("flash_attention_triton")(q, k, v, True), want,
                                   **forward.FLOAT32_TOL)
        if style.label == "no causal block skipped":
            w = forward.WORK_CASE
            wq, wk, wv = w.draw(torch.Generator())
            assert jobs.dot_work(sub, q=wq, k=wk, v=wv, **w.kwargs) == \
                forward.causal_work(w, skip=False)
    assert {s.kind for s in STYLES} == set(calibration.KINDS)


def test_the_calibration_table_finds_the_band_and_its_threshold():
    results = {"a": ("correct", [_verdict(0.8), _verdict(0.9)]),
               "b": ("correct", [_verdict(1.0)]), "c": ("shown", [_verdict(0.1)]),
               "d": ("slow", [_verdict(0.3), _verdict(0.4)]),
               "e": ("slow", [speed.Verdict(msg("speed.no_measurement"))])}
    lines, ok = calibration.calibration_table(results, "cuda")
    text = "\n".join(lines)
    band = calibration.band_between({"a": [0.8, 0.9], "b": [1.0]}, {"d": [0.3, 0.4]})
    assert (band.slowest, band.fastest) == (0.8, 0.4)
    assert f"threshold it would choose: {band.threshold:g}×" in text
    assert "(1 runs not scored)" in text and ok == (min(band.margins(band.threshold)) >= 1.25)


# --------------------------------------------------------------------------- the oracle


def test_the_oracle_is_attention_written_out():
    q, k, v = (torch.randn(1, 2, t, 8, dtype=torch.float64) for t in (3, 7, 7))
    blocked = oracle.causal_blocked(3, 7)
    assert blocked[0].tolist() == [False] * 5 + [True] * 2  # bottom-right
    weights = torch.exp(q @ k.transpose(-2, -1) / 8 ** 0.5).masked_fill(blocked, 0)
    out, lse = oracle.flash(q, k, v, True)
    torch.testing.assert_close(out, weights / weights.sum(-1, keepdim=True) @ v)
    torch.testing.assert_close(lse, weights.sum(-1).log())


def test_the_causal_work_counts_blocks_up_to_the_diagonal():
    c = forward.WORK_CASE  # query block m (of 64) needs key blocks (of 32) 0 .. 2m + 1
    per_block = 2 * 64 * 32 * c.D
    assert forward.causal_work(c) == (2 + 4) * per_block
    assert forward.causal_work(c, extra_blocks=1) == (3 + 4) * per_block
    assert forward.causal_work(c, skip=False) == 8 * per_block
    assert len({c.block_m, c.block_n, c.D}) == 3  # the products over key blocks told by size


def test_the_block_loop_without_its_mistakes_is_the_oracle():
    q, k, v = (torch.randn(1, 2, t, 8, dtype=torch.float64) for t in (9, 13, 13))
    for causal in (False, True):
        for got, want in zip(variants.block_loop(q, k, v, causal, 4),
                             oracle.flash(q, k, v, causal)):
            torch.testing.assert_close(got, want)


# --------------------------------------------------------------------------- Triton's setup


def test_workers_interpret_on_the_cpu_and_keep_triton_in_their_folder(tmp_path: Path):
    assert triton_environment("cpu", str(tmp_path))["TRITON_INTERPRET"] == "1"
    env = triton_environment("cuda:0", str(tmp_path))
    assert env["TRITON_INTERPRET"] == "0"
    assert env["TRITON_HOME"] == str(tmp_path)
    assert Path(env["TRITON_CACHE_DIR"]).is_relative_to(tmp_path)


def test_gpu_workers_may_run_what_triton_runs_to_compile(tmp_path: Path, monkeypatch):
    """On a GPU Triton runs its bundled ptxas (a worker may run it) and asks /sbin/ldconfig
    where libcuda is (a worker may not: the grader asks, and says it in TRITON_LIBCUDA_PATH)."""
    import triton

    tools = Path(triton.__file__).parent / sandbox.TRITON_TOOLS
    assert str(tools) in sandbox.triton_tools()
    if tools.exists():
        assert str(tools.resolve()) in sandbox.executables()
    monkeypatch.delenv("TRITON_LIBCUDA_PATH", raising=False)
    monkeypatch.setattr(runtime.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"))
    runtime.libcuda_folder.cache_clear()
    try:
        assert triton_environment("cuda:0", str(tmp_path))["TRITON_LIBCUDA_PATH"] == \
            "/usr/lib/wsl/lib"
        assert "TRITON_LIBCUDA_PATH" not in triton_environment("cpu", str(tmp_path))
        monkeypatch.setenv("TRITON_LIBCUDA_PATH", "/opt/cuda/lib")  # the grader's own choice
        assert triton_environment("cuda", str(tmp_path))["TRITON_LIBCUDA_PATH"] == "/opt/cuda/lib"
    finally:
        runtime.libcuda_folder.cache_clear()


def test_workers_keep_torchs_compiler_cache_in_their_folder(tmp_path: Path, monkeypatch):
    """Not the grader's TORCHINDUCTOR_CACHE_DIR (in /tmp, read-only in the sandbox) but one in
    the worker's folder, which the worker's start keeps: a submission that sets the variable
    only where unset (as CS336 solutions do) then loads."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_grader")
    env = worker_env(worker_environment(str(tmp_path), "cpu"))
    assert Path(env["TORCHINDUCTOR_CACHE_DIR"]).is_relative_to(tmp_path)
    assert Path(env["TRITON_CACHE_DIR"]).is_relative_to(tmp_path)


def test_a_missing_triton_is_one_sentence(tmp_path: Path, monkeypatch):
    """Where `import triton` fails, the submission's problem says how to install it, in both
    languages: one sentence, no traceback."""
    path = tmp_path / "submission.py"
    path.write_text(REFERENCE.read_text())
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises
    (problem,) = load_source(path).problems
    assert ids_in(problem) == {"load.not_installed", "runner.at_line"}
    for lang in ("en", "zh"):
        text = problem.render(lang)
        assert 'pip install "mha-kit[triton]"' in text and "\n" not in text


def test_triton_is_imported_again_under_the_other_switch():
    """Triton's library (tl.sum, tl.max) is decorated at import: where it was imported under
    the other TRITON_INTERPRET (torch's compiler imports it in the zygote's warm-up), it is
    imported again, so that the student's kernels and the library agree. In a fresh Python:
    kernels loaded here keep the Triton they were made with alive until exit."""
    code = ("import os, runpy, sys\n"
            f"configured = runpy.run_path({str(ROOT / 'mha_kit' / 'runtime.py')!r})"
            "['triton_as_configured']\n"
            "kinds = []\n"
            "for switch in ('0', '1', '0'):\n"
            "    os.environ['TRITON_INTERPRET'] = switch\n"
            "    configured()\n"
            "    import triton\n"
            "    kinds.append(type(triton.language.standard.sum).__name__)\n"
            "print(kinds)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["['JITFunction',", "'InterpretedFunction',", "'JITFunction']"]


# --------------------------------------------------------------------------- published kernels

# Each published kernel (tests/corpus/triton/published.py; their code is not kept here): the
# checks it passes, and for the others what they say: the message ids, and the error's words
# where the kernel raised. None implements the row softmax (`runner.missing`).
FLASH_CHECKS = ("triton_flash_forward", "triton_flash_causal", "triton_flash_strides",
                "triton_flash_backward")
RAISED = frozenset({"runner.raised_text", "runner.at_line"})
PUBLIC: dict[str, tuple[set[str], frozenset[str], str]] = {
    # Correct under the contract: bottom-right causal for Tq != Tk, the boundary masked, the
    # strides used, the blocks above the diagonal skipped (beside one product of q with an
    # identity matrix per query block, which the causal work count leaves out), a backward in
    # Triton with the δ pre-pass.
    "flag_attention.py": (set(FLASH_CHECKS), frozenset(), ""),
    # float16 and bfloat16 only: it asserts so on the float32 inputs the contract asks for (its
    # float16 case matches), and its Function calls the same launcher.
    "dao_flash_attn_triton.py": (set(), RAISED, "Only support fp16 and bf16"),
    # tl.make_block_ptr, as CS336's handout teaches, which triton 3.9 has removed: nothing runs.
    "cs336_damek.py": (set(), RAISED, "Block pointers have been removed"),
}


@pytest.mark.parametrize("name", PUBLIC)
def test_published_kernels_get_what_they_earn(name: str, tmp_path: Path, monkeypatch):
    adapter = TRITON / "public" / name
    if published.missing(adapter):
        pytest.skip(f"{name}: its published code is not here (see published.py): "
                    f"{[str(p) for p in published.missing(adapter)]}")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # cs336_damek sets it
    path = tmp_path / name
    path.write_text(published.submission(adapter))
    results = grade(path)
    passes, ids, words = PUBLIC[name]
    assert {r.id for r in results if r.passed} == passes, [
        f"{r.id}: {r.message}" for r in results if not r.passed]
    for r in results:
        if r.id == "triton_softmax":
            assert ids_in(r.message) == {"runner.missing"}
        elif not r.passed:
            assert ids <= ids_in(r.message) and words in r.message.render("en"), r.message


def test_the_2022_tutorial_without_boundary_masks_ends_its_worker(tmp_path: Path):
    """Triton's tutorial as of 2022 (public/triton_tutorial_2022.py) masks no load or store:
    at T = 21, blocks of 128 read and write past q, k, v and the output. Graded in a worker
    (in this process it would corrupt pytest's memory): the forward check fails, the grading
    process having crashed, with a word on masks; the kit carries on."""
    adapter = TRITON / "public" / "triton_tutorial_2022.py"
    if published.missing(adapter):
        pytest.skip(f"its published code is not here (see published.py): "
                    f"{[str(p) for p in published.missing(adapter)]}")
    path = tmp_path / adapter.name
    path.write_text(published.submission(adapter))
    with WorkerSubmission(path) as sub:
        (result,) = run_checks(sub, assignment="triton_attention", only=["triton_flash_forward"])
    assert not result.passed, result.message
    assert {"worker.crash", "worker.crash_triton"} <= ids_in(result.message)  # masks, it says

