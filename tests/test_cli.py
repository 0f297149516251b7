"""`mha-kit check` and `pytest mha_kit` as users run them: exit codes, table, JSON. One
`mha-kit check` runs in a fresh interpreter; the others run the same `main` in this process."""

import json
import subprocess

import pytest
import torch
from conftest import (
    DETERMINISTIC,
    ROOT,
    SPEED,
    STUBS,
    TEMPLATE,
    assert_full_marks,
    check_here,
    run_cli,
    table_texts,
)

from mha_kit.cli import main
from mha_kit.grading.registry import ASSIGNMENTS, POINTS
from mha_kit.messages import msg, render


def _only(ids):
    return [arg for i in ids for arg in ("--only", i)]


def test_full_marks_and_gradescope_json(graded_speed, tmp_path):
    """Full points, the speed check's at the graded config, timed in the worker."""
    results = tmp_path / "results.json"
    run = run_cli("check", str(TEMPLATE), "--json", str(results))
    assert results.is_file(), run.stdout + run.stderr
    data = json.loads(results.read_text())
    tests = data["tests"]
    assert [t["name"] for t in tests] == [c.id for c in ASSIGNMENTS["mha"]]
    assert_full_marks({t["name"]: (t["status"] == "passed", t["score"]) for t in tests},
                      [c.id for c in ASSIGNMENTS["mha"]])
    assert data["max_score"] == sum(c.points for c in ASSIGNMENTS["mha"])
    assert data["score"] == round(sum(t["score"] for t in tests), 2)
    for test in tests:
        assert test["max_score"] == POINTS[test["name"]]
        assert test["visibility"] == "visible" and test["output"]
    speed = next(t["output"] for t in tests if t["name"] == SPEED)
    assert "on cpu)" in speed and "test config" not in speed, speed
    assert run.returncode == 0, run.stdout + run.stderr  # every check passed
    assert str(results) in run.stdout.splitlines()[-1]  # the output came through whole


def test_stubs_score_zero_with_plain_messages(tmp_path):
    results = tmp_path / "results.json"
    run = check_here(str(STUBS), "--json", str(results))
    assert run.returncode == 1
    data = json.loads(results.read_text())
    assert data["score"] == 0
    for test in data["tests"]:
        if test["name"] != "speed_fused_vs_looped":
            assert "is not implemented yet" in test["output"], test


def test_only_runs_the_named_checks():
    run = check_here(str(TEMPLATE), *_only(["split_heads", "attend"]))
    assert run.returncode == 0, run.stdout
    assert "split_heads" in run.stdout and "attend" in run.stdout
    assert "merge_heads" not in run.stdout
    points = POINTS["split_heads"] + POINTS["attend"]
    assert f"{points}/{points}" in run.stdout


def test_usage_errors_exit_2(tmp_path):
    """In this process: `python -m mha_kit.cli` exits with what `main` returns, and each of
    these is refused before any grading starts."""
    assert main(["check", str(tmp_path / "missing.py")]) == 2
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["check", str(tmp_path / "notes.txt")]) == 2
    (tmp_path / "broken.ipynb").write_text("{ not json")
    assert main(["check", str(tmp_path / "broken.ipynb")]) == 2
    assert main(["check", str(TEMPLATE), "--only", "no_such_check"]) == 2
    assert main([]) == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="this torch has CUDA")
@pytest.mark.parametrize("command", ["check", "grade", "bench"])
def test_cuda_asked_of_a_torch_without_it_exits_2_with_a_sentence(command, tmp_path, capsys):
    (tmp_path / "alice.py").write_text(TEMPLATE.read_text())
    where = {"check": [str(TEMPLATE)], "grade": [str(tmp_path)], "bench": []}[command]
    assert main([command, *where, "--device", "cuda"]) == 2
    out, err = capsys.readouterr()
    assert err.strip() == render(msg("cli.no_cuda", torch=torch.__version__))
    assert "Traceback" not in out + err and "Grading" not in out


def test_a_broken_function_costs_only_its_own_checks(tmp_path):
    source = TEMPLATE.read_text().replace(
        "def split_heads(x, num_heads):\n", "def split_heads(x, num_heads):\n    1 / 0\n")
    path = tmp_path / "one_bug.py"
    path.write_text(source)
    run = check_here(str(path), *_only(DETERMINISTIC))
    assert run.returncode == 1
    failed = [row for row in table_texts(run.stdout) if row.startswith("✗")]
    # The template's fused module splits heads with split_heads: it is graded with the kit's.
    assert [row.split()[1] for row in failed] == ["split_heads"]
    line = source.splitlines().index("    1 / 0") + 1
    assert f"ZeroDivisionError, line {line}: division by zero" in failed[0]


def pytest_run(capsys: pytest.CaptureFixture, path, *args) -> subprocess.CompletedProcess:
    """`pytest mha_kit --submission PATH ARGS`, run in this process (`pytest.main`): the same
    plugin and session, graded by this process's zygote instead of a fresh interpreter's
    (whose start imports torch twice). The outer test keeps its own timeout."""
    capsys.readouterr()
    code = pytest.main([str(ROOT / "mha_kit"), "--rootdir", str(ROOT), "--submission", str(path),
                        "-q", "-p", "no:cacheprovider", "-p", "no:timeout", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["pytest", "mha_kit", str(path), *args], int(code), out,
                                       err)


def test_pytest_plugin_runs_one_test_per_check(capsys):
    good = pytest_run(capsys, TEMPLATE, "-k", "not speed")
    assert good.returncode == 0, good.stdout
    assert f"{len(DETERMINISTIC)} passed" in good.stdout


def test_pytest_plugin_grades_every_assignment(capsys):
    """The assignment comes from a notebook's test cells, or from --assignment; a failing
    check is a failing test, with the grader's message."""
    shapes = pytest_run(capsys, ROOT / "assignments" / "shapes" / "shapes_warmup.ipynb")
    assert shapes.returncode == 1 and f"{len(ASSIGNMENTS['shapes'])} failed" in shapes.stdout, \
        shapes.stdout
    assert "is not implemented yet" in shapes.stdout
    seed = ROOT / "tests" / "corpus" / "extensions" / "seed000_bmm.py"
    extension = pytest_run(capsys, seed, "--assignment", "mha_extensions")
    assert extension.returncode == 0, extension.stdout
    assert f"{len(ASSIGNMENTS['mha_extensions'])} passed" in extension.stdout
