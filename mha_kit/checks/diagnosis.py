"""The catalogue of known mistakes, and which of them reproduces a wrong answer: the mistakes
of attention, which several assignments name, and each assignment's own (`mistakes.py`).

When a value check fails, the grader recomputes the expected value with each classic mistake
applied, from torch primitives. A mistake whose result matches the student's answer (or
raises the very same error) is named in the message, with a hint. These variants only
explain failures: the expected values still come from `oracle` (PyTorch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
import torch.nn.functional as F

from .. import oracle
from ..catalog import modules
from ..messages import Message, ids_in, msg, texts_in
from ..runner.protocol import StudentCodeError
from ..runtime import one_thread
from .scale import ScaleReading, scale_sentence

Tensor = torch.Tensor


# How a mistake's sentence begins, in each language: the feedback shows it after what went wrong.
OPENINGS = {"en": "This matches ", "zh": "这与“"}


@dataclass(frozen=True)
class Mistake:
    """One classic mistake. Its sentence, "This matches <the mistake>: <what to do>.", is the
    message `mistake.<id>` (messages/en_mistakes.py, and each language's); a variant (which
    projection lacks its bias, the function the mistake is in) has its own sentence,
    `mistake.<id>_<variant>`, when one is written."""

    id: str
    variant: str = ""

    def sentence(self) -> Message:
        specific = f"mistake.{self.id}_{self.variant}"
        return msg(specific) if self.variant in VARIANTS.get(self.id, ()) else msg(
            f"mistake.{self.id}")

    def sentences(self) -> list[Message]:
        """Every sentence that names this mistake: its own and its variants'."""
        return [Mistake(self.id, v).sentence() for v in ("", *VARIANTS.get(self.id, ()))]


# The variants with a sentence of their own (a candidate's id is "<mistake>:<variant>").
VARIANTS: dict[str, tuple[str, ...]] = {
    "mask_inverted": ("causal_mask",),  # the fix is in causal_mask, not on the attend side
    "bias_ignored": ("qkvo", "qkv", "q", "v", "o"),  # which projections lack their bias
}

CATALOGUE: tuple[Mistake, ...] = tuple(Mistake(mistake_id) for mistake_id in (
    # splitting and merging heads
    "split_no_transpose", "split_interleaved", "merge_no_transpose", "merge_interleaved",
    # scores
    "no_scaling", "scale_by_d", "scale_by_embed_dim", "scale_by_wrong_dim", "qk_swapped",
    # A dim counted from the front, right for (B, H, T, D) only: `k.transpose(2, 3)` as
    # rasbt/LLMs-from-scratch writes it (ch03) in a module that sees only 4-d tensors; in
    # scaled_scores, which also gets a head's (B, T, D), it raises IndexError.
    "dims_from_the_front",
    # softmax
    "softmax_wrong_dim", "unstable_softmax",
    # `softmax(..., dtype=torch.float32)` (as Hugging Face transformers writes it) without the
    # `.to(dtype)` after it: float32 weights then meet the float64 values and matmul raises
    "float32_cast",
    # the causal mask
    "mask_inverted", "mask_shifted", "mask_transposed", "mask_after_softmax", "mask_fill_zero",
    # `scores.masked_fill(mask, ...)` on a line of its own: masked_fill returns a new tensor,
    # so every mask is ignored. Seen in published code: lucidrains/flamingo-pytorch issue #10
    # (github.com/lucidrains/flamingo-pytorch/issues/10, "zeroing out attention not
    # working"), facebookresearch/ParlAI pull request #3068 ("Fix masked_fill no-op"), and in
    # many tutorial copies of the Annotated Transformer's `attention` with
    # `scores.masked_fill(mask == 0, -1e9)` left unassigned.
    "mask_ignored",
    "is_causal_ignored", "attn_mask_ignored", "masks_and",
    # projections
    "bias_ignored", "weight_not_transposed", "k_proj_on_value", "q_proj_on_key",
    # `q, v, k = ...` unpacking a fused projection: seen in published code,
    # jsbaan/transformer-from-scratch (multi_head_attention.py).
    "kv_swapped",
    "value_from_key",
    # what forward returns
    "weights_averaged",
)) + tuple(Mistake(mistake_id) for own in modules("mistakes", optional=True).values()
          for mistake_id in own.CATALOGUE)  # each assignment's own (assignments/<name>/)
MISTAKES: dict[str, Mistake] = {m.id: m for m in CATALOGUE}

# A mistake id, or "<id>:<variant>", and its (lazy) result
Candidate = tuple[str, Callable[[], Any]]


def mistake_of(key: str) -> Mistake:
    """The mistake a candidate's id names: "bias_ignored:o" is bias_ignored, variant "o"."""
    mistake_id, _, variant = key.partition(":")
    return Mistake(MISTAKES[mistake_id].id, variant)


# Mistakes read off an answer rather than matched (`Diagnosis.read`): their sentences
# take the numbers read, so they are named by id but have no catalogue entry.
READ_OFF = ("scale_read",)


def named_in(message: Message | str) -> list[str]:
    """The ids of the mistakes a message names (its sentences' ids), in catalogue order, then
    those read off the answer."""
    ids = ids_in(message)
    return ([m.id for m in CATALOGUE if any(s.id in ids for s in m.sentences())]
            + [read for read in READ_OFF if f"mistake.{read}" in ids])


# --------------------------------------------------------------------------- matching


@dataclass(frozen=True)
class RaisesKind:
    """What a mistake known by the kind of error it raises gives, rather than a recomputed
    value: it reproduces any error of the student's code whose text holds one of `texts`
    (torch's words for tensors whose sizes do not fit, say). Its sentence names the likely
    causes of that error in one function."""

    texts: tuple[str, ...]


def _reproduces(got: Any, value: Any, tol: dict, same_dtype: bool = False) -> bool:
    if isinstance(got, tuple):  # both parts of an answer, (weights, out) say
        return (isinstance(value, tuple) and len(value) == len(got)
                and all(_reproduces(g, v, tol, same_dtype) for g, v in zip(got, value)))
    if isinstance(got, StudentCodeError) and isinstance(value, RaisesKind):
        return any(words in text for words in value.texts for text in texts_in(got.message))
    if isinstance(got, StudentCodeError) and isinstance(value, StudentCodeError):
        # the kit's own error about a module laid out as the mistake lays it out (weights
        # that do not fit it): the same, as data (a shape is text once it crossed a pipe)
        return value.kind == got.kind and value.message.to_data() == got.message.to_data()
    if isinstance(got, StudentCodeError):  # the student's code raised: the same error?
        first_line = str(value).strip().splitlines()[0] if isinstance(value, Exception) else ""
        return bool(first_line) and any(first_line in text for text in texts_in(got.message))
    if not isinstance(got, Tensor) or not isinstance(value, Tensor) or got.shape != value.shape:
        return False
    if same_dtype and got.dtype != value.dtype:
        return False
    if got.dtype == torch.bool or value.dtype == torch.bool:
        return torch.equal(got, value.to(got.dtype))
    close = torch.isclose(got.double(), value.double(), equal_nan=True, **tol)
    return bool(close.all())


class Diagnosis:
    """Which known mistakes reproduce one wrong answer. The candidates run on first use."""

    def __init__(self, got: Any, candidates: list[Candidate], tol: dict,
                 read: Callable[[], ScaleReading | None] | None = None,
                 same_dtype: bool = False):
        self.got = got  # a tensor, or the error the student's code raised
        self.candidates = candidates
        self.tol = tol
        # Right values in the wrong dtype: a mistake must give that dtype too (else any
        # mistake that leaves the case's values right would match).
        self.same_dtype = same_dtype
        self.read = read  # the answer's scale, for what no catalogue mistake explains
        # The diagnoses of every failing case of the same cause (set by `causes.verdict`): a
        # scale read off this answer is said only if all of theirs have the same form.
        self.together: list[Diagnosis] = [self]
        # The matches that also reproduce every other failing case of the same cause (set by
        # `search.run_cases`); None: this case alone decides.
        self.agreed: tuple[str, ...] | None = None
        self._tried: dict[str, bool] = {}

    @cached_property
    def matches(self) -> tuple[str, ...]:
        with one_thread():
            return tuple(key for key in dict.fromkeys(k for k, _ in self.candidates)
                         if self.reproduces(key))

    def reproduces(self, key: str) -> bool:
        """Whether the candidates of this key (a mistake, maybe with its variant) reproduce
        the answer; each key's candidates run once, and only when asked."""
        if key not in self._tried:
            self._tried[key] = any(self._one(make) for k, make in self.candidates if k == key)
        return self._tried[key]

    def _one(self, make: Callable[[], Any]) -> bool:
        try:
            value = make()
        except Exception as err:  # a mistake may well raise: compare the error then
            value = err
        return _reproduces(self.got, value, self.tol, self.same_dtype)

    @property
    def mistake(self) -> Mistake | None:
        """The first match that every failing case of its cause agrees on."""
        keys = [m for m in self.matches if self.agreed is None or m in self.agreed]
        return mistake_of(keys[0]) if keys else None

    @cached_property
    def reading(self) -> ScaleReading | None:
        if self.read is None:
            return None
        with one_thread():
            return self.read()

    def sentence(self) -> Message | None:
        """What the answer matches: a catalogue mistake, else its scale read off it, if every
        failing case of its cause reads the same way."""
        mistake = self.mistake
        if mistake is not None:
            return mistake.sentence()
        readings = [d.reading for d in self.together]
        return scale_sentence(readings) if self.read and all(readings) else None


# --------------------------------------------------------------------------- step functions


def split_heads(x: Tensor, num_heads: int) -> list[Candidate]:
    B, T, E = x.shape
    D = E // num_heads
    return [
        ("split_no_transpose", lambda: x.reshape(B, num_heads, T, D)),
        ("split_no_transpose", lambda: x.reshape(B, T, num_heads, D)),
        ("split_interleaved", lambda: x.reshape(B, T, D, num_heads).permute(0, 3, 1, 2)),
    ]


def merge_heads(x: Tensor) -> list[Candidate]:
    B, H, T, D = x.shape
    return [
        ("merge_no_transpose", lambda: x.reshape(B, T, H * D)),
        ("merge_interleaved", lambda: x.permute(0, 2, 3, 1).reshape(B, T, D * H)),
    ]


def scaled_scores(q: Tensor, k: Tensor) -> list[Candidate]:
    raw = q @ k.transpose(-2, -1)  # (..., Tq, Tk)
    d = q.shape[-1]
    candidates: list[Candidate] = [
        ("no_scaling", lambda: raw),
        ("scale_by_d", lambda: raw / d),
        ("qk_swapped", lambda: k @ q.transpose(-2, -1) / math.sqrt(d)),
        ("scale_by_wrong_dim", lambda: raw / math.sqrt(q.shape[-2])),
    ]
    if q.dim() == 3:  # (B, T, D): dims 2 and 3 of (B, H, T, D) are not there
        candidates.append(("dims_from_the_front", lambda: q @ k.transpose(2, 3) / math.sqrt(d)))
    if q.dim() == 4:  # (B, H, T, D): the heads dim and the whole embedding
        candidates += [("scale_by_wrong_dim", lambda: raw / math.sqrt(q.shape[1])),
                       ("scale_by_embed_dim", lambda: raw / math.sqrt(q.shape[1] * d))]
    return candidates


def causal_mask(seq_len: int, device: Any = None) -> list[Candidate]:
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)
    return [
        ("mask_inverted:causal_mask", lambda: ones.tril()),
        ("mask_shifted", lambda: ones.triu(0)),
        ("mask_shifted", lambda: ones.triu(2)),
        ("mask_transposed", lambda: ones.tril(-1)),
    ]


def _softmax(scores: Tensor, how: str = "", dim: int = -1) -> Tensor:
    if how == "exp":
        e = scores.exp()
        return e / e.sum(dim, keepdim=True)
    if how == "float32":  # kept in float32, whatever the scores' dtype
        return torch.softmax(scores, dim=dim, dtype=torch.float32)
    return torch.softmax(scores, dim=dim)


def _masked_weights(scores: Tensor, mask: Tensor | None, how: str = "", softmax: str = "",
                    dim: int = -1) -> Tensor:
    """Softmax weights with the mask applied correctly, or in one of the classic wrong ways."""
    if mask is not None and how in ("", "inverted", "fill_zero"):  # "ignored": no mask at all
        blocked = ~mask if how == "inverted" else mask
        scores = scores.masked_fill(blocked, 0.0 if how == "fill_zero" else -math.inf)
    weights = _softmax(scores, softmax, dim)
    if mask is not None and how == "after_softmax":
        weights = weights.masked_fill(mask, 0.0)
    return weights


def attend(scores: Tensor, v: Tensor, mask: Tensor | None = None) -> list[Candidate]:
    """Candidates for (out, weights)."""

    def with_weights(**how: Any) -> Callable[[], tuple[Tensor, Tensor]]:
        def run() -> tuple[Tensor, Tensor]:
            weights = _masked_weights(scores, mask, **how)
            return weights @ v, weights
        return run

    n = scores.dim()
    wrong_dims = sorted({d % n for d in (-2, 1)} - {n - 1})  # keys' neighbour, or heads
    candidates = [("softmax_wrong_dim", with_weights(dim=d)) for d in wrong_dims]
    candidates.append(("unstable_softmax", with_weights(softmax="exp")))
    if scores.dtype != torch.float32:  # else a float32 softmax is the right answer
        candidates.append(("float32_cast", with_weights(softmax="float32")))
    if mask is not None:
        candidates += [(f"mask_{how}", with_weights(how=how))
                       for how in ("inverted", "after_softmax", "fill_zero", "ignored")]
    return candidates


def output_projection(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> list[Candidate]:
    def plus_bias(y: Tensor) -> Tensor:
        return y if bias is None else y + bias

    return [
        ("bias_ignored", lambda: x @ weight.t()),
        ("weight_not_transposed", lambda: plus_bias(x @ weight)),
    ]


# --------------------------------------------------------------------------- modules


@dataclass(frozen=True)
class Knobs:
    """One way to get multi-head attention wrong; the defaults get it right."""

    split: str = ""  # "no_transpose" (B, H, T, D) read straight, "tokens_first", "interleaved"
    merge: str = ""  # "no_transpose", "interleaved", "tokens_first" (B, T, H, D) flattened
    scale: str = ""  # "none", "d", "embed_dim", "tokens", "heads"
    qk_swapped: bool = False
    softmax: str = ""  # "exp": by hand; "float32": kept in float32
    softmax_dim: int = -1
    mask: str = ""  # "inverted", "after_softmax", "fill_zero", "ignored"
    no_bias: str = ""  # the projections without their bias, among "qkvo"
    out_not_transposed: bool = False
    k_from: str = "k"  # which projection makes k from the key
    v_from: str = "v"
    v_input: str = "value"  # or "key"
    weights: str = ""  # "mean": averaged over heads


MHA_VARIANTS: tuple[tuple[str, Knobs], ...] = (
    ("split_no_transpose", Knobs(split="no_transpose")),
    ("split_no_transpose", Knobs(split="no_transpose", merge="no_transpose")),
    ("split_no_transpose", Knobs(split="tokens_first")),
    ("split_no_transpose", Knobs(split="tokens_first", merge="tokens_first")),
    ("split_interleaved", Knobs(split="interleaved")),
    ("split_interleaved", Knobs(split="interleaved", merge="interleaved")),
    ("merge_no_transpose", Knobs(merge="no_transpose")),
    ("merge_interleaved", Knobs(merge="interleaved")),
    ("no_scaling", Knobs(scale="none")),
    ("scale_by_d", Knobs(scale="d")),
    ("scale_by_embed_dim", Knobs(scale="embed_dim")),
    ("scale_by_wrong_dim", Knobs(scale="tokens")),
    ("scale_by_wrong_dim", Knobs(scale="heads")),
    ("qk_swapped", Knobs(qk_swapped=True)),
    ("softmax_wrong_dim", Knobs(softmax_dim=-2)),
    ("softmax_wrong_dim", Knobs(softmax_dim=1)),
    ("unstable_softmax", Knobs(softmax="exp")),
    ("float32_cast", Knobs(softmax="float32")),
    ("mask_inverted", Knobs(mask="inverted")),
    ("mask_after_softmax", Knobs(mask="after_softmax")),
    ("mask_fill_zero", Knobs(mask="fill_zero")),
    ("mask_ignored", Knobs(mask="ignored")),
    # Without the key bias alone the weights do not change: q.b_k is the same for every key.
    *((f"bias_ignored:{which}", Knobs(no_bias=which)) for which in VARIANTS["bias_ignored"]),
    ("weight_not_transposed", Knobs(out_not_transposed=True)),
    ("k_proj_on_value", Knobs(v_from="k")),
    ("q_proj_on_key", Knobs(k_from="q")),
    ("kv_swapped", Knobs(k_from="v", v_from="k")),
    ("value_from_key", Knobs(v_input="key")),
    ("weights_averaged", Knobs(weights="mean")),
)


def _split(x: Tensor, num_heads: int, how: str) -> Tensor:
    B, T, E = x.shape
    D = E // num_heads
    if how == "no_transpose":
        return x.reshape(B, num_heads, T, D)
    if how == "tokens_first":
        return x.reshape(B, T, num_heads, D)
    if how == "interleaved":
        return x.reshape(B, T, D, num_heads).permute(0, 3, 1, 2)
    return x.reshape(B, T, num_heads, D).transpose(1, 2)  # (B, H, T, D)


def _merge(x: Tensor, how: str) -> Tensor:
    B, T = x.shape[0], x.shape[2]
    if how == "tokens_first":  # x is (B, T, H, D)
        return x.reshape(B, x.shape[1], -1)
    if how == "no_transpose":
        return x.reshape(B, T, -1)
    if how == "interleaved":
        return x.permute(0, 2, 3, 1).reshape(B, T, -1)
    return x.transpose(1, 2).reshape(B, T, -1)  # (B, T, H*D)


def attention(params: dict[str, Tensor | None], query: Tensor, key: Tensor, value: Tensor,
              num_heads: int, mask: Tensor | None, knobs: Knobs = Knobs()
              ) -> tuple[Tensor, Tensor]:
    """Multi-head attention with the knobs' mistakes: (out, weights (B, H, Tq, Tk)).

    Without `out_proj.weight` in params it is one `AttentionHead`: (out, weights (B, Tq, Tk)).
    """

    def project(x: Tensor, name: str) -> Tensor:
        bias = None if name in knobs.no_bias else params.get(f"{name}_proj.bias")
        return F.linear(x, params[f"{name}_proj.weight"], bias)

    q = _split(project(query, "q"), num_heads, knobs.split)
    k = _split(project(key, knobs.k_from), num_heads, knobs.split)
    v = _split(project(key if knobs.v_input == "key" else value, knobs.v_from), num_heads,
               knobs.split)
    d = q.shape[-1]
    scale = {"": math.sqrt(d), "none": 1.0, "d": d, "embed_dim": math.sqrt(query.shape[-1]),
             "tokens": math.sqrt(query.shape[1]), "heads": math.sqrt(num_heads)}
    first, second = (k, q) if knobs.qk_swapped else (q, k)
    scores = first @ second.transpose(-2, -1) / scale[knobs.scale]  # (B, H, Tq, Tk)
    weights = _masked_weights(scores, mask, knobs.mask, knobs.softmax, knobs.softmax_dim)
    out = _merge(weights @ v, knobs.merge)  # (B, Tq, E)
    if "out_proj.weight" not in params:  # one head
        return out, weights[:, 0]
    w_o, b_o = params["out_proj.weight"], params["out_proj.bias"]
    b_o = None if "o" in knobs.no_bias else b_o
    out = (out @ w_o + (0 if b_o is None else b_o) if knobs.out_not_transposed
           else F.linear(out, w_o, b_o))
    return out, weights.mean(1) if knobs.weights == "mean" else weights


def mha(params: dict[str, Tensor | None], query: Tensor, key: Tensor, value: Tensor,
        num_heads: int, mask: Tensor | None,
        masks: Sequence[tuple[str, Tensor | None]] = ()) -> list[Candidate]:
    """Candidates for a module's (out, weights): each knob, then each wrongly built mask."""

    def run(knobs: Knobs, m: Tensor | None = mask) -> Callable[[], tuple[Tensor, Tensor]]:
        return lambda: attention(params, query, key, value, num_heads, m, knobs)

    candidates = [(mistake_id, run(knobs)) for mistake_id, knobs in MHA_VARIANTS]
    return candidates + [(mistake_id, run(Knobs(), m)) for mistake_id, m in masks]


def combined_masks(attn_mask: Tensor | None, is_causal: bool, seq_len: int,
                   device: Any = None) -> list[tuple[str, Tensor | None]]:
    """The masks a module may wrongly build from `attn_mask` and `is_causal`."""
    if not is_causal:
        return []
    causal = oracle.causal_mask(seq_len, device=device)
    wrong = [(mistake_id, make()) for mistake_id, make in causal_mask(seq_len, device)]
    if attn_mask is None:
        return wrong + [("is_causal_ignored", None)]
    return ([(mistake_id, attn_mask | m) for mistake_id, m in wrong]
            + [("is_causal_ignored", attn_mask), ("attn_mask_ignored", causal),
               ("masks_and", attn_mask & causal)])

