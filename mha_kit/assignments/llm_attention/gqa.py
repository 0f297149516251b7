"""Checks of `GroupedQueryAttention` and of decoding with its `KVCache`.

Expected values: `oracle.gqa`, SDPA over the whole sequence with a causal mask. A decoding
step's output must equal the matching rows of that whole-sequence attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ...checks.core import TIGHT, CheckFailed, Context
from ...checks.diagnosis import Diagnosis
from ...checks.expect import attempt, expect_close, expect_tensor, expect_unchanged
from ...checks.gradients import backward_for, expect_gradients, expect_on_meta, loaded, moved
from ...checks.inputs import randn, strided
from ...checks.search import run_cases
from ...messages import Message, joined, msg
from ...runner.inprocess import vetted
from ...runner.protocol import ModuleRun
from . import oracle, variants
from .jobs import DECODE_JOB, MODULE
from .pieces import ROPE_TOL

Tensor = torch.Tensor
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


@dataclass(frozen=True)
class Gqa:
    """A module GroupedQueryAttention(E, H, Hkv, rope_base) on x (B, T, E)."""

    B: int
    T: int
    E: int
    H: int
    Hkv: int
    rope_base: float | None = 10000.0
    strided: bool = False
    dtype: torch.dtype = torch.float64

    def init(self) -> tuple:
        return (self.E, self.H, self.Hkv, self.rope_base)

    def label(self) -> Message | str:
        rope = "None" if self.rope_base is None else f"{self.rope_base:g}"
        return joined([f"{MODULE}({self.E}, {self.H}, {self.Hkv}, rope_base={rope}), "
                       f"x (B={self.B}, T={self.T}, E={self.E})",
                       msg("case.non_contiguous_input") if self.strided else "",
                       "float32" if self.dtype == torch.float32 else ""])

    def params(self, gen: torch.Generator, device: str) -> dict[str, Tensor | None]:
        """Random weights, scaled like nn.Linear's; every bias None (the module has none)."""
        D = self.E // self.H
        rows = {"q_proj": self.E, "k_proj": self.Hkv * D, "v_proj": self.Hkv * D,
                "out_proj": self.E}
        params: dict[str, Tensor | None] = {}
        for name in PROJECTIONS:
            params[f"{name}.weight"] = randn(gen, rows[name], self.E, device=device) / self.E ** .5
            params[f"{name}.bias"] = None
        return params


GQA_CASES = (
    Gqa(2, 5, 16, 4, 2),
    Gqa(1, 6, 24, 6, 3, rope_base=500.0),
    Gqa(2, 4, 16, 4, 1),  # MQA: one key/value head
    Gqa(2, 4, 16, 4, 4),  # MHA: as many as query heads
    Gqa(1, 1, 8, 2, 1),
    Gqa(2, 5, 16, 4, 2, rope_base=None),
    Gqa(2, 5, 16, 4, 2, strided=True),
    Gqa(2, 5, 16, 4, 2, dtype=torch.float32),
)


def _weights(params: dict[str, Tensor | None]) -> dict[str, Tensor]:
    return {k: v.double() for k, v in params.items() if v is not None}


def check_gqa(sub, ctx: Context) -> float:
    def one_case(c: Gqa) -> None:
        gen = ctx.generator("llm_gqa", c)
        params = c.params(gen, ctx.device)
        x = randn(gen, c.B, c.T, c.E, device=ctx.device)
        want = oracle.gqa(_weights(params), x, c.H, c.Hkv, c.rope_base)
        backward = backward_for(gen, c.dtype, (want,), ("out",), {0: "x"}, loaded(params))
        x = (strided(x) if c.strided else x).to(c.dtype)
        cast = {k: None if v is None else v.to(c.dtype) for k, v in params.items()}
        mistakes = variants.gqa_candidates(_weights(params), x.double(), c.H, c.Hkv,
                                           c.rope_base)
        # The query heads of a group summed raise (the shapes do not fit); projections of a
        # mistake's widths do not fit the grader's weights.
        laid_out = variants.projection_candidates(_weights(params), MODULE, c.E, c.H, c.Hkv)
        call = attempt(lambda: sub.run_module(ModuleRun(
            MODULE, c.init(), {}, cast, (x,), dtype=c.dtype, backward=backward)), c.label(),
            [*mistakes, *laid_out])
        expect_unchanged(f"{MODULE}.forward", call, {"x": x}, c.label())
        expect_close(msg("what.output", name=MODULE), call.value, want.to(c.dtype), c.label(),
                     ROPE_TOL, dims=("B", "T", "E"), mistakes=mistakes)
        expect_gradients(MODULE, call, backward, lambda: _gradients(c, params, x, backward),
                         c.label(), ROPE_TOL)

    run_cases(one_case, GQA_CASES)
    c = GQA_CASES[0]
    gen = ctx.generator("llm_gqa", "meta")
    params, x = c.params(gen, "cpu"), randn(gen, c.B, c.T, c.E, device="cpu")
    expect_on_meta(ctx, MODULE, lambda device: sub.run_module(ModuleRun(
        MODULE, c.init(), {}, moved(params, device), (moved(x, device),))), c.label())
    return 1.0


def _gradients(c: Gqa, params: dict[str, Tensor | None], x: Tensor,
               backward: Any) -> dict[str, Tensor | None]:
    """Autograd through the oracle: the gradients of x and of each weight."""
    leaves = {"x": x.double().detach().clone().requires_grad_()}
    leaves |= {k: v.detach().clone().requires_grad_() for k, v in _weights(params).items()}
    with torch.enable_grad():
        out = oracle.gqa({k: leaves[k] for k in _weights(params)}, leaves["x"], c.H, c.Hkv,
                         c.rope_base)
        grads = torch.autograd.grad((out * backward.cotangents[0]).sum(), list(leaves.values()))
    return dict(zip(leaves, grads))


@dataclass(frozen=True)
class Decoding:
    """A prefill of chunks[0] tokens, then chunks of the given sizes, through one cache."""

    model: Gqa
    chunks: tuple[int, ...]

    def label(self) -> Message | str:
        return msg("case.llm_decoding", module=self.model.label(), prefill=self.chunks[0],
                   steps=", ".join(map(str, self.chunks[1:])))


DECODING_CASES = (
    Decoding(Gqa(2, 8, 16, 4, 2), (5, 1, 1, 1)),
    Decoding(Gqa(1, 10, 24, 6, 3, rope_base=500.0), (4, 3, 1, 2)),
    Decoding(Gqa(2, 4, 16, 4, 1), (1, 1, 1, 1)),
    Decoding(Gqa(1, 7, 16, 4, 4, dtype=torch.float32), (3, 2, 1, 1)),
)


def check_kv_cache(sub, ctx: Context) -> float:
    def one_case(d: Decoding) -> None:
        c = d.model
        gen = ctx.generator("llm_kv_cache", d)
        params = c.params(gen, ctx.device)
        x = randn(gen, c.B, sum(d.chunks), c.E, device=ctx.device).to(c.dtype)
        chunks = list(x.split(d.chunks, dim=1))
        cast = {k: v.to(c.dtype) for k, v in params.items() if v is not None}
        got = attempt(lambda: sub.run_job(
            DECODE_JOB, msg("llm.decoding", name=MODULE), init=c.init(),
            params={**cast, **{k: None for k in params if params[k] is None}}, chunks=chunks,
            dtype=c.dtype), d.label(), variants.cache_error_candidates(
                c.B, c.H, c.Hkv, c.E // c.H, d.chunks, c.rope_base))
        twice, steps, lengths, held, heads, fresh = _decoded(got, len(chunks))
        if fresh:  # a cache made after another was used holds tokens
            raise CheckFailed(msg("llm.cache_shared", length=fresh), case=d.label())
        want = oracle.gqa(_weights(params), x.double(), c.H, c.Hkv, c.rope_base).to(c.dtype)
        what = msg("what.output", name=MODULE)
        expect_close(what, twice[0], want, c.label(), ROPE_TOL, dims=("B", "T", "E"))
        expect_tensor(what, twice[1], want, c.label())
        if not torch.equal(twice[0], twice[1]):
            raise CheckFailed(msg("llm.keeps_state", name=MODULE), case=c.label())
        expected_lengths = [sum(d.chunks[:n + 1]) for n in range(len(d.chunks))]
        if lengths != expected_lengths:
            raise CheckFailed(msg("llm.cache_length", got=lengths, expected=expected_lengths),
                              case=d.label(), diagnosis=_lengths_diagnosed(lengths, d))
        for n, step in enumerate(steps):
            expect_tensor(msg("llm.step_output", name=MODULE, step=n + 1), step,
                          want[:, sum(d.chunks[:n]):sum(d.chunks[:n + 1])], d.label())
        expect_close(msg("llm.cached_output", name=MODULE), torch.cat(steps, dim=1), want,
                     d.label(), ROPE_TOL, dims=("B", "T", "E"),
                     mistakes=variants.cache_candidates(_weights(params), [
                         t.double() for t in chunks], c.H, c.Hkv, c.rope_base))
        # Right values, from a cache n_rep times larger than GQA's. (Keys laid out otherwise,
        # (B, t, Hkv, D), have no dim 1 of H in these cases.)
        if c.H != c.Hkv and c.H in heads:
            raise CheckFailed(msg("llm.cache_heads", name=MODULE, got=c.H, Hkv=c.Hkv,
                                  n_rep=c.H // c.Hkv), case=d.label())
        _expect_held(held, _weights(params), x.double(), d)

    run_cases(one_case, DECODING_CASES)
    return 1.0


def _lengths_diagnosed(lengths: list[Any], d: Decoding) -> Diagnosis | None:
    """The known mistakes that give these lengths, when each is a number."""
    if not all(type(n) is int and abs(n) < 2 ** 62 for n in lengths):
        return None
    c = d.model
    return Diagnosis(torch.tensor(lengths), variants.cache_length_candidates(
        c.B, c.H, c.Hkv, c.E // c.H, d.chunks), TIGHT)


def _expect_held(held: tuple[Tensor, Tensor] | str | None, weights: dict[str, Tensor],
                 x: Tensor, d: Decoding) -> None:
    """Red team n10: right outputs from a "cache" that keeps the tokens and recomputes every
    key and value. What the module's last `cache.update` gave back must be every key and value
    so far: a key rotated by RoPE (as the notebook asks) or as projected (rotated again at
    every step, still saved work); Hkv heads, or H after `repeat_kv`; a static buffer may
    hold more positions than those written. The calls' tokens in another order name the
    mistake that gives it."""
    c, case = d.model, d.label()
    if held is None:
        raise CheckFailed(msg("llm.cache_not_updated", name=MODULE), case=case)
    if isinstance(held, str):
        raise CheckFailed(msg("llm.cache_update_reply", type=held), case=case)
    D, length = c.E // c.H, x.shape[1]
    rotated, values = oracle.keys_values(weights, x, c.Hkv, D, c.rope_base)
    as_projected = oracle.keys_values(weights, x, c.Hkv, D, c.rope_base, rotated=False)[0]
    for what, got, wants in ((msg("llm.cache_keys"), held[0], (rotated, as_projected)),
                             (msg("llm.cache_values"), held[1], (values,))):
        if got.dim() == 4 and got.shape[2] >= length:
            got = got[:, :, :length]
        if got.dim() == 4 and got.shape[1] == c.H != c.Hkv:
            wants = tuple(oracle.repeat_kv(want, c.H // c.Hkv) for want in wants)
        if not any(got.shape == other.shape and torch.allclose(got.double(), other, **ROPE_TOL)
                   for other in wants[1:]):
            expect_close(what, got, wants[0].to(c.dtype), case, ROPE_TOL,
                         dims=("B", "Hkv", "L", "D"), mistakes=variants.held_candidates(
                             wants[0].to(c.dtype), d.chunks, c.rope_base))


def _decoded(got: Any, count: int) -> tuple[list[Any], list[Any], list[Any], Any,
                                            list[int], int]:
    """The job's reply, in the form asked for: two outputs, one per chunk, one length each,
    what the last `cache.update` gave back (a pair of tensors, a type's name, or None), the
    head counts of the keys passed to `update`, and the length of a cache made after."""
    if not isinstance(got, dict):
        got = {}
    twice, steps, lengths, held, heads, fresh = (got.get(key) for key in (
        "twice", "steps", "lengths", "held", "heads", "fresh_length"))
    if not (isinstance(twice, list) and len(twice) == 2 and isinstance(steps, list)
            and len(steps) == count and isinstance(lengths, list) and len(lengths) == count
            and (held is None or isinstance(held, str) or type(held) in (tuple, list)
                 and len(held) == 2
                 and all(type(t) is Tensor for t in held))
            and isinstance(heads, list) and all(type(h) is int for h in heads)
            and (fresh is None or type(fresh) is int)):
        raise CheckFailed(msg("llm.bad_decoding_reply", name=MODULE))
    return ([vetted(t, MODULE) for t in twice], [vetted(t, MODULE) for t in steps],
            [n if type(n) is int else repr(n) for n in lengths], held, heads, fresh or 0)
