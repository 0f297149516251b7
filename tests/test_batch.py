"""`mha-kit grade` over the hostile corpus: every submission gets its exact score and message,
the grade sheet is the grader's own, and the batch finishes. Plus discovery and Gradescope."""

from __future__ import annotations

import contextlib
import csv
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import (
    CORPUS,
    HOSTILE,
    KILL_REFUSED,
    ROOT,
    SPEED,
    TEMPLATE,
    kit_source,
    run_cli,
    script_here,
)

from mha_kit import settings
from mha_kit.cli import main
from mha_kit.cli.exits import EXIT_USAGE
from mha_kit.cli.gradescope import zippable_assignments
from mha_kit.grading.batch import in_parallel, write_csv
from mha_kit.grading.files import (
    MixedAssignments,
    StudentFile,
    class_assignment,
    discover,
    find_submission,
)
from mha_kit.grading.registry import ASSIGNMENTS, POINTS, WAITING_MESSAGES, run_checks
from mha_kit.messages import LANG_VARIABLE, msg, render
from mha_kit.runner import sandbox
from mha_kit.runner.inprocess import InProcessSubmission
from mha_kit.runner.policy import worker_user

sys.path.insert(0, str(CORPUS))
from mutants import MUTANTS  # noqa: E402

STEPS = ("split_heads", "scaled_scores", "causal_mask", "attend", "merge_heads",
         "output_projection")
FUSED = ("fused_mha", "fused_mha_masks", "fused_mha_contract")
# Tight limits keep the corpus fast (the defaults are in mha_kit/runner/policy.py), with
# room for a first call or a load on a loaded 2-core machine; 11 * CALL_S > TOTAL_S.
CALL_S, LOAD_S, TOTAL_S = 3, 5, 15
LIMITS = {"MHA_KIT_CALL_TIMEOUT": str(CALL_S), "MHA_KIT_LOAD_TIMEOUT": str(LOAD_S),
          "MHA_KIT_TOTAL_TIMEOUT": str(TOTAL_S), "MHA_KIT_LANG": "en"}
DROPPED = worker_user() is not None  # student code runs as another account (the grader is root)


@dataclass
class Expect:
    """What one hostile submission must get: its passing checks, and a message for the rest."""

    passes: tuple[str, ...] = ()
    fails: dict[str, str] = field(default_factory=dict)  # check id -> part of its message
    otherwise: tuple[str, ...] = ("is not defined",)  # one of these for every other check
    notes: tuple[str, ...] = ()  # parts of the loading notes
    somewhere: str | None = None  # part of at least one check's message

    def messages(self, check_id: str) -> tuple[str, ...]:
        if check_id in self.fails:
            return (self.fails[check_id],)
        return (str(WAITING_MESSAGES[SPEED]),) if check_id == SPEED else self.otherwise


DIED = "the grading process died while grading this submission"
FORBIDDEN_SDPA = "`MultiHeadAttention.forward` uses F.scaled_dot_product_attention, which"
EXPECTED: dict[str, Expect] = {
    "exit_at_import.py": Expect(
        otherwise=("your file ended the grading process while loading (exit code 3",)),
    "sys_exit_at_import.py": Expect(("split_heads",),
                                    notes=("line 11 raised SystemExit: done early",)),
    "exit_in_function.py": Expect(("merge_heads", "causal_mask"), {
        "split_heads": "`split_heads` ended the grading process (exit code 7"}),
    "raises_base_exceptions.py": Expect(("causal_mask",), {
        "split_heads": "`split_heads` raised SystemExit",
        "merge_heads": "`merge_heads` raised KeyboardInterrupt",
        "scaled_scores": "`scaled_scores` raised Escape, line 19: out of here"}),
    "infinite_loop.py": Expect(("merge_heads",), {
        "split_heads": f"`split_heads` timed out after {CALL_S} s (an infinite loop?)"}),
    "infinite_loop_at_import.py": Expect(otherwise=(
        f"loading your file did not finish within {LOAD_S} s (an infinite loop at top level?)",)),
    # Each check times out and restarts the worker, until the cap stops the rest. Eleven
    # checks at CALL_S each pass TOTAL_S on any machine; which check the cap stops depends on
    # its speed, so any message naming the cap will do.
    "loops_everywhere.py": Expect(
        fails={"split_heads": f"`split_heads` timed out after {CALL_S} s"},
        otherwise=(f"timed out after {CALL_S} s", f"reached its overall limit of {TOTAL_S} s"),
        somewhere=f"grading this submission reached its overall limit of {TOTAL_S} s"),
    "huge_allocation.py": Expect(("causal_mask",), {
        "split_heads": "`split_heads` ran out of memory (it asked for 3,725.3 GiB at once); "
                       "the grader allows 6 GiB",
        "merge_heads": "`merge_heads` ran out of memory; the grader allows 6 GiB"}),
    "prints_megabytes.py": Expect(("split_heads",),
                                  notes=("your code printed: xxxx", "characters in all")),
    "returns_non_tensors.py": Expect(fails={
        "split_heads": "`split_heads` returned lists or tuples nested too deeply",
        "merge_heads": "`merge_heads` returned a value of type AlwaysEqual",
        "scaled_scores": "`scaled_scores` returned a value of type generator",
        "causal_mask": "`causal_mask` returned a value of type ndarray"}),
    "tensor_subclass.py": Expect(fails={  # a new Parameter is graded, and has no gradient path
        "split_heads": "`split_heads` returned a tensor subclass, Agreeable",
        "merge_heads": "the gradient of `merge_heads` with respect to its input `x` is None"}),
    "monkeypatch_torch.py": Expect(fails={"split_heads": "wrong values",
                                          "merge_heads": "wrong values"}),
    "monkeypatch_autograder.py": Expect(fails={
        "split_heads": "`split_heads` returned something that cannot be sent back "
                       "(PicklingError)",
        "merge_heads": "wrong values"}),
    "writes_results_file.py": Expect(fails={"split_heads": "`split_heads` is not implemented"}),
    "writes_outside.py": Expect(STEPS),  # what it tries: tests/test_sandbox.py
    "forbidden_apis.py": Expect(STEPS, {
        "attention_head": "`AttentionHead.forward` uses F.scaled_dot_product_attention, which",
        "looped_mha": "`LoopedMultiHeadAttention.forward` uses nn.MultiheadAttention, which",
        **{check: FORBIDDEN_SDPA for check in FUSED}}),
    "fake_timer.py": Expect(FUSED, {  # timed by the kernel's count: as slow as it is
        "speed_fused_vs_looped": "measured: 0."}),
    "syntax_error.py": Expect(("split_heads", "causal_mask"),
                              notes=("syntax_error.py: syntax error at line 11",)),
    "syntax_error.ipynb": Expect(("split_heads", "causal_mask"),
                                 notes=("the cell starting `def merge_heads(x):`: syntax error "
                                        "at line 3",)),
    "threads_and_forks.py": Expect(fails={
        "attend": "`attend` starts a process or a session, line 19",
        **{check: "`MultiHeadAttention.forward` starts a thread" for check in FUSED}}),
    "leaves_something_behind.py": Expect(("split_heads",)),  # what is left: below
    # As `nobody`, or under Landlock, the kill is refused; else it kills a grader process, and
    # the batch gives this student alone a row of 0 and grades everyone else again.
    "kills_grader.py": Expect(("causal_mask",), notes=("raised PermissionError",))
    if KILL_REFUSED else Expect(fails={"speed_fused_vs_looped": DIED}, otherwise=(DIED,)),
}


STUDENTS = {e.path.name: e.student for e in discover(HOSTILE)}  # file name -> student


def expected_total(expect: Expect) -> int:
    return sum(POINTS[check] for check in expect.passes)


# A student's file in the folder the grader is run from (a flat folder of submissions): a
# module of the standard library's name that the grader's processes must never import.
PLANTED = (
    "import pathlib, sys\n"
    "pathlib.Path(__file__).with_suffix('.imported').write_text(' '.join(sys.argv))\n"
)


@pytest.fixture(scope="module")
def hostile_batch(tmp_path_factory):
    """One run of `mha-kit grade` over tests/hostile, in a folder of its own (the corpus
    writes fake grade sheets into the grader's working folder)."""
    where = tmp_path_factory.mktemp("batch")
    (where / "multiprocessing.py").write_text(PLANTED)
    run = run_cli("grade", str(HOSTILE), "--jobs", "2", "--csv", "grades.csv",
                  "--json-dir", "json", "--report", "class", env=LIMITS, cwd=where,
                  timeout=900)  # a hang guard only
    assert run.returncode == 0, run.stdout + run.stderr
    return where, run


def test_no_grader_process_imports_from_the_folder_it_runs_in(hostile_batch):
    """The grader's processes start with `-c`, which would put that folder first on their
    import path, ahead of the standard library: its `multiprocessing.py` ran as the grader."""
    where, _ = hostile_batch
    assert (where / "multiprocessing.py").is_file()
    assert not (where / "multiprocessing.imported").exists()


def test_the_corpus_covers_every_case():
    on_disk = {p.name for p in HOSTILE.iterdir() if p.suffix in (".py", ".ipynb")}
    assert on_disk == set(EXPECTED)
    assert len(on_disk) >= 12


def test_nothing_of_a_submission_outlives_the_batch(hostile_batch):
    """tests/hostile/leaves_something_behind.py tried a process in a session of its own, a
    program in a new session, a System V segment and a file unlinked while open: after the
    batch no process runs its programs, no segment has its key, and no process holds its file
    (whose disk space is then free)."""
    marker, key = "mhakit-hostile-leftover", 0x6D6B6974
    running = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if marker in Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " "):
                running.append(pid)
            held = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            running += [f"{pid} holds {path}" for path in held if marker in path]
    assert running == []
    segments = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    assert not [line for line in segments if int(line.split()[0]) == key]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_hostile_submission_gets_its_exact_score_and_messages(hostile_batch, name):
    where, _ = hostile_batch
    payload = json.loads((where / "json" / f"{STUDENTS[name]}.json").read_text())
    expect = EXPECTED[name]
    tests = {t["name"]: t for t in payload["tests"]}
    assert list(tests) == [c.id for c in ASSIGNMENTS["mha"]]
    for check in tests.values():
        if check["name"] in expect.passes:
            assert check["score"] == check["max_score"], check
        else:
            assert check["score"] == 0, check
            assert any(m in check["output"] for m in expect.messages(check["name"])), check
    assert payload["score"] == expected_total(expect)
    if expect.somewhere is not None:
        assert any(expect.somewhere in check["output"] for check in tests.values())
    for note in expect.notes:
        assert note in payload.get("output", ""), payload.get("output")


def test_printing_is_capped_and_made_harmless(hostile_batch):
    where, _ = hostile_batch
    output = json.loads((where / "json" / "prints_megabytes.json").read_text())["output"]
    assert len(output) < 3000 and "\x1b" not in output


def test_the_grade_sheet_is_the_graders_own(hostile_batch):
    """One row per student, one column per check; the fake sheet a student wrote is gone."""
    where, run = hostile_batch
    with open(where / "grades.csv", newline="") as sheet:
        rows = list(csv.DictReader(sheet))
    assert [r["student"] for r in rows] == sorted(STUDENTS.values())
    assert list(rows[0]) == ["student", "file", *(c.id for c in ASSIGNMENTS["mha"]), "total",
                             "mistakes", "notes"]
    for row in rows:
        results = json.loads((where / "json" / f"{row['student']}.json").read_text())
        named = [m for t in results["tests"] for m in t["extra_data"]["mistakes"]]
        assert row["mistakes"].split() == list(dict.fromkeys(named))
        expect = EXPECTED[row["file"]]
        assert float(row["total"]) == expected_total(expect), row
        for check in ASSIGNMENTS["mha"]:
            points = POINTS[check.id] if check.id in expect.passes else 0
            assert float(row[check.id]) == points, (row["student"], check.id)
    lines = run.stderr.splitlines()
    started = f"grading {len(EXPECTED)} submissions of mha with 2 jobs on cpu ..."
    assert started in lines, run.stderr
    assert not any(line.startswith("[") for line in lines[:lines.index(started)])  # said first
    assert f"{len(EXPECTED)}/{len(EXPECTED)}" in run.stderr  # the progress line
    assert f"graded {len(EXPECTED)} submissions in" in run.stdout


def test_discovery_of_files_folders_and_nbgrader_layouts(tmp_path):
    (tmp_path / "alice.py").write_text("")
    (tmp_path / "bob.ipynb").write_text("{}")
    (tmp_path / "bob.py").write_text("")
    carol = tmp_path / "carol" / "mha"  # nbgrader: submitted/STUDENT/ASSIGNMENT/NOTEBOOK
    carol.mkdir(parents=True)
    (carol / "multi_head_attention.ipynb").write_text("{}")
    (carol / ".ipynb_checkpoints").mkdir()
    (carol / ".ipynb_checkpoints" / "multi_head_attention-checkpoint.ipynb").write_text("{}")
    dave = tmp_path / "dave"
    dave.mkdir()
    (dave / "a.py").write_text("")
    (dave / "b.py").write_text("")
    (tmp_path / "erin").mkdir()
    (tmp_path / "notes.txt").write_text("not a submission")
    (tmp_path / "__pycache__").mkdir()
    assert discover(tmp_path) == [
        StudentFile("alice", tmp_path / "alice.py"),
        StudentFile("bob.ipynb", tmp_path / "bob.ipynb"),
        StudentFile("bob.py", tmp_path / "bob.py"),
        StudentFile("carol", carol / "multi_head_attention.ipynb"),
        StudentFile("dave", None, msg("files.several", count=2, suffix=".py",
                                      names="a.py, b.py")),
        StudentFile("erin", None, msg("files.none")),
    ]
    with pytest.raises(LookupError):
        find_submission(tmp_path / "erin")


def test_with_the_assignment_named_a_student_who_handed_in_every_assignment_is_graded(tmp_path):
    """nbgrader's submitted/ holds every assignment of a student: the one named is graded (the
    Chinese edition's folder counts as its assignment's)."""
    for student, folder in (("alice", "mha"), ("alice", "shapes"), ("bob", "mha_zh"),
                            ("bob", "shapes")):
        (tmp_path / student / folder).mkdir(parents=True)
        (tmp_path / student / folder / f"{folder}.ipynb").write_text("{}")
    assert [(e.student, e.path) for e in discover(tmp_path, "mha")] == [
        ("alice", tmp_path / "alice" / "mha" / "mha.ipynb"),
        ("bob", tmp_path / "bob" / "mha_zh" / "mha_zh.ipynb")]
    assert discover(tmp_path, "shapes")[1].path == tmp_path / "bob" / "shapes" / "shapes.ipynb"
    assert discover(tmp_path)[0].path is None  # two notebooks, and no assignment named


def test_a_student_with_two_editions_is_graded_on_the_folder_asked_for(tmp_path, monkeypatch):
    """nbgrader's submitted/ with the warm-up and its Chinese edition both handed in: `mha-kit
    grade` grades the folder named, never 0 for "2 .ipynb files"; an edition in Chinese."""
    alice = tmp_path / "submitted" / "alice"
    for folder, source in (("shapes", "solutions"), ("shapes_zh", "assignments"),
                           ("mha", "assignments")):
        shutil.copytree(ROOT / source / folder, alice / folder)
    monkeypatch.delenv(LANG_VARIABLE, raising=False)  # the edition's language, as none is set
    sheets = {}
    for asked in ("shapes", "shapes_zh"):
        sheets[asked] = tmp_path / f"{asked}.csv"
        assert main(["grade", str(tmp_path / "submitted"), "--assignment", asked,
                     "--csv", str(sheets[asked])]) == 0
    (master,), (chinese,) = (list(csv.DictReader(sheets[a].open())) for a in sheets)
    assert float(master["total"]) == 100 and not master["notes"]
    assert float(chinese["total"]) == 0 and re.search("[\u4e00-\u9fff]", chinese["notes"])


def test_a_class_whose_notebooks_are_of_different_assignments_is_refused(tmp_path, capsys):
    """The warm-up's notebook among the core assignment's must not decide the class's checks
    (the first notebook's assignment did), nor give its author the warm-up's points."""
    for student, notebook in (("aaron", ROOT / "solutions" / "shapes" / "shapes_warmup.ipynb"),
                              ("alice", ROOT / "solutions" / "mha" /
                               "multi_head_attention.ipynb")):
        (tmp_path / student).mkdir()
        (tmp_path / student / notebook.name).write_bytes(notebook.read_bytes())
    assert main(["grade", str(tmp_path), "--csv", str(tmp_path / "grades.csv")]) == 2
    assert ("the submissions are of different assignments: shapes (aaron), mha (alice); name "
            "the one to grade with --assignment") in capsys.readouterr().err
    assert not (tmp_path / "grades.csv").exists()


def test_one_notebook_does_not_choose_the_checks_of_a_class_of_py_files(tmp_path, capsys):
    """A .py file's definitions say which assignment it answers: a warm-up notebook among a
    class of mha files makes the class ask for --assignment, not graded as the warm-up."""
    (tmp_path / "alice.py").write_text(TEMPLATE.read_text())
    (tmp_path / "mallory").mkdir()
    warmup = ROOT / "solutions" / "shapes" / "shapes_warmup.ipynb"
    (tmp_path / "mallory" / warmup.name).write_bytes(warmup.read_bytes())
    assert main(["grade", str(tmp_path), "--csv", str(tmp_path / "grades.csv")]) == 2
    err = capsys.readouterr().err
    assert "shapes (mallory)" in err and "mha (alice)" in err


def test_a_notebook_that_names_no_assignment_has_no_say_in_the_class(tmp_path):
    """A fresh notebook (no test cells) and one that is not JSON among warm-up notebooks: the
    class is the warm-up's (they counted as mha, and the class was refused as mixed)."""
    warmup = ROOT / "solutions" / "shapes" / "shapes_warmup.ipynb"
    files = {"aaron": warmup.read_text(), "bob": '{"nbformat": 4, "nbformat_minor": 5, '
             '"metadata": {}, "cells": []}', "carol": "{not json"}
    for student, text in files.items():
        (tmp_path / f"{student}.ipynb").write_text(text)
    (tmp_path / "erin.py").write_text("x = 1\n")  # defines no name of any contract
    entries = discover(tmp_path)
    assert class_assignment(entries) == "shapes"  # nor has a .py file that defines none
    (tmp_path / "dave.ipynb").write_bytes((ROOT / "assignments" / "mha" /
                                           "multi_head_attention.ipynb").read_bytes())
    with pytest.raises(MixedAssignments, match=r"^shapes \(aaron\), mha \(dave\)$"):
        class_assignment(discover(tmp_path))


def test_grade_usage_errors(tmp_path):
    assert main(["grade", str(tmp_path / "missing")]) == 2
    assert main(["grade", str(tmp_path)]) == 2  # nothing to grade
    assert main(["grade", str(tmp_path), "--jobs", "0"]) == 2


@pytest.mark.parametrize("account", ["nobody", "mha-kit-no-such-account"])
def test_a_grader_that_cannot_start_workers_stops_instead_of_grading_zeros(tmp_path, account):
    """Student code to run as an account that cannot run Python here (`nobody`, where the
    grader is root and its Python is closed to others) or as none that exists."""
    if account == "nobody" and (not hasattr(os, "geteuid") or os.geteuid() != 0 or DROPPED):
        pytest.skip("needs a root grader whose Python the `nobody` account cannot run")
    (tmp_path / "alice.py").write_text(TEMPLATE.read_text())
    run = run_cli("grade", str(tmp_path), "--csv", str(tmp_path / "grades.csv"),
                  env={settings.variable("worker_user"): account})
    assert run.returncode == 2
    assert f"could not start as user {account!r}" in run.stderr
    assert not (tmp_path / "grades.csv").exists()


# --------------------------------------------------------------------------- Gradescope


ENTRY_POINT = ROOT / "mha_kit" / "gradescope" / "run_autograder"


def run_autograder(submission: Path, results: Path, cwd: Path, **env: str
                   ) -> subprocess.CompletedProcess:
    """Gradescope's entry point on `submission`, its settings in the environment, run in this
    process (`conftest.script_here`: the same code, without another interpreter's start;
    test_run_autograder_reads_the_zips_files_where_gradescope_puts_them runs it in one)."""
    return script_here(ENTRY_POINT, cwd, **{
        **LIMITS, "MHA_KIT_SUBMISSION_DIR": str(submission), "MHA_KIT_RESULTS": str(results),
        **env})


def test_gradescope_entry_point_writes_the_graders_results(tmp_path):
    """The submission writes a perfect results.json where the grader works; the grader's own
    results replace it."""
    upload = tmp_path / "submission"
    upload.mkdir()
    (upload / "writes_results_file.py").write_text(
        (HOSTILE / "writes_results_file.py").read_text())
    results = tmp_path / "results.json"
    run = run_autograder(upload, results, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    payload = json.loads(results.read_text())
    assert payload["score"] == 0
    assert payload["max_score"] == sum(c.points for c in ASSIGNMENTS["mha"])
    assert by_visibility(payload) == {
        "visible": [c.id for c in ASSIGNMENTS["mha"]],
        "after_published": [f"{c.id} (hidden inputs)" for c in ASSIGNMENTS["mha"] if not c.timed]}
    assert "is not implemented yet" in payload["tests"][0]["output"]
    assert payload["execution_time"] > 0
    unprotected = sandbox.unprotected()  # the instructor's log says what nothing protects
    assert (render(unprotected) in run.stderr) if unprotected else "sandbox" not in run.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is of a root worker")
def test_gradescope_refuses_a_root_worker_with_nothing_to_confine_it(tmp_path):
    """No Landlock and no account to drop to: student code could forge results.json. The
    entry point refuses, in the log, unless the instructor overrides it."""
    upload = tmp_path / "submission"
    upload.mkdir()
    (upload / "answer.py").write_text(TEMPLATE.read_text())
    results = tmp_path / "results.json"
    run = run_autograder(upload, results, cwd=tmp_path, MHA_KIT_SANDBOX="bwrap",
                         **{settings.variable("worker_user"): ""})
    assert run.returncode != 0 and not results.exists()
    assert "MHA_KIT_ALLOW_UNCONFINED=1" in run.stderr


def test_gradescope_entry_point_without_a_submission(tmp_path):
    upload = tmp_path / "submission"
    upload.mkdir()
    results = tmp_path / "results" / "results.json"
    run = run_autograder(upload, results, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    payload = json.loads(results.read_text())
    assert payload["score"] == 0
    assert "no .ipynb or .py file found: upload your notebook" in payload["output"]
    # The Chinese edition's zip: the core assignment's checks, told in Chinese.
    run = run_autograder(upload, results, cwd=tmp_path, MHA_KIT_ASSIGNMENT="mha_zh",
                         MHA_KIT_LANG="")
    assert run.returncode == 0, run.stderr
    payload = json.loads(results.read_text())
    assert [t["name"] for t in payload["tests"]] == [c.id for c in ASSIGNMENTS["mha"]]
    assert "upload your notebook" not in payload["output"]
    assert "没有找到 .ipynb 或 .py 文件" in payload["output"], payload["output"]


def test_an_upload_of_another_assignment_is_graded_as_the_instructors(tmp_path):
    """A finished warm-up notebook uploaded to the core assignment: graded by the core
    assignment's checks (it was graded as the warm-up, 100/100)."""
    upload = tmp_path / "submission"
    upload.mkdir()
    warmup = ROOT / "solutions" / "shapes" / "shapes_warmup.ipynb"
    (upload / "multi_head_attention.ipynb").write_bytes(warmup.read_bytes())
    results = tmp_path / "results.json"
    run = run_autograder(upload, results, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    payload = json.loads(results.read_text())
    assert by_visibility(payload)["visible"] == [c.id for c in ASSIGNMENTS["mha"]]
    assert payload["score"] == 0


def by_visibility(payload: dict) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for test in payload["tests"]:
        found.setdefault(test["visibility"], []).append(test["name"])
    return found


def test_hidden_input_tests_name_the_mistake_and_never_the_inputs(tmp_path):
    """A file that scales by √embed_dim: the hidden-input tests, hidden from the student as the
    instructor chose, name the mistake but no case, no index and no number; a check earns the
    lower of its two scores."""
    upload = tmp_path / "submission"
    upload.mkdir()
    mutant = next(m for m in MUTANTS if m.mistake == "scale_by_embed_dim")
    # It prints what split_heads is given once the visible run's calls are over: the values
    # of hidden inputs, which must reach no output.
    counting = mutant.source().replace(
        "def split_heads(x, num_heads):\n",
        "CALLS = [0]\n\n\ndef split_heads(x, num_heads):\n    CALLS[0] += 1\n"
        "    if CALLS[0] > VISIBLE:\n        print('HIDDEN', x.flatten()[:2].tolist())\n", 1)
    (tmp_path / "count.py").write_text(counting.replace("VISIBLE", "10**9"))
    sub = InProcessSubmission.from_path(tmp_path / "count.py")
    run_checks(sub, assignment="mha")
    (upload / "answer.py").write_text(counting.replace(
        "VISIBLE", str(sub.namespace["CALLS"][0])))
    results = tmp_path / "results.json"
    run = run_autograder(upload, results, cwd=tmp_path, MHA_KIT_HIDDEN_VISIBILITY="hidden")
    assert run.returncode == 0, run.stderr
    payload = json.loads(results.read_text())
    tests = {t["name"]: t for t in payload["tests"]}
    visible, hidden = tests["fused_mha"], tests["fused_mha (hidden inputs)"]
    assert hidden["visibility"] == "hidden" and hidden["status"] == "failed"
    assert hidden["extra_data"]["mistakes"] == visible["extra_data"]["mistakes"] == [
        "scale_by_embed_dim"]
    assert "B=" not in hidden["output"] and "index" not in hidden["output"]
    assert not re.search(r"\d\.\d", hidden["output"])  # no value, expected or got
    assert "B=" in visible["output"]  # the visible inputs are told as before
    assert "HIDDEN" not in json.dumps(payload)  # nothing printed in the hidden run
    earned = sum(min(t["score"], tests.get(f"{name} (hidden inputs)", t)["score"])
                 for name, t in tests.items() if not name.endswith("(hidden inputs)"))
    assert payload["score"] == round(earned, 2)


def test_hidden_input_tests_can_be_left_out(tmp_path):
    upload = tmp_path / "submission"
    upload.mkdir()
    (upload / "answer.py").write_text(TEMPLATE.read_text())
    results = tmp_path / "results.json"
    run = run_autograder(upload, results, cwd=tmp_path, MHA_KIT_HIDDEN_VISIBILITY="none",
                         MHA_KIT_SPEED_CONFIG="tiny")
    assert run.returncode == 0, run.stderr
    assert set(by_visibility(json.loads(results.read_text()))) == {"visible"}
    bad = run_autograder(upload, results, cwd=tmp_path, MHA_KIT_HIDDEN_VISIBILITY="soon")
    assert bad.returncode != 0 and "soon" in bad.stderr


def make_zip(out: Path, *args: str) -> int:
    """`mha-kit gradescope OUT ARGS...`, in this process: its exit status."""
    return main(["gradescope", str(out), *args])


def zipped(path: Path, name: str) -> str:
    return zipfile.ZipFile(path).read(name).decode().strip()


def test_run_autograder_reads_the_zips_files_where_gradescope_puts_them(tmp_path, monkeypatch):
    """Gradescope unpacks the zip into /autograder/source/ and copies run_autograder alone to
    /autograder/run_autograder: there it still grades the zip's assignment, with its hidden
    tests' visibility (review 52: it graded mha, unsalted, whatever the zip said)."""
    monkeypatch.chdir(tmp_path)
    assert make_zip(tmp_path / "shapes.zip", "--assignment", "shapes", "--hidden", "hidden") == 0
    autograder = tmp_path / "autograder"
    zipfile.ZipFile(tmp_path / "shapes.zip").extractall(autograder / "source")
    shutil.copy(autograder / "source" / "run_autograder", autograder / "run_autograder")
    upload = tmp_path / "submission"
    upload.mkdir()
    shutil.copy(next((ROOT / "solutions" / "shapes").glob("*.ipynb")), upload)
    results = tmp_path / "results.json"
    env = {**os.environ, **LIMITS, "MHA_KIT_SUBMISSION_DIR": str(upload),
           "MHA_KIT_RESULTS": str(results)}
    env.pop(settings.variable("assignment"), None)
    env.pop(settings.variable("hidden_visibility"), None)
    # In a fresh interpreter, as Gradescope runs it (the other tests run it in this process).
    run = subprocess.run([sys.executable, str(autograder / "run_autograder")], env=env,
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    tests = json.loads(results.read_text())["tests"]
    assert {t["name"] for t in tests if "(hidden inputs)" not in t["name"]} == {
        c.id for c in ASSIGNMENTS["shapes"]}
    assert {t["visibility"] for t in tests if "(hidden inputs)" in t["name"]} == {"hidden"}


def test_gradescope_zip_holds_the_entry_point_the_kit_and_the_assignment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no course here: the defaults
    monkeypatch.delenv(settings.variable("default_assignment"), raising=False)
    assert make_zip(tmp_path / "autograder.zip") == 0
    archive = zipfile.ZipFile(tmp_path / "autograder.zip")
    names = set(archive.namelist())
    assert {"run_autograder", "setup.sh", "assignment", "hidden_visibility",
            "mha-kit/pyproject.toml", "mha-kit/README.md", "mha-kit/mha_kit/runner/worker.py",
            "mha-kit/mha_kit/gradescope/run_autograder"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    entry_point = ROOT / "mha_kit" / "gradescope" / "run_autograder"
    assert archive.read("run_autograder") == entry_point.read_bytes()
    assert archive.getinfo("run_autograder").external_attr >> 16 & 0o111  # Gradescope runs it
    assert archive.read("mha-kit/pyproject.toml") == (ROOT / "pyproject.toml").read_bytes()
    assert zipped(tmp_path / "autograder.zip", "assignment") == settings.Settings.default_assignment
    assert zipped(tmp_path / "autograder.zip", "hidden_visibility") == "after_published"
    assert make_zip(tmp_path / "shapes.zip", "--assignment", "shapes") == 0
    assert zipped(tmp_path / "shapes.zip", "assignment") == "shapes"
    assert make_zip(tmp_path / "zh.zip", "--assignment", "mha_zh") == 0  # the Chinese edition's
    assert zipped(tmp_path / "zh.zip", "assignment") == "mha_zh"
    monkeypatch.setenv(settings.variable("default_assignment"), "shapes")  # the setting's
    assert make_zip(tmp_path / "default.zip") == 0
    assert zipped(tmp_path / "default.zip", "assignment") == "shapes"
    assert make_zip(tmp_path / "due.zip", "--hidden", "after_due_date") == 0
    assert zipped(tmp_path / "due.zip", "hidden_visibility") == "after_due_date"


def test_gradescope_zip_of_an_unknown_assignment_or_visibility_is_refused(tmp_path, monkeypatch,
                                                                           capsys):
    monkeypatch.chdir(tmp_path)
    assert make_zip(tmp_path / "wrong.zip", "--assignment", "nope") == EXIT_USAGE
    said = capsys.readouterr().err.strip()
    assert said.splitlines() == [render(msg("gradescope.no_assignment", assignment="nope",
                                            known=", ".join(zippable_assignments())))]
    assert make_zip(tmp_path / "soon.zip", "--hidden", "soon") == EXIT_USAGE
    assert "--hidden soon" in capsys.readouterr().err
    monkeypatch.setenv(settings.variable("default_assignment"), "nope")  # the setting's, too
    assert make_zip(tmp_path / "default.zip") == EXIT_USAGE
    assert "nope" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.zip"))


def test_gradescope_zip_holds_the_course_secret_only_when_given(tmp_path, monkeypatch):
    """The secret that salts every input (red team n4) travels in the zip, which students
    never see; run_autograder reads it from beside itself. It comes from the environment or
    from the course's nbgrader_config.py, which overrides it."""
    monkeypatch.chdir(tmp_path)
    variable = settings.variable("secret")
    monkeypatch.setenv(variable, "")
    assert make_zip(tmp_path / "open.zip") == 0
    assert "secret" not in zipfile.ZipFile(tmp_path / "open.zip").namelist()
    monkeypatch.setenv(variable, "s3cr3t words")
    assert make_zip(tmp_path / "salted.zip") == 0
    assert zipped(tmp_path / "salted.zip", "secret") == "s3cr3t words"
    secret = zipfile.ZipFile(tmp_path / "salted.zip").getinfo("secret")
    assert secret.external_attr >> 16 & 0o077 == 0  # root's alone
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\nc.MhaKit.secret = 'the course words'\n")
    assert make_zip(tmp_path / "course.zip") == 0
    assert zipped(tmp_path / "course.zip", "secret") == "the course words"


def test_gradescope_zip_from_a_pip_install_carries_an_installable_kit(tmp_path):
    """An instructor without a checkout: the kit built as a wheel and installed elsewhere
    writes the zip, whose mha-kit/ (a pyproject.toml from the installed metadata) installs
    and imports, with the dependencies and the triton extra of the installed kit."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    source = kit_source(tmp_path / "source")
    installed, reinstalled, cwd = tmp_path / "installed", tmp_path / "reinstalled", tmp_path / "cwd"
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(tmp_path / "dist"), str(source)], check=True, timeout=300)
    wheel = next((tmp_path / "dist").glob("mha_kit-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(installed),
                    str(wheel)], check=True, timeout=300)
    shutil.rmtree(source)  # nothing of a checkout is left to read
    cwd.mkdir()
    env = {**os.environ, "PYTHONPATH": str(installed)}
    run = subprocess.run([sys.executable, "-m", "mha_kit.cli", "gradescope", "out.zip"],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    archive = zipfile.ZipFile(cwd / "out.zip")
    assert {"run_autograder", "setup.sh", "mha-kit/pyproject.toml"} <= set(archive.namelist())
    assert "mha-kit/README.md" not in archive.namelist()  # the installed kit's, not a checkout's
    archive.extractall(cwd / "unzipped")
    subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(reinstalled), str(cwd / "unzipped" / "mha-kit")],
                   check=True, timeout=300)
    probe = "import mha_kit, mha_kit.cli; print(mha_kit.__file__)"
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              cwd=cwd, env={**os.environ, "PYTHONPATH": str(reinstalled)},
                              check=True)
    assert Path(imported.stdout.strip()).is_relative_to(reinstalled)
    assert (reinstalled / "mha_kit" / "gradescope" / "run_autograder").is_file()

    def metadata(folder: Path) -> importlib.metadata.PackageMetadata:
        return importlib.metadata.PathDistribution(next(folder.glob("mha_kit-*.dist-info"))
                                                   ).metadata

    built, rebuilt = metadata(installed), metadata(reinstalled)
    for field_name in ("Name", "Version", "Requires-Python"):
        assert rebuilt[field_name] == built[field_name]
    kept = [r for r in built.get_all("Requires-Dist")
            if "extra ==" not in r or r.endswith('extra == "triton"')]
    assert rebuilt.get_all("Requires-Dist") == kept


def _returned_or_died(item: str) -> str:
    if item.startswith("dies:"):  # dies:MARKER, written just before
        time.sleep(0.5)
        Path(item.removeprefix("dies:")).touch()
        os._exit(1)  # as student code that kills its grader process
    return item


def test_a_grader_process_that_dies_between_two_results_costs_only_its_own_item(tmp_path):
    """The pool may break while the batch handles a result: the next item goes to a new pool,
    the dead process's item is tried alone, and the batch goes on."""
    marker = tmp_path / "died"
    dies = f"dies:{marker}"
    got = {}
    for item, result in in_parallel(["fast", dies, "next"], 2, _returned_or_died,
                                    lambda item: "died", str(tmp_path)):
        got[item] = result
        deadline = time.monotonic() + 30
        while item == "fast" and not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # meanwhile `dies` ends its process
        time.sleep(1 if item == "fast" else 0)  # and the pool sees it
    assert got == {"fast": "fast", "next": "next", dies: "died"}


def test_the_grade_sheet_holds_no_formula_and_no_escape(tmp_path):
    """A file named as a spreadsheet formula, or with a terminal's escapes in its name, is
    written as text a spreadsheet shows and a terminal prints as it is."""
    names = ['=HYPERLINK("http://x")+0', "-2+3+cmd|' -C calc'!A0", "@SUM(1)", "a\x1b[2Jb"]
    payload = {"score": 0, "max_score": 100, "tests": [], "output": "=1+1\nprinted"}
    rows = {name: (StudentFile(name, tmp_path / f"{name}.py"), payload) for name in names}
    sheet = tmp_path / "grades.csv"
    write_csv(sheet, rows, [])
    cells = [cell for row in list(csv.reader(sheet.open()))[1:] for cell in row]
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@"))]
    assert "'=HYPERLINK(\"http://x\")+0" in cells and "'=1+1 | printed" in cells
    assert not any("\x1b" in cell for cell in cells) and "a[2Jb" not in cells
