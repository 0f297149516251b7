"""Student code in a separate process: `WorkerSubmission` and the worker's main loop.

The grader's process never imports the student's code. It sends requests (call this
function on these tensors) over a pipe and gets tensors back; every comparison happens on
its side, and everything that comes back passes `_plain` again there. Messages are
`torch.save` payloads read back with `weights_only=True`, so the worker cannot make the
grader run code.

The worker runs in a fresh temporary folder, as `nobody` when the grader is root, under a
memory limit, and dies with the grader. A request that outlives its timeout, a crash or an
exit kills it; the next request starts a fresh one, so a hang or a crash costs one check.
An overall cap bounds the whole submission, restarts included. See docs/trusted-grading.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import io
import json
import math
import os
import pwd
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from .inprocess import InProcessSubmission, plain
from .policy import Limits, forbidden_functions, forbidden_names, worker_user
from .protocol import Call, ModuleRun, StudentCodeError

HEADER = struct.Struct("!Q")
MAX_MESSAGE = 256 * 2**20
PRINT_KEEP = 500  # characters of the student's printing kept for the report
TEXT_KEEP = 1000  # characters of any text from the worker shown to anyone
FILE_SIZE_LIMIT = 64 * 2**20  # bytes the worker may write to any one file
KIT_ROOT = Path(__file__).resolve().parents[2]


class WorkerStartError(RuntimeError):
    """The worker could not start before running any student code: the grader's setup."""


# --------------------------------------------------------------------------- framing


def _encode(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = buffer.getvalue()
    return HEADER.pack(len(data)) + data


def _read_exactly(fd: int, size: int, deadline: float) -> bytes:
    chunks, remaining = [], size
    while remaining:
        timeout = deadline - time.monotonic()
        if timeout <= 0 or not select.select([fd], [], [], timeout)[0]:
            raise TimeoutError
        chunk = os.read(fd, min(remaining, 2**20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int, deadline: float) -> Any:
    """One message. TimeoutError, EOFError, or ValueError for anything unreadable."""
    (size,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if size > MAX_MESSAGE:  # left unread: the pipe is out of step, as after a crash
        raise EOFError
    data = _read_exactly(fd, size, deadline)
    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except Exception as err:  # not a safe payload: an object weights_only refuses, or junk
        raise ValueError(type(err).__name__) from None


def _write_all(fd: int, data: bytes, deadline: float | None = None) -> None:
    """Write everything; with a deadline the fd is non-blocking and waits are bounded."""
    view = memoryview(data)
    while view:
        if deadline is not None:
            timeout = deadline - time.monotonic()
            if timeout <= 0 or not select.select([], [fd], [], timeout)[1]:
                raise TimeoutError
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue


def _clean(text: Any, keep: int = TEXT_KEEP) -> str:
    """Text from the worker, safe to show: printable, bounded."""
    text = str(text)[:keep]
    return "".join(c if c.isprintable() or c in "\n\t" else "?" for c in text)


# dtypes travel as names: ModuleRun holds a torch.dtype.
def _run_to_dict(run: ModuleRun) -> dict:
    fields = dataclasses.asdict(run)
    fields["dtype"] = str(run.dtype).removeprefix("torch.")
    return fields


def _run_from_dict(fields: dict) -> ModuleRun:
    return ModuleRun(**{**fields, "dtype": getattr(torch, fields["dtype"])})


# --------------------------------------------------------------------------- grader side


class WorkerSubmission:
    """The `Submission` operations, carried out by a worker process that holds the code."""

    def __init__(self, path: str | Path, device: str = "cpu", limits: Limits | None = None):
        self.path = Path(path).resolve()
        self.device = device
        self.limits = limits or Limits.from_env()
        self.forbidden = forbidden_names()
        forbidden_functions(self.forbidden)  # a misconfigured list fails here, not per check
        self.user = worker_user()
        self.problems: list[str] = []
        self.printed = ""
        self._proc: subprocess.Popen | None = None
        self._workdir: Path | None = None
        self._dead_at_load: str | None = None
        self._deadline: float | None = None
        self._check: tuple[str, float | None] | None = None  # the running check, its deadline

    # -- lifecycle
    def _left(self) -> float:
        assert self._deadline is not None
        return self._deadline - time.monotonic()

    def _cap_message(self) -> str:
        return f"not run: grading this submission reached its overall limit of " \
               f"{self.limits.total_s:g} s"

    def _start(self) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix="mha-kit-worker-"))
        shutil.copyfile(self.path, self._workdir / self.path.name)
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        config = {"path": self.path.name, "device": self.device, "parent": os.getpid(),
                  "memory_gib": self.limits.memory_gib, "forbidden": list(self.forbidden)}
        home = str(self._workdir)
        env = {**os.environ, "HOME": home, "TMPDIR": home, "MPLCONFIGDIR": home,
               "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(KIT_ROOT),
                                                           os.environ.get("PYTHONPATH")]))}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-s", "-m", "autograder.runner.worker", json.dumps(config),
                 str(request_r), str(reply_w)],
                pass_fds=(request_r, reply_w), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=home,
                start_new_session=True, **self._account(),
            )
        except (OSError, KeyError) as err:  # no such user, or not allowed to switch to it
            for fd in (request_r, request_w, reply_r, reply_w):
                os.close(fd)
            self.close()
            raise WorkerStartError(f"the grading worker could not start{self._as_user()}: "
                                   f"{type(err).__name__}: {err}") from None
        os.close(request_r)
        os.close(reply_w)
        os.set_blocking(request_w, False)
        self._request_fd, self._reply_fd = request_w, reply_r
        self._handshake()

    def _account(self) -> dict[str, Any]:
        """Popen's arguments to run as `self.user`, who then owns the temporary folder."""
        if not self.user:
            return {}
        entry = pwd.getpwnam(self.user)
        assert self._workdir is not None
        for item in (self._workdir, self._workdir / self.path.name):
            os.chown(item, entry.pw_uid, entry.pw_gid)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _as_user(self) -> str:
        return f" as user {self.user!r} (MHA_KIT_WORKER_USER chooses another)" if self.user \
            else ""

    def _handshake(self) -> None:
        """`ready` before any student code runs (else the grader's setup failed), then `loaded`."""
        assert self._proc is not None and self._proc.stderr is not None
        try:
            _receive(self._reply_fd, time.monotonic() + self.limits.start_s)
        except (TimeoutError, EOFError, ValueError, OSError):
            self._kill()
            status = self._exit_status()
            stderr = self._proc.stderr.read().decode(errors="replace").strip().splitlines()
            self.close()
            raise WorkerStartError(f"the grading worker could not start{self._as_user()}: "
                                   + ("\n".join(stderr[-5:]) or status)) from None
        self._proc.stderr.close()
        capped = self._left() < self.limits.load_s
        try:
            hello = _receive(self._reply_fd, time.monotonic() + min(self.limits.load_s,
                                                                    self._left()))
        except TimeoutError:
            self._dead_at_load = self._cap_message() if capped else (
                f"loading your file did not finish within {self.limits.load_s:g} s (an "
                "infinite loop at top level?)")
        except (EOFError, ValueError, OSError):
            self._dead_at_load = ("your file ended the grading process while loading "
                                  f"({self._exit_status()})")
        else:
            hello = hello if isinstance(hello, dict) else {}
            self.problems = [_clean(p) for p in hello.get("problems", ())][:50]
            self.printed = _clean(hello.get("printed", ""))
            return
        self.problems.append(self._dead_at_load)
        self.close()

    def _exit_status(self) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "it stopped answering"
        if code < 0:
            name = signal.Signals(-code).name
            hint = {"SIGKILL": " (out of memory?)", "SIGABRT": " (a crash in native code, or "
                    "out of memory)", "SIGSEGV": " (a crash in native code)"}.get(name, "")
            return f"killed by {name}{hint}"
        return f"exit code {code}: sys.exit or os._exit in student code?"

    def _kill(self) -> None:
        """The worker's process group (its children), and the worker itself wherever it went."""
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self._proc.kill()

    def close(self) -> None:
        if self._proc is not None:
            self._kill()
            self._proc.wait()
            for fd in (self._request_fd, self._reply_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._proc = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> WorkerSubmission:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def ensure_loaded(self) -> None:
        """Start the worker (and the overall clock) unless it runs or could not load."""
        if self._deadline is None:
            self._deadline = time.monotonic() + self.limits.total_s
        if self._proc is None and self._dead_at_load is None and self._left() > 0:
            self._start()

    def cpu_seconds(self) -> float | None:
        """CPU time the worker has used so far, read by the kernel's count (Linux), else None."""
        if self._proc is None:
            return None
        try:
            stat = Path(f"/proc/{self._proc.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (name)": state is fields[0]
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    # -- one request
    def start_check(self, check_id: str) -> None:
        """A check begins: its calls share one budget of `limits.check_s` seconds, counted from
        its first request to a running worker (starting one is the grader's time)."""
        self._check = (check_id, None)

    def _check_left(self) -> float:
        if self._check is None or self._check[1] is None:
            return math.inf
        return self._check[1] - time.monotonic()

    def _check_cap_message(self, what: str) -> str:
        check_id = self._check[0] if self._check else "?"
        return (f"`{what}` was stopped: the check {check_id} reached its limit of "
                f"{self.limits.check_s:g} s (is your code very slow?)")

    def _request(self, what: str, op: str, payload: dict, timeout: float) -> Any:
        self.ensure_loaded()
        if self._dead_at_load:
            raise StudentCodeError("load", self._dead_at_load)
        if self._left() <= 0:
            raise StudentCodeError("total_timeout", self._cap_message())
        if self._check is not None and self._check[1] is None:
            self._check = (self._check[0], time.monotonic() + self.limits.check_s)
        if self._check_left() <= 0:
            raise StudentCodeError("timeout", self._check_cap_message(what))
        deadline = time.monotonic() + min(timeout, self._left(), self._check_left())
        try:
            _write_all(self._request_fd, _encode({"op": op, **payload}), deadline)
            reply = _receive(self._reply_fd, deadline)
        except TimeoutError:
            self.close()
            if self._left() <= 0:
                raise StudentCodeError("total_timeout", f"`{what}` was stopped: grading this "
                                       "submission reached its overall limit of "
                                       f"{self.limits.total_s:g} s") from None
            if self._check_left() <= 0:
                raise StudentCodeError("timeout", self._check_cap_message(what)) from None
            raise StudentCodeError(
                "timeout", f"`{what}` timed out after {timeout:g} s (an infinite loop?)"
            ) from None
        except (EOFError, OSError):
            status = self._exit_status()
            self.close()
            raise StudentCodeError("crash", f"`{what}` ended the grading process ({status})"
                                   ) from None
        except ValueError as err:  # the whole message was read: the worker can go on
            raise StudentCodeError("bad_reply", f"`{what}` sent back something other than plain "
                                   f"tensors and values ({_clean(err, 100)}), which the grader "
                                   "does not read") from None
        if not isinstance(reply, dict):
            raise StudentCodeError("bad_reply", f"`{what}`: the worker sent a malformed reply")
        if "printed" in reply:
            self.printed = _clean(reply["printed"])
        if not reply.get("ok"):
            exc_type = reply.get("exc_type")
            raise StudentCodeError(_clean(reply.get("kind"), 40), _clean(reply.get("message")),
                                   None if exc_type is None else _clean(exc_type, 100))
        return reply.get("value")

    def _call_reply(self, what: str, op: str, payload: dict) -> Call:
        value = self._request(what, op, payload, self.limits.call_s)
        if not isinstance(value, dict):
            raise StudentCodeError("bad_reply", f"`{what}`: the worker sent a malformed reply")
        inputs_after = plain(value.get("inputs_after", ()), what)
        if not all(isinstance(t, torch.Tensor) for t in inputs_after):
            raise StudentCodeError("bad_reply", f"`{what}`: the worker sent a malformed reply")
        return Call(plain(value.get("value"), what), inputs_after)

    # -- the Submission operations
    def call(self, name: str, *args: Any, **kwargs: Any) -> Call:
        return self._call_reply(name, "call", {"name": name, "args": args, "kwargs": kwargs})

    def run_module(self, run: ModuleRun) -> Call:
        return self._call_reply(f"{run.class_name}", "run_module", {"run": _run_to_dict(run)})

    def check_constructor(self, name: str, *args: Any, **kwargs: Any) -> None:
        self._request(name, "check_constructor", {"name": name, "args": args,
                                                  "kwargs": kwargs}, self.limits.call_s)

    def run_job(self, job: str, what: str, **kwargs: Any) -> Any:
        """Run a kit job in the worker, under `limits.speed_s`; its reply is untrusted data:
        whoever asked checks its form."""
        return self._request(what, "run_job", {"job": job, "kwargs": kwargs},
                             self.limits.speed_s)


# --------------------------------------------------------------------------- worker side


class _CappedWriter(io.TextIOBase):
    """Keeps the first characters the student prints and counts the rest."""

    def __init__(self) -> None:
        self.kept: list[str] = []
        self.size = 0

    def write(self, text: str) -> int:
        text = str(text)
        if self.size < PRINT_KEEP:
            self.kept.append(text[: PRINT_KEEP - self.size])
        self.size += len(text)
        return len(text)

    def summary(self) -> str:
        if not self.size:
            return ""
        more = f" ... ({self.size:,} characters in all)" if self.size > PRINT_KEEP else ""
        return "".join(self.kept) + more


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this worker when the grader that started it dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):  # not Linux: the pipe's EOF ends an idle worker
        pass
    if os.getppid() != parent:
        os._exit(0)


def _limit_resources(device: str, memory_gib: float) -> None:
    limit = int(memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    if device == "cpu":
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    else:  # CUDA maps far more address space than it uses: cap the GPU memory instead
        total = torch.cuda.get_device_properties(torch.device(device)).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), torch.device(device))


def _serve(config: dict, request_fd: int, reply_fd: int) -> None:
    _die_with_parent(config["parent"])
    _limit_resources(config["device"], config["memory_gib"])
    forbidden = forbidden_functions(tuple(config["forbidden"]))
    if config["path"].endswith(".ipynb"):  # the grader's imports, not the student's load time
        import IPython.core.inputtransformer2  # noqa: F401
        import nbformat  # noqa: F401
    _write_all(reply_fd, _encode({"ready": True}))
    printed = _CappedWriter()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = printed
    try:
        sub = InProcessSubmission.from_path(config["path"], forbidden)
    except Exception as err:  # an unreadable file: report it, grade nothing
        sub = InProcessSubmission({}, [f"{config['path']} could not be read: "
                                       f"{type(err).__name__}: {err}"], forbidden)
    sub.memory_limit_gib = config["memory_gib"] if config["device"] == "cpu" else None
    _write_all(reply_fd, _encode({"problems": sub.problems, "printed": printed.summary()}))
    reported = printed.size
    while True:
        try:
            request = _receive(request_fd, time.monotonic() + 24 * 3600)
        except (EOFError, TimeoutError, ValueError):
            return
        reply = _answer(sub, request)
        if printed.size != reported:
            reply["printed"], reported = printed.summary(), printed.size
        try:
            message = _encode(reply)
        except Exception as err:  # e.g. a class of the student's own, which cannot be saved
            what = request.get("name") or request.get("run", {}).get("class_name", "it")
            message = _encode({"ok": False, "kind": "bad_return", "message": f"`{what}` "
                               f"returned something that cannot be sent back ({type(err).__name__}"
                               "): return plain tensors"})
        _write_all(reply_fd, message)


def _answer(sub: InProcessSubmission, request: dict) -> dict:
    op = request["op"]
    try:
        if op == "call":
            call = sub.call(request["name"], *request["args"], **request["kwargs"])
            value: Any = {"value": call.value, "inputs_after": call.inputs_after}
        elif op == "run_module":
            call = sub.run_module(_run_from_dict(request["run"]))
            value = {"value": call.value, "inputs_after": call.inputs_after}
        elif op == "check_constructor":
            value = sub.check_constructor(request["name"], *request["args"], **request["kwargs"])
        elif op == "run_job":
            value = sub.run_job(request["job"], "", **request["kwargs"])
        else:
            raise ValueError(f"unknown request {op!r}")
        return {"ok": True, "value": value}
    except StudentCodeError as err:
        return {"ok": False, "kind": err.kind, "message": str(err), "exc_type": err.exc_type}
    except BaseException as err:  # the grader's own code failed here: say so, keep serving
        return {"ok": False, "kind": "crash", "message": f"{type(err).__name__}: {err}"}


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
