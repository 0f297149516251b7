"""Kit code that runs beside the student's code (the worker, or the notebook's kernel) for the
checks that drive it through more than one call or watch it run: decoding with the KV cache,
the memory watch of FlashAttention on the `meta` device, and the count of decoding's work.
What these return is untrusted data: the checks (`gqa.py`, `flash.py`, `decode_speed.py`)
judge it, on their side of the pipe."""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ...runner.inprocess import load_weights, vetted
from ...runner.protocol import LocalSubmission, StudentCodeError
from ...runner.student_code import type_name
from ...speed.timing import CPU_CLOCK, timing_conditions
from .decode_config import DecodeConfig, decode_config, decode_input, decode_params

Tensor = torch.Tensor
DECODE_JOB = "mha_kit.assignments.llm_attention.jobs:decode"
MEMORY_JOB = "mha_kit.assignments.llm_attention.jobs:memory"
WORK_JOB = "mha_kit.assignments.llm_attention.jobs:decode_work"
MODULE = "GroupedQueryAttention"
# Ops that read a tensor's values into Python (`.item()`, `int(t)`, `if t:`): meta tensors
# have none, so code that does cannot be measured there.
READS_VALUES = ("aten::_local_scalar_dense",)
_ABSENT = object()  # a class that inherits its `update`


def decode(sub: LocalSubmission, *, init: tuple, params: dict[str, Tensor],
           chunks: list[Tensor], dtype: torch.dtype) -> dict[str, Any]:
    """The module run twice over every token without a cache, then over the chunks one after
    the other through one `KVCache`: every output, len(cache) after each chunk, what the
    module's last `cache.update` gave back ("held": None if it never called it), the heads
    of the keys passed to `update`, and the length of a new cache made after (None where
    len() of it fails)."""
    module = sub.construct(MODULE, *init)
    device = chunks[0].device

    def prepare() -> None:
        with torch.no_grad():
            module.to(device=device, dtype=dtype)
            load_weights(module, MODULE, params)
        module.eval()

    sub.guard(MODULE, prepare)
    forward = f"{MODULE}.forward"
    whole = torch.cat(chunks, dim=1)  # (B, T, E)
    with torch.no_grad():
        twice = [vetted(sub.guard(forward, lambda: module(whole.clone())), forward)
                 for _ in range(2)]
        cache = sub.guard("KVCache", sub.lookup("KVCache"))
        steps, lengths, updates, heads = [], [], [], []
        with _updates_noted(cache, updates, heads):
            for chunk in chunks:
                steps.append(vetted(sub.guard(forward, lambda c=chunk: module(
                    c.clone(), cache=cache)), forward))
                lengths.append(sub.guard("len(cache)", lambda: len(cache)))
        fresh = sub.guard("KVCache", sub.lookup("KVCache"))
        try:
            fresh_length = sub.guard("len(cache)", lambda: len(fresh))
        except StudentCodeError:  # len() of an empty cache is not asked for
            fresh_length = None
    held = _held(updates[-1]) if updates else None
    return {"twice": twice, "steps": steps, "lengths": lengths, "held": held, "heads": heads,
            "fresh_length": fresh_length}


def _held(given: Any) -> tuple[Tensor, Tensor] | str:
    """A pair of tensors, as it is (vetted); anything else by the name of its type."""
    if type(given) in (tuple, list) and len(given) == 2 and all(
            type(t) in (Tensor, nn.Parameter) for t in given):
        return vetted(given, "KVCache.update")
    return type_name(given)


@contextlib.contextmanager
def _updates_noted(cache: Any, noted: list[Any], heads: list[int]) -> Iterator[None]:
    """While active, what each call of `cache.update` gives back is appended to `noted`: the
    keys and values the cache holds, as the student's module sees them; and the heads of
    each (B, heads, t, D) key it is passed, to `heads`. The method is wrapped on the cache's
    class (a class with `__slots__` takes no attribute), and put back."""
    kind = type(cache)
    own = vars(kind).get("update", _ABSENT)
    update = inspect.getattr_static(kind, "update", None)  # a function, or any descriptor
    if update is None:
        yield
        return

    def noting(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self is cache and args and type(args[0]) is Tensor and args[0].dim() == 4:
            heads.append(args[0].shape[1])
        bound = update.__get__(self, kind) if hasattr(update, "__get__") else update
        given = bound(*args, **kwargs)
        if self is cache:
            noted.append(given)
        return given

    try:
        kind.update = noting
    except (TypeError, AttributeError):  # a built-in type, a class that takes no attribute
        yield
        return
    try:
        yield
    finally:
        if own is _ABSENT:
            del kind.update
        else:
            kind.update = own


class SizeWatch(TorchDispatchMode):
    """The largest tensor any op makes or grows, counted by the memory it owns (its storage's
    elements: an expanded view costs what it expands, and a tensor grown by `resize_` or
    written by `out=` what it holds after); the most elements the tensors it made held at once
    (blocks kept in a list add up); and whether values were read."""

    def __init__(self) -> None:
        super().__init__()
        self.largest, self.shape, self.op, self.reads_values = 0, (), "", False
        self.live = self.peak = 0
        self.owned: dict[int, int] = {}  # storage -> its elements, as this watch last saw it

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        if func._schema.name in READS_VALUES:
            self.reads_values = True
        out = func(*args, **(kwargs or {}))
        given = {t.untyped_storage()._cdata for t in tree_leaves((args, kwargs))
                 if type(t) is Tensor}
        for t in tree_leaves(out):
            if type(t) is not Tensor or not t.element_size():
                continue
            key, owned = t.untyped_storage()._cdata, _owned(t)
            if owned > self.largest:
                self.largest, self.shape, self.op = owned, tuple(t.shape), func._schema.name
            before = self.owned.get(key)
            if before is None and key in given:  # an input's memory, not this code's
                continue
            self.live += owned - (before or 0)  # new memory, or memory grown in place
            self.peak = max(self.peak, self.live)
            if before is None:
                weakref.finalize(t, self._freed, key)
            self.owned[key] = max(owned, before or 0)
        return out

    def _freed(self, key: int) -> None:
        self.live -= self.owned.pop(key, 0)

    def report(self) -> dict[str, Any]:
        return {"largest": self.largest, "shape": self.shape, "op": self.op, "peak": self.peak}


def _owned(t: Tensor) -> int:
    """The elements of the memory a tensor holds: an expanded view costs what it expands."""
    return t.untyped_storage().nbytes() // t.element_size() if t.element_size() else 0


def _tensors_in(value: Any, where: str, depth: int = 0) -> list[tuple[str, Tensor]]:
    """(where, tensor) for each tensor `value` holds: in containers, in the closure and
    defaults of a function (a lambda that captured the scores), in an object's attributes."""
    if type(value) is Tensor or isinstance(value, nn.Parameter):
        return [(where, value)]
    if depth >= 4:
        return []
    if isinstance(value, (list, tuple)):
        parts = [(f"{where}[{i}]", v) for i, v in enumerate(value)]
    elif isinstance(value, dict):
        parts = [(f"{where}[{k!r}]", v) for k, v in value.items()]
    elif callable(value) and hasattr(value, "__code__"):
        parts = [(f"{where} (captured)", cell.cell_contents)
                 for cell in value.__closure__ or () if cell.cell_contents is not value]
        parts += [(f"{where} (default)", d) for d in value.__defaults__ or ()]
    elif hasattr(value, "__dict__") and not isinstance(value, (type, nn.Module)):
        parts = [(f"{where}.{k}", v) for k, v in vars(value).items()]
    else:
        return []
    return [found for w, v in parts for found in _tensors_in(v, w, depth + 1)]


def kept_in_ctx(out: Tensor, counted: set[int]) -> dict[str, Any]:
    """What the autograd graph of `out` keeps beside its saved tensors: the tensors a custom
    Function put on `ctx` as attributes (directly, in a list, in a closure), each storage
    once and none of `counted`'s; the largest by where it is kept. And whether the graph has
    a custom Function at all."""
    elements, largest, function = 0, {"where": "", "shape": (), "elements": 0}, False
    nodes, seen = [out.grad_fn], set()
    while nodes:
        node = nodes.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            function = True
            kept = [found for attr, value in vars(node).items()
                    for found in _tensors_in(value, f"ctx.{attr}")]
            for where, t in kept:
                key = t.untyped_storage()._cdata
                if key not in counted:
                    counted.add(key)
                    elements += _owned(t)
                    if _owned(t) > largest["elements"]:
                        largest = {"where": where, "shape": tuple(t.shape),
                                   "elements": _owned(t)}
        nodes.extend(next_node for next_node, _ in node.next_functions)
    return {"elements": elements, "largest": largest, "function": function}


def memory(sub: LocalSubmission, *, name: str, q_shape: tuple[int, ...],
           k_shape: tuple[int, ...], is_causal: bool, block_size: int, backward: bool,
           inputs: tuple[Tensor, Tensor, Tensor] | None = None) -> dict[str, Any]:
    """`name`(q, k, v) on meta tensors of these shapes, or on the real `inputs`: the largest
    tensor made in forward (and, with `backward`, in backward, how many elements the autograd
    graph saves for it and what a custom Function keeps on `ctx`), and with `inputs` what it
    returned (its values are checked: the code measured is the code graded); or
    {"reads_values": True} when the code reads values, which meta tensors do not have."""
    q, k, v = (t.detach().clone().requires_grad_(backward) for t in inputs) if inputs else (
        torch.randn(shape, device="meta", requires_grad=backward)
        for shape in (q_shape, k_shape, k_shape))
    function, watch, saved, counted = sub.lookup(name), SizeWatch(), [0], set()

    def pack(t: Tensor) -> Tensor:
        if t.untyped_storage()._cdata not in counted:  # a tensor saved twice costs once
            counted.add(t.untyped_storage()._cdata)
            saved[0] += _owned(t)
        return t

    def run() -> Any:
        with watch:
            return function(q, k, v, is_causal=is_causal, block_size=block_size)

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                torch.set_grad_enabled(backward):
            out = sub.guard(name, run)
    except StudentCodeError:
        if watch.reads_values:
            return {"reads_values": True}
        raise
    result: dict[str, Any] = {"forward": watch.report(), "saved": saved[0]}
    if inputs:
        result["out"] = vetted(out, name)
    if backward:
        if type(out) is not Tensor or not out.requires_grad:
            return {**result, "backward": None}
        result["in_ctx"] = sub.guard(name, lambda: kept_in_ctx(out, counted), watch=False)
        watch = SizeWatch()

        def run_backward() -> None:
            with watch:
                out.backward(torch.ones_like(out))

        sub.guard(f"{name} (backward)", run_backward)
        result["backward"] = watch.report()
    return result


# --------------------------------------------------------------------------- decoding's work

# The work of an op, in one unit: a matrix product's FLOPs (2 per multiply-add), the elements
# any other op reads and writes. Products, by where their two operands start among the
# arguments (addmm's first argument is the tensor added).
PRODUCTS = {"aten::mm": 0, "aten::bmm": 0, "aten::mv": 0, "aten::dot": 0, "aten::vdot": 0,
            "aten::_int_mm": 0, "aten::addmm": 1, "aten::_addmm_activation": 1,
            "aten::baddbmm": 1, "aten::addbmm": 1, "aten::addmv": 1}
# Fused attention (forbidden in graded code, counted all the same): q, k, v (B, H, L, D).
ATTENTION = frozenset(f"aten::_scaled_dot_product_{kind}" for kind in (
    "flash_attention_for_cpu", "flash_attention", "efficient_attention", "cudnn_attention",
    "fused_attention_overrideable"))
# Ops whose work is proportional to the elements they read and write, besides those torch
# tags pointwise (and their in-place forms) and the copies of views (`*_copy`): reductions,
# normalisations, copies, indexing, padding, new tensors, in-place views. An op in no list is
# not counted but named, and the check is not scored: its work could far exceed its elements
# (a convolution, an embedding bag, a linear solve, a custom op are products in disguise).
LINEAR = frozenset(f"aten::{name}" for name in """
    sum nansum mean amax amin aminmax max min prod argmax argmin any all count_nonzero
    logsumexp logcumsumexp cumsum cumprod cummax cummin _softmax _log_softmax _safe_softmax
    var std var_mean std_mean norm linalg_vector_norm dist trace bincount histc
    native_layer_norm _fused_rms_norm native_group_norm native_batch_norm renorm
    cat stack _chunk_cat block_diag diag diag_embed copy_ _copy_from _copy_from_and_resize
    _unsafe_view repeat repeat_interleave roll rot90 flip tril triu tril_ triu_ tril_indices
    triu_indices index _unsafe_index _unsafe_masked_index index_select take gather scatter
    scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_ index_put index_put_
    _index_put_impl_ _unsafe_index_put index_copy index_copy_ index_add index_add_ index_fill
    index_fill_ index_reduce index_reduce_ masked_fill_ masked_scatter masked_scatter_
    masked_select slice_scatter select_scatter diagonal_scatter as_strided_scatter
    unsafe_chunk unsafe_split unsafe_split_with_sizes nonzero nonzero_static one_hot
    constant_pad_nd reflection_pad1d reflection_pad2d reflection_pad3d replication_pad1d
    replication_pad2d replication_pad3d pixel_shuffle pixel_unshuffle channel_shuffle
    t_ transpose_ unsqueeze_ squeeze_ as_strided_ resize_ resize_as_ _resize_output_ set_
    equal fill fill_ zero zero_ empty empty_like empty_strided empty_permuted new_empty
    new_empty_strided new_zeros new_ones new_full zeros zeros_like ones ones_like full
    full_like scalar_tensor arange linspace logspace eye lift rand rand_like randn randn_like
    randint randint_like randperm normal normal_ uniform uniform_ bernoulli bernoulli_
    native_dropout floor_divide floor_divide_ polar complex __and__ __or__ __iand__ __ior__
    __irshift__ true_divide_ glu hardswish prelu _prelu_kernel log_sigmoid_forward _add_relu addr
    """.split())


# Ops that read a tensor's metadata (its dtype, its sizes), never its data: no work.
METADATA = frozenset(f"aten::{name}" for name in """
    result_type is_same_size size sym_size stride sym_stride numel sym_numel dim
    is_floating_point is_complex is_signed
    """.split())


@functools.cache
def _linear(name: str) -> bool:
    """Whether `name`'s work is proportional to its elements: LINEAR, a copy of a view, or an
    op torch tags pointwise (any overload of it or of its out-of-place form)."""
    if name in LINEAR or name.endswith("_copy"):
        return True
    base = name.removeprefix("aten::")
    packets = [getattr(torch.ops.aten, n, None) for n in {base, base.removesuffix("_")}]
    return name != base and any(torch.Tag.pointwise in getattr(packet, overload).tags
                                for packet in packets if packet is not None
                                for overload in packet.overloads())


class WorkCount(TorchDispatchMode):
    """The work of every ATen op run while it is active, however the op was reached (a torch
    function, TorchScript; compiled code runs eagerly under a dispatch mode): FLOPs for
    products and attention, elements read and written for linear ops (`_linear`), nothing for
    views, and none for ops that touch no tensor's data (`torch.promote_types`, which takes
    and gives dtypes; `METADATA`). The names of the ops it cannot count, and of those that
    read values into Python (`.item()`, `int(t)`, `if t:`), whose work on those values it
    cannot see."""

    def __init__(self) -> None:
        super().__init__()
        self.work = 0
        self.uncounted: set[str] = set()
        self.reads: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        out = func(*args, **(kwargs or {}))
        name = func._schema.name
        if name in PRODUCTS:
            a, b = args[PRODUCTS[name]:PRODUCTS[name] + 2]
            self.work += 2 * a.numel() * (b.shape[-1] if b.dim() > 1 else 1)
        elif name in ATTENTION:
            q, k, v = args[:3]  # (B, H, Lq, D), (B, Hk, Lk, D), (B, Hk, Lk, Dv)
            self.work += 2 * q.numel() // q.shape[-1] * k.shape[-2] * (q.shape[-1] + v.shape[-1])
        elif name in READS_VALUES:
            self.reads.add(name)
        elif _linear(name):
            self.work += sum(t.numel() for t in tree_leaves((args, kwargs, out))
                             if isinstance(t, Tensor))
        elif not (func.is_view or name in METADATA or not any(
                isinstance(t, Tensor) for t in tree_leaves((args, kwargs, out)))):
            self.uncounted.add(name)
        return out


class ValueReads(TorchFunctionMode):
    """The tensor methods called while it is active that hand a tensor's values to Python or
    NumPy, by name: the dispatcher sees the single values (`WorkCount.reads`), never a
    `tolist` or `numpy`."""

    READ = frozenset({Tensor.tolist, Tensor.numpy, Tensor.__array__, Tensor.__dlpack__,
                      Tensor.item, Tensor.__int__, Tensor.__float__, Tensor.__bool__,
                      Tensor.__index__, Tensor.__complex__})

    def __init__(self) -> None:
        super().__init__()
        self.reads: set[str] = set()

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        if func in self.READ:
            self.reads.add(f"Tensor.{func.__name__}")
        return func(*args, **(kwargs or {}))


def _load(sub: LocalSubmission, cfg: DecodeConfig, seed: int) -> nn.Module:
    """The student's module, float32 on the CPU in eval mode, holding the weights of `seed`."""
    module, params = sub.construct(MODULE, cfg.E, cfg.H, cfg.Hkv), decode_params(cfg, seed)

    def prepare() -> None:
        with torch.no_grad():
            module.to(device="cpu", dtype=torch.float32)
            load_weights(module, MODULE, params)
        module.eval()

    sub.guard(MODULE, prepare, watch=False)
    return module


def decode_work(sub: LocalSubmission, *, seed: int) -> dict[str, Any]:
    """A prefill of P tokens through a fresh KVCache, then N tokens decoded one at a time,
    counted (`WorkCount`, `ValueReads`: the prefill is watched, not counted); then the same
    decoding `rounds` times more, timed and not counted, for the message. The work of the N
    tokens, the ops not counted, the ways values were read, the outputs, the seconds."""
    cfg = decode_config()
    module, cache_class = _load(sub, cfg, seed), sub.lookup("KVCache")
    x = decode_input(cfg, seed)  # (B, P + N, E)
    tokens = [x[:, cfg.P + n:cfg.P + n + 1] for n in range(cfg.N)]  # (B, 1, E) each
    count, reads = WorkCount(), ValueReads()
    outs: list[Tensor] = []
    times: dict[str, list[float]] = {"cpu": [], "wall": []}

    def counted() -> int:
        with reads, count:
            cache = cache_class()
            module(x[:, :cfg.P], cache=cache)
            prefill = count.work
            outs.extend(module(token, cache=cache) for token in tokens)
        return count.work - prefill

    def timed() -> None:
        cache = cache_class()
        module(x[:, :cfg.P], cache=cache)
        cpu, wall = CPU_CLOCK(), time.perf_counter()
        for token in tokens:
            module(token, cache=cache)
        times["cpu"].append(CPU_CLOCK() - cpu)
        times["wall"].append(time.perf_counter() - wall)

    forward = f"{MODULE}.forward"
    with timing_conditions():
        work = sub.guard(forward, counted, watch=False)
        for _ in range(cfg.rounds):
            sub.guard(forward, timed, watch=False)
    return {"work": work, "uncounted": sorted(count.uncounted),
            "reads": sorted(reads.reads or count.reads),
            "outputs": [vetted(out, forward) for out in outs], **times}
