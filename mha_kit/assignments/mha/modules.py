"""The checks of the modules: `AttentionHead`, the looped and the fused
`MultiHeadAttention`, against `nn.MultiheadAttention` holding the same weights."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ... import oracle
from ...checks import diagnosis, scale
from ...checks.core import TIGHT, CheckFailed, Context
from ...checks.diagnosis import Candidate
from ...checks.expect import (
    Label,
    attempt,
    expect_blocked_zero,
    expect_close,
    expect_dropout,
    expect_no_dropout_in_eval,
    expect_output_pair,
    expect_unchanged,
    expect_value_error,
    float64,
)
from ...checks.gradients import backward_for, expect_gradients, expect_on_meta, loaded, moved
from ...checks.inputs import Attn, Inputs, attn_shapes, draw_inputs, per_head_params
from ...checks.search import pictured, run_cases
from ...messages import Message, joined, msg
from ...runner.protocol import Backward, Call, ModuleRun

Tensor = torch.Tensor

MODULE_EXAMPLES = 8  # shapes the search draws per module


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
# A failure is pictured on these, where a pattern shows (2 heads of 8 tokens, causal).
PICTURED_MODULE = Attn(1, 8, 8, 2, mask="causal")
PICTURED_HEAD = Attn(1, 8, 8, 1, mask="causal")
META_CASE = MODULE_CASES[4]  # the device check's case: a causal mask
# The longest sequence the speed check times (the cuda config of speed_config.py; a test keeps
# them in step): the masks check runs this length first, on every device.
LONGEST_TIMED_T = 128


_SAME_MASK: Any = object()


def expected_mha(c: Attn, inp: Inputs, mask: Tensor | None = _SAME_MASK) -> tuple[Tensor, Tensor]:
    """nn.MultiheadAttention's output and per-head weights, computed in float64."""
    params64 = float64(inp.params)
    mha = oracle.torch_mha(params64, c.E, c.H, c.kdim, c.vdim)
    mask = inp.mask if mask is _SAME_MASK else mask
    out, weights = oracle.multi_head_attention(
        mha, inp.query.double(), inp.key.double(), inp.value.double(), mask
    )
    return out.to(c.dtype), weights.to(c.dtype)


def _module_kwargs(c: Attn) -> dict[str, Any]:
    return {"kdim": c.kdim, "vdim": c.vdim, "bias": c.bias}


def _mha_mistakes(c: Attn, inp: Inputs, mask: Tensor | None = _SAME_MASK,
                  masks: tuple | list = ()) -> list[Candidate]:
    """The catalogue's versions of this case's (out, weights), computed in float64."""
    params64 = float64(inp.params)
    mask = inp.mask if mask is _SAME_MASK else mask
    return diagnosis.mha(params64, inp.query.double(), inp.key.double(), inp.value.double(),
                         c.H, mask, masks)


def _scale_read(c: Attn, inp: Inputs, tol: dict) -> scale.Read:
    """The scale c of weights softmax(c · q @ k^T), read off them."""
    raw = scale.raw_scores(float64(inp.params), inp.query.double(), inp.key.double(), c.H)
    return lambda got: scale.scale_reading(scale.scale_of_weights(got, raw, tol), c.E // c.H,
                                           c.E)


def _compare_module(name: str, call: Call, c: Attn, expected: tuple[Tensor, Tensor],
                    mask: Tensor | None, mistakes: list[Candidate], inp: Inputs,
                    case: Label = "", tol: dict | None = None) -> None:
    """The weights and the output against torch's; `mask`: the keys blocked, weight 0."""
    case, tol = case or c.label(), tol or c.tol
    out, weights = expect_output_pair(f"{name}.forward", call)
    what = msg("what.attention_weights", name=name)
    expect_close(what, weights, expected[1], case, tol, dims=("B", "H", "Tq", "Tk"),
                 mistakes=mistakes, part=1, beside=out, read=_scale_read(c, inp, tol))
    expect_blocked_zero(what, weights, mask, case)
    expect_close(msg("what.output", name=name), out, expected[0], case, tol,
                 dims=("B", "Tq", "E"), mistakes=mistakes, part=0)


HEAD_MODULE_CASES = (
    Attn(2, 5, 8, 1), Attn(2, 3, 6, 1, Tk=4, kdim=5, vdim=3), Attn(1, 1, 4, 1, bias=False),
    Attn(2, 6, 8, 1, mask="causal"), Attn(2, 5, 8, 1, mask="causal", dtype=torch.float32),
)


def check_attention_head(sub, ctx: Context) -> float:
    def one_case(c: Attn, head_dim: int | None = None) -> None:
        head_dim = head_dim or (3 if c.E % 3 == 0 else 4)
        case = joined([c.label(), f"head_dim={head_dim}"])
        gen = ctx.generator("attention_head", c, head_dim)
        inp = draw_inputs(c, gen, ctx.device)
        params = _head_params(c, inp, head_dim)
        args = (inp.query, inp.key, inp.value)
        p64 = float64(params)
        args64 = tuple(a.double() for a in args)
        mistakes = diagnosis.mha(p64, *args64, 1, inp.mask)
        out, weights = oracle.attention_head(p64, *args64, inp.mask)
        backward = backward_for(gen, c.dtype, (out, weights), ("out", "weights"),
                                _inputs(c), loaded(params))
        call = attempt(lambda: sub.run_module(ModuleRun(
            "AttentionHead", (c.E, head_dim), _module_kwargs(c), params,
            args, {"attn_mask": inp.mask}, dtype=c.dtype, backward=backward,
        )), case, mistakes)
        got_out, got_w = expect_output_pair("AttentionHead.forward", call)
        expect_unchanged("AttentionHead.forward", call, _passed(inp), case)
        what = msg("what.weights", name="AttentionHead")
        raw = scale.raw_scores(p64, *args64[:2], 1)[:, 0]  # (B, Tq, Tk): q @ k^T, unscaled
        expect_close(what, got_w, weights.to(c.dtype), case,
                     c.tol, dims=("B", "Tq", "Tk"), mistakes=mistakes, part=1, beside=got_out,
                     read=lambda got: scale.scale_reading(
                         scale.scale_of_weights(got, raw, c.tol), head_dim, c.E))
        expect_blocked_zero(what, got_w, inp.mask, case)
        expect_close(msg("what.output", name="AttentionHead"), got_out, out.to(c.dtype), case,
                     c.tol,
                     dims=("B", "Tq", "head_dim"), mistakes=mistakes, part=0)
        expect_gradients("AttentionHead", call, backward, lambda: oracle.attention_head_gradients(
            p64, args64, backward.inputs, inp.mask, backward.cotangents), case, c.tol)

    from hypothesis import strategies as st

    shapes = attn_shapes(single_head=True).flatmap(
        lambda c: st.tuples(st.just(c), st.integers(1, c.E)))
    run_cases(lambda pair: one_case(*pair), [(c, None) for c in HEAD_MODULE_CASES], shapes,
              MODULE_EXAMPLES, pictured(lambda pair: one_case(*pair), (PICTURED_HEAD, 4)))
    c = HEAD_MODULE_CASES[3]  # a causal mask

    def meta_run(device: str) -> Call:
        inp = moved(draw_inputs(c, ctx.generator("attention_head"), "cpu"), device)
        return sub.run_module(ModuleRun("AttentionHead", (c.E, 4), _module_kwargs(c),
                                        _head_params(c, inp, 4), (inp.query, inp.key, inp.value),
                                        {"attn_mask": inp.mask}, dtype=c.dtype))

    expect_on_meta(ctx, "AttentionHead.forward", meta_run, joined([c.label(), "head_dim=4"]))
    return 1.0


def _inputs(c: Attn) -> dict[int, str]:
    """The inputs whose gradients are compared: query, key and value; in self-attention one
    tensor passed three times, as in real use, so its gradient sums the three paths (a
    module that projects the key as the value trains as well there: it fails on cross-
    attention, as its forward does)."""
    return {0: "query", 1: "key", 2: "value"} if c.cross else dict.fromkeys(range(3), "query")


def _head_params(c: Attn, inp: Inputs, head_dim: int) -> dict[str, Tensor | None]:
    """One head's weights: the first head_dim rows of the fused q, k and v projections."""
    params = {k: v[:head_dim] for k, v in inp.params.items()
              if k.startswith(("q_", "k_", "v_")) and v is not None}
    params.update({f"{n}.bias": None for n in ("q_proj", "k_proj", "v_proj") if not c.bias})
    return params


def _mha_backward(gen: torch.Generator, c: Attn, expected: tuple[Tensor, Tensor],
                  params: dict[str, Tensor | None]) -> Backward | None:
    return backward_for(gen, c.dtype, expected, ("out", "weights"), _inputs(c), loaded(params))


def _mha_gradients(c: Attn, inp: Inputs, mask: Tensor | None, backward: Backward,
                   looped: bool) -> dict[str, Tensor | None]:
    """nn.MultiheadAttention's gradients for this case; sliced per head for a looped module."""
    grads = oracle.mha_gradients(float64(inp.params), c.E, c.H, c.kdim, c.vdim,
                                 (inp.query.double(), inp.key.double(), inp.value.double()),
                                 backward.inputs, mask, backward.cotangents)
    inputs = set(backward.inputs.values())
    if looped:
        weights = per_head_params({k: grads.get(k) for k in inp.params}, c.H)
        grads = {**{k: grads[k] for k in inputs}, **weights}
    return {k: v for k, v in grads.items() if k in inputs or k in backward.params}


def _passed(inp: Inputs, attn_mask: Tensor | None = _SAME_MASK) -> dict[str, Tensor | None]:
    """What `_run_mha` passes to forward, by name, for `expect_unchanged`."""
    mask = inp.mask if attn_mask is _SAME_MASK else attn_mask
    return {"query": inp.query, "key": inp.key, "value": inp.value, "attn_mask": mask}


def _module_params(class_name: str, c: Attn, inp: Inputs) -> dict[str, Tensor | None]:
    return per_head_params(inp.params, c.H) if class_name.startswith("Looped") else inp.params


def _run_mha(sub, class_name: str, c: Attn, inp: Inputs, backward: Backward | None = None,
             **forward: Any) -> Call:
    forward.setdefault("attn_mask", inp.mask)
    return sub.run_module(ModuleRun(
        class_name, (c.E, c.H), _module_kwargs(c), _module_params(class_name, c, inp),
        (inp.query, inp.key, inp.value), forward, dtype=c.dtype, backward=backward,
    ))


def _meta_run(sub, ctx: Context, check_id: str, class_name: str, c: Attn,
              **forward: Any) -> None:
    """The device check of a module, on case `c` drawn on meta."""
    expect_on_meta(ctx, f"{class_name}.forward", lambda device: _run_mha(
        sub, class_name, c, moved(draw_inputs(c, ctx.generator(check_id), "cpu"), device),
        **forward), c.label())


def _module_case(sub, ctx: Context, check_id: str, class_name: str) -> Callable[[Attn], None]:
    """One case of a module check: build, load the weights, run, compare with torch."""

    def one_case(c: Attn) -> None:
        gen = ctx.generator(check_id, c)
        inp = draw_inputs(c, gen, ctx.device)
        mistakes = _mha_mistakes(c, inp)
        expected = expected_mha(c, inp)
        backward = _mha_backward(gen, c, expected, _module_params(class_name, c, inp))
        call = attempt(lambda: _run_mha(sub, class_name, c, inp, backward), c.label(), mistakes)
        _compare_module(class_name, call, c, expected, inp.mask, mistakes, inp)
        expect_unchanged(f"{class_name}.forward", call, _passed(inp), c.label())
        expect_gradients(class_name, call, backward, lambda: _mha_gradients(
            c, inp, inp.mask, backward, class_name.startswith("Looped")), c.label(), c.tol)

    return one_case


def check_looped_mha(sub, ctx: Context) -> float:
    one_case = _module_case(sub, ctx, "looped_mha", "LoopedMultiHeadAttention")
    run_cases(one_case, MODULE_CASES, attn_shapes(), MODULE_EXAMPLES,
              pictured(one_case, PICTURED_MODULE))
    _meta_run(sub, ctx, "looped_mha", "LoopedMultiHeadAttention", META_CASE)
    _mask_ways(sub, ctx, "looped_mha", "LoopedMultiHeadAttention")  # is_causal too
    # The rest of its options, in eval mode, where the looped module is graded.
    _query_alone(sub, ctx, "looped_mha query", "LoopedMultiHeadAttention")
    _eval_options(sub, ctx, "looped_mha options", "LoopedMultiHeadAttention")
    return 1.0


def check_fused_mha(sub, ctx: Context) -> float:
    one_case = _module_case(sub, ctx, "fused_mha", "MultiHeadAttention")
    run_cases(one_case, MODULE_CASES, attn_shapes(), MODULE_EXAMPLES,
              pictured(one_case, PICTURED_MODULE))
    _meta_run(sub, ctx, "fused_mha", "MultiHeadAttention", META_CASE)
    _query_alone(sub, ctx, "fused_mha", "MultiHeadAttention")
    return 1.0


def _query_alone(sub, ctx: Context, seed_id: str, class_name: str) -> None:
    """key and value default to query."""
    c = Attn(2, 5, 16, 4)
    inp = draw_inputs(c, ctx.generator(seed_id), ctx.device)
    case = msg("case.query_alone")
    mistakes = _mha_mistakes(c, inp)
    run = ModuleRun(class_name, (c.E, c.H), {}, _module_params(class_name, c, inp),
                    (inp.query,), {})
    call = attempt(lambda: sub.run_module(run), case, mistakes)
    out, weights = expect_output_pair(f"{class_name}.forward", call)
    expect_close(msg("what.output", name=f"{class_name}(query)"), out,
                 expected_mha(c, inp)[0], case, TIGHT, dims=("B", "Tq", "E"), mistakes=mistakes,
                 part=0)


def check_fused_mha_masks(sub, ctx: Context) -> float:
    _mask_ways(sub, ctx, "fused_mha_masks", "MultiHeadAttention")
    _longest_timed(sub, ctx, "fused_mha_masks", "MultiHeadAttention")
    return 1.0


def _longest_timed(sub, ctx: Context, check_id: str, class_name: str) -> None:
    """is_causal=True at the longest sequence the speed check times. A module of the contract
    takes any length; one that cannot (a mask buffer made for fewer tokens) is told so here,
    on every device, rather than first by the timing run on a GPU."""
    c = Attn(1, LONGEST_TIMED_T, 8, 2)
    inp = draw_inputs(c, ctx.generator(check_id, c), ctx.device)
    causal = oracle.combined_mask(None, True, c.Tq, device=ctx.device)
    _masks_case(sub, ctx, check_id, class_name, c, inp, msg("case.longest_timed", T=c.Tq),
                {"attn_mask": None, "is_causal": True}, causal)


@dataclass(frozen=True, eq=False)  # tensors: compared by identity
class MaskWay:
    """One way of passing masks to forward: its label, the keyword arguments, the keys that
    end up blocked."""

    name: Label
    forward: dict[str, Any]
    mask: Tensor | None

    def label(self) -> Label:
        return self.name

    def traits(self) -> list[tuple[str, Message | str]]:
        """What it passes, in the words of the contract (`checks.causes`)."""
        attn_mask = self.forward.get("attn_mask") is not None
        causal = bool(self.forward.get("is_causal"))
        return [("attn_mask", msg("trait.attn_mask" if attn_mask else "trait.no_attn_mask")),
                ("is_causal", msg("trait.is_causal" if causal else "trait.not_causal")),
                ("masked", msg("trait.masked" if attn_mask or causal else "case.no_mask"))]


def _mask_ways(sub, ctx: Context, check_id: str, class_name: str) -> None:
    """Every way of passing masks (`attn_mask`, `is_causal`, both, neither), each compared
    with torch: a module of the contract takes them all."""
    gen = ctx.generator(check_id)
    c = Attn(2, 6, 12, 4, mask="random")  # D = 3, √E ≠ D: each scaling mistake differs
    inp = draw_inputs(c, gen, ctx.device)
    assert inp.mask is not None
    inp.mask[:, 0] = False  # with is_causal too, each query keeps a key: no row of NaN

    def blocked(attn_mask: Tensor | None) -> Tensor | None:
        return oracle.combined_mask(attn_mask, True, c.Tq, device=ctx.device)

    ways = (
        MaskWay(msg("case.attn_mask_only"), {"attn_mask": inp.mask}, inp.mask),
        MaskWay(msg("case.is_causal_only"), {"attn_mask": None, "is_causal": True},
                blocked(None)),
        MaskWay(msg("case.both_masks"), {"attn_mask": inp.mask, "is_causal": True},
                blocked(inp.mask)),
        MaskWay("attn_mask=None", {"attn_mask": None}, None),
    )
    # Every way is tried: a mistake is named when it explains each way that fails.
    run_cases(lambda way: _masks_case(sub, ctx, check_id, class_name, c, inp, way.name,
                                      way.forward, way.mask), ways)
    _meta_run(sub, ctx, check_id, class_name, c, is_causal=True)


def _masks_case(sub, ctx: Context, check_id: str, class_name: str, c: Attn, inp: Inputs,
                case: Label, forward: dict, mask: Tensor | None) -> None:
    """One way of passing masks; the expected mask is `mask`."""
    attn_mask = forward.get("attn_mask", inp.mask)
    wrong_masks = diagnosis.combined_masks(attn_mask, forward.get("is_causal", False), c.Tq,
                                           ctx.device)
    mistakes = _mha_mistakes(c, inp, mask, wrong_masks)
    expected = expected_mha(c, inp, mask=mask)
    backward = _mha_backward(ctx.generator(check_id, case), c, expected,
                             _module_params(class_name, c, inp))
    call = attempt(lambda: _run_mha(sub, class_name, c, inp, backward, **forward),
                   case, mistakes)
    _compare_module(class_name, call, c, expected, mask, mistakes, inp, case, TIGHT)
    expect_unchanged(f"{class_name}.forward", call, _passed(inp, attn_mask), case)
    expect_gradients(class_name, call, backward, lambda: _mha_gradients(
        c, inp, mask, backward, class_name.startswith("Looped")), case, TIGHT)


def _eval_options(sub, ctx: Context, seed_id: str, class_name: str
                  ) -> tuple[Attn, Inputs, tuple[Tensor, Tensor], Callable[[bool], Any]]:
    """need_weights=False, and dropout=0.5 in eval mode (none). Returns the case, its inputs,
    torch's (out, weights) and a function that runs the module with dropout=0.5, in training
    mode if asked."""
    gen = ctx.generator(seed_id)
    c = Attn(2, 5, 12, 4, mask="causal")
    inp = draw_inputs(c, gen, ctx.device)
    expected = expected_mha(c, inp)
    mistakes = _mha_mistakes(c, inp)
    params = _module_params(class_name, c, inp)

    # need_weights=False: the output alone, weights None.
    unweighted = _options_case(c, "need_weights=False")
    call = attempt(lambda: _run_mha(sub, class_name, c, inp, need_weights=False), unweighted,
                   mistakes)
    out, weights = expect_output_pair(f"{class_name}.forward", call)
    if weights is not None:
        raise CheckFailed(msg("modules.need_weights"))
    output = msg("what.output", name=class_name)
    expect_close(output, out, expected[0], unweighted, TIGHT,
                 dims=("B", "Tq", "E"), mistakes=mistakes, part=0)

    def run(training: bool) -> tuple[Any, Any]:
        return expect_output_pair(f"{class_name}.forward", attempt(lambda: sub.run_module(
            ModuleRun(class_name, (c.E, c.H), {"dropout": 0.5}, params,
                      (inp.query, inp.key, inp.value), {"attn_mask": inp.mask},
                      training=training, seed=0)), _dropout_case(c, training)))

    # Dropout: none in eval mode.
    out, weights = run(training=False)
    in_eval = _dropout_case(c, training=False)
    expect_no_dropout_in_eval(class_name, weights, expected[1], 0.5, in_eval)
    expect_close(msg("what.attention_weights", name=class_name), weights, expected[1],
                 in_eval, TIGHT, dims=("B", "H", "Tq", "Tk"), mistakes=mistakes, part=1,
                 beside=out)
    expect_close(output, out, expected[0], in_eval, TIGHT, dims=("B", "Tq", "E"),
                 mistakes=mistakes, part=0)
    return c, inp, expected, run


def _options_case(c: Attn, option: Label) -> Label:
    """The case an option of forward's is tried on (the mask it meets too), and the option."""
    return joined([c.label(), option])


def _dropout_case(c: Attn, training: bool) -> Label:
    """dropout=0.5, in training or in eval mode, on case `c`."""
    return _options_case(c, msg("case.training" if training else "case.eval_dropout", p=0.5))


def check_fused_mha_contract(sub, ctx: Context) -> float:
    expect_value_error(sub, "MultiHeadAttention", (10, 3), {},
                       msg("why.heads_divide", dim=10, heads=3))

    c, inp, expected, run = _eval_options(sub, ctx, "fused_mha_contract", "MultiHeadAttention")
    # Dropout in training mode: on the weights.
    out, weights = run(training=True)
    v = oracle.split_heads(F.linear(inp.value, inp.params["v_proj.weight"],
                                    inp.params["v_proj.bias"]), c.H)  # (B, H, Tk, D)
    expect_dropout("MultiHeadAttention", out, weights, expected[1], v, inp.params, 0.5,
                   _dropout_case(c, training=True))
    return 1.0

