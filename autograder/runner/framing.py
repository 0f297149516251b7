"""The pipe between the grader and its worker: length-prefixed `torch.save` messages.

Each message is an 8-byte length, then a `torch.save` payload that the reader loads with
`weights_only=True`: tensors and plain Python values can cross, never code, whichever side
wrote it. Reads and writes are bounded by a deadline; a reader that gives up (TimeoutError),
meets the end of the pipe or an impossible length (EOFError) leaves the pipe out of step, so
its worker is not asked again.
"""

from __future__ import annotations

import dataclasses
import io
import os
import select
import struct
import time
from typing import Any

import torch

from .protocol import Backward, ModuleRun

HEADER = struct.Struct("!Q")
MAX_MESSAGE = 256 * 2**20
TEXT_KEEP = 1000  # characters of any text from the worker shown to anyone (a message: 4x)


def encode(obj: Any) -> bytes:
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


def receive(fd: int, deadline: float) -> Any:
    """One message. TimeoutError, EOFError, or ValueError for anything unreadable."""
    (size,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if size > MAX_MESSAGE:  # left unread: the pipe is out of step, as after a crash
        raise EOFError
    data = _read_exactly(fd, size, deadline)
    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except Exception as err:  # not a safe payload: an object weights_only refuses, or junk
        raise ValueError(type(err).__name__) from None


def write_all(fd: int, data: bytes, deadline: float | None = None) -> None:
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


def clean(text: Any, keep: int = TEXT_KEEP) -> str:
    """Text from the worker, safe to show: printable, bounded."""
    text = str(text)[:keep]
    return "".join(c if c.isprintable() or c in "\n\t" else "?" for c in text)


# dtypes travel as names: ModuleRun holds a torch.dtype.
def run_to_dict(run: ModuleRun) -> dict:
    fields = dataclasses.asdict(run)
    fields["dtype"] = str(run.dtype).removeprefix("torch.")
    return fields


def run_from_dict(fields: dict) -> ModuleRun:
    return ModuleRun(**{**fields, "dtype": getattr(torch, fields["dtype"]),
                        "backward": backward_from_dict(fields.get("backward"))})


def backward_from_dict(fields: dict | None) -> Backward | None:
    """A `Backward` from `dataclasses.asdict` (the grader's request; None: no backward)."""
    return None if fields is None else Backward(**fields)
