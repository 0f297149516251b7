"""Student code behind bubblewrap (`bwrap`): it writes only to its scratch folders and has no
network.

`wrap(argv, binds)` is `argv` run by bwrap in new mount, network and IPC namespaces: the whole
filesystem read-only; /tmp and /run empty and read-only; a /dev of its own (null, zero,
random, a pty, the GPU's devices, a small private /dev/shm); a new /proc; and writable only
the folders in `binds`. The network namespace has nothing but its own loopback. Processes stay
in the caller's pid namespace (the grader adopts its workers), with every capability dropped,
but CAP_SETUID and CAP_SETGID where asked (a root grader's zygote, to drop its workers to
`nobody`; `drop_capabilities` then drops them in a worker that stays root).

Where bwrap is missing or cannot build its namespaces (the probe runs it once per process),
`wrap` returns None, code runs unprotected, and `unprotected()` says so, for the warning.
MHA_KIT_SANDBOX=off turns it off (debugging); MHA_KIT_BWRAP names another bwrap binary.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..messages import Message, msg

SANDBOX_ENV = "MHA_KIT_SANDBOX"
BWRAP_ENV = "MHA_KIT_BWRAP"
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri", "/dev/kfd")
SHM_BYTES = 64 * 2**20  # the private /dev/shm: semaphores and small shared buffers


def without_grader_paths(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for student code: not TORCHINDUCTOR_CACHE_DIR, which torch sets in a process that
    used its compiler (a folder in /tmp, where a sandbox cannot write)."""
    return {k: v for k, v in env.items() if k != "TORCHINDUCTOR_CACHE_DIR"}


def _bwrap() -> str | None:
    return shutil.which(os.environ.get(BWRAP_ENV) or "bwrap")


def _kept_visible(writable: Sequence[Path] = ()) -> list[str]:
    """What the sandboxed Python needs that lies in /tmp or /run, which the sandbox empties:
    its installation, its import path, the kit (a checkout or a venv in /tmp). Each as named
    and as resolved (a venv in /tmp may be a link to one elsewhere, and Python runs by the
    name). Of a checkout, only its `autograder` package: the checkout is the nbgrader course
    folder too (gradebook.db, every submission). Not the working folder, which `python -m`
    puts on the import path (a course in /tmp, say), nor a folder that holds the temporary
    folder or one of the `writable` folders: where the student's own folder is, the other
    students' folders are too (a kernel's, in the course that nbgrader put on the import
    path). Outermost folders only; they stay read-only."""
    cwd, kit = os.getcwd(), Path(__file__).parents[1]
    needed = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(kit),
              *(p for p in sys.path if p and os.path.abspath(p) != cwd
                and Path(p).resolve() != kit.parent.resolve())}
    named = {Path(os.path.abspath(p)) for p in needed if os.path.isdir(p)}
    own = [Path(tempfile.gettempdir()).resolve(), *(Path(w).resolve() for w in writable)]
    kept: list[str] = []
    for path in sorted(p for p in named | {p.resolve() for p in named}
                       if p.parts[1:2] in (("tmp",), ("run",))
                       and not any(w.is_relative_to(p) for w in own)):
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(str(path))
    return kept


def _options(binds: Sequence[tuple[Path, Path]], setuid: bool) -> list[str]:
    devices = [arg for path in sorted({p for g in GPU_DEVICES for p in glob.glob(g)})
               for arg in ("--dev-bind", path, path)]
    kept = [arg for path in _kept_visible([dest for _, dest in binds])
            for arg in ("--ro-bind", path, path)]
    writable = [arg for source, dest in binds for arg in ("--bind", str(source), str(dest))]
    caps = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if setuid else []
    return ["--ro-bind", "/", "/", "--dev", "/dev", *devices,
            "--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--proc", "/proc",
            "--tmpfs", "/tmp", "--tmpfs", "/run", *kept, *writable, "--remount-ro", "/tmp",
            "--remount-ro", "/run", "--unshare-net", "--unshare-ipc", "--die-with-parent",
            "--cap-drop", "ALL", *caps]


@functools.cache
def _probe(bwrap: str, as_root: bool) -> str | None:
    """None if this bwrap builds the sandbox here; else what went wrong."""
    try:
        run = subprocess.run([bwrap, *_options([], as_root), "--", "true"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{type(err).__name__}: {err}"
    return None if run.returncode == 0 else (run.stderr.strip()[-300:]
                                             or f"exit code {run.returncode}")


def unprotected() -> Message | None:
    """Why student code runs without the sandbox here, as the warning to show; None if it
    runs inside it."""
    if os.environ.get(SANDBOX_ENV, "").strip().lower() == "off":
        reason = msg("sandbox.disabled", variable=SANDBOX_ENV)
    elif (bwrap := _bwrap()) is None:
        reason = msg("sandbox.missing", bwrap=os.environ.get(BWRAP_ENV) or "bwrap")
    elif (error := _probe(bwrap, os.geteuid() == 0)) is not None:
        reason = msg("sandbox.broken", bwrap=bwrap, error=error)
    else:
        return None
    return msg("sandbox.off", reason=reason, variable=SANDBOX_ENV)


def protection() -> Message:
    """What protects a grading here, in one line: the sandbox, or the warning that nothing does."""
    return unprotected() or msg("sandbox.on", bwrap=_bwrap())


def wrap(argv: Sequence[str], binds: Sequence[tuple[Path, Path]], *, setuid: bool = False,
         chdir: Path | None = None, info_fd: int | None = None,
         new_session: bool = False) -> list[str] | None:
    """`argv` in the sandbox, with each (source, dest) of `binds` writable at dest; None where
    there is no sandbox. `setuid`: keep CAP_SETUID and CAP_SETGID (root only). `info_fd`: bwrap
    writes {"child-pid": ...} there. `new_session`: the command leads a session of its own."""
    if unprotected() is not None:
        return None
    bwrap = _bwrap()
    assert bwrap is not None
    extra = [*(["--chdir", str(chdir)] if chdir else []),
             *(["--info-fd", str(info_fd)] if info_fd is not None else []),
             *(["--new-session"] if new_session else [])]
    return [bwrap, *_options(binds, setuid and os.geteuid() == 0), *extra, "--", *argv]


def drop_capabilities() -> None:
    """Drop every capability this process holds (capset), where it holds any (Linux)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: twice, all zero
    if ctypes.CDLL(None, use_errno=True).capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed: cannot drop capabilities")


_scratch: Path | None = None


def scratch() -> Path:
    """This process's folder for its workers' folders, the one place the sandbox lets them
    write: made on first use in the temporary folder of that moment, removed at exit. Open to
    other accounts for traversal, so that a worker running as `nobody` reaches its own."""
    global _scratch
    if _scratch is None:
        _scratch = Path(tempfile.mkdtemp(prefix="mha-kit-scratch-"))
        os.chmod(_scratch, 0o711)
    return _scratch


def _remove_scratch() -> None:
    if _scratch is not None:
        shutil.rmtree(_scratch, ignore_errors=True)


def _forget_in_child() -> None:
    """A fork of the grader makes its own scratch folder, and leaves this one alone."""
    global _scratch
    _scratch = None


atexit.register(_remove_scratch)
os.register_at_fork(after_in_child=_forget_in_child)
