"""The Triton speed check (triton_speed) on the styles of tests/corpus/triton/speed_styles.py,
on a GPU: each style timed N times by the check's own job, against SDPA and the kit's
FlashAttention in PyTorch, judged by the check's own judge; a table of each style's share of
SDPA's speed, the dead band between the slowest style that must earn the points and the fastest
that must not, the threshold in its middle, and its margins (docs/speed.md). It times the
graded config (GRADED in mha_kit/assignments/triton_attention/speed_config.py), unless
MHA_KIT_SPEED_CONFIG names a test config ("tiny": in Triton's interpreter on the CPU, for the
script's logic only). Exit status 0 where the margins hold.

    python scripts/triton_speed_calibration.py [N] [--device cuda|cpu]     # N runs a style (5)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "corpus" / "triton"))

from speed_styles import STYLES  # noqa: E402

from mha_kit.assignments.triton_attention.calibration import (  # noqa: E402
    calibration_table,
    style_row,
    table_head,
    timed_runs,
)
from mha_kit.runner.inprocess import InProcessSubmission  # noqa: E402
from mha_kit.runtime import default_device, triton_as_configured, triton_interpret  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=int, nargs="?", default=5)
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None)
    args = parser.parse_args(argv)
    device = args.device or default_device()
    os.environ["TRITON_INTERPRET"] = triton_interpret(device)
    triton_as_configured()
    results = {}
    print("\n".join(table_head(device)), file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="triton-styles-") as folder:
        for i, style in enumerate(STYLES):
            path = Path(folder, f"style_{i}.py")
            path.write_text(style.source(), encoding="utf-8")
            sub = InProcessSubmission.from_path(path, kit_code=True)
            results[style.label] = (style.kind, timed_runs(sub, device, args.runs))
            # each row as soon as it is timed: a run cut short still leaves its rows
            print(style_row(style.label, *results[style.label]), file=sys.stderr, flush=True)
    lines, ok = calibration_table(results, device)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
