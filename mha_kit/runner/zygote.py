"""Starting workers: each one starts from a zygote, a process that has already imported torch.

Starting Python and importing torch takes a second or more, which `mha-kit check` used to pay
twice (the grader, then its worker). A fork of a process that has done it starts in
milliseconds. Each grader process has one zygote (`zygote_process`): a fresh interpreter
that imports torch, the worker's modules and IPython's cell transformer, then forks workers
on request (or, where the grader cannot adopt a fork, becomes one: below). `prestart` starts
it early, so that it imports while the grader does.

Until it becomes a worker, the zygote runs no grader or student code and no torch op but a few
on the meta device (`devices.warm_up`), so a fork of it is as fresh as a new interpreter:
torch's thread pools have not started (forking once OpenMP's threads have can deadlock;
OpenBLAS stops its one thread before each fork), no CUDA context, nothing of the grader's
memory (a fork of the grader would hand student code its state, hash secret and address
layout), no student's file or name (a worker reads its setup from its own pipe). It imports
with the garbage collector off and freezes what it has before it forks (`gc.freeze`, as
Python's documentation advises for a fork server): its imports take 0.4 s less, and the
workers' collectors skip all that.

The worker is forked through a short-lived middle process, and the grader, a child
subreaper (PR_SET_CHILD_SUBREAPER) for that moment only, adopts it when the middle exits. So
the worker is the grader's own child, as one started by `subprocess.Popen` is: the grader
reaps it (exit codes, signals), the kernel kills it with the grader (PR_SET_PDEATHSIG), and
its parent is the grader. Before anything else it does what Popen did: a session of its
own, only its pipes open, the temporary folder as working folder and HOME, the grader's
environment, and the `nobody` account (setgroups, setgid, setuid) when the grader is root.
`serve.serve` then does the rest, the same however the worker started: the limits, then
the handshake and the student's file.

Without a subreaper (not Linux), or with `FORK = False`, the grader could not adopt a fork:
the zygote then becomes the worker itself, and the next worker needs a new zygote (which
costs the import of torch each time). It is the same start either way: the same program, the
same steps before `serve.serve`, the same pipes, and a worker that is the grader's child (or,
for a zygote that became one inside bubblewrap, bwrap's, as the zygote was).

Where bubblewrap runs (`sandbox`), the zygote starts inside it, and so its workers: bwrap's
monitor sits between the grader and the zygote (which dies with it, and it with the grader),
never between the grader and a forked worker.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..runtime import default_device, triton_interpret
from . import sandbox
from .landlock import PR_GET_CHILD_SUBREAPER, PR_SET_CHILD_SUBREAPER

KIT_ROOT = Path(__file__).resolve().parents[2]
FORK = sys.platform == "linux"  # a subreaper adopts forked workers; else the zygote becomes one
PID = struct.Struct("!q")
READY = b"R"
FORK_WORKER, BECOME_WORKER = b"F", b"B"  # the grader's requests to its zygote


class ZygoteError(OSError):
    """The zygote could not start, or could not start a worker: the grader's setup."""


def worker_env(env: dict[str, str]) -> dict[str, str]:
    """The environment of any process that runs the kit's worker code, from `env` without the
    grader's paths (`sandbox.without_grader_paths`)."""
    path = os.pathsep.join(filter(None, [str(KIT_ROOT), env.get("PYTHONPATH")]))
    return {**env, "MPLBACKEND": "Agg",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": path}


def _popen_code(code: int, *, via_bwrap: bool) -> int:
    """A return code as Popen's (-N: killed by signal N), also for a process started under
    bwrap, which exits with 128 + N when its child is killed by signal N."""
    return 128 - code if via_bwrap and code > 128 else code


def _read_until_eof(fd: int, wait_s: float, limit: int = 2**16) -> str:
    """What a pipe holds until its writers close it, for at most `wait_s` seconds and `limit`
    bytes: a process that outlives the one that ended may hold the pipe open."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + wait_s
    while sum(map(len, chunks)) < limit:
        timeout = deadline - time.monotonic()
        if timeout <= 0 or not select.select([fd], [], [], timeout)[0]:
            break
        chunk = os.read(fd, limit)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


@contextlib.contextmanager
def _subreaper() -> Iterator[None]:
    """This process adopts the orphans among its descendants, for a moment only: strays (a
    student's detached process) still go to init, as without the zygote."""
    libc = ctypes.CDLL(None, use_errno=True)
    was = ctypes.c_int(0)
    if libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, was.value, 0, 0, 0)


class WorkerProcess:
    """A started worker, a child of this process (its pid is also its process group's), and
    the grader's ends of its pipes: requests, replies, and its stderr until it is ready.
    `popen`: the zygote that became this worker (or bwrap around it); None if forked."""

    def __init__(self, pid: int, fds: tuple[int, int, int], popen: subprocess.Popen | None,
                 parent: int | None = None):
        self.pid = pid
        self.parent = parent or os.getpid()  # its parent: this process, or bwrap's monitor
        self.request_fd, self.reply_fd, self.stderr_fd = fds
        self.returncode: int | None = None  # as Popen's: -N for signal N
        self._popen = popen

    def wait(self, timeout: float | None = None) -> int | None:
        """Its return code once it has ended; None if it still runs after `timeout` seconds."""
        if self._popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.returncode = _popen_code(self._popen.wait(timeout),
                                             via_bwrap=self.parent == self._popen.pid)
            return self.returncode
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            except ChildProcessError:  # reaped by other code of this process: status unknown
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif deadline is not None and time.monotonic() >= deadline:
                return None
            else:
                time.sleep(0.005)
        return self.returncode

    def kill(self) -> None:
        """The worker's process group (its children), and the worker itself wherever it went."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self.returncode is None:  # not yet reaped, so the pid is still this worker's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def stderr(self, wait_s: float = 1.0) -> str:
        """What it wrote to stderr before it was ready (read once it has ended)."""
        text = _read_until_eof(self.stderr_fd, wait_s) if self.stderr_fd >= 0 else ""
        self.close_stderr()
        return text

    def close_stderr(self) -> None:
        if self.stderr_fd >= 0:
            os.close(self.stderr_fd)
            self.stderr_fd = -1

    def close_pipes(self) -> None:
        self.close_stderr()
        for fd in (self.request_fd, self.reply_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


class Zygote:
    """This process's zygote, seen from the grader: it forks workers on request, or becomes
    one."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        argv = [sys.executable, "-s", "-m", "mha_kit.runner.zygote_process",
                str(theirs.fileno()), str(os.getpid())]
        scratch = sandbox.scratch()
        command = sandbox.wrap(argv, [(scratch, scratch)], setuid=True)
        self.sandboxed = command is not None
        try:
            self.proc = subprocess.Popen(
                command or argv,
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                # Triton, imported by the warm-up (torch's compiler), as most workers want it
                env=worker_env(sandbox.with_settings({
                    **sandbox.without_grader_paths(os.environ), "TMPDIR": str(scratch),
                    "TRITON_INTERPRET": triton_interpret(default_device())})),
                cwd=KIT_ROOT,
                start_new_session=True)  # its imports want a writable temporary folder
            ours.sendall(PID.pack(self.proc.pid))  # the zygote's parent, or bwrap's
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        self.ready = False
        self.closed = False

    def _wait_ready(self, deadline: float) -> None:
        if self.ready:
            return
        timeout = max(0.0, deadline - time.monotonic())
        ended = True  # unless it is still importing at the deadline
        with contextlib.suppress(ConnectionResetError):  # it ended unread: stderr says why
            ended = bool(select.select([self.sock], [], [], timeout)[0])
            self.ready = ended and self.sock.recv(1) == READY
        if self.ready:
            assert self.proc.stderr is not None
            self.proc.stderr.close()
            return
        code = None
        if ended:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.proc.wait(1.0)
        self.close()
        assert self.proc.stderr is not None
        lines = _read_until_eof(self.proc.stderr.fileno(), 1.0).strip().splitlines()
        raise ZygoteError("\n".join(lines[-5:]) or self._not_ready(code, timeout))

    def _not_ready(self, code: int | None, timeout: float) -> str:
        """Why it never said ready, where it wrote nothing: how it ended, or that it was slow."""
        if code is None:
            return f"the zygote did not start within {timeout:g} s"
        code = _popen_code(code, via_bwrap=self.sandboxed)
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"the zygote was killed by {signal.Signals(-code).name} before it was ready"
            return f"the zygote was killed by signal {-code} before it was ready"
        return f"the zygote exited with status {code} before it was ready"

    def fork(self, fds: tuple[int, int, int], deadline: float) -> int:
        """The pid of a worker holding these pipes (request, reply, stderr), adopted by this
        process. EOFError: the zygote ended on the way (it was ready before)."""
        self._wait_ready(deadline)  # a new zygote imports for a second: strays go to init
        with _subreaper():
            return self._ask(FORK_WORKER, fds, deadline)

    def become_worker(self, fds: tuple[int, int, int], deadline: float) -> int:
        """The zygote's pid, once it is becoming a worker holding these pipes: it forks no
        more, and this object is done with. EOFError: it ended on the way."""
        try:
            self._wait_ready(deadline)
            return self._ask(BECOME_WORKER, fds, deadline)
        finally:
            self.sock.close()

    def _ask(self, request: bytes, fds: tuple[int, int, int], deadline: float) -> int:
        """The pid the ready zygote answers `request` with."""
        try:
            socket.send_fds(self.sock, [request], list(fds))
            data = b""
            while len(data) < PID.size:
                timeout = deadline - time.monotonic()
                if timeout <= 0 or not select.select([self.sock], [], [], timeout)[0]:
                    raise ZygoteError("the zygote did not start a worker in time")
                chunk = self.sock.recv(PID.size - len(data))
                if not chunk:
                    raise EOFError
                data += chunk
        except (BrokenPipeError, ConnectionResetError):
            raise EOFError from None
        (pid,) = PID.unpack(data)
        if pid <= 0:
            raise ZygoteError("the zygote could not fork a worker")
        return pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """Its process group: the zygote, bwrap's processes and any stray they started (its
        workers have sessions of their own). Once only: once reaped, its pid may be reused."""
        if self.closed:
            return
        self.closed = True
        self.sock.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()


_zygote: Zygote | None = None
# A zygote of the other sandbox (inside bubblewrap or not) than `_zygote`'s, kept for when
# that sandbox is asked for again (the `sandbox` setting changed back): not a second import.
_parked: dict[bool, Zygote] = {}
_lock = threading.Lock()


def prestart() -> None:
    """Start this process's zygote now, so that it imports while the grader does. Best effort:
    if it cannot start, the first worker's start tries again and says why."""
    global _zygote
    with _lock:
        _take_up(sandbox.BUBBLEWRAP in sandbox.layers())
        if _zygote is None:
            with contextlib.suppress(OSError):
                _zygote = Zygote()


def _take_up(bwrap: bool) -> None:
    """`_zygote` becomes one of this sandbox (inside bubblewrap or not): the one parked, if
    any, or None; one of the other sandbox is parked."""
    global _zygote
    if _zygote is not None and _zygote.sandboxed == bwrap:
        return
    if _zygote is not None:
        _parked[_zygote.sandboxed] = _zygote
    _zygote = _parked.pop(bwrap, None)


def _close_at_exit() -> None:
    for zygote_ in (_zygote, *_parked.values()):
        if zygote_ is not None:
            zygote_.close()


def _forget_in_child() -> None:
    """A fork of the grader (multiprocessing, say) starts its own zygote if it needs one."""
    global _zygote, _lock
    for zygote_ in (_zygote, *_parked.values()):
        if zygote_ is not None:
            zygote_.sock.close()
    _zygote = None
    _parked.clear()
    _lock = threading.Lock()


atexit.register(_close_at_exit)
os.register_at_fork(after_in_child=_forget_in_child)


def _from_zygote(fds: tuple[int, int, int], deadline: float
                 ) -> tuple[int, subprocess.Popen | None, int | None]:
    """A worker holding these pipes: (its pid, the Popen of a zygote that became it, its
    parent's pid if not this process). EOFError: the zygote ended on the way (the caller tries
    again, with a new one)."""
    global _zygote
    with _lock:
        _take_up(sandbox.BUBBLEWRAP in sandbox.layers())
        if _zygote is not None and not _zygote.alive():  # killed by student code?
            _zygote.close()
            _zygote = None
        if _zygote is None:
            _zygote = Zygote()
        zygote_, _zygote = _zygote, None  # its own again if it stays a zygote
        try:
            if not FORK:
                pid = zygote_.become_worker(fds, deadline)
                return pid, zygote_.proc, zygote_.proc.pid if zygote_.sandboxed else None
            pid = zygote_.fork(fds, deadline)
        except BaseException:
            zygote_.close()
            raise
        _zygote = zygote_
    try:  # adopted, or waitid says this is not our child
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        raise ZygoteError("the worker was not adopted by the grader") from None
    return pid, None, None


def start_worker(deadline: float) -> WorkerProcess:
    """A new worker, with pipes of its own. It then waits for its setup, the first message on
    its request pipe: `serve.serve`'s config, plus `cwd`, `env` and `account` (uid, gid, or
    None). OSError: it could not start (no zygote, a zygote that could not fork, ...)."""
    for attempt in range(2):
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        theirs, ours = (request_r, reply_w, stderr_w), (request_w, reply_r, stderr_r)
        try:
            pid, popen, parent = _from_zygote(theirs, deadline)
        except EOFError:  # a stray worker may hold the old pipes: new ones, a new zygote
            for fd in ours:
                os.close(fd)
            if attempt:
                raise ZygoteError("the zygote ended while starting a worker") from None
            continue
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        os.set_blocking(request_w, False)
        return WorkerProcess(pid, ours, popen, parent)
    raise AssertionError("unreachable")
