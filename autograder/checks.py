"""The graded checks. One function per check id in the points table.

Each check draws inputs in the grader's process, asks the `Submission` for the student's
answer, and compares it with `oracle` here. A check either returns the fraction of its
points earned (1.0 for all of them) or raises `CheckFailed` with a message for the student.
"""

from __future__ import annotations

import math
import random
import secrets
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F

from . import oracle
from .feedback import describe_mismatch, describe_shape
from .points import CHECKS, POINTS
from .submission import Call, ModuleRun, StudentCodeError

Tensor = torch.Tensor


@dataclass
class Picture:
    """Tensors worth looking at beside a failure: what was expected and what the student gave."""

    title: str
    expected: Tensor
    got: Tensor


class CheckFailed(AssertionError):
    """A check's verdict against the student, with the message to show them."""

    def __init__(self, message: str, picture: Picture | None = None):
        super().__init__(message)
        self.picture = picture


@dataclass
class CheckResult:
    id: str
    score: float
    max_score: int
    message: str
    picture: Picture | None = None

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score


@dataclass
class Context:
    """Where and how a run of checks happens."""

    device: str = "cpu"
    salt: str = ""  # another fixed set of inputs, e.g. for nbgrader's hidden tests
    results: dict[str, CheckResult] = field(default_factory=dict)
    notes: str = ""  # a passing check's message, when it has more to say than "ok"

    def generator(self, check_id: str) -> torch.Generator:
        """A fixed seed per check: the same submission always sees the same inputs."""
        return torch.Generator().manual_seed(zlib.crc32((check_id + self.salt).encode()))


# --------------------------------------------------------------------------- tolerances

# float64, moderate logits. Wide enough for a float32 scale constant such as the seed
# tutorial's `1 / torch.sqrt(torch.tensor(d))` (relative error ~3e-8), tight enough that
# any real mistake (all of which move values by 1e-2 or more) is far outside.
TIGHT = {"rtol": 1e-6, "atol": 1e-9}
# float64 with logits around 1e3: that same 3e-8 scale error moves a logit by 3e-5, so the
# weights may move by that relative amount. An unstable softmax gives NaN, not 1e-4.
LARGE_LOGITS = {"rtol": 1e-4, "atol": 1e-7}
# float32, compared with a float64 oracle. Measured: correct implementations in every style
# stay under 3e-6 at these sizes (see docs/grading.md).
FLOAT32 = {"rtol": 1e-4, "atol": 2e-5}


# --------------------------------------------------------------------------- helpers


def _randn(gen: torch.Generator, *shape: int, device: str, dtype=torch.float64) -> Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype)


def _strided(x: Tensor) -> Tensor:
    """The same values, non-contiguous: every other step of a twice-as-long dim 1."""
    doubled = torch.repeat_interleave(x, 2, dim=1)
    return doubled[:, ::2]


def expect_tensor(what: str, got: Any, expected: Tensor, case: str) -> Tensor:
    """Type, shape, dtype and device, each with its own message."""
    if not isinstance(got, Tensor):
        raise CheckFailed(
            f"{what} should be a tensor of shape {tuple(expected.shape)}, got "
            f"{type(got).__name__} ({case})"
        )
    if got.shape != expected.shape:
        raise CheckFailed(f"{what}: {describe_shape(tuple(got.shape), tuple(expected.shape))}"
                          f" ({case})")
    if got.dtype != expected.dtype:
        raise CheckFailed(
            f"{what} has dtype {got.dtype} for {expected.dtype} inputs: keep the input's dtype "
            f"(avoid torch.tensor(...) constants that force float32) ({case})"
        )
    if got.device != expected.device:
        raise CheckFailed(
            f"{what} is on {got.device} but the inputs are on {expected.device}: create new "
            f"tensors with device=x.device ({case})"
        )
    return got


def expect_close(what: str, got: Any, expected: Tensor, case: str, tol: dict) -> None:
    got = expect_tensor(what, got, expected, case)
    expected_64, got_64 = expected.double(), got.double()
    close = torch.isclose(got_64, expected_64, equal_nan=True, **tol)
    if not bool(close.all()):
        raise CheckFailed(f"{what}: {describe_mismatch(got_64, expected_64, close)} ({case})")


def expect_unchanged(name: str, call: Call, originals: tuple[Tensor, ...]) -> None:
    for before, after in zip(originals, call.inputs_after):
        if before.shape != after.shape or not torch.equal(before, after):
            raise CheckFailed(
                f"`{name}` modified its input in place: use out-of-place ops "
                "(masked_fill rather than masked_fill_, x = x * s rather than x *= s)"
            )


def expect_output_pair(name: str, call: Call) -> tuple[Any, Any]:
    if not isinstance(call.value, tuple) or len(call.value) != 2:
        raise CheckFailed(f"`{name}` should return a pair (out, weights), got "
                          f"{type(call.value).__name__}")
    return call.value


# --------------------------------------------------------------------------- step functions


@dataclass(frozen=True)
class Heads:
    """Sizes of one test case, B batch, T (and Tk) tokens, H heads of D features."""

    B: int
    T: int
    H: int
    D: int
    Tk: int | None = None
    strided: bool = False
    dtype: torch.dtype = torch.float64

    @property
    def tol(self) -> dict:
        return FLOAT32 if self.dtype == torch.float32 else TIGHT

    def __str__(self) -> str:
        tk = "" if self.Tk is None else f", Tk={self.Tk}"
        extras = [" non-contiguous input" if self.strided else "",
                  " float32" if self.dtype == torch.float32 else ""]
        return f"B={self.B}, T={self.T}{tk}, H={self.H}, D={self.D}" + ",".join(
            e for e in extras if e
        )


HEAD_CASES = (
    Heads(2, 5, 4, 3),
    Heads(1, 1, 1, 1),
    Heads(3, 7, 2, 8),
    Heads(2, 6, 8, 1),
    Heads(2, 4, 3, 5, strided=True),
    Heads(2, 5, 4, 3, dtype=torch.float32),
)


def check_split_heads(sub, ctx: Context) -> float:
    gen = ctx.generator("split_heads")
    for c in HEAD_CASES:
        x = _randn(gen, c.B, c.T, c.H * c.D, device=ctx.device, dtype=c.dtype)
        x = _strided(x) if c.strided else x
        call = sub.call("split_heads", x, c.H)
        expect_close("split_heads(x, num_heads)", call.value, oracle.split_heads(x, c.H),
                     str(c), c.tol)
        expect_unchanged("split_heads", call, (x,))
    return 1.0


def check_merge_heads(sub, ctx: Context) -> float:
    gen = ctx.generator("merge_heads")
    for c in HEAD_CASES:
        x = _randn(gen, c.B, c.H, c.T, c.D, device=ctx.device, dtype=c.dtype)
        x = _strided(x) if c.strided else x
        call = sub.call("merge_heads", x)
        expect_close("merge_heads(x)", call.value, oracle.merge_heads(x), str(c), c.tol)
        expect_unchanged("merge_heads", call, (x,))
    return 1.0


SCORE_CASES = (
    Heads(2, 5, 4, 3),
    Heads(2, 3, 2, 4, Tk=6),
    Heads(1, 1, 1, 1),
    Heads(2, 4, 3, 16, Tk=2, strided=True),
    Heads(2, 5, 4, 8, dtype=torch.float32),
)


def check_scaled_scores(sub, ctx: Context) -> float:
    gen = ctx.generator("scaled_scores")
    for c in SCORE_CASES:
        tk = c.Tk or c.T
        q = _randn(gen, c.B, c.H, c.T, c.D, device=ctx.device, dtype=c.dtype)
        k = _randn(gen, c.B, c.H, tk, c.D, device=ctx.device, dtype=c.dtype)
        q, k = (_strided(q), _strided(k)) if c.strided else (q, k)
        call = sub.call("scaled_scores", q, k)
        expect_close("scaled_scores(q, k)", call.value, oracle.scaled_scores(q, k), str(c),
                     c.tol)
        expect_unchanged("scaled_scores", call, (q, k))
    # Leading dims are "...": a plain (B, T, D) input works too.
    q = _randn(gen, 3, 4, 6, device=ctx.device)
    k = _randn(gen, 3, 7, 6, device=ctx.device)
    call = sub.call("scaled_scores", q, k)
    expect_close("scaled_scores(q, k)", call.value, oracle.scaled_scores(q, k),
                 "3-d inputs (B, T, D) with Tq=4, Tk=7", TIGHT)
    return 1.0


def check_causal_mask(sub, ctx: Context) -> float:
    for seq_len in (1, 2, 5, 16):
        expected = oracle.causal_mask(seq_len, device=ctx.device)
        call = sub.call("causal_mask", seq_len, device=ctx.device)
        got = expect_tensor("causal_mask(seq_len)", call.value, expected, f"seq_len={seq_len}")
        if not torch.equal(got, expected):
            raise CheckFailed(
                f"causal_mask({seq_len}): {describe_mismatch(got, expected, got == expected)}. "
                "True marks a *blocked* pair: query i may not look at key j > i"
            )
    call = sub.call("causal_mask", 3)
    expect_tensor("causal_mask(3) without device", call.value, oracle.causal_mask(3, "cpu"),
                  "device=None means the default device")
    return 1.0


def _allowed_somewhere(gen: torch.Generator, *shape: int, device: str) -> Tensor:
    """A random bool mask (True = blocked) that leaves every row at least one key."""
    blocked = torch.rand(*shape, generator=gen) < 0.4
    blocked[..., 0] = False
    perm = torch.randperm(shape[-1], generator=gen)
    return blocked[..., perm].to(device)


def check_attend(sub, ctx: Context) -> float:
    gen = ctx.generator("attend")
    B, H, T, Tk, D = 2, 3, 5, 7, 4
    causal = oracle.causal_mask(T, device=ctx.device)
    cases = (
        ("no mask", (B, H, T, Tk), None, 1.0, torch.float64),
        ("causal mask (T, T)", (B, H, T, T), causal, 1.0, torch.float64),
        ("random mask (Tq, Tk)", (B, H, T, Tk), _allowed_somewhere(gen, T, Tk,
                                                                   device=ctx.device), 1.0,
         torch.float64),
        ("padding mask (B, 1, 1, Tk)", (B, H, T, Tk), _allowed_somewhere(gen, B, 1, 1, Tk,
                                                                         device=ctx.device),
         1.0, torch.float64),
        ("logits around 1e3", (B, H, T, T), causal, 1e3, torch.float64),
        ("B=1, H=1, T=1", (1, 1, 1, 1), None, 1.0, torch.float64),
        ("float32, causal", (B, H, T, T), causal, 1.0, torch.float32),
    )
    for case, shape, mask, scale, dtype in cases:
        scores = _randn(gen, *shape, device=ctx.device, dtype=dtype) * scale
        v = _randn(gen, *shape[:-2], shape[-1], D, device=ctx.device, dtype=dtype)
        tol = FLOAT32 if dtype == torch.float32 else TIGHT
        expected_out, expected_w = oracle.attend(scores, v, mask)
        call = sub.call("attend", scores, v, mask)
        out, weights = expect_output_pair("attend", call)
        expect_close("attend weights", weights, expected_w, case, tol)
        expect_close("attend out", out, expected_out, case, tol)
        if mask is not None and bool((weights.masked_select(mask.expand_as(weights)) != 0).any()):
            raise CheckFailed(f"attend weights: blocked positions must be exactly 0 ({case})")
        expect_unchanged("attend", call, (scores, v) + (() if mask is None else (mask,)))
    return 1.0


def check_output_projection(sub, ctx: Context) -> float:
    gen = ctx.generator("output_projection")
    for case, (B, T, d_in, d_out), with_bias, strided, dtype in (
        ("with bias, 6 -> 4", (2, 5, 6, 4), True, False, torch.float64),
        ("without bias, 3 -> 8", (2, 3, 3, 8), False, False, torch.float64),
        ("B=1, T=1, 1 -> 1", (1, 1, 1, 1), True, False, torch.float64),
        ("non-contiguous x", (2, 4, 5, 5), True, True, torch.float64),
        ("float32", (2, 5, 8, 8), True, False, torch.float32),
    ):
        x = _randn(gen, B, T, d_in, device=ctx.device, dtype=dtype)
        x = _strided(x) if strided else x
        weight = _randn(gen, d_out, d_in, device=ctx.device, dtype=dtype)
        bias = _randn(gen, d_out, device=ctx.device, dtype=dtype) if with_bias else None
        args = (x, weight) if bias is None else (x, weight, bias)
        call = sub.call("output_projection", *args)
        tol = FLOAT32 if dtype == torch.float32 else TIGHT
        expect_close("output_projection(x, weight, bias)", call.value,
                     oracle.output_projection(x, weight, bias), case, tol)
        expect_unchanged("output_projection", call, args)
    return 1.0


# --------------------------------------------------------------------------- modules


@dataclass(frozen=True)
class Attn:
    """One module test case."""

    B: int
    Tq: int
    E: int
    H: int
    Tk: int | None = None  # None: self-attention, key = value = query
    kdim: int | None = None
    vdim: int | None = None
    bias: bool = True
    mask: str | None = None  # None, "causal" or "random"
    strided: bool = False
    logit_scale: float = 1.0
    dtype: torch.dtype = torch.float64

    @property
    def cross(self) -> bool:
        return self.Tk is not None

    @property
    def tol(self) -> dict:
        if self.dtype == torch.float32:
            return FLOAT32
        return LARGE_LOGITS if self.logit_scale > 1 else TIGHT

    def __str__(self) -> str:
        parts = [f"B={self.B}", f"Tq={self.Tq}" if self.cross else f"T={self.Tq}",
                 f"E={self.E}", f"H={self.H}"]
        if self.cross:
            parts.append(f"Tk={self.Tk}")
        parts += [f"{n}={getattr(self, n)}" for n in ("kdim", "vdim") if getattr(self, n)]
        parts += [p for p, on in (("bias=False", not self.bias),
                                  (f"{self.mask} attn_mask", self.mask),
                                  ("non-contiguous inputs", self.strided),
                                  ("logits around 1e3", self.logit_scale > 1),
                                  ("float32", self.dtype == torch.float32)) if on]
        return ", ".join(parts)


MODULE_CASES = (
    Attn(2, 5, 16, 4),
    Attn(2, 3, 12, 3, Tk=6, kdim=5, vdim=7),
    Attn(1, 1, 4, 1),
    Attn(2, 4, 6, 6),  # D = 1
    Attn(3, 6, 16, 8, mask="causal"),
    Attn(2, 4, 12, 2, bias=False),
    Attn(2, 5, 16, 4, strided=True),
    Attn(2, 5, 16, 4, mask="causal", logit_scale=1e3),
    Attn(2, 5, 16, 4, mask="causal", dtype=torch.float32),
)


@dataclass
class Inputs:
    query: Tensor
    key: Tensor
    value: Tensor
    mask: Tensor | None
    params: dict[str, Tensor | None]  # fused names: q_proj.weight, ..., out_proj.bias


def draw_inputs(c: Attn, gen: torch.Generator, device: str) -> Inputs:
    """Inputs and random weights (biases included) for one case, float64 then c.dtype."""
    tk = c.Tk or c.Tq
    kdim, vdim = c.kdim or c.E, c.vdim or c.E

    def randn(*shape: int) -> Tensor:
        return _randn(gen, *shape, device=device)

    query = randn(c.B, c.Tq, c.E)
    key = randn(c.B, tk, kdim) if c.cross else query
    value = randn(c.B, tk, vdim) if c.cross else query
    params: dict[str, Tensor | None] = {
        "q_proj.weight": randn(c.E, c.E) / math.sqrt(c.E) * c.logit_scale,
        "k_proj.weight": randn(c.E, kdim) / math.sqrt(kdim),
        "v_proj.weight": randn(c.E, vdim) / math.sqrt(vdim),
        "out_proj.weight": randn(c.E, c.E) / math.sqrt(c.E),
    }
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        params[f"{name}.bias"] = randn(c.E) if c.bias else None
    if c.bias and c.logit_scale > 1:
        params["q_proj.bias"] = params["q_proj.bias"] * c.logit_scale
    mask = None
    if c.mask == "causal":
        mask = oracle.causal_mask(c.Tq, device=device)
    elif c.mask == "random":
        mask = _allowed_somewhere(gen, c.Tq, tk, device=device)
    if c.strided:
        query, key, value = _strided(query), _strided(key), _strided(value)
    cast = {k: None if v is None else v.to(c.dtype) for k, v in params.items()}
    return Inputs(query.to(c.dtype), key.to(c.dtype), value.to(c.dtype), mask, cast)


_SAME_MASK: Any = object()


def expected_mha(c: Attn, inp: Inputs, mask: Tensor | None = _SAME_MASK) -> tuple[Tensor, Tensor]:
    """nn.MultiheadAttention's output and per-head weights, computed in float64."""
    params64 = {k: None if v is None else v.double() for k, v in inp.params.items()}
    mha = oracle.torch_mha(params64, c.E, c.H, c.kdim, c.vdim)
    mask = inp.mask if mask is _SAME_MASK else mask
    out, weights = oracle.multi_head_attention(
        mha, inp.query.double(), inp.key.double(), inp.value.double(), mask
    )
    return out.to(c.dtype), weights.to(c.dtype)


def per_head_params(params: dict[str, Tensor | None], num_heads: int) -> dict:
    """The fused weights sliced into `heads.i.{q,k,v}_proj` for a looped module."""
    sliced: dict[str, Tensor | None] = {}
    for i in range(num_heads):
        for name in ("q_proj", "k_proj", "v_proj"):
            weight, bias = params[f"{name}.weight"], params[f"{name}.bias"]
            rows = weight.shape[0] // num_heads
            sliced[f"heads.{i}.{name}.weight"] = weight[i * rows:(i + 1) * rows]
            sliced[f"heads.{i}.{name}.bias"] = (
                None if bias is None else bias[i * rows:(i + 1) * rows]
            )
    sliced["out_proj.weight"] = params["out_proj.weight"]
    sliced["out_proj.bias"] = params["out_proj.bias"]
    return sliced


def _module_kwargs(c: Attn) -> dict[str, Any]:
    return {"kdim": c.kdim, "vdim": c.vdim, "bias": c.bias}


def _compare_module(name: str, call: Call, c: Attn, expected: tuple[Tensor, Tensor],
                    inp: Inputs) -> None:
    out, weights = expect_output_pair(f"{name}.forward", call)
    expect_close(f"{name} attention weights (B, H, Tq, Tk)", weights, expected[1], str(c), c.tol)
    expect_close(f"{name} output", out, expected[0], str(c), c.tol)
    originals = (inp.query, inp.key, inp.value) + (() if inp.mask is None else (inp.mask,))
    expect_unchanged(f"{name}.forward", call, originals)


def check_attention_head(sub, ctx: Context) -> float:
    gen = ctx.generator("attention_head")
    for c in (Attn(2, 5, 8, 1), Attn(2, 3, 6, 1, Tk=4, kdim=5, vdim=3),
              Attn(1, 1, 4, 1, bias=False), Attn(2, 6, 8, 1, mask="causal"),
              Attn(2, 5, 8, 1, mask="causal", dtype=torch.float32)):
        head_dim = 3 if c.E % 3 == 0 else 4
        inp = draw_inputs(c, gen, ctx.device)
        params = {k: v[:head_dim] for k, v in inp.params.items()
                  if k.startswith(("q_", "k_", "v_")) and v is not None}
        params.update({f"{n}.bias": None for n in ("q_proj", "k_proj", "v_proj")
                       if not c.bias})
        args = (inp.query, inp.key, inp.value)
        call = sub.run_module(ModuleRun(
            "AttentionHead", (c.E, head_dim), _module_kwargs(c), params,
            args, {"attn_mask": inp.mask}, dtype=c.dtype,
        ))
        p64 = {k: None if v is None else v.double() for k, v in params.items()}
        out, weights = oracle.attention_head(p64, *(a.double() for a in args), inp.mask)
        case = f"{c}, head_dim={head_dim}"
        got_out, got_w = expect_output_pair("AttentionHead.forward", call)
        expect_close("AttentionHead weights (B, Tq, Tk)", got_w, weights.to(c.dtype), case,
                     c.tol)
        expect_close("AttentionHead output (B, Tq, head_dim)", got_out, out.to(c.dtype), case,
                     c.tol)
    return 1.0


def _run_mha(sub, class_name: str, c: Attn, inp: Inputs, **forward: Any) -> Call:
    params = per_head_params(inp.params, c.H) if class_name.startswith("Looped") else inp.params
    forward.setdefault("attn_mask", inp.mask)
    return sub.run_module(ModuleRun(
        class_name, (c.E, c.H), _module_kwargs(c), params,
        (inp.query, inp.key, inp.value), forward, dtype=c.dtype,
    ))


def check_looped_mha(sub, ctx: Context) -> float:
    gen = ctx.generator("looped_mha")
    for c in MODULE_CASES:
        inp = draw_inputs(c, gen, ctx.device)
        call = _run_mha(sub, "LoopedMultiHeadAttention", c, inp)
        _compare_module("LoopedMultiHeadAttention", call, c, expected_mha(c, inp), inp)
    return 1.0


def check_fused_mha(sub, ctx: Context) -> float:
    gen = ctx.generator("fused_mha")
    for c in MODULE_CASES:
        inp = draw_inputs(c, gen, ctx.device)
        call = _run_mha(sub, "MultiHeadAttention", c, inp)
        _compare_module("MultiHeadAttention", call, c, expected_mha(c, inp), inp)
    # key and value default to query.
    c = Attn(2, 5, 16, 4)
    inp = draw_inputs(c, gen, ctx.device)
    call = sub.run_module(ModuleRun("MultiHeadAttention", (c.E, c.H), {}, inp.params,
                                    (inp.query,), {}))
    out, weights = expect_output_pair("MultiHeadAttention.forward", call)
    expected = expected_mha(c, inp)
    expect_close("MultiHeadAttention(query) output", out, expected[0],
                 "forward(query) alone: key and value default to query", TIGHT)
    return 1.0


def check_fused_mha_masks(sub, ctx: Context) -> float:
    gen = ctx.generator("fused_mha_masks")
    c = Attn(2, 6, 16, 4, mask="random")
    inp = draw_inputs(c, gen, ctx.device)
    causal = oracle.causal_mask(c.Tq, device=ctx.device)
    for case, forward, mask in (
        ("attn_mask only", {"attn_mask": inp.mask}, inp.mask),
        ("is_causal=True only", {"attn_mask": None, "is_causal": True}, causal),
        ("attn_mask and is_causal=True: blocked if either blocks", {"is_causal": True},
         inp.mask | causal),
        ("attn_mask=None", {"attn_mask": None}, None),
    ):
        call = _run_mha(sub, "MultiHeadAttention", c, inp, **forward)
        out, weights = expect_output_pair("MultiHeadAttention.forward", call)
        expected = expected_mha(c, inp, mask=mask)
        expect_close("MultiHeadAttention attention weights", weights, expected[1], case, TIGHT)
        expect_close("MultiHeadAttention output", out, expected[0], case, TIGHT)
        if inp.mask is not None and forward.get("attn_mask") is not None:
            expect_unchanged("MultiHeadAttention.forward", call,
                             (inp.query, inp.key, inp.value, inp.mask))
    return 1.0


def check_fused_mha_contract(sub, ctx: Context) -> float:
    # A clear ValueError when the heads do not divide the embedding.
    try:
        sub.check_constructor("MultiHeadAttention", 10, 3)
    except StudentCodeError as err:
        if err.kind in ("missing", "not_implemented"):
            raise
        if err.exc_type != "ValueError":
            raise CheckFailed(
                f"MultiHeadAttention(10, 3) should raise ValueError (10 is not divisible by 3), "
                f"but: {err}"
            ) from None
    else:
        raise CheckFailed(
            "MultiHeadAttention(10, 3) should raise ValueError: 10 is not divisible by 3 heads"
        )

    gen = ctx.generator("fused_mha_contract")
    c = Attn(2, 5, 16, 4, mask="causal")
    inp = draw_inputs(c, gen, ctx.device)
    expected = expected_mha(c, inp)

    # need_weights=False: the output alone, weights None.
    call = _run_mha(sub, "MultiHeadAttention", c, inp, need_weights=False)
    out, weights = expect_output_pair("MultiHeadAttention.forward", call)
    if weights is not None:
        raise CheckFailed("with need_weights=False, forward should return (out, None)")
    expect_close("MultiHeadAttention output", out, expected[0], "need_weights=False", TIGHT)

    # Dropout: none in eval mode ...
    def run(training: bool) -> tuple[Any, Any]:
        return expect_output_pair("MultiHeadAttention.forward", sub.run_module(ModuleRun(
            "MultiHeadAttention", (c.E, c.H), {"dropout": 0.5}, inp.params,
            (inp.query, inp.key, inp.value), {"attn_mask": inp.mask}, training=training,
            seed=0,
        )))

    out, weights = run(training=False)
    expect_close("MultiHeadAttention output", out, expected[0], "dropout=0.5 in eval mode",
                 TIGHT)
    # ... and in training mode, on the weights: each is dropped or scaled by 1 / (1 - p).
    out, weights = run(training=True)
    weights = expect_tensor("attention weights", weights, expected[1], "dropout=0.5, training")
    kept = weights != 0
    if bool(kept.all()):
        raise CheckFailed("dropout=0.5 in training mode dropped no attention weight: apply "
                          "nn.Dropout to the weights (it is active only in train())")
    scaled = expected[1] / (1 - 0.5)
    if not torch.allclose(weights[kept], scaled[kept], **TIGHT):
        raise CheckFailed("dropout in training mode: the weights you return should be the ones "
                          "you used, each either 0 or softmax / (1 - p)")
    v = oracle.split_heads(F.linear(inp.value, inp.params["v_proj.weight"],
                                    inp.params["v_proj.bias"]), c.H)
    mixed = oracle.output_projection(oracle.merge_heads(weights @ v),
                                     inp.params["out_proj.weight"], inp.params["out_proj.bias"])
    expect_close("MultiHeadAttention output", out, mixed,
                 "dropout=0.5, training: out must use the dropped-out weights", TIGHT)
    return 1.0


def check_speed(sub, ctx: Context) -> float:
    from .timing import SPOT_CHECKS, score_speed, total_measured

    gate = ctx.results.get("fused_mha")
    if gate is None:
        gate = run_check("fused_mha", sub, ctx)
    if not gate.passed:
        raise CheckFailed("timed only once MultiHeadAttention matches nn.MultiheadAttention "
                          "(see fused_mha)")
    seed = secrets.randbelow(2**31)
    started = time.perf_counter()
    measurement = sub.time_speed(ctx.device, seed)
    wall = time.perf_counter() - started
    if total_measured(measurement) > wall * 1.05:
        raise CheckFailed(f"speed not scored: the reported times add up to more than the "
                          f"{wall:.2f} s the measurement took")
    rounds = random.Random(seed).sample(range(measurement["config"]["rounds"]), SPOT_CHECKS)
    fraction, message = score_speed(measurement, rounds)
    if fraction <= 0:
        raise CheckFailed(message)
    ctx.notes = message
    return fraction


CHECK_FUNCTIONS: dict[str, Callable[[Any, Context], float]] = {
    "split_heads": check_split_heads,
    "scaled_scores": check_scaled_scores,
    "causal_mask": check_causal_mask,
    "attend": check_attend,
    "merge_heads": check_merge_heads,
    "output_projection": check_output_projection,
    "attention_head": check_attention_head,
    "looped_mha": check_looped_mha,
    "fused_mha": check_fused_mha,
    "fused_mha_masks": check_fused_mha_masks,
    "fused_mha_contract": check_fused_mha_contract,
    "speed_fused_vs_looped": check_speed,
}
assert set(CHECK_FUNCTIONS) == set(POINTS), "every check in the points table has a function"


def run_check(check_id: str, sub, ctx: Context | None = None) -> CheckResult:
    """Run one check; whatever the student's code does, return a result."""
    ctx = ctx or Context()
    points = POINTS[check_id]
    ctx.notes = ""
    try:
        fraction = CHECK_FUNCTIONS[check_id](sub, ctx)
        message = ctx.notes or "ok"
    except (CheckFailed, StudentCodeError) as err:
        fraction, message = 0.0, str(err)
        picture = getattr(err, "picture", None)
    else:
        picture = None
    result = CheckResult(check_id, round(points * fraction, 2), points, message, picture)
    ctx.results[check_id] = result
    return result


def run_checks(sub, only: list[str] | None = None, device: str = "cpu",
               on_result: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Run the checks in points-table order (all of them, or those named in `only`)."""
    ctx = Context(device=device)
    results = []
    for spec in CHECKS:
        if only and spec.id not in only:
            continue
        result = run_check(spec.id, sub, ctx)
        results.append(result)
        if on_result:
            on_result(result)
    return results
