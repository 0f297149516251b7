"""The sandbox (mha_kit/runner/sandbox.py): student code writes only to its own folder and
connects nowhere, in the worker and in the kernel nbgrader runs, with each layer alone
(Landlock, bubblewrap); without any, grading still works and says what is not protected."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from conftest import HOSTILE, ROOT, STUBS, TEMPLATE, check_here, run_cli

from mha_kit import settings
from mha_kit.grading.batch import grade_submission
from mha_kit.grading.registry import ASSIGNMENTS, POINTS, WAITING_MESSAGES, run_check
from mha_kit.messages import ids_in, msg, render
from mha_kit.runner import landlock, sandbox, zygote
from mha_kit.runner.policy import Limits
from mha_kit.runner.worker import WorkerSubmission
from mha_kit.sandboxed_kernel import (
    SandboxedExecute,
    SandboxedKernelManager,
    SandboxedStudentCells,
)

SANDBOX, BWRAP = settings.variable("sandbox"), settings.variable("bwrap")
needs_sandbox = pytest.mark.skipif(sandbox.unprotected() is not None,
                                   reason=f"no sandbox here ({sandbox.unprotected()})")
needs_bwrap = pytest.mark.skipif(
    sandbox.layer_problem(sandbox.BUBBLEWRAP) is not None,
    reason=f"bubblewrap cannot run here ({sandbox.layer_problem(sandbox.BUBBLEWRAP)}): "
           "apt-get install bubblewrap")
EACH_LAYER = [pytest.param(layer, marks=pytest.mark.skipif(
    sandbox.layer_problem(layer) is not None,
    reason=f"no {layer} here ({sandbox.layer_problem(layer)})"))
    for layer in (sandbox.LANDLOCK, sandbox.BUBBLEWRAP)]
BOTH = pytest.param("auto", marks=pytest.mark.skipif(
    len(sandbox.layers()) < 2, reason=f"not both layers here: {sandbox.layers()}"))
REFUSED_CONNECTION = {sandbox.LANDLOCK: {"EACCES"},  # no socket at all
                      sandbox.BUBBLEWRAP: {"ECONNREFUSED", "ENETUNREACH"}}  # its own loopback
STEPS = {"split_heads", "scaled_scores", "causal_mask", "attend", "merge_heads",
         "output_projection"}
MARK = f"WRITTEN_BY_STUDENT_CODE_{uuid.uuid4().hex[:8]}"
NET_NS = """
import os, torch


def causal_mask(seq_len, device=None):  # the worker's network namespace, as an inode number
    return torch.tensor(os.stat("/proc/self/ns/net").st_ino)
"""


THREADS = """
import os, torch


def causal_mask(seq_len, device=None):  # every thread of the worker: seccomp's mode, once
    torch.ones(256, 256) @ torch.ones(256, 256)  # torch's thread pools are running by now
    tasks = os.listdir("/proc/self/task")
    modes = [next(int(line.split()[1]) for line in open(f"/proc/self/task/{t}/status")
                  if line.startswith("Seccomp:")) for t in tasks]
    return torch.tensor([len(tasks), *modes])
"""


@pytest.fixture
def course_dir():
    """A course folder where the sandbox shows it read-only (/tmp, where pytest works, it
    hides): a grade book, and two students' submission folders."""
    folder = Path(tempfile.mkdtemp(prefix="mha-kit-course-", dir="/var/tmp"))
    (folder / "gradebook.db").write_text("the grade book\n")
    for student in ("alice", "bob"):
        (folder / "submitted" / student / "mha").mkdir(parents=True)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def outside(course_dir):
    """Files student code must not write: in the kit's package, the grader's home, the
    course folder (the grade book, another student's folder), and /tmp; removed after."""
    paths = [ROOT / "mha_kit" / MARK, Path.home() / MARK, course_dir / "gradebook.db",
             course_dir / "submitted" / "bob" / "mha" / MARK, Path(tempfile.gettempdir()) / MARK]
    yield paths
    for path in paths:
        if path.name == MARK:
            path.unlink(missing_ok=True)


@pytest.fixture
def listener():
    """A TCP port on 127.0.0.1 that nothing should connect to."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        yield server


def assert_untouched(outside: list[Path], course_dir: Path, listener: socket.socket) -> None:
    assert [p for p in outside if p.name == MARK and p.exists()] == []
    assert (course_dir / "gradebook.db").read_text() == "the grade book\n"
    with pytest.raises(BlockingIOError):  # no connection is waiting
        listener.accept()


@pytest.mark.parametrize("layer", EACH_LAYER)
def test_a_hostile_submission_writes_nowhere_and_connects_nowhere_but_is_graded(
        layer, course_dir, outside, listener, monkeypatch):
    """Each layer alone; Landlock also keeps another submission and the grade book unread
    (bubblewrap alone leaves reading to the account's rights, outside /tmp)."""
    monkeypatch.setenv(SANDBOX, layer)
    path = course_dir / "submitted" / "alice" / "mha" / "writes_outside.py"
    secret = course_dir / "submitted" / "bob" / "mha" / "answers.py"
    secret.write_text("bob's answers")
    targets = {"files": [str(p) for p in outside], "port": listener.getsockname()[1],
               "reads": [str(secret), str(course_dir / "gradebook.db")]}
    path.write_text((HOSTILE / "writes_outside.py").read_text().replace(
        'TARGETS = {"files": []}', f"TARGETS = {targets!r}"))
    results, problems = grade_submission(path)
    assert_untouched(outside, course_dir, listener)
    for result in results:  # the six steps are right; nothing else is defined
        if result.id in STEPS:
            assert result.passed and result.score == POINTS[result.id], result
        else:
            assert result.score == 0, result
            expected = ({WAITING_MESSAGES[result.id].id} if result.id in WAITING_MESSAGES
                        else {"runner.missing", "runner.missing_after_problems"})  # not defined
            assert expected & ids_in(result.message), result
    assert [r.id for r in results] == [c.id for c in ASSIGNMENTS["mha"]]
    printed = str(problems[-1])  # it tried, at import and in its calls, and failed each time
    tries = re.findall(r"(import|call): writes ([A-Z ]+) connect ([A-Z]+) reads ([A-Za-z ]+)",
                       printed)
    assert {when for when, *_ in tries} == {"import", "call"}, printed
    for _, writes, connection, reads in tries:
        assert len(writes.split()) == len(outside), printed
        assert set(writes.split()) <= {"EROFS", "EACCES", "ENOENT"}, printed
        assert connection in REFUSED_CONNECTION[layer], printed
        if layer == sandbox.LANDLOCK:
            assert reads.split() == ["EACCES", "EACCES"], printed


@needs_bwrap
def test_the_worker_is_in_a_network_namespace_of_its_own_unless_turned_off(tmp_path,
                                                                            monkeypatch):
    """MHA_KIT_SANDBOX=off takes effect at the next worker (a new zygote)."""
    source = tmp_path / "net_ns.py"
    source.write_text(NET_NS)
    ours = os.stat("/proc/self/ns/net").st_ino
    for setting, sandboxed in (("auto", True), ("off", False), ("auto", True)):
        monkeypatch.setenv(SANDBOX, setting)
        with WorkerSubmission(source) as sub:
            assert (sub.call("causal_mask", 1).value.item() != ours) == sandboxed, setting


PROC_READS = """
import torch


def causal_mask(seq_len, device=None):  # bytes read from /proc/devices and /proc/self/status
    return torch.tensor([len(open(p).read()) for p in ("/proc/devices", "/proc/self/status")])
"""


@pytest.mark.skipif(sandbox.layer_problem(sandbox.LANDLOCK) is not None,
                    reason=f"no Landlock here ({sandbox.layer_problem(sandbox.LANDLOCK)})")
def test_a_landlock_worker_reads_what_cudas_start_reads_of_proc(tmp_path, monkeypatch):
    """CUDA's start reads /proc/driver/nvidia and /proc/devices: a worker confined by Landlock
    alone failed it on a GPU (error 304). Here, without a GPU, /proc/devices stands for both."""
    assert {"/proc/driver/nvidia", "/proc/devices"} <= set(sandbox.WORKER_PROC)
    source = tmp_path / "proc_reads.py"
    source.write_text(PROC_READS)
    monkeypatch.setenv(SANDBOX, sandbox.LANDLOCK)
    with WorkerSubmission(source) as sub:
        assert min(sub.call("causal_mask", 1).value.tolist()) > 0


@pytest.mark.skipif(sandbox.layer_problem(sandbox.LANDLOCK) is not None,
                    reason=f"no Landlock here ({sandbox.layer_problem(sandbox.LANDLOCK)})")
@pytest.mark.parametrize("forked", [True, False], ids=["forked", "the zygote itself"])
def test_every_thread_of_a_worker_is_confined(forked, tmp_path, monkeypatch):
    """Landlock and seccomp bind the thread that asks and those it starts: the worker confines
    itself before any other thread starts (torch's pool, CUDA's), so none runs free. So does a
    zygote that becomes the worker (no subreaper)."""
    monkeypatch.setenv(SANDBOX, sandbox.LANDLOCK)
    monkeypatch.setattr(zygote, "FORK", forked)
    source = tmp_path / "threads.py"
    source.write_text(THREADS)
    with WorkerSubmission(source) as sub:
        count, *modes = sub.call("causal_mask", 1).value.tolist()
    assert count > 1 and modes == [2] * count, modes  # 2: a seccomp filter


SECOND_PYTHON = """
import os
import subprocess
import sys

import torch

FILES = {files!r}
LOADER = {loader!r}


def _opens(path):
    try:
        open(path, "rb").close()
    except PermissionError:
        return 0
    return 1


def _rulesets():  # Landlock rulesets this process holds open, to which it could add a rule
    fds = [os.path.join("/proc/self/fd", fd) for fd in os.listdir("/proc/self/fd")]
    return sum("landlock" in os.readlink(fd) for fd in fds if os.path.islink(fd))


def split_heads(x, num_heads):  # each file opened (1) or not, ld.so python's exit code, new
    new = "graphlib" not in sys.modules  # import, rulesets open
    import graphlib  # noqa: F401  (a module the worker had not imported)
    run = subprocess.run([LOADER, sys.executable, "-c", "pass"], capture_output=True)
    return torch.tensor([*(_opens(p) for p in FILES), run.returncode, new, _rulesets()])
"""


@pytest.mark.skipif(sandbox.layer_problem(sandbox.LANDLOCK) is not None,
                    reason=f"no Landlock here ({sandbox.layer_problem(sandbox.LANDLOCK)})")
def test_a_landlock_worker_can_load_no_second_python(tmp_path, monkeypatch):
    """The dynamic loader, which a worker may run (a compiler's ELF interpreter), runs any
    program it can read: red team 52 ran a Python through it, which no watch of the worker's
    saw. A worker reads no interpreter and no libpython, and what lies beside them it still
    reads (the standard library beside libpython's static library), and imports anew. The
    ruleset that says so, which the zygote made for all its workers, is closed in each."""
    interpreters = sorted(sandbox.interpreters())
    python = os.path.realpath(sys.executable)
    assert python in interpreters and any("libpython" in p for p in interpreters)
    beside = [os.__file__, *(str(p) for p in Path(python).parent.iterdir()
                             if p.is_file() and str(p.resolve()) not in interpreters)][:2]
    assert len(beside) == 2
    loader = next(p for p in sandbox.executables() if "ld-linux" in p)
    source = tmp_path / "second_python.py"
    denied = [*interpreters, "/proc/self/exe"]  # the worker's own program, by its magic link
    source.write_text(SECOND_PYTHON.format(files=[*denied, *beside], loader=loader))
    monkeypatch.setenv(SANDBOX, sandbox.LANDLOCK)
    with WorkerSubmission(source) as sub:
        *opened, returncode, imported_anew, rulesets = sub.call("split_heads", 1, 1
                                                               ).value.tolist()
    assert opened == [0] * len(denied) + [1, 1], dict(zip([*denied, *beside], opened))
    assert returncode != 0 and imported_anew == 1
    assert rulesets == 0  # the zygote's ruleset, which its later workers share, is closed


def test_the_rules_beside_an_interpreter_reach_all_but_it(tmp_path):
    """A folder that holds an interpreter gives way to its entries, down the way to it; a link
    gets no rule (a rule follows it: to the interpreter, or to the folder split)."""
    root = tmp_path.resolve()
    (root / "bin").mkdir()
    (root / "lib").mkdir()
    python = root / "bin" / "python3.11"
    python.write_bytes(b"\x7fELF")
    (root / "bin" / "gcc").write_text("")
    (root / "bin" / "python3").symlink_to("python3.11")
    (root / "bin" / "X11").symlink_to(".")
    rules = sandbox._beside(str(root), frozenset({str(python)}))
    assert sorted(rules) == [str(root / "bin" / "gcc"), str(root / "lib")]


def test_a_folder_the_layer_cannot_list_gets_a_rule(tmp_path, monkeypatch):
    """A folder on the way to an interpreter that this account cannot list stopped the
    zygote, and so the batch (review 53): it gets a rule, its interpreter with it."""
    root = tmp_path.resolve()
    (root / "bin").mkdir()
    python = root / "bin" / "python3.11"
    python.write_bytes(b"\x7fELF")
    listed = os.scandir

    def refused(path):
        if str(path) == str(root / "bin"):
            raise PermissionError(13, "Permission denied", str(path))
        return listed(path)

    monkeypatch.setattr(os, "scandir", refused)
    assert sandbox._beside(str(root), frozenset({str(python)})) == [str(root / "bin")]


FILLS_DISK = """
import mmap, os

HOW = {how!r}
held = []


def split_heads(x, num_heads):  # 16 MiB files, 1 GiB in all: kept, or deleted and still held
    chunk = os.urandom(1 << 20)  # what no file system compresses
    for n in range(64):
        with open(f"ballast-{{n}}", "w+b") as out:
            for _ in range(16):
                out.write(chunk)
            out.flush()
            if HOW == "open":
                held.append(os.dup(out.fileno()))
            elif HOW == "mapped":  # one page of it, the file closed
                held.append(mmap.mmap(out.fileno(), mmap.PAGESIZE))
            if HOW != "kept":
                os.unlink(out.name)
    return x


def merge_heads(x):  # honest, with a file of notes
    with open("notes.txt", "w") as notes:
        notes.write("merging")
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)
"""


@pytest.mark.parametrize("how", ["kept", "open", "mapped"])
@pytest.mark.parametrize("layer", EACH_LAYER)
def test_a_submission_whose_files_take_more_than_the_disk_limit_is_stopped(layer, how, tmp_path,
                                                                            monkeypatch):
    """Its files together, those it deleted but holds (open, or mapped) included, count
    against one limit: past it, that check stops and says why; the next check gets a fresh
    worker, and an honest function that writes a small file its points. Afterwards the disk
    holds nothing of it."""
    monkeypatch.setenv(SANDBOX, layer)
    source = tmp_path / "fills_disk.py"
    source.write_text(FILLS_DISK.format(how=how))
    free = os.statvfs(sandbox.scratch())
    with WorkerSubmission(source, limits=Limits(disk_gib=1 / 16)) as sub:
        filled, honest = run_check("split_heads", sub), run_check("merge_heads", sub)
    assert filled.score == 0
    assert filled.message == msg("worker.disk_cap", what="split_heads", gib=1 / 16), filled
    assert honest.passed and honest.score == POINTS["merge_heads"], honest
    after = os.statvfs(sandbox.scratch())
    freed = (after.f_bavail - free.f_bavail) * after.f_frsize  # 64 MiB at least was written
    assert freed > -2**24, freed  # whatever else this machine wrote meanwhile


HIDES = """
import ctypes, torch


def causal_mask(seq_len, device=None):  # prctl(PR_SET_DUMPABLE, 0): /proc closed to others
    libc = ctypes.CDLL(None, use_errno=True)
    return torch.tensor([libc.prctl(4, 0, 0, 0, 0), ctypes.get_errno()])
"""


@pytest.mark.skipif(sandbox.layer_problem(sandbox.LANDLOCK) is not None,
                    reason=f"no Landlock here ({sandbox.layer_problem(sandbox.LANDLOCK)})")
def test_a_worker_cannot_hide_what_it_holds_from_the_disk_watch(tmp_path, monkeypatch):
    """Landlock's seccomp program keeps its /proc entries open to the grader's disk watch."""
    monkeypatch.setenv(SANDBOX, sandbox.LANDLOCK)
    source = tmp_path / "hides.py"
    source.write_text(HIDES)
    with WorkerSubmission(source) as sub:
        assert sub.call("causal_mask", 1).value.tolist() == [-1, errno.EACCES]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="root, with setpriv, plays a container's root")
def test_a_root_grader_without_ptrace_counts_what_a_worker_of_another_account_holds():
    """A container's root has no CAP_SYS_PTRACE, so /proc shows it nothing of what a `nobody`
    worker holds; the watch reads it as `nobody` (a worker under Landlock lets its account
    read: here a program, which `nobody` started)."""
    folder = Path(tempfile.mkdtemp(dir=sandbox.scratch()))
    os.chown(folder, 65534, 65534)
    holder = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
         "exec 3<>ballast && rm ballast && head -c 67108864 /dev/urandom >&3 && echo held "
         "&& exec sleep 60"], cwd=folder, stdout=subprocess.PIPE, text=True,
        start_new_session=True)  # the leader of its process group, as a worker is
    try:
        assert holder.stdout.readline() == "held\n"
        watch = ("import sys, time\n"
                 "from pathlib import Path\n"
                 "from mha_kit.runner.disk import DiskWatch\n"
                 "for account in (None, (65534, 65534)):\n"
                 "    watch = DiskWatch(Path(sys.argv[1]), int(sys.argv[2]), 2**25, account)\n"
                 "    time.sleep(0.5)\n"
                 "    watch.stop()\n"
                 "    print(watch.exceeded)\n")
        run = subprocess.run(["setpriv", "--bounding-set", "-sys_ptrace", "--inh-caps",
                              "-sys_ptrace", sys.executable, "-c", watch, str(folder),
                              str(holder.pid)], capture_output=True, text=True, timeout=60)
        assert run.stdout.split() == ["False", "True"], run.stdout + run.stderr
        assert holder.wait(timeout=10) == -signal.SIGKILL
    finally:
        holder.kill()
        holder.wait()
        shutil.rmtree(folder)


@pytest.mark.parametrize("env, reason", [
    ({SANDBOX: "off"}, "MHA_KIT_SANDBOX=off"),
    ({SANDBOX: "bwrap", BWRAP: "/nonexistent/bwrap"},
     "/nonexistent/bwrap not found"),
    ({SANDBOX: "bwrap", BWRAP: shutil.which("false") or "/bin/false"},
     "cannot build its sandbox"),
    ({SANDBOX: "landlock", "no_landlock": "ENOSYS"},
     "this kernel offers no Landlock (ENOSYS)"),
    ({BWRAP: "/nonexistent/bwrap", "no_landlock": "EOPNOTSUPP"},
     "this kernel offers no Landlock (EOPNOTSUPP); /nonexistent/bwrap not found"),
])
def test_without_the_sandbox_check_works_and_says_what_is_not_protected_when_asked(
        env, reason, monkeypatch):
    """A learner's own code: no warning, unless --verbose asks what protects the grading.
    A kernel without Landlock (gVisor's ENOSYS, say) is this process's answer replaced."""
    if (error := env.pop("no_landlock", None)) is not None:
        monkeypatch.setattr(landlock, "_version", lambda: error)
    run = check_here(str(TEMPLATE), "--only", "causal_mask", **env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "✓ causal_mask" in run.stdout and "sandbox" not in run.stdout + run.stderr
    run = check_here(str(TEMPLATE), "--only", "causal_mask", "-v", **env)
    assert run.stdout.count("warning: student code runs without the sandbox") == 1, run.stdout
    assert reason in run.stdout and "other submissions, your home folder" in run.stdout


def test_the_warning_is_shown_once_by_grade_and_in_chinese(tmp_path):
    for name in ("alice", "bob"):
        shutil.copy(STUBS, tmp_path / f"{name}.py")
    run = run_cli("grade", str(tmp_path), "--csv", str(tmp_path / "grades.csv"),
                  env={SANDBOX: "bwrap", BWRAP: "/nonexistent/bwrap",
                       "MHA_KIT_LANG": "zh"})
    assert run.returncode == 0, run.stdout + run.stderr
    warning = msg("sandbox.off", reason=[msg("sandbox.missing", bwrap="/nonexistent/bwrap")],
                  variable=SANDBOX).render("zh")
    assert run.stderr.count(warning) == 1, run.stderr


@pytest.mark.parametrize("layer", EACH_LAYER)
def test_with_the_sandbox_there_is_no_warning_and_verbose_names_the_layer(layer, monkeypatch):
    monkeypatch.setenv(SANDBOX, layer)
    run = check_here(str(TEMPLATE), "--only", "causal_mask", "-v")
    assert run.returncode == 0 and "sandbox" not in run.stderr, run.stderr
    assert sandbox.layers() == (layer,)
    assert render(sandbox.protection()) in run.stdout
    assert ("Landlock ABI" in run.stdout) == (layer == sandbox.LANDLOCK), run.stdout


# --------------------------------------------------------------------------- the kernel

KERNEL_CELL = """
import json, os, socket
targets = json.loads({targets!r})
for path in targets["files"]:
    try:
        open(path, "a").write("written by student code")
        print("written", path)
    except OSError as err:
        print("refused", err.strerror)
try:
    socket.create_connection(("127.0.0.1", targets["port"]), timeout=2).close()
    print("connected")
except OSError as err:
    print("no connection:", err.strerror)
try:
    print("read", open(targets["read"]).read())  # another submission
except OSError as err:
    print("not read:", err.strerror)
print(open("data.txt").read())  # beside the notebook
with open("notes.txt", "w") as notes:  # its working folder: a copy, thrown away
    notes.write("mine")
print(open("notes.txt").read(), os.getcwd())
"""


def test_nbgrader_gets_the_sandboxed_kernel():
    """nbgrader's Execute passes its own kernel manager class, whatever the config says."""
    for executes in (SandboxedExecute, SandboxedStudentCells):
        assert executes().kernel_manager_class is SandboxedKernelManager


@pytest.fixture
def kernel_scratch(monkeypatch) -> list[str]:
    """The scratch folders the kernels of this test made (the course's cycle makes others
    meanwhile)."""
    made: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def remembered(*args, **kwargs):
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", remembered)
    return made


def assert_removed(made: list[str]) -> None:
    kernels = [path for path in made if "mha-kit-kernel-" in path]
    assert len(kernels) == 1 and not Path(kernels[0]).exists(), kernels


@pytest.mark.parametrize("layer", EACH_LAYER)
def test_the_kernel_writes_only_to_its_copy_of_its_folder_and_connects_nowhere(
        layer, course_dir, outside, listener, kernel_scratch, monkeypatch):
    """bwrap mounts the copy at the folder's own path; with Landlock alone the kernel works
    in the copy, and reads no other submission."""
    monkeypatch.setenv(SANDBOX, layer)
    folder = course_dir / "submitted" / "alice" / "mha"
    (folder / "data.txt").write_text("data beside the notebook")
    (course_dir / "submitted" / "bob" / "mha" / "answers.py").write_text("bob's answers")
    targets = json.dumps({"files": [str(p) for p in outside],
                          "port": listener.getsockname()[1],
                          "read": str(course_dir / "submitted" / "bob" / "mha" / "answers.py")})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        KERNEL_CELL.format(targets=targets))])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb, _ = SandboxedStudentCells(timeout=120).preprocess(nb, {"metadata": {"path": str(folder)}})
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["stream"], outputs
    lines = outputs[0].text.splitlines()
    refused = lines[:len(outside)]  # read-only; as `nobody`, some not even reachable
    assert all(line.startswith("refused ") for line in refused), lines
    *rest, read, data, mine = lines[len(outside):]
    assert rest == ["no connection: " + ("Connection refused" if layer == sandbox.BUBBLEWRAP
                                         else "Permission denied")], lines
    assert data == "data beside the notebook", lines
    if layer == sandbox.LANDLOCK:
        assert read == "not read: Permission denied", lines
        copy = Path(mine.split(" ", 1)[1])
        assert copy.name == "work" and copy.parent.name.startswith("mha-kit-kernel-"), lines
    else:
        assert mine == f"mine {folder}", lines
    assert_untouched(outside, course_dir, listener)
    assert sorted(p.name for p in folder.iterdir()) == ["data.txt"]  # notes.txt: in the copy
    assert_removed(kernel_scratch)


KERNEL_FILLS_DISK = """
import os
chunk = os.urandom(1 << 20)
held = []
for n in range(64):  # 16 MiB files, 1 GiB in all, each deleted and still held
    with open(f"ballast-{n}", "w+b") as out:
        for _ in range(16):
            out.write(chunk)
        held.append(os.dup(out.fileno()))
        os.unlink(out.name)
"""


@pytest.mark.parametrize("layer", EACH_LAYER)
def test_a_kernel_whose_files_take_more_than_the_disk_limit_is_stopped(
        layer, course_dir, kernel_scratch, monkeypatch):
    """The kernel's files count against the disk limit too, those it deleted but holds
    included: past it, the kernel is stopped and its cell says why."""
    monkeypatch.setenv(SANDBOX, layer)
    monkeypatch.setenv(settings.variable("disk_gib"), str(1 / 16))
    cells = ["open('notes.txt', 'w').write('honest')\nprint('noted')", KERNEL_FILLS_DISK,
             "print('after')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    free = os.statvfs(tempfile.gettempdir())  # where the kernel's scratch folder is
    nb, _ = SandboxedStudentCells(timeout=60).preprocess(
        nb, {"metadata": {"path": str(course_dir)}})
    noted, filled, after = (cell.outputs for cell in nb.cells)
    assert [o.text for o in noted] == ["noted\n"]
    stopped = msg("autograde.kernel_disk", cell=msg("load.cell_defining", name="chunk"), gib=1 / 16)
    assert filled[-1].evalue == render(stopped), filled
    assert after == []
    assert_removed(kernel_scratch)
    freed = (os.statvfs(tempfile.gettempdir()).f_bavail - free.f_bavail) * free.f_frsize
    assert freed > -2**24, freed


@needs_sandbox
def test_the_kernel_can_still_be_interrupted(course_dir):
    """An interrupt is a message: a signal to the process group would reach bwrap (or, with
    Landlock alone, the kernel itself)."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import time\nalive = 'still alive'\ntime.sleep(60)"),
        nbformat.v4.new_code_cell("print(alive)")])  # the same kernel, interrupted
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb, _ = SandboxedStudentCells(timeout=3, interrupt_on_timeout=True).preprocess(
        nb, {"metadata": {"path": str(course_dir)}})
    assert nb.cells[1].outputs[0].text == "still alive\n", nb.cells


@needs_sandbox
def test_a_kernel_that_kills_itself_leaves_no_scratch_folder(course_dir, kernel_scratch):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb, _ = SandboxedStudentCells(timeout=30).preprocess(
        nb, {"metadata": {"path": str(course_dir)}})
    assert nb.cells[0].outputs[-1].ename == "DeadKernelError"
    assert_removed(kernel_scratch)



@needs_sandbox
def test_a_grader_where_torch_set_its_compiler_cache_still_starts_workers():
    """torch sets TORCHINDUCTOR_CACHE_DIR (in /tmp) in a process that used its compiler, and
    children inherit it: the worker must not, or the sandbox's read-only /tmp stops its start."""
    cache = Path(tempfile.gettempdir()) / f"torchinductor_{uuid.uuid4().hex}"
    run = run_cli("check", str(TEMPLATE), "--only", "split_heads",
                  env={"TORCHINDUCTOR_CACHE_DIR": str(cache)})
    assert run.returncode == 0, run.stdout + run.stderr


@needs_bwrap
def test_a_kit_in_tmp_stays_visible_read_only(tmp_path, monkeypatch):
    """The sandbox empties /tmp, where a CI clone and its venv may live: what Python imports
    from there stays visible, read-only."""
    (tmp_path / "kit.py").write_text("seen")
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    command = sandbox.wrap(["/bin/sh", "-c", f"cat {tmp_path}/kit.py; touch {tmp_path}/x"], [])
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert run.stdout == "seen" and "Read-only file system" in run.stderr


@needs_bwrap
def test_the_folders_above_a_writable_one_in_tmp_can_be_passed_by_any_account(tmp_path):
    """A batch's scratch folder holds each grader's, which holds each worker's: the folders
    bwrap makes above a bound one in its empty /tmp are 0711, not its 0700, so that a worker
    running as `nobody` reaches its own (every start failed so, under a root grader)."""
    own = tmp_path / "batch" / "grader" / "worker"
    own.mkdir(parents=True)
    above = [str(own.parent.parent), str(own.parent)]
    command = sandbox.wrap(["stat", "-c", "%a", *above], [(own, own)])
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["711", "711"], run.stderr


@needs_bwrap
def test_the_graders_working_folder_and_the_temporary_folder_stay_hidden(tmp_path, monkeypatch):
    """`python -m mha_kit.cli` run in a course folder in /tmp puts that folder on the import
    path, and PYTHONPATH may name /tmp: neither is kept visible, so a course's files and the
    submissions other graders hold in the temporary folder stay out of reach."""
    (tmp_path / "gradebook.db").write_text("grades")
    loose = Path(tempfile.gettempdir()) / f"mha-kit-test-{uuid.uuid4().hex}.txt"
    loose.write_text("another submission")
    try:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(sys, "path", [str(tmp_path), tempfile.gettempdir(), *sys.path])
        command = sandbox.wrap(["/bin/sh", "-c", f"cat {tmp_path}/gradebook.db {loose}"], [])
        run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        loose.unlink()
    assert run.stdout == "" and run.stderr.count("No such file") == 2, run.stderr


@needs_bwrap
def test_a_venv_linked_from_tmp_runs_by_its_name(tmp_path, monkeypatch):
    """A venv in /tmp may be a link to one elsewhere, and Python is started by the link's name:
    the sandbox keeps the name visible too."""
    link = tmp_path / "venv"
    link.symlink_to(sys.prefix, target_is_directory=True)
    monkeypatch.setattr(sys, "prefix", str(link))
    python = link / "bin" / Path(sys.executable).name
    run = subprocess.run(sandbox.wrap([str(python), "-c", "print('ran')"], []),
                         capture_output=True, text=True, timeout=60)
    assert run.stdout == "ran\n", run.stderr


@needs_bwrap
def test_a_zygote_that_cannot_start_says_why(monkeypatch):
    """bwrap starts, but not Python: the error is what bwrap said, not a reset connection."""
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    starting = zygote.Zygote()
    with pytest.raises(zygote.ZygoteError, match="/nonexistent/python"):
        starting.fork((-1, -1, -1), time.monotonic() + 30)


def _seen_in_sandbox(tmp_path: Path, layer: str, import_path: Path, secret: Path,
                     writable: Path | None = None) -> list[str]:
    """Where `mha_kit` is imported from (resolved: Landlock's kernel imports it through a
    link) in the sandbox's `layer` and whether `secret` can be read there, as a grader whose
    import path starts with `import_path` sandboxes a Python as it does a kernel (with the
    folder `writable`, as a kernel has its notebook's folder)."""
    binds = f"[({str(writable)!r}, {str(writable)!r})]" if writable else "[]"
    inside = ("import mha_kit, os, sys\n"
              "try:\n    seen = bool(open(sys.argv[1]).read())\n"
              "except OSError:\n    seen = False\n"
              "print(os.path.realpath(mha_kit.__file__), seen)")
    outside = ("import pathlib, subprocess, sys, tempfile\n"
               "from mha_kit.runner import sandbox\n"
               "scratch = pathlib.Path(tempfile.mkdtemp())  # the kernel's, with the kit's link\n"
               f"binds = [(scratch, scratch), *(tuple(map(pathlib.Path, b)) for b in {binds})]\n"
               f"argv = sandbox.confined([sys.executable, '-c', {inside!r}, {str(secret)!r}],\n"
               "                         [dest for _, dest in binds], kit_link=scratch / 'kit',\n"
               "                         drop_capabilities=True)\n"
               "argv = sandbox.wrap(argv, binds) or argv\n"
               "print(subprocess.run(argv, capture_output=True, text=True).stdout)")
    run = subprocess.run([sys.executable, "-c", outside], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120, env={**os.environ, "PYTHONPATH": str(
                             import_path), SANDBOX: layer})
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


def _course_with_a_secret(course: Path) -> Path:
    secret = course / "submitted" / "alice" / "mha" / "secret.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text("alice's answers")
    return secret


@pytest.mark.parametrize("layer", [*EACH_LAYER, BOTH])
def test_a_course_on_the_import_path_is_hidden_from_its_kernels(tmp_path, layer):
    """nbgrader puts the folder it starts in on the import path, which the sandbox keeps
    visible in /tmp (which it empties otherwise; tmp_path is there): a kernel of bob's, whose
    folder is in the course, must not read alice's. Elsewhere, Landlock keeps it unread, and
    with bubblewrap alone reading is the account's rule (docs/instructor-guide.md)."""
    course = tmp_path / "course"
    secret = _course_with_a_secret(course)
    bob = course / "submitted" / "bob" / "mha"
    bob.mkdir(parents=True)
    assert _seen_in_sandbox(tmp_path, layer, course, secret, writable=bob)[1] == "False"


@pytest.mark.parametrize("layer", [*EACH_LAYER, BOTH])
def test_of_a_kit_checkout_in_tmp_only_its_package_is_visible(tmp_path, layer):
    """The checkout is the course folder too: the sandbox shows its `mha_kit` package, never
    gradebook.db or the submissions beside it."""
    checkout = tmp_path / "course"
    shutil.copytree(ROOT / "mha_kit", checkout / "mha_kit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    secret = _course_with_a_secret(checkout)
    imported, seen = _seen_in_sandbox(tmp_path, layer, checkout, secret)
    assert imported == str(checkout / "mha_kit" / "__init__.py")
    assert seen == "False"
