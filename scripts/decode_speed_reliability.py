"""The decoding speed check (llm_decode_speed) on the styles of tests/corpus/llm/decode_styles.py:
each style's speedups and points over N checks, alone and beside a busy core, the dead band
between the slowest correct style and the fastest one that recomputes, and the threshold's
margins. It measures the graded config (autograder/assignments/llm_attention/decode_config.py,
GRADED), whatever MHA_KIT_SPEED_CONFIG says.

    python scripts/decode_speed_reliability.py [N]        # N checks per style and condition
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.pop("MHA_KIT_SPEED_CONFIG", None)  # the graded config, never a test config
sys.path.insert(0, str(ROOT / "tests" / "corpus" / "llm"))

from decode_styles import STYLES, source  # noqa: E402

from autograder.assignments.llm_attention.decode_config import GRADED  # noqa: E402
from autograder.assignments.llm_attention.decode_speed import (  # noqa: E402
    SPEEDUP_NEEDED,
    decide,
    timed_run,
)
from autograder.grading.batch import loaded_worker  # noqa: E402
from autograder.speed.reliability import busy_core  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    print(f"config: {GRADED}; threshold {SPEEDUP_NEEDED:g}x; {n} checks per style and condition")
    folder = Path(tempfile.mkdtemp())
    lowest_correct, highest_wrong = math.inf, 0.0
    for number, (style, (correct, _)) in enumerate(STYLES.items()):
        path = folder / f"style_{number}.py"
        path.write_text(source(style))
        for busy in (False, True):
            speedups, points = [], 0
            with busy_core(busy), loaded_worker(path, "cpu", None) as sub:
                for _ in range(n):
                    run = timed_run(sub, int.from_bytes(os.urandom(4), "big") >> 1)
                    fraction, message = decide([run])
                    if run.problem is not None:
                        print(f"  not scored: {message}")
                    speedups.append(run.speedup)
                    points += fraction == 1.0
            low, high = min(speedups), max(speedups)
            if correct:
                lowest_correct = min(lowest_correct, low)
            else:
                highest_wrong = max(highest_wrong, high)
            print(f"{'correct' if correct else 'recomputes':10} {'busy' if busy else 'alone':5} "
                  f"{style:45} speedup {low:5.1f}-{high:5.1f}x (median "
                  f"{statistics.median(speedups):5.1f}), full points {points}/{n}")
    middle = math.sqrt(lowest_correct * highest_wrong)
    print(f"dead band {highest_wrong:.1f}x to {lowest_correct:.1f}x; its geometric middle "
          f"{middle:.1f}x; margins at {SPEEDUP_NEEDED:g}x: {lowest_correct / SPEEDUP_NEEDED:.2f} "
          f"and {SPEEDUP_NEEDED / highest_wrong:.2f}")


if __name__ == "__main__":
    main()
