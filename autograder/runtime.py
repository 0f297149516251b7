"""Where and how torch runs: the default device, and one thread for small tensors."""

from __future__ import annotations

import contextlib
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
