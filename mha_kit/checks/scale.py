"""A wrong scale read off the answer: scores, or attention weights, that are those of some
constant times q @ k^T, said in numbers (`ScaleReading`), for any constant, not only the
catalogue's. A reading is said only when every failing case of its cause follows one rule
(`Diagnosis.sentence`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ..messages import Message, msg

Tensor = torch.Tensor


def scale_of_scores(got: Any, raw: Tensor, tol: dict) -> float | None:
    """The constant c with got = c · raw (raw = q @ k^T), if one explains every finite entry
    within `tol`; None otherwise."""
    if not isinstance(got, Tensor) or got.shape != raw.shape or not got.is_floating_point():
        return None
    g, r = got.double(), raw.double()
    finite = torch.isfinite(g) & torch.isfinite(r)
    g, r = g[finite], r[finite]
    if g.numel() == 0 or float((r * r).sum()) == 0.0:
        return None
    c = float((g * r).sum() / (r * r).sum())
    return c if bool(torch.isclose(g, c * r, **tol).all()) else None


def scale_of_weights(got: Any, raw: Tensor, tol: dict) -> float | None:
    """The constant c with got = softmax(c · raw) over the keys it does not block (weight 0),
    if one explains every weight within `tol`; None otherwise. Read off log-weights, which are
    c · raw up to one constant per row."""
    if not isinstance(got, Tensor) or got.shape != raw.shape or not got.is_floating_point():
        return None
    w, r = got.double(), raw.double()
    kept = w > 0
    if not bool(torch.isfinite(w).all()) or not bool(kept.any()):
        return None
    count = kept.sum(-1, keepdim=True).clamp(min=1)

    def centred(x: Tensor) -> Tensor:  # each row less its mean over the keys kept
        return torch.where(kept, x - (x * kept).sum(-1, keepdim=True) / count, 0.0)

    x, y = centred(r), centred(torch.where(kept, w.log(), 0.0))
    if float((x * x).sum()) == 0.0:
        return None
    c = float((x * y).sum() / (x * x).sum())
    again = torch.softmax((c * r).masked_fill(~kept, -math.inf), dim=-1)
    return c if bool(torch.isclose(w, again.nan_to_num(0.0), **tol).all()) else None


_DIMS = ("√3", "√4")  # √k.dim() of a (B, T, D) or a (B, H, T, D) tensor


@dataclass(frozen=True)
class ScaleReading:
    """Scores divided by `divisor` where √d was due (d: the size of one head)."""

    divisor: float
    d: int
    embed_dim: int | None = None


# An answer's scale, read off it (None: no constant explains it, or it is right)
Read = Callable[[Any], "ScaleReading | None"]


def scale_reading(c: float | None, d: int, embed_dim: int | None = None) -> ScaleReading | None:
    """The reading of a scale c found in an answer; None for none found or the right one."""
    if c is None or c <= 0 or math.isclose(c, 1 / math.sqrt(d), rel_tol=1e-3):
        return None
    return ScaleReading(1 / c, d, embed_dim)


def _same_form(readings: list[ScaleReading]) -> bool:
    """Whether one rule gives every divisor: a constant, or a constant times √d, d or
    √embed_dim."""
    forms = (lambda r: 1.0, lambda r: math.sqrt(r.d), lambda r: float(r.d),
             lambda r: math.sqrt(r.embed_dim or 0) or math.nan)
    return any(all(math.isclose(r.divisor / form(r), readings[0].divisor / form(readings[0]),
                                rel_tol=1e-3) for r in readings) for form in forms)


def _expressions(divisor: float, d: int, embed_dim: int | None) -> list[str]:
    """The names of `divisor` in terms of the sizes at hand (several where they coincide)."""
    named = {"1 (no scaling)": 1.0, f"{d}": float(d), **dict.fromkeys(_DIMS),
             f"2·√{d}": 2 * math.sqrt(d)}
    named.update({"√3": math.sqrt(3), "√4": 2.0})
    if embed_dim:
        named[f"√{embed_dim}"] = math.sqrt(embed_dim)
    return list(dict.fromkeys(name for name, value in named.items()
                              if math.isclose(divisor, value, rel_tol=1e-3)))


def scale_sentence(readings: list[ScaleReading]) -> Message | None:
    """A wrong scale in numbers, that of the first reading; None if there is none, or if the
    readings of one cause's cases follow no one rule."""
    if not readings or not _same_form(readings):
        return None
    divisor, d, embed_dim = readings[0].divisor, readings[0].d, readings[0].embed_dim
    names = _expressions(divisor, d, embed_dim)
    dims = len(names) == 1 and names[0] in _DIMS
    return msg("mistake.scale_read", divisor=divisor,
               named=msg("mistake.scale_named", expression=" = ".join(names)) if names else "",
               d=d, expected=math.sqrt(d), hint=msg("mistake.scale_dims") if dims else "")


def raw_scores(params: dict[str, Tensor | None], query: Tensor, key: Tensor,
               num_heads: int) -> Tensor:
    """q @ k^T per head, unscaled, from the module's projections: (B, H, Tq, Tk)."""
    def heads(x: Tensor) -> Tensor:
        B, T, E = x.shape
        return x.reshape(B, T, num_heads, E // num_heads).transpose(1, 2)  # (B, H, T, D)

    q = heads(F.linear(query, params["q_proj.weight"], params.get("q_proj.bias")))
    k = heads(F.linear(key, params["k_proj.weight"], params.get("k_proj.bias")))
    return q @ k.transpose(-2, -1)  # (B, H, Tq, Tk)
