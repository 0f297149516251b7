"""What student code may not call, and the limits it runs under. Instructors configure both,
through the kit's settings (`mha_kit.settings`: `forbidden`, `call_timeout` and the other
limits, `worker_user`).

Forbidden APIs: each entry of the `forbidden` setting is a short name from `ALIASES` or the
dotted path of any torch function, e.g. `nn.MultiheadAttention,torch.einsum`. An empty value
forbids nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import settings
from ..settings import Settings

# Short names and the torch functions that using them goes through. nn.MultiheadAttention's
# forward calls multi_head_attention_forward, or _native_multi_head_attention on its fast path.
ALIASES: dict[str, tuple[str, ...]] = {
    "nn.MultiheadAttention": (
        "torch.nn.functional.multi_head_attention_forward",
        "torch._native_multi_head_attention",
    ),
    "F.scaled_dot_product_attention": ("torch.nn.functional.scaled_dot_product_attention",),
}
# The ATen ops a short name runs as, however they are reached (torch.ops, a C binding,
# TorchScript, with torch's function modes off): the watch at the dispatcher names them by the
# short name. Every op that computes attention, its gradients or a whole attention layer is
# named, since a kernel runs the ops it calls below the dispatcher's Python key, unwatched:
# `_transformer_encoder_layer_fwd` (nn.TransformerEncoderLayer's fast path) runs the native
# MHA kernel inside, and with a zero feed-forward and an identity layer norm it is plain
# attention. The math path (a GPU's for float64) decomposes into ordinary ops before the
# dispatcher, all but `_safe_softmax`, which only it uses (a GPU showed the path unwatched:
# tests/corpus/forbidden_routes.py, "hidden"). `_fused_sdp_choice` only picks a kernel, but
# nothing else calls it. tests/test_forbidden_routes.py checks the list against torch's ops.
ATEN_OPS: dict[str, tuple[str, ...]] = {
    "nn.MultiheadAttention": tuple(f"aten::{op}" for op in (
        "_native_multi_head_attention", "_transformer_encoder_layer_fwd",
        "_triton_multi_head_attention")),
    "F.scaled_dot_product_attention": tuple(f"aten::{op}" for op in (
        "scaled_dot_product_attention", "_fused_sdp_choice", "_scaled_dot_product_attention_math",
        "_scaled_dot_product_attention_math_for_mps", "_safe_softmax",
        *(f"_scaled_dot_product_{kernel}{part}"
          for kernel in ("flash_attention", "flash_attention_for_cpu", "efficient_attention",
                         "cudnn_attention", "fused_attention_overrideable")
          for part in ("", "_backward")),
        *(f"_{kernel}_attention_{part}" for kernel in ("flash", "efficient", "cudnn")
          for part in ("forward", "backward")),
        "_flash_attention_forward_no_dropout_inplace", "_triton_scaled_dot_attention")),
}

def _resolve(dotted: str) -> Callable:
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):  # the longest importable module first
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            obj = getattr(obj, name, None)
        if callable(obj):
            return obj
    raise ValueError(f"forbidden: {dotted!r} is neither one of {', '.join(ALIASES)} "
                     "nor the dotted path of a torch function")


def forbidden_names() -> tuple[str, ...]:
    """The configured list (the `forbidden` setting)."""
    return settings.current().forbidden


def forbidden_functions(names: tuple[str, ...] | None = None) -> dict[Callable | str, str]:
    """Each forbidden torch callable, and each ATen op (by its name, "aten::...") a short name
    runs as, mapped to the name a student knows it by."""
    functions: dict[Callable | str, str] = {}
    for name in forbidden_names() if names is None else names:
        for dotted in ALIASES.get(name, (name,)):
            functions[_resolve(dotted)] = name
        functions.update(dict.fromkeys(ATEN_OPS.get(name, ()), name))
    return functions


class Refused(RuntimeError):
    """Student code started what graded code may not: threads, or processes (`refuse_starts`).
    The grader's message says which (`what`: "threads" or "processes")."""

    def __init__(self, what: str):
        super().__init__(f"graded code may not start {what}")
        self.what = what


def refuse_starts() -> None:
    """From now on Python's own ways to start a thread or a process raise Refused in this
    process (the worker, before the student's file loads): every torch call of student code
    then runs on the thread the grader watches, in its process. The kernel refuses the rest
    (`landlock.refuse_new_tasks`); a program still runs (a compiler: subprocess uses vfork)."""
    import _thread
    import threading

    def refusing(what: str) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise Refused(what)
        return refuse

    for module, name in ((_thread, "start_new_thread"), (_thread, "start_joinable_thread"),
                         (threading, "_start_new_thread"), (threading, "_start_joinable_thread")):
        if hasattr(module, name):
            setattr(module, name, refusing("threads"))
    for name in ("fork", "forkpty", "setsid", "setpgid"):
        if hasattr(os, name):
            setattr(os, name, refusing("processes"))


@dataclass(frozen=True)
class Limits:
    """How long and how much a worker may take for one submission (seconds, GiB)."""

    load_s: float = Settings.load_timeout  # running the file's top level
    call_s: float = Settings.call_timeout  # one call into student code
    check_s: float = Settings.check_timeout  # all the calls of one check (speed's run included)
    speed_s: float = Settings.speed_timeout  # the speed check's timed run
    total_s: float = Settings.total_timeout  # everything for one submission, restarts included
    memory_gib: float = Settings.memory_gib  # the worker's address space (CPU)
    disk_gib: float = Settings.disk_gib  # its files together (`disk`), and so any one file
    start_s: float = 120.0  # the worker's own start (importing torch): not the student's time

    @classmethod
    def from_settings(cls, chosen: Settings | None = None) -> Limits:
        """The limits `chosen` sets (the settings in force when None)."""
        chosen = chosen or settings.current()
        return cls(load_s=chosen.load_timeout, call_s=chosen.call_timeout,
                   check_s=chosen.check_timeout, speed_s=chosen.speed_timeout,
                   total_s=chosen.total_timeout, memory_gib=chosen.memory_gib,
                   disk_gib=chosen.disk_gib)


def _open_to_all(path: Path) -> bool:
    """Whether every account may reach this file or folder: o+x on each folder above it, and
    on it o+x (a folder, a program) or o+r (a file: pip installs torch's modules 0644)."""
    path = path.resolve()
    own = 0o001 if path.is_dir() or os.access(path, os.X_OK) else 0o004
    return bool(path.stat().st_mode & own) and all(p.stat().st_mode & 0o001
                                                   for p in path.parents)


def worker_user() -> str | None:
    """The account student code runs as: `nobody` when the grader is root (as on Gradescope)
    and Python, torch and the kit are open to all accounts; else the grader's own.

    The `worker_user` setting names another account; an empty value keeps the grader's own.
    """
    configured = settings.current().worker_user
    if configured != "auto":
        return configured or None
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    torch_spec = importlib.util.find_spec("torch")
    needed = [Path(sys.executable), Path(__file__).parent]
    needed += [Path(torch_spec.origin)] if torch_spec and torch_spec.origin else []
    return "nobody" if all(_open_to_all(p) for p in needed) else None
