"""Shared paths, constants and helpers for the kit's own tests."""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import shutil
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch

from mha_kit import settings
from mha_kit.assignments.mha import jobs as speed_jobs
from mha_kit.assignments.mha import speed as speed_score
from mha_kit.assignments.mha import speed_config
from mha_kit.grading.registry import ASSIGNMENTS, POINTS, SPECS
from mha_kit.messages import Message, msg
from mha_kit.runner import landlock, sandbox
from mha_kit.runner.policy import worker_user
from mha_kit.runtime import freeze_imports

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
TEMPLATE = CORPUS / "template.py"
STUBS = CORPUS / "stubs.py"
HOSTILE = ROOT / "tests" / "hostile"
KERNEL_TIMEOUT_S = 15  # nbgrader's Execute.timeout in the course of the `course` fixture
COURSE_SPEED_CONFIG = "small"  # c.MhaKit.speed_config in that course's nbgrader_config.py
SPEED = "speed_fused_vs_looped"
TIMED = {s.id for s in SPECS.values() if s.timed}  # the checks that time: not "ok" but times
# Every check but the speed check: what a submission gets the same way on any machine.
DETERMINISTIC = [c.id for c in ASSIGNMENTS["mha"] if c.id != SPEED]
# The speed check at a size that takes milliseconds (18 timed calls, every one checked).
TINY = speed_config.TINY
# Student code cannot signal the grader (tests/hostile/kills_grader.py): it runs as another
# account (a root grader's `nobody`), or Landlock (ABI 6) keeps its signals to itself.
KILL_REFUSED = worker_user() is not None or (sandbox.LANDLOCK in sandbox.layers()
                                             and landlock.abi() >= 6)
# The suite, and every process it starts, grades the speed check at the `small` config: a
# correct module passes, in a third of the CPU time. `tiny` and `graded_speed` choose otherwise.
os.environ.setdefault(settings.variable("speed_config"), "small")
# Each test process is a grader, and grades as a batch's graders do (grading.batch): on one
# torch thread, since the grader's side is small tensors and the suite's processes share the
# cores. What it starts (workers, kernels) keeps the interpreter's default.
torch.set_num_threads(1)


def measured(sub: Any, seed: int, timer: Any) -> dict:
    """The measurement of one timing run of `sub` on the CPU (`speed.timed_run`), every round
    timed by `timer` (in process, the times the rounds report are the times)."""
    with mock.patch.object(speed_jobs, "timer_for", lambda device: timer):
        return speed_score.timed_run(sub, "cpu", seed).measurement


def score_once(sub: Any, measurement: dict, device: str, seed: int) -> tuple[float, Message]:
    """(fraction of the points, message) from one timing run's measurement on `sub`, as the
    speed check decides on a single run (its outputs revealed by `sub`)."""
    judged = speed_score.judge(measurement, device, seed,
                               lambda indices: speed_score.revealed(sub, indices))
    return speed_score.decide([judged], device)


def messages_with(message: Any, message_id: str) -> list[Message]:
    """The messages of id `message_id` in `message` and nested in its parameters, in the order
    they are written (`messages.ids_in` gives their ids): a test reads their fields, not words."""
    if isinstance(message, list):
        return [found for part in message for found in messages_with(part, message_id)]
    if not isinstance(message, Message):
        return []
    return [message] * (message.id == message_id) + messages_with(list(message.params.values()),
                                                                  message_id)


def run_cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`mha-kit ...` as a user runs it (the console script, which puts no folder but its own on
    the import path), in a fresh interpreter; `env` is added to ours."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("mha-kit")), *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})},
    )


def kit_source(folder: Path) -> Path:
    """`folder`, a copy of what the kit publishes (its sources, masters and build files), for
    pip to build from: a build in the checkout would write into it."""
    for name in ("mha_kit", "solutions", "translations"):
        shutil.copytree(ROOT / name, folder / name,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "nbgrader_config.py"):
        shutil.copy(ROOT / name, folder)
    return folder


def table_entries(printed: str) -> list[list[str]]:
    """The rows and the problems of a table `mha-kit check` printed, each as its lines: a row
    starts with its mark, a problem with "  - ", and the indented lines under one (its message
    wrapped to the terminal's width) are its own."""
    entries: list[list[str]] = []
    inside = False  # the line before belongs to an entry
    for line in printed.splitlines():
        if line.startswith(("✓", "✗", "  - ")):
            entries.append([line])
            inside = True
        elif inside and line.startswith("    "):
            entries[-1].append(line)
        else:  # a rule, the total, a heading
            inside = False
    return entries


def table_texts(printed: str) -> list[str]:
    """`table_entries`, each entry's lines joined into one by a space."""
    return [" ".join(line.strip() for line in entry) for entry in table_entries(printed)]


@contextlib.contextmanager
def in_this_process(cwd: Path, env: Mapping[str, str] | None = None, unset: tuple[str, ...] = ()
                    ) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """For the block, what a command run in this process (instead of a fresh interpreter, and
    the zygote that would import torch again) sees: `cwd` as its folder, `env` set and `unset`
    left out; yields its (stdout, stderr), taken by redirection."""
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()) as out, \
            contextlib.redirect_stderr(io.StringIO()) as err:
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        for name in unset:
            patch.delenv(name, raising=False)
        patch.chdir(cwd)
        yield out, err


def cli_at(cwd: Path, *argv: str, env: Mapping[str, str] | None = None,
           unset: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`mha-kit ARGV` in `cwd` as `run_cli` runs it, but in this process (`in_this_process`):
    the same `main`, its exit code and output (a batch's graders are processes of their own
    either way)."""
    from mha_kit.cli import main

    with in_this_process(cwd, env, unset) as (out, err):
        code = main(list(argv))
    return subprocess.CompletedProcess(["mha-kit", *argv], code, out.getvalue(), err.getvalue())


def cli_here(*argv: str, **env: str) -> subprocess.CompletedProcess:
    """`mha-kit ARGV` in this process and folder (`cli_at`), `env` set for the call, in
    English unless it says otherwise."""
    from mha_kit.messages import LANG_VARIABLE

    return cli_at(Path.cwd(), *argv, env={LANG_VARIABLE: os.environ.get(LANG_VARIABLE, "en"),
                                          **env})


def check_here(*args: str, **env: str) -> subprocess.CompletedProcess:
    """`mha-kit check ARGS` in this process (`cli_here`)."""
    return cli_here("check", *args, **env)


def script_here(script: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """`python SCRIPT` in `cwd` as `subprocess.run` runs it, but in this process
    (`in_this_process`): the script run as `__main__` (runpy), its exit status and output (a
    SystemExit's message, or an exception's traceback, on stderr with status 1, as the
    interpreter gives them). The settings it adopts, as a process of its own does
    (`settings.adopt`), are undone after it."""
    adopted = list(settings._chosen)
    code = 0
    with in_this_process(cwd, env) as (out, err):
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as exit:
            if isinstance(exit.code, str):
                print(exit.code, file=sys.stderr)
            code = 1 if isinstance(exit.code, str) else exit.code or 0
        except Exception:  # as the interpreter ends on one: its traceback, status 1
            traceback.print_exc()
            code = 1
        finally:
            settings._chosen[:] = adopted
    return subprocess.CompletedProcess([sys.executable, str(script)], code, out.getvalue(),
                                       err.getvalue())


@contextlib.contextmanager
def renders_recorded() -> Iterator[list[str]]:
    """The ids of the messages rendered meanwhile. Grading renders none: ids and data decide
    inputs, points and the mistakes named, whatever the templates' words."""
    rendered: list[str] = []
    render = Message.render

    def recorded(self: Message, lang: str | None = None) -> str:
        rendered.append(self.id)
        return render(self, lang)

    Message.render = recorded
    try:
        yield rendered
    finally:
        Message.render = render


def assert_full_marks(found: dict[str, tuple[bool, float]], check_ids) -> None:
    """check id -> (passed, points) for exactly `check_ids`, each passed with full points (the
    timed check too: all or nothing, decided with a margin, docs/speed.md)."""
    assert set(found) == set(check_ids)
    for check_id, (passed, score) in found.items():
        assert passed and score == POINTS[check_id], (check_id, found[check_id])


def assert_fails_exactly(results: list, fails: set[str], label: str) -> None:
    """A corpus file's results: the checks in `fails` fail, every other one passes."""
    messages = "\n".join(f"{r.id}: {r.message}" for r in results if not r.passed)
    assert {r.id for r in results if not r.passed} == fails, f"{label}\n{messages}"


def assert_every_point_unexplained(results: list, check_ids: list[str]) -> None:
    """Correct code's results: exactly `check_ids`, in order, each passed with a plain "ok"
    (no mistake named, no note)."""
    assert [r.id for r in results] == check_ids
    for r in results:
        assert r.passed and r.message == msg("ok"), f"{r.id}: {r.message}"


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU speed check at the TINY size."""
    monkeypatch.setenv(settings.variable("speed_config"), "tiny")


@pytest.fixture
def graded_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The speed check at the size it is graded at, as a student's run has it."""
    monkeypatch.delenv(settings.variable("speed_config"), raising=False)


# --------------------------------------------------------------------------- nbgrader

# Fixtures that many tests share and that take a minute or more to build, and the xdist group
# of the tests that use each: `make test` runs the suite in two processes (pytest -n 2) and
# sends each group, file by file, to one of them, so that each fixture is built once. The groups
# start first, the longest (`course`, minutes in one process) before all: what is left fills
# the other process meanwhile.
SHARED = {"course": "course", "kit_course": "course", "hostile_batch": "hostile_batch"}
GROUPS = {"test_course_autograde.py": "course", "test_hostile_notebooks.py": "course",
          "test_nbgrader_cycle.py": "course",
          "test_batch.py": "hostile_batch",
          # a file whose tests share graded mutants (functools.cache): graded once, in one process
          "test_corpus.py": "test_corpus.py", "test_llm_attention.py": "test_llm_attention.py",
          "test_triton_attention.py": "test_triton_attention.py",
          "test_gradients.py": "test_gradients.py",
          "test_sandbox.py": "sandbox"}  # write to shared places (home, /tmp): one at a time


GROUP_ORDER = ["course", *dict.fromkeys(g for g in GROUPS.values() if g != "course")]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses a shared fixture is in a file of that fixture's group; the groups'
    tests come first, in GROUP_ORDER (xdist's queue keeps this order: see below)."""
    for item in items:
        for name in set(getattr(item, "fixturenames", ())) & set(SHARED):
            if GROUPS.get(item.path.name) != SHARED[name]:
                raise pytest.UsageError(f"{item.nodeid} uses `{name}`: add its file to "
                                        f"conftest.GROUPS as {SHARED[name]!r}")
    rank = {group: n for n, group in enumerate(GROUP_ORDER)}
    items.sort(key=lambda item: rank.get(GROUPS.get(item.path.name), len(rank)))  # stable


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (torch, the kit, every test module) frozen now, as a grader's
    imports are (`runtime.freeze_imports`, done here once for this process): the full
    collections that grading in this process sets off skip them (test_corpus.py alone: about
    10% less CPU)."""
    freeze_imports()


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's scheduling by scope, where a scope is a file's group, else a single test; the
    scopes are queued in collection order, not by their number of tests."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return GROUPS.get(Path(nodeid.split("::")[0]).name, nodeid)

    return GroupScheduling(config, log)


@pytest.fixture(scope="session")
def course(tmp_path_factory) -> Path:
    """The suite's one real nbgrader cycle, in a course folder apart from the kit, as the
    instructor guide sets one up: `mha-kit course init` writes it (nbgrader_config.py, the
    masters, their editions and overlays), and every command runs in it. Nothing is mocked.

    `mha-kit release mha` releases the core assignment from a source whose points drifted;
    four students submit it: the release with every answer pasted in and a cell of
    module-level Python before them (tests/corpus/module_features.py: "complete"), as
    released ("empty"), with three steps answered ("partial"), and that with one test cell
    edited and another deleted ("tampered"); so do the hostile notebooks
    (tests/hostile_notebooks.py). Every other assignment, and one edition (SUBMITTED), gets
    its solution with that cell ("complete") and its committed release ("empty").
    tests/nbgrader_cycle.py then runs nbgrader's generate_assignment for each, autograde and
    generate_feedback for every submission, and exports grades.csv.
    """
    import hostile_notebooks
    import nbformat  # here: notebook_helpers imports this module
    from notebook_helpers import (
        COURSE_ASSIGNMENTS,
        MHA_STUDENTS,
        PARTIAL,
        SOLUTION,
        STUDENTS,
        SUBMITTED,
        is_test_cell,
        kernel_env,
        read,
        solved,
        tampered,
        with_module_features,
    )

    course = tmp_path_factory.mktemp("course")

    # The suite's speed config comes from the course's nbgrader_config.py, not the environment.
    speed_config = settings.variable("speed_config")

    # The commands themselves, in this process: without a second interpreter's start.
    init = cli_at(course, "course", "init", str(course))  # every assignment of the kit
    assert init.returncode == 0, init.stdout + init.stderr
    with open(course / "nbgrader_config.py", "a") as config:  # hostile_notebooks' loop: not 2 min
        config.write(f"\nc.Execute.timeout = {KERNEL_TIMEOUT_S}\n"
                     f"c.MhaKit.speed_config = {COURSE_SPEED_CONFIG!r}\n")
    source = course / "solutions" / "mha" / SOLUTION.name
    nb = read(source)
    next(filter(is_test_cell, nb.cells)).metadata.nbgrader.points = 1
    nbformat.write(nb, str(source))
    release = cli_at(course, "release", "mha", unset=(speed_config,))
    assert release.returncode == 0, release.stdout + release.stderr
    assert "points updated" in release.stdout
    assert (f"warning: assignments/mha/{SOLUTION.name} installs the kit from the placeholder "
            "address") in release.stderr  # the kit's own master still holds YOUR-ORG

    released = read(course / "assignments" / "mha" / SOLUTION.name)
    complete = with_module_features(solved(released))
    for student, nb in zip(MHA_STUDENTS, (complete, released, solved(released, PARTIAL),
                                          tampered(solved(released, PARTIAL)))):
        folder = course / "submitted" / student / "mha"
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / SOLUTION.name))
    bases = {"complete": solved(released), "empty": released}
    for student, attacks in hostile_notebooks.submissions(hostile_notebooks.cases()).items():
        folder = course / "submitted" / student / "mha"
        folder.mkdir(parents=True)
        nb = hostile_notebooks.build(attacks, bases, course, ROOT / "mha_kit")
        nbformat.write(nb, str(folder / SOLUTION.name))
    submitted = sorted(course.glob("submitted/*/*/*.ipynb"))
    (course.parent / "submitted-before.json").write_text(
        json.dumps(hostile_notebooks.fingerprint(submitted)))
    for name in COURSE_ASSIGNMENTS:
        if name != "mha":
            for student, folder in zip(STUDENTS, ("solutions", "assignments")):
                if name in SUBMITTED:  # the notebook alone, as students hand it in
                    (course / "submitted" / student / name).mkdir(parents=True)
                    for notebook in (ROOT / folder / name).glob("*.ipynb"):
                        shutil.copy(notebook, course / "submitted" / student / name)
            for path in (course / "submitted" / "complete" / name).glob("*.ipynb"):
                nbformat.write(with_module_features(read(path)), str(path))

    env = {k: v for k, v in kernel_env().items() if k != speed_config}
    cycle = subprocess.run([sys.executable, str(ROOT / "tests" / "nbgrader_cycle.py"), str(course),
                            "--feedback", ",".join(MHA_STUDENTS),  # no hostile's feedback
                            *COURSE_ASSIGNMENTS], cwd=course, env=env, text=True,
                           capture_output=True, timeout=1200)  # a hang guard only
    assert cycle.returncode == 0, cycle.stdout[-3000:] + cycle.stderr[-3000:]
    return course
