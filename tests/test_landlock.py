"""Landlock and seccomp (autograder/runner/landlock.py), in a forked child confined as a worker
is: it reads and writes only where it is let, makes no socket and signals nobody outside."""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from autograder.runner import landlock, sandbox

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
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        tries = {"tcp": lambda: socket.create_connection(("127.0.0.1", port), timeout=2),
                 "fast open": lambda: socket.socket().sendto(b"x", socket.MSG_FASTOPEN,
                                                             ("127.0.0.1", port)),
                 "udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
                 "ipv6": lambda: socket.socket(socket.AF_INET6),
                 "unix": lambda: socket.socket(socket.AF_UNIX),
                 "netlink": lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW),
                 "socketpair": socket.socketpair}
        worker = confined(tries, tmp_path)
        kernel = confined(tries, tmp_path, local_sockets=True)
        server.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing reached it
            server.accept()
    assert worker == {**dict.fromkeys(tries, "EACCES"), "socketpair": "done"}
    assert kernel == {**dict.fromkeys(tries, "EACCES"), "unix": "done", "netlink": "done",
                      "socketpair": "done"}


@pytest.mark.skipif(landlock.abi() < 6, reason=f"Landlock ABI {landlock.abi()}: signals need 6")
def test_it_signals_no_process_outside_itself(tmp_path):
    parent = os.getpid()
    seen = confined({"the grader": lambda: os.kill(parent, 0),
                     "itself": lambda: os.kill(os.getpid(), 0)}, tmp_path)
    assert seen == {"the grader": "EPERM", "itself": "done"}


def test_the_socket_filter_is_none_on_a_machine_it_does_not_know(monkeypatch):
    monkeypatch.setattr(landlock.platform, "machine", lambda: "riscv64")
    assert landlock._socket_filter(False) is None
    monkeypatch.setattr(landlock, "_version", lambda: 3)
    assert landlock.problem() == ("no_network", {"abi": 3, "machine": "riscv64"})


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
    monkeypatch.setenv(sandbox.SANDBOX_ENV, sandbox.LANDLOCK)
    other = tmp_path / "other-env"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "python").symlink_to(Path(sys.executable).resolve())
    launched = sandbox.confined([str(other / "bin" / "python"), "-m", "ipykernel_launcher"],
                                [tmp_path / "scratch"])
    readable = json.loads(launched[launched.index("--") - 1])["readable"]
    assert str(other) in readable
    assert str(Path(sys.executable).resolve().parents[1]) in readable
    assert str(tmp_path) not in readable  # only the installation, not what holds it
