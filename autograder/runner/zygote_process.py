"""The zygote itself: `python -m autograder.runner.zygote_process SOCKET PARENT`.

It imports torch and the worker's modules once, tells the grader it is ready, then forks a
worker for each request on its socket until the grader goes. The grader's side, and why the
workers are forked this way, are in `zygote`.
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

from . import landlock
from .zygote import KIT_ROOT, PID, READY, worker_env


def _run_zygote(sock_fd: int, parent: int) -> NoReturn:
    """Import, say ready, then fork a worker for each request until the grader goes. It dies
    with the process the grader started: itself, or bwrap (which dies with the grader)."""
    gc.disable()  # imports make half a million objects that live for good: no passes over them
    from . import serve  # torch and all the worker runs

    sock = socket.socket(fileno=sock_fd)
    started = PID.unpack(sock.recv(PID.size, socket.MSG_WAITALL) or bytes(PID.size))[0]
    serve.die_with_parent(parent if started == os.getpid() else started)
    import IPython.core.inputtransformer2  # noqa: F401  (a notebook's cells are IPython)
    import torch

    threads = torch.get_num_threads()  # the default a fresh interpreter gets: no pool starts
    serve.devices.warm_up()  # meta ops only: no thread pool starts either
    gc.freeze()  # the workers' collections (gc.enable in each) skip what they inherit
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
        pid = _fork_worker(fds, sock, threads) if len(fds) == 3 else 0
        for fd in fds:
            os.close(fd)
        try:
            sock.sendall(PID.pack(pid))
        except OSError:
            break
    os._exit(0)


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
    """In the forked worker: what Popen did for a new one, then `serve.serve`."""
    from . import serve
    from .framing import receive

    code = 1
    try:
        os.setsid()
        keep = {request_fd, reply_fd, stderr_fd}
        for fd in [int(name) for name in os.listdir("/proc/self/fd")]:  # the zygote's own
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
        os.chdir(setup["cwd"])
        if sys.path[:1] == [str(KIT_ROOT)]:  # the zygote's folder: as `python -m` there
            sys.path[0] = setup["cwd"]
        os.environ.clear()
        os.environ.update(worker_env(setup["env"]))
        import tempfile

        tempfile.tempdir = None  # TMPDIR is read again
        if setup["account"] is not None:
            _drop_to(*setup["account"])
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
    for needed in (Path(sys.executable), KIT_ROOT / "autograder", Path(torch.__file__).parent):
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
