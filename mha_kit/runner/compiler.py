"""Torch's compiler in a worker, which may run a C++ compiler but no Python and start no
thread (`sandbox.executables`, `policy.refuse_starts`): inductor compiles on the calling
thread, and checks that a library built with the CPU's vector instructions loads by loading it
in the worker itself, not in a child Python."""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.util
import sys
from typing import Any

VECTOR_CHECK = "torch._inductor.cpu_vec_isa"
CONFIG = "torch._inductor.config"


def _load_here(self: Any, output_path: str) -> bool:
    """`VecISA._probe_load` without a child process: whether the library loads."""
    try:
        ctypes.CDLL(output_path)
    except OSError:
        return False
    return True


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Puts `_load_here` in place of inductor's probe when the module is first imported
    (importing inductor costs a second: never before it is used)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != VECTOR_CHECK:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            module.VecISA._probe_load = _load_here

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def start_no_pythons() -> None:
    """From now on, in this process, inductor compiles on this thread (TORCHINDUCTOR_COMPILE_
    THREADS=1, which the worker's environment sets, is read when its config is imported: torch's
    meta ops imported it in the zygote already) and its vector check starts no child Python
    (patched now where imported, else on import)."""
    config = sys.modules.get(CONFIG)
    if config is not None:
        config.compile_threads = 1
    module = sys.modules.get(VECTOR_CHECK)
    if module is not None:
        module.VecISA._probe_load = _load_here
    else:
        sys.meta_path.insert(0, _PatchOnImport())
