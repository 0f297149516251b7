"""The pipe between the grader and its worker: length-prefixed messages that carry values only.

A message is an 8-byte length, then a pickle of plain Python values (numbers, text, bytes,
lists, tuples, dicts, sets) and tensors, then the bytes of the tensors' storages. Nothing else
crosses, never code, whichever side wrote it: the writer refuses any other object, and the
reader's unpickler knows no global but torch's dtypes, `torch.Size` and `torch.device`, and
rebuilds each tensor itself from its dtype, shape, strides and storage (views of one storage
stay views of one storage, and a tensor sent twice arrives as one object: `mha(x, x, x)`). It
is a few times faster than `torch.save` with `torch.load(weights_only=True)`, and as strict.
Reads and writes are bounded by a deadline; a reader that gives up (TimeoutError), meets the
end of the pipe or an impossible length (EOFError) leaves the pipe out of step, so its worker
is not asked again.

What a hostile writer can make the reader do is bounded too: the pickle is at most
MAX_PICKLE bytes (a few kilobytes in practice), with no opcode that writes the memo at a
chosen index, so the values it builds take tens of megabytes at most, and a few seconds
(hash collisions: past the deadline, that is a timeout); a tensor must fit its storage, and
all of a message's tensors together count at most MAX_MESSAGE bytes.
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import io
import os
import pickle
import pickletools
import select
import struct
import time
from typing import Any

import torch

from .protocol import Backward, ModuleRun

HEADER = struct.Struct("!Q")
_COUNTS = struct.Struct("!QI")  # after the header: the pickle's length, the storages' count
MAX_MESSAGE = 256 * 2**20
MAX_PICKLE = 2**18  # the values around the tensors' bytes: at most a few kilobytes in practice
TENSOR_COST = 2**10  # bytes each tensor counts against a message's room, however small
# Memo writes at a chosen index: the C unpickler sizes its memo by the highest index, so 21
# bytes can ask for a gigabyte. The writer only appends to the memo (MEMOIZE).
_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
TEXT_KEEP = 1000  # characters of any text from the worker shown to anyone (a message: 4x)


_DTYPES = {str(d).removeprefix("torch."): d for d in vars(torch).values()
           if isinstance(d, torch.dtype)}
# The classes a reader may call: none of them allocates more than its arguments hold.
# (bytearray, set and frozenset have opcodes of their own in protocol 5: no call needed.)
_CLASSES = {("torch", "Size"): torch.Size, ("torch", "device"): torch.device,
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("builtins", "complex"): complex, ("builtins", "slice"): slice}
_VALUES = (torch.dtype, *_CLASSES.values(), bytearray, set, frozenset)
_DEVICES = frozenset({"cpu", "meta", "cuda"})


class _Pickler(pickle.Pickler):
    """Tensors go by reference to the storages that follow the pickle; other objects that are
    not plain values are refused."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=5)
        self.storages: list[bytes] = []
        self._index: dict[tuple, int] = {}
        self._resolved: list[torch.Tensor] = []  # alive while pickling: their storages' keys
        self._sent: dict[int, int] = {}  # id() of each tensor sent -> its place in the message

    def persistent_id(self, obj: Any) -> tuple | None:
        if not isinstance(obj, torch.Tensor):
            return None
        if id(obj) in self._sent:  # the same tensor again (self-attention's query, key, value)
            return ("same", self._sent[id(obj)])
        self._sent[id(obj)] = len(self._sent)
        self._resolved.append(obj)  # alive while pickling: its id stays its own
        if type(obj) not in (torch.Tensor, torch.nn.Parameter):
            raise pickle.PicklingError(f"a tensor subclass, {type(obj).__name__}")
        if obj.layout != torch.strided or obj.is_quantized or obj.is_nested:
            raise pickle.PicklingError(f"a {obj.layout} tensor")
        obj = obj.resolve_conj().resolve_neg()
        self._resolved.append(obj)  # a copy freed now would leave its address to the next one
        device = obj.device.type
        if device not in _DEVICES:
            raise pickle.PicklingError(f"a tensor on {obj.device}")
        index = None
        if device != "meta":
            storage = obj.untyped_storage()
            key = (device, storage.data_ptr(), storage.nbytes())
            index = self._index.get(key)
            if index is None:
                data = storage if device == "cpu" else storage.cpu()
                index = self._index[key] = len(self.storages)
                self.storages.append(ctypes.string_at(data.data_ptr(), data.nbytes()))
        return ("tensor", index, str(obj.dtype).removeprefix("torch."), tuple(obj.shape),
                obj.stride(), obj.storage_offset(), str(obj.device), obj.requires_grad,
                isinstance(obj, torch.nn.Parameter))

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, _VALUES) or type(obj) is type and obj in _VALUES:
            return NotImplemented  # pickled as usual, by the reduce of its type
        raise pickle.PicklingError(f"not a plain value: {type(obj).__name__}")


class _Unpickler(pickle.Unpickler):
    """Knows torch's dtypes, `torch.Size`, `torch.device` and a few builtins; rebuilds tensors
    from the storages after the pickle, refusing any that does not fit its storage."""

    def __init__(self, file: io.BytesIO, storages: list[torch.UntypedStorage]) -> None:
        super().__init__(file)
        self.storages = storages
        self.room = MAX_MESSAGE  # bytes that the message's tensors may span, all together
        self.moved: dict[tuple[int, str], torch.UntypedStorage] = {}  # (index, device): copy
        self.made: list[torch.Tensor] = []  # in the message's order: ("same", i) is made[i]

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" and name in _DTYPES:
            return _DTYPES[name]
        if (module, name) in _CLASSES:
            return _CLASSES[module, name]
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed")

    def persistent_load(self, pid: Any) -> torch.Tensor:
        if type(pid) is tuple and len(pid) == 2 and pid[0] == "same":
            if type(pid[1]) is not int or not 0 <= pid[1] < len(self.made):
                raise pickle.UnpicklingError("not a tensor sent before")
            return self.made[pid[1]]
        self.made.append(self._tensor(pid))
        return self.made[-1]

    def _tensor(self, pid: Any) -> torch.Tensor:
        kind, index, dtype, shape, stride, offset, device, requires_grad, parameter = pid
        dtype = _DTYPES[dtype]
        if (kind != "tensor" or torch.device(device).type not in _DEVICES
                or len(shape) != len(stride)
                or not all(type(n) is int and n >= 0 for n in (*shape, *stride, offset))):
            raise pickle.UnpicklingError("not a tensor")
        self.room -= TENSOR_COST + _nbytes(shape, dtype.itemsize, self.room)
        if self.room < 0:  # e.g. broadcast views of one value, each as large as a message
            raise pickle.UnpicklingError("tensors too large to hold")
        if index is None:
            tensor = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        else:
            storage = self.storages[index]
            if _span(shape, stride, offset) * dtype.itemsize > storage.nbytes():
                raise pickle.UnpicklingError("a tensor larger than its storage")
            if device != "cpu":  # one copy per storage: views of it stay views on the GPU
                if (index, device) not in self.moved:
                    self.moved[index, device] = storage_to(storage, device)
                storage = self.moved[index, device]
            tensor = torch.empty(0, dtype=dtype, device=storage.device)
            tensor = tensor.set_(storage, offset, shape, stride)
        if parameter:
            return torch.nn.Parameter(tensor, requires_grad=requires_grad)
        return tensor.requires_grad_(requires_grad) if requires_grad else tensor


def storage_to(storage: torch.UntypedStorage, device: str) -> torch.UntypedStorage:
    """A copy of a storage on `device` (a GPU): the whole storage, so that every view of it
    keeps its strides and offset, and views of one storage share one copy."""
    return storage.to(device=device)


def _nbytes(shape: tuple, itemsize: int, limit: int) -> int:
    """The bytes of a tensor of this shape, or more than `limit`: it stops there, so that huge
    sizes cost no giant product."""
    if 0 in shape:
        return 0
    count = itemsize
    for size in shape:
        count *= size
        if count > limit:
            break
    return count


def _span(shape: tuple, stride: tuple, offset: int) -> int:
    """Elements of storage a view reaches, from the start: none for an empty view."""
    if 0 in shape:
        return 0
    return offset + 1 + sum((size - 1) * step for size, step in zip(shape, stride))


def encode(obj: Any) -> bytes:
    """One message: header, pickle, then each storage with its length. Raises
    pickle.PicklingError for an object that is not a plain value or a tensor, or too many."""
    buffer = io.BytesIO()
    pickler = _Pickler(buffer)
    pickler.dump(obj)
    if buffer.tell() > MAX_PICKLE:
        raise pickle.PicklingError("too many values to send")
    return frame(buffer.getvalue(), pickler.storages)


def frame(pickled: bytes, storages: list[bytes]) -> bytes:
    """The message of a pickle and the storages its tensors refer to, by index."""
    parts = [_COUNTS.pack(len(pickled), len(storages)), pickled]
    for data in storages:
        parts += [HEADER.pack(len(data)), data]
    body = b"".join(parts)
    return HEADER.pack(len(body)) + body


def decode(data: bytes) -> Any:
    """The value of one message body; any malformed or disallowed content raises."""
    view = memoryview(data)
    size, count = _COUNTS.unpack_from(view)
    if size > MAX_PICKLE:
        raise ValueError("too many values")
    pickled, at = view[_COUNTS.size:_COUNTS.size + size], _COUNTS.size + size
    storages = []
    for _ in range(count):
        (length,) = HEADER.unpack_from(view, at)
        at += HEADER.size
        if at + length > len(view):
            raise ValueError("truncated")
        chunk = bytearray(view[at:at + length])
        storages.append(torch.frombuffer(chunk, dtype=torch.uint8).untyped_storage()
                        if length else torch.UntypedStorage(0))
        at += length
    if at != len(view) or len(pickled) != size:
        raise ValueError("wrong lengths")
    file = io.BytesIO(pickled)
    for opcode, _, _ in pickletools.genops(file):
        if opcode.name in _MEMO_PUTS:
            raise ValueError(f"opcode {opcode.name}")
    file.seek(0)
    return _Unpickler(file, storages).load()


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
    """One message. TimeoutError (also for one that took past the deadline to rebuild),
    EOFError, or ValueError for anything unreadable."""
    (size,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if size > MAX_MESSAGE:  # left unread: the pipe is out of step, as after a crash
        raise EOFError
    data = _read_exactly(fd, size, deadline)
    try:
        value = decode(data)
    except Exception as err:  # not a safe payload: an object the unpickler refuses, or junk
        raise ValueError(type(err).__name__) from None
    if time.monotonic() > deadline:  # values made slow to build (keys whose hashes collide)
        raise TimeoutError
    return value


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


def fields_of(obj: Any) -> dict[str, Any]:
    """A dataclass's fields, as they are: `dataclasses.asdict` would copy each tensor, and a
    tensor passed three times (`mha(x, x, x)`) would arrive as three."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


# dtypes travel as names: ModuleRun holds a torch.dtype.
def run_to_dict(run: ModuleRun) -> dict:
    return {**fields_of(run), "dtype": str(run.dtype).removeprefix("torch."),
            "backward": None if run.backward is None else fields_of(run.backward)}


def run_from_dict(fields: dict) -> ModuleRun:
    return ModuleRun(**{**fields, "dtype": getattr(torch, fields["dtype"]),
                        "backward": backward_from_dict(fields.get("backward"))})


def backward_from_dict(fields: dict | None) -> Backward | None:
    """A `Backward` from `fields_of` (the grader's request; None: no backward)."""
    return None if fields is None else Backward(**fields)
