"""Student code in a separate process, seen from the grader: `WorkerSubmission`.

The grader's process never imports the student's code. It sends requests (call this
function on these tensors) over a pipe and gets tensors back; every comparison happens on
its side, and everything that comes back passes `vetted` again there. Messages carry
plain values and tensors only, read back by an unpickler that knows no code (`framing`), so
the worker cannot make the grader run code.

Each worker is a new process that starts from a zygote, a process that has imported torch
(`zygote`); its side of the pipe is `serve`. It runs in a fresh temporary folder, as `nobody`
when the grader is root, under a memory limit, in the sandbox (`sandbox`), and dies with the
grader; the grader stops it once its files take more disk than the limit (`disk`).
A request that outlives its timeout, a crash or an exit kills it; the next request starts a
fresh one, so a hang or a crash costs one check. An overall cap bounds the whole submission,
restarts included. See docs/trusted-grading.md.
"""

from __future__ import annotations

import contextlib
import math
import os
import pwd
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from .. import settings
from ..messages import Message, msg
from ..runtime import triton_environment
from . import fonts, no_student_code, sandbox
from .devices import on_meta
from .disk import DiskWatch, process_tree
from .framing import TEXT_KEEP, clean, encode, fields_of, receive, run_to_dict, write_all
from .inprocess import vetted
from .loading import cell_names
from .policy import Limits, forbidden_functions, forbidden_names, worker_user
from .protocol import Backward, Call, ModuleRun, StandIns, StudentCodeError
from .student_code import CELL_LABEL, shown_printed
from .zygote import WorkerProcess, start_worker

__all__ = ["WorkerStartError", "WorkerSubmission"]


def worker_environment(home: str, device: str) -> dict[str, str]:
    """The environment of a worker whose scratch folder is `home`: the grader's variables that
    student code may see, and every folder a library writes to in `home`. Torch's compiler
    without the Pythons it would start, which a worker may not run (`sandbox.executables`,
    `compiler`): no pool of compiling processes; its cache in `home`, where code that reads
    TORCHINDUCTOR_CACHE_DIR (or sets it only where unset, as CS336 solutions do) may write."""
    return {**sandbox.student_environment(os.environ), "HOME": home, "TMPDIR": home,
            "MPLCONFIGDIR": home, "TORCHINDUCTOR_COMPILE_THREADS": "1",
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(home, ".inductor"),
            **triton_environment(device, home)}

class WorkerStartError(RuntimeError):
    """The worker could not start before running any student code: the grader's setup."""


def _from_worker(data: Any, fallback: Message) -> Message:
    """A message the worker sent (`Message.to_data`), made safe to show; else `fallback`."""
    try:
        return Message.from_data(data, text=clean, keep=4 * TEXT_KEEP)
    except ValueError:
        return fallback


def _printed(data: Any) -> Message | None:
    """What the worker says the student's code printed (its first characters, how many in
    all), as the grader shows it (`shown_printed`); None if it is not that."""
    if not (isinstance(data, dict) and type(data.get("text")) is str
            and type(data.get("count")) is int and len(data["text"]) <= data["count"] < 2**63):
        return None  # a count no printing reaches (10**5000 would not even render)
    text, count = shown_printed(data["text"]), data["count"]
    return (msg("worker.printed_more", text=text, count=count) if count > len(data["text"])
            else msg("worker.printed", text=text))


def _threads_cpu(pid: int) -> float:
    """CPU seconds the threads of process `pid` have used, by the kernel's count."""
    return sum(int((task / "schedstat").read_text().split()[0])
               for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9


class WorkerSubmission:
    """The `Submission` operations, carried out by a worker process that holds the code."""

    def __init__(self, path: str | Path, device: str = "cpu", limits: Limits | None = None,
                 kit_code: bool = False):
        self.path = Path(path).resolve()
        self.kit_code = kit_code  # as for InProcessSubmission: the kit grading its own styles
        self.device = device
        self.limits = limits or Limits.from_settings()
        self.forbidden = forbidden_names()
        forbidden_functions(self.forbidden)  # a misconfigured list fails here, not per check
        self.user = worker_user()
        self.problems: list[Message] = []
        self.printed: Message | None = None  # what the student's code printed, if anything
        self.warnings: list[Message] = []  # what PyTorch warned about, in the current check
        self._proc: WorkerProcess | None = None
        self._workdir: Path | None = None
        self._watch: DiskWatch | None = None
        self._dead_at_load: Message | None = None
        self._slow_cells: list[str] = []  # left out of the load: each ran past its limit
        self._deadline: float | None = None
        self._loading: tuple[float, bool] | None = None  # the load's deadline, and if capped
        self._check: tuple[str, float | None] | None = None  # the running check, its deadline
        self._stand_ins: StandIns | None = None  # sent with every request while set
        self.stand_ins_ran: set[str] = set()
        self._clean: WorkerSubmission | None = None  # `clean_worker`, once asked for

    # -- lifecycle
    def _left(self) -> float:
        assert self._deadline is not None
        return self._deadline - time.monotonic()

    def _cap_message(self) -> Message:
        return msg("worker.cap", limit=float(self.limits.total_s))

    def _start(self) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix="mha-kit-worker-", dir=sandbox.scratch()))
        shutil.copyfile(self.path, self._workdir / self.path.name)
        fonts.seed(self._workdir)
        home = str(self._workdir)
        env = worker_environment(home, self.device)
        deadline = time.monotonic() + self.limits.start_s
        try:
            account = self._account()
            self._proc = start_worker(deadline)
        except (OSError, KeyError) as err:  # no such user, no zygote, ...
            self.close()
            raise WorkerStartError(msg("worker.cannot_start", user=self._as_user(), error=msg(
                "quote", text=f"{type(err).__name__}: {err}"))) from None
        self._request_fd, self._reply_fd = self._proc.request_fd, self._proc.reply_fd
        confinement = self._confinement()
        self._ready({"path": self.path.name, "device": self.device, "parent": self._proc.parent,
                     "memory_gib": self.limits.memory_gib, "disk_gib": self.limits.disk_gib,
                     "forbidden": list(self.forbidden), "cwd": home, "env": env,
                     "account": account, "skip": self._slow_cells, "kit_code": self.kit_code,
                     "confine": confinement},
                    deadline)
        # /proc as the worker's account only where the worker opens its entries to it (under
        # Landlock: `serve.open_to_grader`).
        self._watch = DiskWatch(self._workdir, self._proc.pid, int(self.limits.disk_gib * 2**30),
                                account, proc_as_account=bool(confinement))

    def _confinement(self) -> dict | None:
        """Landlock's setup: the worker confines itself while it has its one thread."""
        assert self._workdir is not None
        return sandbox.confinement([self._workdir], worker=True)

    def _account(self) -> tuple[int, int] | None:
        """(uid, gid) of `self.user`, who then owns the temporary folder; None: the grader's."""
        if not self.user:
            return None
        entry = pwd.getpwnam(self.user)
        assert self._workdir is not None
        for item in (self._workdir, self._workdir / self.path.name):
            os.chown(item, entry.pw_uid, entry.pw_gid)
        return entry.pw_uid, entry.pw_gid

    def _as_user(self) -> Message | str:
        return (msg("worker.as_user", user=self.user, variable=settings.variable("worker_user"))
                if self.user else "")

    def _ready(self, setup: dict, deadline: float) -> None:
        """The worker's setup, then `ready` before any student code runs (else the grader's
        setup failed). Then it loads the file: `_loaded` waits for that."""
        assert self._proc is not None
        try:
            write_all(self._request_fd, encode(setup), deadline)
            receive(self._reply_fd, deadline)
        except (TimeoutError, EOFError, ValueError, OSError):
            self._proc.kill()
            status = self._exit_status()
            stderr = self._proc.stderr().strip().splitlines()
            self.close()
            error = msg("quote", text="\n".join(stderr[-5:])) if stderr else status
            raise WorkerStartError(msg("worker.cannot_start", user=self._as_user(),
                                       error=error)) from None
        self._proc.close_stderr()
        self._loading = (time.monotonic() + min(self.limits.load_s, self._left()),
                         self._left() < self.limits.load_s)

    def _loaded(self) -> None:
        """`loaded`, with the problems met while loading, or the reason it never came."""
        assert self._loading is not None
        deadline, capped = self._loading
        self._loading = None
        running = None  # the notebook cell being run, as the worker last said
        try:
            hello = receive(self._reply_fd, deadline)
            while isinstance(hello, dict) and isinstance(hello.get("loading"), str):
                running = hello["loading"]
                hello = receive(self._reply_fd, deadline)
        except TimeoutError:
            if not capped and self._skips_slow_cell(running):
                return
            self._dead_at_load = self._cap_message() if capped else msg(
                "worker.load_timeout", limit=float(self.limits.load_s))
        except (EOFError, ValueError, OSError):
            status = self._exit_status()
            self._dead_at_load = self._over_disk(self.path.name) or msg("worker.load_crash",
                                                                        status=status)
        else:
            hello = hello if isinstance(hello, dict) else {}
            problems = hello.get("problems")
            self.problems = self._slow_cell_notes()
            self.problems += [_from_worker(p, self._malformed()) for p in
                              (problems if isinstance(problems, list) else [])[:50]]
            self._read_printed(hello)
            return
        self.problems = [*self._slow_cell_notes(), self._dead_at_load]  # what came first, too
        self.close()

    def _slow_cell_notes(self) -> list[Message]:
        """One line per notebook cell left out of the load for running past its limit."""
        names = cell_names(self.path) if self._slow_cells else {}
        return [msg("worker.slow_cell", limit=float(self.limits.load_s),
                    cell=names.get(label, label)) for label in self._slow_cells]

    def _skips_slow_cell(self, running: str | None) -> bool:
        """A notebook cell ran past the load's limit: load again in a new worker without it
        (and without those left out before), as a cell that fails costs only what it defines.
        False when no cell is known, or two were left out already."""
        if (running is None or not CELL_LABEL.fullmatch(running) or running in self._slow_cells
                or len(self._slow_cells) >= 2 or self._left() <= 0):
            return False
        self._slow_cells.append(running)
        self.close()
        self.start()
        self._loaded()
        return True

    def _malformed(self, what: Message | str | None = None) -> Message:
        return msg("worker.malformed_reply", what=what or self.path.name)

    def _read_printed(self, reply: dict) -> None:
        if reply.get("printed") is not None:  # what the student's code has printed so far
            self.printed = _printed(reply["printed"]) or self._malformed()
        warned = reply.get("warnings")
        if isinstance(warned, list):  # what PyTorch warned about in the student's code
            self.warnings += [w for w in (_from_worker(d, self._malformed()) for d in warned[:8])
                              if w not in self.warnings][:8]

    def _crash_message(self, what: str, status: Message) -> Message:
        """The process ended; where the student's file uses Triton on the CPU (its
        interpreter, which reads and writes memory where a kernel's pointers say), most often
        by a tl.load or tl.store past the end of a tensor: said so."""
        crash = msg("worker.crash", what=what, status=status)
        if self.device == "cpu" and b"triton" in self.path.read_bytes():
            return msg("worker.crash_triton", crash=crash)
        return crash

    def _over_disk(self, what: str) -> Message | None:
        """What to say where the disk watch stopped the worker (`_exit_status` stops the
        watch); None where it did not."""
        if self._watch is None or not self._watch.exceeded:
            return None
        return msg("worker.disk_cap", what=what, gib=float(self.limits.disk_gib))

    def _stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.stop()

    def _exit_status(self) -> Message:
        assert self._proc is not None
        self._stop_watch()  # before the worker is reaped
        code = self._proc.wait(timeout=5)
        if code is None:
            return msg("worker.no_answer")
        if code < 0:
            name = signal.Signals(-code).name
            which = {"SIGKILL": "worker.killed_oom", "SIGABRT": "worker.killed_abort",
                     "SIGSEGV": "worker.killed_crash"}.get(name, "worker.killed")
            return msg(which, signal=name)
        return msg("worker.exit_code", code=code)

    def close(self) -> None:
        if self._clean is not None:
            self._clean.close()
            self._clean = None
        self._loading = None
        self._stop_watch()
        self._watch = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc.close_pipes()
            self._proc = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> WorkerSubmission:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        """Start the worker (and the overall clock) unless it runs or could not load; it then
        loads the file while the grader goes on."""
        if self._deadline is None:
            self._deadline = time.monotonic() + self.limits.total_s
        if self._proc is None and self._dead_at_load is None and self._left() > 0:
            self._start()

    def restart_clock(self) -> None:
        """The overall cap counts again from now: for a second grading of the same file."""
        self._deadline = time.monotonic() + self.limits.total_s

    def ensure_loaded(self) -> None:
        """`start`, and wait until the worker has loaded the file."""
        self.start()
        if self._loading is not None:
            self._loaded()

    def cpu_seconds(self) -> float | None:
        """CPU time the worker and the programs it started have used so far, by the kernel's
        count: the threads of the worker and of each live descendant in nanoseconds (Linux:
        /proc/<pid>/task/*/schedstat), and the children the worker has reaped (their utime and
        stime, in clock ticks); else None. A program started from student code (red team 52
        ran the loop over heads in a Python started through the dynamic loader, beside the
        timed calls) counts as the worker's own."""
        if self._proc is None:
            return None
        try:
            total = _threads_cpu(self._proc.pid)
            after_name = Path(f"/proc/{self._proc.pid}/stat").read_text().rpartition(")")[2]
            cutime, cstime = map(int, after_name.split()[13:15])
        except (OSError, ValueError, IndexError):  # no /proc, or a thread that just ended
            return None
        for pid in process_tree(self._proc.pid)[1:]:
            with contextlib.suppress(OSError, ValueError, IndexError):  # one that just ended
                total += _threads_cpu(pid)
        return total + (cutime + cstime) / os.sysconf("SC_CLK_TCK")

    def clean_worker(self) -> WorkerSubmission:
        """A worker like this one (device, limits) that loads no student code: the kit's jobs
        that must not run beside student code run there. Started when first used; closed with
        this one."""
        if self._clean is None:
            self._clean = WorkerSubmission(Path(no_student_code.__file__), self.device,
                                           self.limits)
        return self._clean

    # -- one request
    def start_check(self, check_id: str) -> None:
        """A check begins: its calls share one budget of `limits.check_s` seconds, counted from
        its first request to a running worker (starting one is the grader's time)."""
        self._check = (check_id, None)
        self.warnings = []

    def stand_in(self, stand_ins: StandIns | None) -> None:
        """Every request from now on asks the worker to put the kit's versions of these pieces
        in place of the student's while it runs: a restarted worker gets them too."""
        self._stand_ins = stand_ins
        if stand_ins is not None:
            self.stand_ins_ran = set()

    @contextlib.contextmanager
    def own_code(self) -> Iterator[None]:
        """Requests ask for no stand-in while it lasts: the student's own versions answer."""
        stand_ins, self._stand_ins = self._stand_ins, None
        try:
            yield
        finally:
            self._stand_ins = stand_ins

    def _check_left(self) -> float:
        if self._check is None or self._check[1] is None:
            return math.inf
        return self._check[1] - time.monotonic()

    def _check_cap_message(self, what: Message | str) -> Message:
        check_id = self._check[0] if self._check else "?"
        return msg("worker.check_cap", what=what, check=check_id,
                   limit=float(self.limits.check_s))

    def _request(self, what: Message | str, op: str, payload: dict, timeout: float) -> Any:
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
        if self._stand_ins is not None:
            payload = {**payload, "stand_ins": fields_of(self._stand_ins)}
        try:
            write_all(self._request_fd, encode({"op": op, **payload}), deadline)
            reply = receive(self._reply_fd, deadline)
        except TimeoutError:
            self.close()
            if self._left() <= 0:
                raise StudentCodeError("total_timeout", msg(
                    "worker.total_cap", what=what, limit=float(self.limits.total_s))) from None
            if self._check_left() <= 0:
                raise StudentCodeError("timeout", self._check_cap_message(what)) from None
            raise StudentCodeError("timeout", msg("worker.timeout", what=what, limit=timeout)
                                   ) from None
        except (EOFError, OSError):
            status = self._exit_status()
            message = self._over_disk(what) or self._crash_message(what, status)
            self.close()
            raise StudentCodeError("crash", message) from None
        except ValueError as err:  # the whole message was read: the worker can go on
            raise StudentCodeError("bad_reply", msg("worker.unreadable_reply", what=what,
                                                    error=clean(err, 100))) from None
        if not isinstance(reply, dict):
            raise StudentCodeError("bad_reply", self._malformed(what))
        self._read_printed(reply)
        if self._stand_ins is not None and isinstance(reply.get("stand_ins_ran"), list):
            self.stand_ins_ran |= set(self._stand_ins.names) & {
                name for name in reply["stand_ins_ran"] if isinstance(name, str)}
        if not reply.get("ok"):
            exc_type = reply.get("exc_type")
            raise StudentCodeError(clean(reply.get("kind"), 40),
                                   _from_worker(reply.get("message"), self._malformed(what)),
                                   None if exc_type is None else clean(exc_type, 100))
        return reply.get("value")

    def _call_reply(self, what: str, op: str, payload: dict, meta: bool = False,
                    backward: Backward | None = None) -> Call:
        """The reply to a call: meta tensors pass only where the grader sent meta inputs, and
        gradients only by the names `backward` asked for."""
        value = self._request(what, op, payload, self.limits.call_s)
        if not isinstance(value, dict):
            raise StudentCodeError("bad_reply", self._malformed(what))
        inputs_after = vetted(value.get("inputs_after", ()), what, meta=meta)
        if not all(isinstance(t, torch.Tensor) for t in inputs_after):
            raise StudentCodeError("bad_reply", self._malformed(what))
        call = Call(vetted(value.get("value"), what, meta=meta), inputs_after)
        if backward is None:
            return call
        grads, failure = value.get("grads"), value.get("backward_failure")
        if failure is not None:
            call.backward_failure = _from_worker(failure, self._malformed(what))
        elif grads is not None:
            names = set(backward.inputs.values()) | set(backward.params)
            if not isinstance(grads, dict) or not set(grads) <= names:
                raise StudentCodeError("bad_reply", self._malformed(what))
            call.grads = {k: vetted(v, what) for k, v in grads.items()}
            if not all(g is None or isinstance(g, torch.Tensor) for g in call.grads.values()):
                raise StudentCodeError("bad_reply", self._malformed(what))
        return call

    # -- the Submission operations
    def call(self, name: str, *args: Any, **kwargs: Any) -> Call:
        return self._call_reply(name, "call", {"name": name, "args": args, "kwargs": kwargs},
                                meta=on_meta((args, kwargs)))

    def call_backward(self, name: str, args: tuple, kwargs: dict, backward: Backward) -> Call:
        return self._call_reply(name, "call", {"name": name, "args": args, "kwargs": kwargs,
                                               "backward": fields_of(backward)},
                                backward=backward)

    def run_module(self, run: ModuleRun) -> Call:
        return self._call_reply(f"{run.class_name}", "run_module", {"run": run_to_dict(run)},
                                meta=on_meta(run.forward_args), backward=run.backward)

    def check_constructor(self, name: str, *args: Any, **kwargs: Any) -> None:
        self._request(name, "check_constructor", {"name": name, "args": args,
                                                  "kwargs": kwargs}, self.limits.call_s)

    def run_job(self, job: str, what: Message | str, **kwargs: Any) -> Any:
        """Run a kit job in the worker, under `limits.speed_s`; its reply is untrusted data:
        whoever asked checks its form."""
        return self._request(what, "run_job", {"job": job, "kwargs": kwargs},
                             self.limits.speed_s)
