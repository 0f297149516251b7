"""Where and how torch runs: the default device, and one thread for small tensors."""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from collections.abc import Iterator


def default_device() -> str:
    """cuda when a GPU is there, else cpu."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One torch thread: a fixed count for timings, and for tiny tensors, where waking a pool
    of threads for each op costs more than the op itself."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@functools.cache
def freeze_imports() -> None:
    """Once per grader process: what it has imported so far (some 200,000 objects once torch and
    the kit are in, which live as long as the process) moved out of the garbage collector's passes
    (`gc.freeze`), so that the full collections grading sets off do not walk them each time
    (`mha-kit grade` of six files, one job: about 8% less CPU). Graders call it
    (`grading.batch.loaded_worker`), never a student's kernel."""
    import gc

    gc.freeze()


def triton_interpret(device: str) -> str:
    """TRITON_INTERPRET for kernels run on `device`: Triton's interpreter where no GPU runs
    them, compiled kernels on a GPU."""
    return "0" if device.startswith("cuda") else "1"


def triton_interpreting() -> bool:
    """Whether TRITON_INTERPRET asks for Triton's interpreter in this process, read as Triton
    reads it."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on")


@functools.cache
def libcuda_folder() -> str | None:
    """The folder of libcuda.so.1 as the dynamic loader's cache lists it (`ldconfig -p`), or
    None: what Triton asks /sbin/ldconfig for on a GPU, which a confined worker may not run."""
    try:
        listed = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True,
                                timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = [line.split()[-1] for line in listed.splitlines() if "libcuda.so.1" in line]
    return os.path.dirname(found[0]) if found else None


def triton_environment(device: str, folder: str) -> dict[str, str]:
    """The variables Triton reads in a process that runs student kernels on `device`: the
    interpreter's switch (read when a kernel is decorated, so before the student's code
    loads), its caches and its home in `folder`, the process's scratch folder, the one place
    a sandboxed worker may write; and on a GPU where libcuda is (TRITON_LIBCUDA_PATH, unless
    set already), which Triton would otherwise ask /sbin/ldconfig, a program a confined worker
    may not run."""
    env = {"TRITON_INTERPRET": triton_interpret(device), "TRITON_HOME": folder,
           "TRITON_CACHE_DIR": os.path.join(folder, ".triton", "cache")}
    libcuda = device.startswith("cuda") and (os.environ.get("TRITON_LIBCUDA_PATH")
                                             or libcuda_folder())
    if libcuda:
        env["TRITON_LIBCUDA_PATH"] = libcuda
    return env


def triton_as_configured() -> None:
    """Triton's Python modules imported again where they were imported under another
    TRITON_INTERPRET (torch's compiler imports Triton, and the zygote's warm-up imports the
    compiler): its library's `@triton.jit` functions (tl.sum, tl.max) are decorated at import,
    and an interpreted kernel cannot call a compiled one, nor the other way round. Its
    compiled core (`triton._C`) stays loaded."""
    triton = sys.modules.get("triton")
    if triton is None:
        return
    interpreted = type(triton.language.standard.sum).__name__ == "InterpretedFunction"
    if interpreted == triton_interpreting():
        return
    for name in [m for m in sys.modules if m.partition(".")[0] == "triton"
                 and not m.startswith("triton._C")]:
        del sys.modules[name]
