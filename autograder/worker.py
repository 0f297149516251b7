"""Student code in a separate process: `WorkerSubmission` and the worker's main loop.

The grader's process never imports the student's code. It sends requests (call this
function on these tensors) over a pipe and gets tensors back; every comparison happens on
its side. Messages are `torch.save` payloads read back with `weights_only=True`, so the
worker cannot make the grader run code. A request that outlives its timeout, a crash or an
exit kills the worker; the next request starts a fresh one.
"""

from __future__ import annotations

import dataclasses
import io
import os
import resource
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from .submission import Call, InProcessSubmission, ModuleRun, StudentCodeError

HEADER = struct.Struct("!Q")
MAX_MESSAGE = 256 * 2**20
LOAD_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 20.0
SPEED_TIMEOUT_S = 60.0
MEMORY_LIMIT_GIB = 6
PRINT_KEEP = 2000  # characters of the student's printing kept for the report


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
    (size,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if size > MAX_MESSAGE:
        raise EOFError
    return torch.load(io.BytesIO(_read_exactly(fd, size, deadline)), weights_only=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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

    def __init__(self, path: str | Path, device: str = "cpu"):
        self.path = Path(path).resolve()
        self.device = device
        self.problems: list[str] = []
        self.printed = ""
        self._proc: subprocess.Popen | None = None
        self._dead_at_load: str | None = None

    # -- lifecycle
    def _start(self) -> None:
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1"}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "autograder.worker", str(self.path), self.device,
             str(request_r), str(reply_w)],
            pass_fds=(request_r, reply_w), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )
        os.close(request_r)
        os.close(reply_w)
        self._request_fd, self._reply_fd = request_w, reply_r
        try:
            hello = _receive(self._reply_fd, time.monotonic() + LOAD_TIMEOUT_S)
        except TimeoutError:
            self._dead_at_load = (f"loading your file did not finish within {LOAD_TIMEOUT_S:.0f}"
                                  " s (an infinite loop at top level?)")
        except (EOFError, OSError, RuntimeError):
            self._dead_at_load = (f"your file ended the grading process while loading "
                                  f"({self._exit_status()})")
        else:
            self.problems = list(hello.get("problems", []))
            self.printed = hello.get("printed", "")
            return
        self.close()

    def _exit_status(self) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "it stopped answering"
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (out of memory?)" if name == "SIGKILL" else ""
            return f"killed by {name}{hint}"
        return f"exit code {code}: sys.exit or os._exit in student code?"

    def close(self) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
            for fd in (self._request_fd, self._reply_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._proc = None

    def __enter__(self) -> WorkerSubmission:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def ensure_loaded(self) -> None:
        if self._proc is None and self._dead_at_load is None:
            self._start()

    # -- one request
    def _request(self, what: str, op: str, payload: dict, timeout: float) -> Any:
        self.ensure_loaded()
        if self._dead_at_load:
            raise StudentCodeError("load", self._dead_at_load)
        try:
            _write_all(self._request_fd, _encode({"op": op, **payload}))
            reply = _receive(self._reply_fd, time.monotonic() + timeout)
        except TimeoutError:
            self.close()
            raise StudentCodeError(
                "timeout", f"`{what}` timed out after {timeout:.0f} s (an infinite loop?)"
            ) from None
        except (EOFError, OSError, RuntimeError):
            status = self._exit_status()
            self.close()
            raise StudentCodeError("crash", f"`{what}` ended the grading process ({status})"
                                   ) from None
        if not isinstance(reply, dict):
            raise StudentCodeError("crash", f"`{what}`: the worker sent a malformed reply")
        if not reply.get("ok"):
            raise StudentCodeError(str(reply.get("kind")), str(reply.get("message")),
                                   reply.get("exc_type"))
        return reply.get("value")

    def _call_reply(self, what: str, op: str, payload: dict) -> Call:
        value = self._request(what, op, payload, CALL_TIMEOUT_S)
        if not isinstance(value, dict):
            raise StudentCodeError("crash", f"`{what}`: the worker sent a malformed reply")
        return Call(value.get("value"), tuple(value.get("inputs_after", ())))

    # -- the Submission operations
    def call(self, name: str, *args: Any, **kwargs: Any) -> Call:
        return self._call_reply(name, "call", {"name": name, "args": args, "kwargs": kwargs})

    def run_module(self, run: ModuleRun) -> Call:
        return self._call_reply(f"{run.class_name}", "run_module", {"run": _run_to_dict(run)})

    def check_constructor(self, name: str, *args: Any, **kwargs: Any) -> None:
        self._request(name, "check_constructor", {"name": name, "args": args,
                                                  "kwargs": kwargs}, CALL_TIMEOUT_S)

    def time_speed(self, device: str, seed: int) -> dict[str, Any]:
        value = self._request("MultiHeadAttention (timing)", "time_speed",
                              {"device": device, "seed": seed}, SPEED_TIMEOUT_S)
        if not isinstance(value, dict):
            raise StudentCodeError("crash", "the timing run sent a malformed reply")
        return value


# --------------------------------------------------------------------------- worker side


class _CappedWriter(io.TextIOBase):
    """Keeps the first characters the student prints and counts the rest."""

    def __init__(self) -> None:
        self.kept: list[str] = []
        self.size = 0

    def write(self, text: str) -> int:
        if self.size < PRINT_KEEP:
            self.kept.append(text[: PRINT_KEEP - self.size])
        self.size += len(text)
        return len(text)

    def summary(self) -> str:
        if not self.size:
            return ""
        more = f" ... ({self.size:,} characters in all)" if self.size > PRINT_KEEP else ""
        return "".join(self.kept) + more


def _serve(path: str, device: str, request_fd: int, reply_fd: int) -> None:
    printed = _CappedWriter()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = printed
    if device == "cpu":
        limit = MEMORY_LIMIT_GIB * 2**30
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sub = InProcessSubmission.from_path(path)
    _write_all(reply_fd, _encode({"problems": sub.problems, "printed": printed.summary()}))
    while True:
        try:
            request = _receive(request_fd, time.monotonic() + 24 * 3600)
        except (EOFError, TimeoutError):
            return
        _write_all(reply_fd, _encode(_answer(sub, request)))


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
        elif op == "time_speed":
            value = sub.time_speed(request["device"], request["seed"])
        else:
            raise ValueError(f"unknown request {op!r}")
        return {"ok": True, "value": value}
    except StudentCodeError as err:
        return {"ok": False, "kind": err.kind, "message": str(err), "exc_type": err.exc_type}
    except BaseException as err:  # the grader's own code failed here: say so, keep serving
        return {"ok": False, "kind": "crash", "message": f"{type(err).__name__}: {err}"}


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
