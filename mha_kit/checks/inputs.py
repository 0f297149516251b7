"""Test cases and their inputs: the sizes of a case, and the tensors and random weights drawn
for it from the check's fixed generator.

A case's `label()` names it in messages, in the language of the messages; its fields, never
its label, seed its inputs (`core.seed_text`), so no wording or language changes an input.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .. import oracle
from ..messages import Message, joined, msg
from .core import tolerance

Tensor = torch.Tensor


def randn(gen: torch.Generator, *shape: int, device: str, dtype=torch.float64) -> Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype)


def random_params(gen: torch.Generator, shapes: dict[str, tuple[int, int]], *,
                  biased: tuple[str, ...], logit_scale: float = 1.0, device: str = "cpu"
                  ) -> dict[str, Tensor | None]:
    """Random weights in the fused naming, float64: `{name}.weight` of shape (out, in) for each
    entry of `shapes`, drawn as randn / √in so that outputs stay near unit size; then
    `{name}.bias`, randn for the names in `biased` and None for the others. The query's weight
    and bias are multiplied by `logit_scale`, and so is every logit."""
    params: dict[str, Tensor | None] = {
        f"{name}.weight": randn(gen, out, inp, device=device) / math.sqrt(inp)
        for name, (out, inp) in shapes.items()
    }
    for name, (out, _) in shapes.items():
        params[f"{name}.bias"] = randn(gen, out, device=device) if name in biased else None
    for key in ("q_proj.weight", "q_proj.bias"):
        if params.get(key) is not None:
            params[key] = params[key] * logit_scale
    return params


def strided(x: Tensor) -> Tensor:
    """The same values, non-contiguous: every other step of a twice-as-long dim 1."""
    doubled = torch.repeat_interleave(x, 2, dim=1)
    return doubled[:, ::2]


def allowed_somewhere(gen: torch.Generator, *shape: int, device: str) -> Tensor:
    """A random bool mask (True = blocked) that leaves every row at least one key."""
    blocked = torch.rand(*shape, generator=gen) < 0.4
    blocked[..., 0] = False
    perm = torch.randperm(shape[-1], generator=gen)
    return blocked[..., perm].to(device)


_MASKS = {None: "case.no_mask", "causal": "case.causal_mask", "random": "case.random_mask",
          "padding": "case.padding_mask"}


def _dtype(dtype: torch.dtype) -> tuple[str, Message]:
    return "dtype", msg("trait.dtype", dtype=str(dtype).removeprefix("torch."))


def _contiguity(strided: bool) -> tuple[str, Message]:
    return "strided", msg("case.non_contiguous_inputs" if strided else "trait.contiguous")


def _logits(scale: float) -> tuple[str, Message]:
    return "logits", msg("case.large_logits" if scale > 1 else "trait.usual_logits")


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
        return tolerance(self.dtype)

    def traits(self) -> list[tuple[str, Message | str]]:
        """What sets this case apart, for telling failures apart by cause (`causes`)."""
        return [_contiguity(self.strided), _dtype(self.dtype)]

    def label(self) -> Message | str:
        tk = "" if self.Tk is None else f", Tk={self.Tk}"
        return joined([f"B={self.B}, T={self.T}{tk}, H={self.H}, D={self.D}",
                       msg("case.non_contiguous_input") if self.strided else "",
                       "float32" if self.dtype == torch.float32 else ""])


def heads_shapes(tk: bool = False) -> Any:
    """The search's sizes for the step functions: B, T (and Tk), H and D, 1s included."""
    from hypothesis import strategies as st

    return st.builds(Heads, B=st.integers(1, 3), T=st.integers(1, 5), H=st.integers(1, 4),
                     D=st.integers(1, 4), Tk=st.integers(1, 5) if tk else st.none())


@dataclass(frozen=True)
class Scores:
    """One `attend` case: scores (B, H, Tq, Tk), v (B, H, Tk, D) and a kind of mask."""

    B: int
    H: int
    Tq: int
    Tk: int
    D: int
    mask: str | None = None  # None, "causal" (Tq = Tk), "random" (Tq, Tk), "padding"
    logit_scale: float = 1.0
    dtype: torch.dtype = torch.float64

    def traits(self) -> list[tuple[str, Message | str]]:
        return [("mask", msg(_MASKS[self.mask])), _logits(self.logit_scale), _dtype(self.dtype)]

    def label(self) -> Message | str:
        mask = _MASKS[self.mask]
        return joined([f"B={self.B}, H={self.H}, Tq={self.Tq}, Tk={self.Tk}, D={self.D}",
                       msg(mask), msg("case.large_logits") if self.logit_scale > 1 else "",
                       "float32" if self.dtype == torch.float32 else ""])

    def draw_mask(self, gen: torch.Generator, device: str) -> Tensor | None:
        if self.mask == "causal":
            return oracle.causal_mask(self.Tq, device=device)
        if self.mask == "random":
            return allowed_somewhere(gen, self.Tq, self.Tk, device=device)
        if self.mask == "padding":
            return allowed_somewhere(gen, self.B, 1, 1, self.Tk, device=device)
        return None


@dataclass(frozen=True)
class Projection:
    """One `output_projection` case: x (B, T, d_in), weight (d_out, d_in), maybe a bias."""

    B: int
    T: int
    d_in: int
    d_out: int
    bias: bool = True
    strided: bool = False
    dtype: torch.dtype = torch.float64

    def traits(self) -> list[tuple[str, Message | str]]:
        return [("square", msg("trait.square" if self.d_in == self.d_out else "trait.not_square")),
                ("bias", msg("trait.bias" if self.bias else "trait.bias_none")),
                _contiguity(self.strided), _dtype(self.dtype)]

    def label(self) -> Message | str:
        return joined([f"B={self.B}, T={self.T}, {self.d_in} -> {self.d_out}",
                       "" if self.bias else msg("case.without_bias"),
                       msg("case.non_contiguous_x") if self.strided else "",
                       "float32" if self.dtype == torch.float32 else ""])


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
        return tolerance(self.dtype, self.logit_scale)

    def traits(self) -> list[tuple[str, Message | str]]:
        """Its kinds, in the words of the contract; the first that sets failing cases apart
        is the one told (`causes`): a kind of mask before having one at all."""
        mask = (msg("case.attn_mask_kind", kind=msg(f"case.{self.mask}_kind")) if self.mask
                else msg("case.no_mask"))
        return [("attention", msg("trait.cross" if self.cross else "trait.self")),
                ("mask", mask), ("masked", msg("trait.attn_mask" if self.mask else "case.no_mask")),
                ("bias", msg("trait.bias" if self.bias else "trait.no_bias")),
                _logits(self.logit_scale), _contiguity(self.strided), _dtype(self.dtype)]

    def label(self) -> Message | str:
        parts = [f"B={self.B}", f"Tq={self.Tq}" if self.cross else f"T={self.Tq}",
                 f"E={self.E}", f"H={self.H}"]
        if self.cross:
            parts.append(f"Tk={self.Tk}")
        parts += [f"{n}={getattr(self, n)}" for n in ("kdim", "vdim") if getattr(self, n)]
        parts += ["bias=False"] if not self.bias else []
        words = [(msg("case.attn_mask_kind", kind=msg(f"case.{self.mask}_kind"))
                  if self.mask else ""),
                 msg("case.non_contiguous_inputs") if self.strided else "",
                 msg("case.large_logits") if self.logit_scale > 1 else "",
                 "float32" if self.dtype == torch.float32 else ""]
        return joined([", ".join(parts), *words])


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

    def draw(*shape: int) -> Tensor:
        return randn(gen, *shape, device=device)

    query = draw(c.B, c.Tq, c.E)
    key = draw(c.B, tk, kdim) if c.cross else query
    value = draw(c.B, tk, vdim) if c.cross else query
    shapes = {"q_proj": (c.E, c.E), "k_proj": (c.E, kdim), "v_proj": (c.E, vdim),
              "out_proj": (c.E, c.E)}
    params = random_params(gen, shapes, biased=tuple(shapes) if c.bias else (),
                           logit_scale=c.logit_scale, device=device)
    mask = None
    if c.mask == "causal":
        mask = oracle.causal_mask(c.Tq, device=device)
    elif c.mask == "random":
        mask = allowed_somewhere(gen, c.Tq, tk, device=device)
    if c.strided:
        query, key, value = strided(query), strided(key), strided(value)
    cast = {k: None if v is None else v.to(c.dtype) for k, v in params.items()}
    query = query.to(c.dtype)
    if not c.cross:  # one tensor passed three times, as `mha(x, x, x)`: `key is query` holds
        return Inputs(query, query, query, mask, cast)
    return Inputs(query, key.to(c.dtype), value.to(c.dtype), mask, cast)


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


def attn_shapes(single_head: bool = False) -> Any:
    """The search's module cases: B, Tq, Tk (cross-attention with kdim and vdim), H, D, bias
    and a mask. Every draw shrinks towards self-attention with a bias and no mask."""
    from hypothesis import strategies as st

    @st.composite
    def cases(draw: Callable) -> Attn:
        H = 1 if single_head else draw(st.integers(1, 3))
        D = draw(st.integers(1, 3))
        B, Tq = draw(st.integers(1, 2)), draw(st.integers(1, 4))
        cross = draw(st.booleans())
        Tk, kdim, vdim = (draw(st.integers(1, 4)), draw(st.none() | st.integers(1, 5)),
                          draw(st.none() | st.integers(1, 5))) if cross else (None, None, None)
        bias = draw(st.sampled_from((True, False)))
        mask = draw(st.sampled_from((None, "random") if cross else (None, "random", "causal")))
        return Attn(B, Tq, H * D, H, Tk, kdim, vdim, bias, mask)

    return cases()

