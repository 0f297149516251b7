"""The Triton speed check's sizes and inputs, which the grader and the timing job both derive
from one seed (`speed` for the check, docs/speed.md for the figures)."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import torch

from ...speed.config import chosen_test_config

Tensor = torch.Tensor


@dataclass(frozen=True)
class SpeedConfig:
    """Causal attention over q, k, v (B, H, T, D) in `dtype`, forward and backward, with the
    student's kernels asked for blocks of block_m queries and block_n keys: `calls` calls per
    candidate in each of `rounds` interleaved rounds, after `warmup` calls."""

    B: int
    H: int
    T: int
    D: int
    block_m: int
    block_n: int
    rounds: int
    calls: int
    warmup: int = 3
    dtype: str = "float16"


# A GPU: long enough a sequence that the work above the diagonal and the launches of a loop
# over heads cost far more than a launch's overhead; float16, as tensor cores want it.
GRADED = SpeedConfig(B=4, H=16, T=1024, D=64, block_m=64, block_n=64, rounds=15, calls=4)
# The kit's tests (the `speed_config` setting): "tiny" runs in Triton's interpreter in
# seconds, for the timing job's logic only; "small" is the graded shape timed fewer times.
TINY = SpeedConfig(B=1, H=2, T=40, D=16, block_m=16, block_n=16, rounds=2, calls=1, warmup=1,
                   dtype="float32")
SPOT_CHECKS = 2  # timed calls whose output and gradients the grader compares with PyTorch
SPOT_HEADS = 2  # of batch element 0: the heads the spot check compares


def speed_config() -> SpeedConfig:
    """The graded config, or the test config the `speed_config` setting names."""
    name = chosen_test_config()
    if name == "tiny":
        return TINY
    return replace(GRADED, rounds=5, calls=2, warmup=1) if name == "small" else GRADED


def speed_inputs(cfg: SpeedConfig, seed: int, index: int) -> tuple[Tensor, ...]:
    """Input number `index` (round r, call c is index r * calls + c): q, k, v and the output's
    gradient dO, each (B, H, T, D) in cfg.dtype, on the CPU."""
    gen = torch.Generator().manual_seed(seed * 100_003 + index)
    return tuple(torch.randn(cfg.B, cfg.H, cfg.T, cfg.D, generator=gen).to(
        getattr(torch, cfg.dtype)) for _ in range(4))


def spot_indices(cfg: SpeedConfig, seed: int) -> list[int]:
    """Which timed calls are checked; both sides derive them from the seed."""
    return sorted(random.Random(seed).sample(range(cfg.rounds * cfg.calls),
                                             min(SPOT_CHECKS, cfg.rounds * cfg.calls)))
