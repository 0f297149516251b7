"""The style set of the Triton speed check (triton_speed): reference.py's kernels written the
ways its threshold must tell apart, each a whole submission (reference.py with edits, then any
code appended). scripts/triton_speed_calibration.py times them on a GPU (docs/speed.md).

Kinds: "correct" must earn the points; "slow" must not; "shown" is timed and printed, and left
out of the dead band (whether 16 x 16 blocks, the contract's default, earn the points is for
the calibration's figures to say).
"""

from __future__ import annotations

from dataclasses import dataclass

from triton_mutants import Mutant

# The loop bounds that skip the key blocks above the diagonal (forward and dQ), and the query
# blocks before it (dK and dV).
_SKIPPED = (("hi = tl.minimum(Tk, (start_m + 1) * BLOCK_M + offset)", "hi = Tk"),
            ("lo = tl.maximum(0, start_n * BLOCK_N - offset) // BLOCK_M * BLOCK_M", "lo = 0"))


def _blocks(block_m: int, block_n: int) -> str:
    """flash_attention_triton with these blocks, whatever the caller asks for."""
    return ("\n\n_asked = flash_attention_triton\n\n\n"
            "def flash_attention_triton(q, k, v, is_causal=False, block_m=16, block_n=16):\n"
            f"    return _asked(q, k, v, is_causal, {block_m}, {block_n})\n")


_HEADS_LOOPED = """

_one_launch = flash_attention_triton


def flash_attention_triton(q, k, v, is_causal=False, block_m=16, block_n=16):
    return torch.cat([_one_launch(q[:, h:h + 1], k[:, h:h + 1], v[:, h:h + 1], is_causal,
                                  block_m, block_n) for h in range(q.shape[1])], dim=1)
"""


@dataclass(frozen=True)
class SpeedStyle:
    label: str
    kind: str  # "correct", "slow" or "shown"
    edits: tuple[tuple[str, str], ...] = ()
    appended: str = ""

    def source(self) -> str:
        return Mutant(self.label, self.edits).source() + self.appended


STYLES: tuple[SpeedStyle, ...] = (
    SpeedStyle("the blocks asked for", "correct"),
    SpeedStyle("large blocks (128 x 64)", "correct", appended=_blocks(128, 64)),
    SpeedStyle("small blocks (16 x 16)", "shown", appended=_blocks(16, 16)),
    SpeedStyle("no causal block skipped", "slow", edits=_SKIPPED),
    SpeedStyle("heads looped from Python", "slow", appended=_HEADS_LOOPED),
)
