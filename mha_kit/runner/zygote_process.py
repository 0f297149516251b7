"""The zygote itself: `python -m mha_kit.runner.zygote_process SOCKET PARENT`.

It imports torch and the worker's modules once, tells the grader it is ready, then answers
requests on its socket until the grader goes: FORK_WORKER forks a worker (the grader adopts
it), BECOME_WORKER makes the zygote itself that worker (where the grader cannot adopt a fork).
Either way the worker starts in `_become_worker`. The grader's side is in `zygote`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import sys
import time
from pathlib import Path
from typing import NoReturn

from . import landlock, sandbox
from .zygote import BECOME_WORKER, FORK_WORKER, KIT_ROOT, PID, READY, worker_env


def _run_zygote(sock_fd: int, parent: int) -> NoReturn:
    """Import, say ready, then start a worker for each request until the grader goes, or until
    it becomes one. It dies with the process the grader started: itself, or bwrap (which dies
    with the grader)."""
    gc.disable()  # imports make half a million objects that live for good: no passes over them
    from . import devices, serve  # torch and all the worker runs

    sock = socket.socket(fileno=sock_fd)
    started = PID.unpack(sock.recv(PID.size, socket.MSG_WAITALL) or bytes(PID.size))[0]
    serve.die_with_parent(parent if started == os.getpid() else started)
    import IPython.core.inputtransformer2  # noqa: F401  (a notebook's cells are IPython)
    import torch

    threads = torch.get_num_threads()  # the default a fresh interpreter gets: no pool starts
    devices.warm_up()  # meta ops only: no thread pool starts either
    gc.freeze()  # the workers' collections (gc.enable in each) skip what they inherit
    sandbox.interpreters_layer()  # made once, here: each worker inherits it
    sock.sendall(READY)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # the grader reads stderr only until ready
    os.close(devnull)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 1, 3)
        except OSError:
            break
        if not message:  # the grader closed its end
            break
        if message == BECOME_WORKER and len(fds) == 3:
            _stop_library_threads()
            sock.sendall(PID.pack(os.getpid()))
            sock.close()
            _become_worker(*fds, threads)
        pid = _fork_worker(fds, sock, threads) if message == FORK_WORKER and len(fds) == 3 else 0
        for fd in fds:
            os.close(fd)
        try:
            sock.sendall(PID.pack(pid))
        except OSError:
            break
    os._exit(0)


def _stop_library_threads() -> None:
    """What forking a worker does to the zygote's libraries, for a zygote that becomes one:
    their fork handlers stop the threads they started at import (OpenBLAS's, through numpy),
    which start again once the worker is confined. A child that exits at once is enough."""
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)


def _fork_worker(fds: list[int], sock: socket.socket, threads: int) -> int:
    """Fork the worker from a middle process that then exits, so that the grader adopts it.
    Its pid, once the middle has exited, or 0."""
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:
        code = 1
        try:
            os.close(read)
            pid = os.fork()
            if pid == 0:
                os.close(write)
                sock.close()
                _become_worker(*fds, threads)
            os.write(write, PID.pack(pid))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with open(read, "rb") as pipe:
        data = pipe.read(PID.size)
    os.waitpid(middle, 0)
    return PID.unpack(data)[0] if len(data) == PID.size else 0


def _become_worker(request_fd: int, reply_fd: int, stderr_fd: int, threads: int) -> NoReturn:
    """A forked worker, or the zygote itself: what starting a new process would do (a session
    of its own, only its pipes open, the setup's folder, environment and account), then
    `serve.serve`."""
    from . import serve
    from .framing import receive

    code = 1
    try:
        if os.getsid(0) != os.getpid():  # the zygote itself may lead its session already
            os.setsid()
        keep = {request_fd, reply_fd, stderr_fd, sandbox.interpreters_layer()}
        open_fds = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
        for fd in [int(name) for name in os.listdir(open_fds)]:  # the zygote's own
            if fd > 2 and fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(stderr_fd, 2)
        os.close(devnull)
        os.close(stderr_fd)
        setup = receive(request_fd, time.monotonic() + serve.SETUP_WAIT_S)
        if setup["account"] is not None:
            _drop_to(*setup["account"])
        # Entered as the account: its folder is its own (0700), which a root zygote without
        # CAP_DAC_OVERRIDE (bubblewrap drops it) may not enter.
        os.chdir(setup["cwd"])
        if sys.path[:1] == [str(KIT_ROOT)]:  # the zygote's folder: as `python -m` there
            sys.path[0] = setup["cwd"]
        os.environ.clear()
        os.environ.update(worker_env(setup["env"]))
        import tempfile

        tempfile.tempdir = None  # TMPDIR is read again
        landlock.drop_capabilities()  # a root worker's (a root grader's zygote keeps some)
        serve.serve(setup, request_fd, reply_fd, after_confining=lambda: _fresh_state(threads))
        code = 0
    except SystemExit as exit_:  # the worker's own exit, before student code ran
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException as err:  # a setup failure: its one line is the grader's to show
        with contextlib.suppress(BaseException):
            sys.stderr.write(f"{type(err).__name__}: {err}\n")
            sys.stderr.flush()
    finally:
        os._exit(code)


def _drop_to(uid: int, gid: int) -> None:
    """The account student code runs as, for good. It must be able to read Python, torch and
    the kit (modules not imported yet come from there): else the grader's setup is wrong."""
    import torch

    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    for needed in (Path(sys.executable), KIT_ROOT / "mha_kit", Path(torch.__file__).parent):
        if not os.access(needed, os.R_OK | os.X_OK):
            raise PermissionError(f"{needed} is not readable by uid {uid}")


def _fresh_state(threads: int) -> None:
    """What a forked worker shares with the zygote and a new interpreter would not."""
    import torch

    gc.enable()  # the zygote's imports ran without it
    torch.set_num_threads(threads)  # the zygote's pool never started: the child starts its own
    if "numpy.random" in sys.modules:  # seeded once in the zygote: each worker its own seed
        sys.modules["numpy.random"].seed()


def _main(argv: list[str]) -> None:
    try:
        _run_zygote(int(argv[0]), int(argv[1]))
    except BaseException as err:
        sys.stderr.write(f"{type(err).__name__}: {err}\n")
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    _main(sys.argv[1:])
