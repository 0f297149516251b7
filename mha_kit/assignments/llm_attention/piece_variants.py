"""More known mistakes of llm_attention's pieces, recomputed from torch primitives as
variants.py's are: RoPE's pairs laid out one way and written back another, and the sliding
window's bounds each off by one (kept apart so that variants.py stays within 500 lines)."""

from __future__ import annotations

import torch

from . import oracle

Tensor = torch.Tensor


def turned_pairs(x1: Tensor, x2: Tensor, angles: Tensor) -> tuple[Tensor, Tensor]:
    """Each pair (x1_i, x2_i) turned by its angle (T, D/2), in float64."""
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x1.double(), x2.double()
    return x1 * cos - x2 * sin, x1 * sin + x2 * cos


def _turned(x1: Tensor, x2: Tensor, positions: Tensor, base: float, D: int
            ) -> tuple[Tensor, Tensor]:
    """Each pair (x1_i, x2_i) turned by θ_i at each position, in float64."""
    return turned_pairs(x1, x2, oracle.rope_angles(positions, D, base))


def rope_layout_candidates(x: Tensor, positions: Tensor, base: float) -> list:
    """RoPE whose pairs are read in one layout and written back in the other: adjacent
    features (x[..., 0::2], x[..., 1::2]) turned and concatenated as halves, or the halves
    (i, i + D/2) turned and interleaved (torch.stack(..., dim=-1).flatten(-2)); and the
    rotate-half angle table (torch.cat([angles, angles])) on adjacent pairs (x * cos +
    rotate_every_two(x) * sin), where 2i and 2i + 1 turn by different angles."""
    D, half = x.shape[-1], x.shape[-1] // 2

    def adjacent_as_halves() -> Tensor:
        return torch.cat(_turned(x[..., 0::2], x[..., 1::2], positions, base, D), dim=-1)

    def halves_interleaved() -> Tensor:
        turned = _turned(x[..., :half], x[..., half:], positions, base, D)
        return torch.stack(turned, dim=-1).flatten(-2)

    def halves_table_on_adjacent_pairs() -> Tensor:
        angles = oracle.rope_angles(positions, D, base)
        table = torch.cat([angles, angles], dim=-1)  # (T, D)
        xd = x.double()
        every_two = torch.stack([-xd[..., 1::2], xd[..., 0::2]], dim=-1).flatten(-2)
        return xd * table.cos() + every_two * table.sin()

    return [("rope_pairs_relaid", lambda: adjacent_as_halves().to(x.dtype)),
            ("rope_pairs_relaid", lambda: halves_interleaved().to(x.dtype)),
            ("rope_pairs_relaid", lambda: halves_table_on_adjacent_pairs().to(x.dtype))]


def window_candidates(T: int, window: int) -> list:
    """The sliding window with a bound off by one: the upper one strict (j < i: the query's
    own key left out), the lower one a key further or nearer (j >= i - window, j > i -
    window + 1), or both; on both sides, inverted, not causal, or transposed."""
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    right = (j <= i) & (j > i - window)
    found = []
    for self_excluded in (False, True):
        upper = j < i if self_excluded else j <= i
        for shift, lower_id in ((1, "window_one_too_many"), (0, ""), (-1, "window_one_too_few")):
            mistake_id = "window_self_excluded" if self_excluded else lower_id
            if mistake_id:
                found.append((mistake_id, lambda upper=upper, shift=shift:
                              upper & (j > i - window - shift)))
    return [*found,
            ("window_two_sided", lambda: (j - i).abs() < window),
            ("window_two_sided", lambda: (j - i).abs() <= window),
            ("window_inverted", lambda: ~right),
            ("window_not_causal", lambda: j > i - window),
            ("window_transposed", lambda: right.T)]
