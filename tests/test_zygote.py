"""How workers start: forked from a zygote that has imported torch, or (zygote.FORK off: no
subreaper) as the zygote itself. Either way a worker is the grader's own child, in a session of
its own, with the same limits and account, and it dies with its grader."""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, TEMPLATE

from mha_kit import settings
from mha_kit.grading.batch import grade_submission
from mha_kit.runner import landlock, sandbox, zygote
from mha_kit.runner.policy import Limits, worker_user
from mha_kit.runner.worker import WorkerSubmission
from mha_kit.runtime import freeze_imports

SANDBOXED = sandbox.BUBBLEWRAP in sandbox.layers()  # the zygote is then bwrap's child
REPORTS = """
import os, resource, torch


def causal_mask(seq_len, device=None):
    return torch.tensor([os.getppid(), os.getuid(), os.getsid(0), os.getpid(),
                         resource.getrlimit(resource.RLIMIT_AS)[0],
                         resource.getrlimit(resource.RLIMIT_FSIZE)[0],
                         resource.getrlimit(resource.RLIMIT_CORE)[0],
                         os.getcwd() == os.environ["HOME"] == os.environ["TMPDIR"]])
"""


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.fixture(params=["forked", "the zygote itself"])
def start(request, monkeypatch):
    """Both ways a zygote starts a worker."""
    if request.param == "forked" and not zygote.FORK:
        pytest.skip("workers are forked only on Linux")
    monkeypatch.setattr(zygote, "FORK", request.param == "forked")
    return request.param


def test_a_worker_is_the_graders_child_with_its_limits_and_account(start, tmp_path):
    source = tmp_path / "reports.py"
    source.write_text(REPORTS)
    # not the default 6 GiB, so that the limit shown is the one asked for; a CUDA build of torch
    # maps more than 3 GiB at import (measured: a worker under 3 GiB could not start); no file
    # may take more disk than all of them may
    with WorkerSubmission(source, limits=Limits(memory_gib=5, disk_gib=0.5)) as sub:
        parent, uid, session, pid, memory, file_size, core, in_its_folder = (
            sub.call("causal_mask", 1).value.tolist())
        worker = sub._proc.pid
        bwrap = sub._proc._popen.pid if start == "the zygote itself" and SANDBOXED else None
        cmdline = open(f"/proc/{worker}/cmdline").read().split("\0")
    assert pid == worker and parent == (bwrap or os.getpid())  # what `kills_grader.py` uses
    assert session == pid  # its own session and process group: killed as a group
    assert uid == (65534 if worker_user() == "nobody" else os.getuid())
    assert (memory, file_size, core) == (5 * 2**30, 2**29, 0)
    assert in_its_folder
    assert "mha_kit.runner.zygote_process" in cmdline


def test_a_worker_dies_with_its_grader(start, tmp_path):
    grader = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from mha_kit.runner import zygote\n"
         "from mha_kit.runner.worker import WorkerSubmission\n"
         f"zygote.FORK = {zygote.FORK}\n"
         f"sub = WorkerSubmission({str(TEMPLATE)!r})\n"
         "sub.ensure_loaded()\n"
         "print(sub._proc.pid, zygote._zygote.proc.pid if zygote._zygote else 0, flush=True)\n"
         "time.sleep(120)\n"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        worker, zygote_pid = map(int, grader.stdout.readline().split())
        assert not _dead(worker)
    finally:
        grader.kill()
        grader.wait()
    deadline = time.monotonic() + 10
    while not (_dead(worker) and (not zygote_pid or _dead(zygote_pid))):
        assert time.monotonic() < deadline, "the worker outlived its grader"
        time.sleep(0.05)


@pytest.mark.skipif(not zygote.FORK, reason="workers are forked only on Linux")
def test_a_killed_zygote_is_replaced():
    """Student code running as the grader's account can kill the zygote: the next worker
    comes from a new one, and the grade goes on."""
    with WorkerSubmission(TEMPLATE) as sub:
        sub.ensure_loaded()
    assert zygote._zygote is not None
    old = zygote._zygote.proc.pid
    os.kill(old, signal.SIGKILL)
    while not _dead(old):
        time.sleep(0.01)
    with WorkerSubmission(TEMPLATE) as sub:
        assert sub.call("causal_mask", 2).value.tolist() == [[False, True], [False, False]]
    assert zygote._zygote.proc.pid != old


def _zygote_python(zygote_: zygote.Zygote) -> int:
    """The zygote's interpreter: the process started, or, in the sandbox, bwrap's child (whose
    command line bwrap's own contains)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for pid in [zygote_.proc.pid, *_children(zygote_.proc.pid)]:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
            if argv[0] == os.fsencode(sys.executable) and b"-m" in argv:
                return pid
        time.sleep(0.01)
    raise AssertionError("no zygote process")


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        return [int(child) for child in children.read().split()]


@pytest.mark.skipif(not zygote.FORK, reason="workers are forked only on Linux")
def test_a_zygote_killed_before_it_is_ready_says_how_it_ended():
    """Killed with nothing on stderr (by the OOM killer, say): the grader's error says so,
    rather than that the zygote was slow to start."""
    starting = zygote.Zygote()
    os.kill(_zygote_python(starting), signal.SIGKILL)
    with pytest.raises(zygote.ZygoteError) as error:
        starting.fork((-1, -1, -1), time.monotonic() + 30)
    assert str(error.value) == "the zygote was killed by SIGKILL before it was ready"


@pytest.mark.skipif(not zygote.FORK, reason="workers are forked only on Linux")
def test_a_zygote_that_dies_while_a_stray_holds_its_stderr_is_reported_without_waiting(
        tmp_path, monkeypatch):
    """A process the zygote started holds its stderr open after it is killed: the grader
    kills the zygote's process group and reads for a moment only, instead of hanging."""
    (tmp_path / "sitecustomize.py").write_text(
        "import os, signal, subprocess\n"
        "if b'zygote_process' in open('/proc/self/cmdline', 'rb').read():\n"
        "    subprocess.Popen(['sleep', '600'])  # inherits stderr\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))  # folders on the grader's path stay visible
    started = time.monotonic()
    with pytest.raises(zygote.ZygoteError) as error:
        zygote.Zygote().fork((-1, -1, -1), time.monotonic() + 60)
    assert str(error.value) == "the zygote was killed by SIGKILL before it was ready"
    assert time.monotonic() - started < 30
    assert subprocess.run(["pgrep", "-f", "sleep 600"], capture_output=True).returncode == 1


def test_the_worker_gets_the_interpreters_default_threads(start, tmp_path):
    """The zygote never started torch's thread pool: a worker gets what a new process does."""
    source = tmp_path / "threads.py"
    source.write_text("import torch\n"
                      "THREADS = torch.get_num_threads()  # at load: calls run on one thread\n"
                      "def causal_mask(seq_len, device=None):\n"
                      "    return torch.tensor(THREADS)\n")
    fresh = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                           capture_output=True, text=True, check=True)
    with WorkerSubmission(source) as sub:
        assert sub.call("causal_mask", 1).value.item() == int(fresh.stdout)


def test_the_worker_collects_garbage_but_not_what_it_inherited(start, tmp_path):
    """The zygote imports without the collector and freezes what it has; a worker's collector
    is on, as a new interpreter's is, and skips the frozen objects."""
    source = tmp_path / "collector.py"
    source.write_text("import gc\n"
                      "import torch\n"
                      "AT_LOAD = gc.isenabled()\n"
                      "def causal_mask(seq_len, device=None):\n"
                      "    frozen = gc.get_freeze_count() > 10**5\n"
                      "    return torch.tensor([AT_LOAD, gc.isenabled(), frozen])\n")
    with WorkerSubmission(source) as sub:
        assert sub.call("causal_mask", 1).value.tolist() == [True, True, True]


def test_a_grader_freezes_its_imports_once_it_grades():
    """A grader's imports (torch, the kit) are frozen when it loads its first worker, as the
    zygote's are, and once: what it makes later is collected as usual."""
    gc.unfreeze()
    freeze_imports.cache_clear()
    assert gc.get_freeze_count() == 0
    grade_submission(TEMPLATE, only=["causal_mask"])
    frozen = gc.get_freeze_count()
    assert frozen > 10**5, frozen
    grade_submission(TEMPLATE, only=["causal_mask"])
    assert gc.get_freeze_count() == frozen


def test_without_a_subreaper_the_prestarted_zygote_becomes_the_worker_and_is_not_reused(
        monkeypatch):
    """Where the grader could not adopt a fork, the zygote started early (`prestart`) is the
    first worker; the next worker comes from a new zygote, and grades the same."""
    monkeypatch.setattr(zygote, "FORK", False)
    if zygote._zygote is not None:
        zygote._zygote.close()
        zygote._zygote = None
    zygote.prestart()
    assert zygote._zygote is not None
    prestarted = zygote._zygote.proc.pid
    workers = []
    for _ in range(2):
        with WorkerSubmission(TEMPLATE) as sub:
            assert sub.call("causal_mask", 2).value.tolist() == [[False, True], [False, False]]
            workers.append(sub._proc._popen.pid)
        assert zygote._zygote is None  # it became the worker: no zygote left to fork
    assert workers[0] == prestarted != workers[1]


def _is_subreaper() -> bool:
    state = ctypes.c_int(0)
    ctypes.CDLL(None).prctl(landlock.PR_GET_CHILD_SUBREAPER, ctypes.byref(state), 0, 0, 0)
    return bool(state.value)


def _new_zygote_next() -> None:
    if zygote._zygote is not None:
        zygote._zygote.close()
        zygote._zygote = None


@pytest.mark.skipif(not zygote.FORK, reason="workers are forked only on Linux")
def test_the_grader_adopts_orphans_only_while_a_worker_is_forked(monkeypatch):
    """Not while a new zygote imports (a second, or more): a process orphaned meanwhile (a
    student's stray) goes to init, not to a grader that would never reap it."""
    waiting = zygote.Zygote._wait_ready
    while_importing = []

    def wait_ready(self, deadline):
        while_importing.append(_is_subreaper())
        return waiting(self, deadline)

    monkeypatch.setattr(zygote.Zygote, "_wait_ready", wait_ready)
    _new_zygote_next()
    with WorkerSubmission(TEMPLATE) as sub:
        assert sub.call("causal_mask", 1).value.tolist() == [[False]]
    assert while_importing and not any(while_importing) and not _is_subreaper()


def test_a_zygote_too_slow_to_start_is_killed_once(monkeypatch):
    """Killed where it failed, and never again: once reaped, its pid may be another's."""
    _new_zygote_next()
    killpg, killed = os.killpg, []
    monkeypatch.setattr(os, "killpg", lambda pid, sig: (killed.append(pid), killpg(pid, sig)))
    with pytest.raises(zygote.ZygoteError, match="did not start within"):
        zygote.start_worker(time.monotonic() + 0.05)
    assert len(killed) == 1 and zygote._zygote is None


@pytest.mark.skipif(not zygote.FORK or len(sandbox.layers()) < 2,
                    reason="workers forked by zygotes inside bubblewrap and outside it")
def test_a_zygote_of_the_other_sandbox_is_parked_and_taken_up_again(monkeypatch):
    """Each change of the `sandbox` setting cost a zygote's import of torch: the zygote of
    the other sandbox waits, parked, and serves again, also where the one in use was lost."""

    def zygote_serving(layer: str) -> int:
        monkeypatch.setenv(settings.variable("sandbox"), layer)
        with WorkerSubmission(TEMPLATE) as sub:
            sub.ensure_loaded()
        assert zygote._zygote is not None
        return zygote._zygote.proc.pid

    inside = zygote_serving(sandbox.BUBBLEWRAP)
    alone = zygote_serving(sandbox.LANDLOCK)
    assert alone != inside
    assert zygote_serving(sandbox.BUBBLEWRAP) == inside
    zygote._zygote.close()  # lost: killed, or closed after a start that failed
    zygote._zygote = None
    assert zygote_serving(sandbox.LANDLOCK) == alone
