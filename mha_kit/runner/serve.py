"""The worker's side: its limits, the handshake, loading the student's file, and answering
requests until the grader closes the pipe.

However the worker started (forked from the zygote, or the zygote itself: see `zygote`),
`serve` runs before any student code: it asks the kernel to kill it with the grader, confines
itself (`landlock`, where the sandbox has that layer, before any thread starts: a failure there
stops the worker), limits its memory, file sizes and core files, says *ready*, and only then
loads the file, with stdout and stderr leading nowhere and the student's printing kept in part
for the report.
"""

from __future__ import annotations

import ctypes
import io
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from ..messages import msg
from ..runtime import triton_as_configured
from . import compiler, landlock, sandbox
from .framing import backward_from_dict, encode, receive, run_from_dict, write_all
from .inprocess import InProcessSubmission
from .policy import forbidden_functions, refuse_starts
from .protocol import Call, StandIns, StudentCodeError
from .student_code import refuse_kit_reads

PRINT_KEEP = 500  # characters of the student's printing kept for the report
SETUP_WAIT_S = 60.0  # a new worker waits this long for its setup, the grader's first message


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

    def summary(self) -> dict | None:
        """What was printed: its first characters and how many in all (the grader words it,
        `worker.printed`); None if nothing."""
        return {"text": "".join(self.kept), "count": self.size} if self.size else None


def die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this process (a worker, the zygote) when the grader that
    started it dies. Call it after any change of account, which clears the request."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):  # not Linux: the pipe's EOF ends an idle worker
        pass
    if os.getppid() != parent:
        os._exit(0)


def open_to_grader() -> None:
    """Let the grader's disk watch, with this worker's account as its file-system ids, read
    the worker's /proc entries (`disk.DiskWatch`: the files it holds), which the switch of
    account closed (it made the process undumpable). Only under Landlock: every process that
    runs student code as that account is confined too, and none may read another's; and its
    seccomp program keeps this so."""
    ctypes.CDLL(None).prctl(landlock.PR_SET_DUMPABLE, 1, 0, 0, 0)


def limit_resources(device: str, memory_gib: float, disk_gib: float) -> None:
    """Memory, and each file's size (the disk watch bounds all the files together)."""
    limit, file_size = int(memory_gib * 2**30), int(disk_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    if device == "cpu":
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    else:  # CUDA maps far more address space than it uses: cap the GPU memory instead
        index = gpu_index(device)
        total = torch.cuda.get_device_properties(index).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), index)


def gpu_index(device: str) -> int:
    """The GPU that `device` names: "cuda:1" is 1, a bare "cuda" the current one. The memory
    cap takes only an index (a bare "cuda" failed every worker's start on a GPU)."""
    index = torch.device(device).index
    return torch.cuda.current_device() if index is None else index


def serve(config: dict, request_fd: int, reply_fd: int,
          after_confining: Callable[[], None] = lambda: None) -> None:
    """The worker's life after its start: `config` is the grader's setup message.
    `after_confining`: what starts threads (a forked worker's torch thread pool), run once
    the worker is confined, as CUDA's start is: Landlock binds no thread already running."""
    die_with_parent(config["parent"])
    layer = sandbox.interpreters_layer()  # the zygote's: shared with its later workers
    if config.get("confine"):  # Landlock, for good, while this process has its one thread
        if config.get("account"):
            open_to_grader()
        landlock.confine(**config["confine"], layer=layer)
    if layer is not None:  # closed, confined or not: no student code may add a rule to it
        os.close(layer)
    after_confining()
    limit_resources(config["device"], config["memory_gib"], config["disk_gib"])
    triton_as_configured()
    refuse_starts()
    refuse_kit_reads()
    compiler.start_no_pythons()
    # Torch's pool of threads starts now, before threads are refused; a GPU's driver starts
    # threads of its own, so there only Python's ways are refused.
    torch.ones(1 << 20).add_(1)
    landlock.refuse_new_tasks(threads=config["device"] == "cpu")
    forbidden = forbidden_functions(tuple(config["forbidden"]))
    if config["path"].endswith(".ipynb"):  # the grader's import, not the student's load time
        import IPython.core.inputtransformer2  # noqa: F401  (the zygote has it already)
    write_all(reply_fd, encode({"ready": True}))
    printed = _CappedWriter()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = printed

    def loading(label: str) -> None:  # which chunk runs: a cell too slow is left out next time
        write_all(reply_fd, encode({"loading": label}))

    try:
        sub = InProcessSubmission.from_path(config["path"], forbidden, config.get("skip", ()),
                                            loading, config.get("kit_code", False))
    except Exception as err:  # an unreadable file: report it, grade nothing
        sub = InProcessSubmission({}, [msg("load.unreadable", path=config["path"],
                                           type=type(err).__name__, error=str(err))], forbidden)
    sub.memory_limit_gib = config["memory_gib"] if config["device"] == "cpu" else None
    write_all(reply_fd, encode({"problems": [p.to_data() for p in sub.problems],
                                "printed": printed.summary()}))
    reported = printed.size
    while True:
        try:
            request = receive(request_fd, time.monotonic() + 24 * 3600)
        except (EOFError, TimeoutError, ValueError):
            return
        reply = _answer(sub, request)
        if sub.warnings:  # what PyTorch warned about, at the student's lines
            reply["warnings"], sub.warnings = [w.to_data() for w in sub.warnings], []
        if printed.size != reported:
            reply["printed"], reported = printed.summary(), printed.size
        try:
            message = encode(reply)
        except Exception as err:  # e.g. a class of the student's own, which cannot be saved
            what = (request.get("name") or request.get("run", {}).get("class_name")
                    or request.get("job", "?"))
            message = encode({"ok": False, "kind": "bad_return", "message": msg(
                "worker.unsendable", what=what, type=type(err).__name__).to_data()})
        write_all(reply_fd, message)


def _answer(sub: InProcessSubmission, request: dict) -> dict:
    op = request["op"]
    try:
        stand_ins = request.get("stand_ins")
        sub.stand_in(None if stand_ins is None else StandIns(
            stand_ins["module"], tuple(stand_ins["names"])))
        reply = _answer_op(sub, op, request)  # calls on one thread (InProcessSubmission)
        if stand_ins is not None:
            reply["stand_ins_ran"] = sorted(sub.stand_ins_ran)
        return reply
    except Exception as err:  # the grader's own request was wrong: say so, keep serving
        return _grader_error(err)
    finally:
        sub.stand_in(None)


def _answer_op(sub: InProcessSubmission, op: str, request: dict) -> dict:
    try:
        if op == "call":
            backward = backward_from_dict(request.get("backward"))
            call = (sub.call(request["name"], *request["args"], **request["kwargs"])
                    if backward is None else
                    sub.call_backward(request["name"], request["args"], request["kwargs"],
                                      backward))
            value: Any = _call_data(call)
        elif op == "run_module":
            value = _call_data(sub.run_module(run_from_dict(request["run"])))
        elif op == "check_constructor":
            value = sub.check_constructor(request["name"], *request["args"], **request["kwargs"])
        elif op == "run_job":
            value = sub.run_job(request["job"], "", **request["kwargs"])
        else:
            raise ValueError(f"unknown request {op!r}")
        return {"ok": True, "value": value}
    except StudentCodeError as err:
        return {"ok": False, "kind": err.kind, "message": err.message.to_data(),
                "exc_type": err.exc_type}
    except BaseException as err:  # the grader's own code failed here: say so, keep serving
        return _grader_error(err)


def _grader_error(err: BaseException) -> dict:
    return {"ok": False, "kind": "crash", "message": msg(
        "worker.grader_error", type=type(err).__name__, error=str(err)).to_data()}


def _call_data(call: Call) -> dict:
    failure = call.backward_failure
    return {"value": call.value, "inputs_after": call.inputs_after, "grads": call.grads,
            "backward_failure": None if failure is None else failure.to_data()}
