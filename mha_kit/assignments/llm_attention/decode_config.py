"""The decoding speed check's sizes and inputs, which the grader and the counting job both
derive from one seed (see `decode_speed` for the check, docs/speed.md for the figures)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...speed.config import chosen_test_config

Tensor = torch.Tensor


@dataclass(frozen=True)
class DecodeConfig:
    """A prefill of P tokens, then N tokens decoded one at a time: counted once, then timed
    `rounds` times for the message."""

    B: int
    P: int
    N: int
    E: int
    H: int
    Hkv: int
    rounds: int


# On the CPU whatever device grades: the work counted is the same on any device, and the time
# shown beside it is the CPU's. A long prefix makes recomputing it cost far more than a cache;
# key/value heads are half the query heads, so recomputing only the keys and values costs a
# third of recomputing everything, and a buffer attended whole costs its length, not the
# tokens it holds (docs/speed.md, the dead band).
GRADED = DecodeConfig(B=1, P=192, N=12, E=512, H=8, Hkv=4, rounds=3)
# The kit's tests (the `speed_config` setting, as for the other speed check): "small" keeps the
# graded sizes and times one round, "tiny" takes milliseconds, for the check's logic only.
TINY = DecodeConfig(B=1, P=6, N=3, E=16, H=4, Hkv=2, rounds=1)
SPOT_TOLERANCE = {"rtol": 1e-3, "atol": 1e-3}  # float32 against a float64 oracle


def decode_config() -> DecodeConfig:
    """The graded config, or the test config the `speed_config` setting names."""
    name = chosen_test_config()
    if name == "tiny":
        return TINY
    return replace(GRADED, rounds=1) if name == "small" else GRADED


def decode_params(cfg: DecodeConfig, seed: int) -> dict[str, Tensor]:
    """Bias-free weights scaled like nn.Linear's, float32, on the CPU."""
    gen = torch.Generator().manual_seed(seed)
    D = cfg.E // cfg.H
    rows = {"q_proj": cfg.E, "k_proj": cfg.Hkv * D, "v_proj": cfg.Hkv * D, "out_proj": cfg.E}
    return {f"{name}.weight": torch.randn(n, cfg.E, generator=gen) / cfg.E ** 0.5
            for name, n in rows.items()}


def decode_input(cfg: DecodeConfig, seed: int) -> Tensor:
    """The tokens (B, P + N, E), float32, on the CPU."""
    return torch.randn(cfg.B, cfg.P + cfg.N, cfg.E, generator=torch.Generator().manual_seed(
        seed + 1))
