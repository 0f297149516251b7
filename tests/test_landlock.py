"""Landlock and seccomp (mha_kit/runner/landlock.py), in a forked child confined as a worker
is: it reads and writes only where it is let, makes no socket and signals nobody outside."""

from __future__ import annotations

import errno
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mha_kit import settings
from mha_kit.runner import landlock, sandbox

pytestmark = pytest.mark.skipif(landlock.problem() is not None,
                                reason=f"no Landlock here: {landlock.problem()}")


def outcome(attempt: Callable[[], object]) -> str:
    try:
        attempt()
        return "done"
    except OSError as err:
        return errno.errorcode.get(err.errno, str(err.errno))


def confined(tries: dict[str, Callable[[], object]], writable: Path,
             local_sockets: bool = False) -> dict[str, str]:
    """Each attempt's outcome ("done", or its error's name) in a child confined to write only
    `writable` and to read what a worker reads."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            landlock.confine(sandbox.readable([writable]), [str(writable)],
                             local_sockets=local_sockets)
            os.write(write, json.dumps({k: outcome(v) for k, v in tries.items()}).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with open(read, "rb") as pipe:
        data = pipe.read()
    assert os.waitpid(pid, 0)[1] == 0, data
    return json.loads(data)


def test_it_writes_only_its_folder_and_reads_no_other_submission(tmp_path):
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    mine.mkdir()
    theirs.mkdir()
    (theirs / "answers.py").write_text("bob's answers")
    kit = Path(sandbox.__file__)
    seen = confined({"write its own": lambda: (mine / "out.txt").write_text("ok"),
                     "write beside it": lambda: (theirs / "out.txt").write_text("no"),
                     "overwrite the kit": lambda: kit.open("a"),
                     "read another submission": lambda: (theirs / "answers.py").read_text(),
                     "list the course": lambda: os.listdir(tmp_path),
                     "read the kit": kit.read_text,
                     "read Python": lambda: Path(os.__file__).read_text(),
                     "write /dev/null": lambda: Path(os.devnull).write_text("gone")}, mine)
    assert seen == {"write its own": "done", "write beside it": "EACCES",
                    "overwrite the kit": "EACCES", "read another submission": "EACCES",
                    "list the course": "EACCES", "read the kit": "done", "read Python": "done",
                    "write /dev/null": "done"}
    assert (mine / "out.txt").read_text() == "ok" and not (theirs / "out.txt").exists()


def test_a_worker_makes_no_socket_and_a_kernel_only_local_ones(tmp_path):
    """A TCP socket would allow TCP Fast Open (a `sendto` that connects), which Landlock's TCP
    rule does not see on every kernel: seccomp refuses the socket itself."""
    listening = tmp_path / "service.sock"  # as docker.sock or a D-Bus would be
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.socket(socket.AF_UNIX) as service:
        service.bind(str(listening))
        service.listen()
        port = server.getsockname()[1]
        tries = {"tcp": lambda: socket.create_connection(("127.0.0.1", port), timeout=2),
                 "fast open": lambda: socket.socket().sendto(b"x", socket.MSG_FASTOPEN,
                                                             ("127.0.0.1", port)),
                 "udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
                 "ipv6": lambda: socket.socket(socket.AF_INET6),
                 "unix": lambda: socket.socket(socket.AF_UNIX),
                 "unix datagram": lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM),
                 "connect to a unix socket": lambda: socket.socket(socket.AF_UNIX).connect(
                     str(listening)),
                 "netlink": lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW),
                 "socketpair": socket.socketpair}
        worker = confined(tries, tmp_path)
        kernel = confined(tries, tmp_path, local_sockets=True)
        for listener in (server, service):
            listener.setblocking(False)
            with pytest.raises(BlockingIOError):  # nothing reached it
                listener.accept()
    assert worker == {**dict.fromkeys(tries, "EACCES"), "socketpair": "done"}
    assert kernel == {**dict.fromkeys(tries, "EACCES"), "unix": "done", "netlink": "done",
                      "socketpair": "done"}
    assert "connect to a unix socket" in worker  # (refused at its socket, in a worker)


@pytest.mark.skipif(landlock.abi() < 6, reason=f"Landlock ABI {landlock.abi()}: signals need 6")
def test_it_signals_no_process_outside_itself(tmp_path):
    parent = os.getpid()
    seen = confined({"the grader": lambda: os.kill(parent, 0),
                     "itself": lambda: os.kill(os.getpid(), 0)}, tmp_path)
    assert seen == {"the grader": "EPERM", "itself": "done"}


def test_without_a_seccomp_program_the_layer_is_off(monkeypatch):
    """Without seccomp, UDP and TCP Fast Open get out whatever the Landlock ABI."""
    monkeypatch.setattr(landlock.platform, "machine", lambda: "riscv64")
    assert landlock._seccomp_program(False) is None
    monkeypatch.setattr(landlock, "_version", lambda: 7)
    assert landlock.problem() == ("no_network", {"abi": 7, "machine": "riscv64"})


def test_the_launcher_refuses_to_run_where_it_cannot_confine(monkeypatch, capsys):
    """It never runs its command unconfined."""
    monkeypatch.setattr(landlock, "_version", lambda: "ENOSYS")
    monkeypatch.setattr(os, "execvp", lambda *a: pytest.fail(f"ran {a}"))
    config = json.dumps({"readable": [], "writable": [], "local_sockets": True,
                         "import_path": ""})
    with pytest.raises(SystemExit, match="cannot confine"):
        landlock._main([config, "--", sys.executable, "-c", "pass"])


def test_a_kernel_of_another_python_can_read_its_installation(tmp_path, monkeypatch):
    """The kernel's command may name a Python other than the grader's (a kernelspec's): its
    installation stays readable, by the link's name and by what it resolves to."""
    monkeypatch.setenv(settings.variable("sandbox"), sandbox.LANDLOCK)
    other = tmp_path / "other-env"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    launched = sandbox.confined([str(other / "bin" / "python"), "-m", "ipykernel_launcher"],
                                [tmp_path / "scratch"], kit_link=tmp_path / "kit",
                                drop_capabilities=True)
    readable = json.loads(launched[launched.index("--") - 1])["readable"]
    assert str(other) in readable
    assert str(Path(sys.executable).resolve().parents[1]) in readable
    assert str(tmp_path) not in readable  # only the installation, not what holds it


def test_metadata_changes_do_nothing_and_truncate_by_path_is_refused(tmp_path):
    """Landlock does not see a file's mode, owner, times or extended attributes: chmod 000 on
    another submission would fail its grading. seccomp makes those calls do nothing."""
    mine, theirs = tmp_path / "mine", tmp_path / "theirs.py"
    mine.mkdir()
    theirs.write_text("bob's answers")
    before = theirs.stat()
    seen = confined({"chmod": lambda: os.chmod(theirs, 0),
                     "chown": lambda: os.chown(theirs, 65534, 65534),
                     "utime": lambda: os.utime(theirs, (0, 0)),
                     "setxattr": lambda: os.setxattr(theirs, "user.x", b"1"),
                     "truncate": lambda: os.truncate(theirs, 0),
                     "chmod its own": lambda: (mine / "a").write_text("") or os.chmod(mine / "a",
                                                                                     0o755)},
                    mine)
    assert seen == {**dict.fromkeys(seen, "done"), "truncate": "EACCES"}
    after = theirs.stat()
    assert (after.st_mode, after.st_uid, after.st_mtime_ns, after.st_size) == (
        before.st_mode, before.st_uid, before.st_mtime_ns, before.st_size)
    assert os.listxattr(theirs) == [] and theirs.read_text() == "bob's answers"


def test_a_process_with_a_second_thread_is_not_confined(tmp_path):
    """Landlock and seccomp bind the calling thread and those it starts: a thread already
    running would stay free, so confine refuses."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        import threading

        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
        said = "confined"
        try:
            landlock.confine([], [str(tmp_path)])
        except landlock.ConfinementError as err:
            said = str(err)
        os.write(write, said.encode())
        os._exit(0)
    os.close(write)
    with open(read, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(pid, 0)
    assert said.endswith("2 threads: confine before any starts"), said


CLONE_NEWNS, CLONE_FS = 0x20000, 0x200  # together: EINVAL from the kernel, after seccomp


@pytest.mark.skipif(platform.machine() != "x86_64", reason="clone's number here is x86_64's")
def test_a_worker_starts_no_process_outside_its_tree():
    """Red team 53 hid CPU time from the worker's count: a process sharing its memory, run
    beside it (clone with CLONE_VM alone, its parent then gone: given to init), or made the
    grader's child (CLONE_PARENT; zombies of the grader stopped a whole batch). Refused, as
    is undoing the child subreaper that keeps every descendant the worker's; a program still
    runs (vfork, then exec). Flags the kernel itself refuses (EINVAL) keep the test harmless."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import ctypes
            import subprocess

            libc = ctypes.CDLL(None, use_errno=True)

            def clone(flags: int) -> str:
                libc.syscall(landlock.SECCOMP_ARCH["x86_64"]["clone"],
                             flags | CLONE_NEWNS | CLONE_FS, 0, 0, 0, 0)
                return errno.errorcode[ctypes.get_errno()]

            landlock.refuse_new_tasks(threads=True)
            subreaper = ctypes.c_int(0)
            libc.prctl(landlock.PR_GET_CHILD_SUBREAPER, ctypes.byref(subreaper), 0, 0, 0)
            undo = libc.prctl(landlock.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
            said = {"parent": clone(landlock.CLONE_VM | landlock.CLONE_VFORK
                                    | landlock.CLONE_PARENT),
                    "beside": clone(landlock.CLONE_VM),
                    "subreaper": subreaper.value,
                    "undo": errno.errorcode.get(ctypes.get_errno()) if undo else "done",
                    "program": subprocess.run(["true"]).returncode}
            os.write(write, json.dumps(said).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with open(read, "rb") as pipe:
        said = json.loads(pipe.read())
    assert os.waitpid(pid, 0)[1] == 0
    assert said == {"parent": "EPERM", "beside": "EPERM", "subreaper": 1, "undo": "EPERM",
                    "program": 0}


def test_the_launcher_imports_nothing_from_its_working_folder(tmp_path, monkeypatch):
    """A kernel starts in the copy of the notebook's folder, where a student's json.py could
    stand in for the standard library's before the confinement."""
    monkeypatch.setenv(settings.variable("sandbox"), sandbox.LANDLOCK)
    marker = tmp_path / "ran before confinement"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').close()\n"
                                      "from _json import *  # noqa\n")
    argv = sandbox.confined([sys.executable, "-c", "print('kernel')"], [tmp_path],
                            kit_link=tmp_path / "kit", drop_capabilities=True)
    run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.stdout == "kernel\n", run.stderr
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="root's capabilities: run as root")
def test_a_root_kernel_keeps_no_capability(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.variable("sandbox"), sandbox.LANDLOCK)
    show = "print(next(l for l in open('/proc/self/status') if l.startswith('CapEff')))"
    argv = sandbox.confined([sys.executable, "-c", show], [tmp_path],
                            kit_link=tmp_path / "kit", drop_capabilities=True)
    run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["CapEff:", "0000000000000000"], run.stdout + run.stderr


HELD_RULESETS = """
import os, torch


def causal_mask(seq_len, device=None):  # the Landlock rulesets this worker holds open
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            held += "landlock-ruleset" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed since
            pass
    return torch.tensor([held])
"""


@pytest.mark.parametrize("setting", ["off", sandbox.BUBBLEWRAP])
def test_a_worker_that_landlock_does_not_confine_holds_no_ruleset(setting, tmp_path,
                                                                   monkeypatch):
    """The zygote makes its workers' interpreters layer wherever Landlock works; a worker that
    Landlock does not confine closed it too: student code that added a rule to it would widen
    it for the zygote's later Landlock workers (review 53 opened every Python this way)."""
    from mha_kit.runner.worker import WorkerSubmission

    if setting == sandbox.BUBBLEWRAP and sandbox.layer_problem(setting) is not None:
        pytest.skip(f"no bubblewrap here ({sandbox.layer_problem(setting)})")
    source = tmp_path / "held.py"
    source.write_text(HELD_RULESETS)
    monkeypatch.setenv(settings.variable("sandbox"), setting)
    with WorkerSubmission(source) as sub:
        assert sub.call("causal_mask", 2).value.tolist() == [0]
