"""The decoding speed check (llm_decode_speed) on the styles of tests/corpus/llm/decode_styles.py,
graded as `mha-kit grade --jobs 2` grades a class (two graders with their workers, every check
of llm_attention) while one more process does torch work on one thread: each style's points over
N gradings, its factor of less work than recomputing the prefix (a count: the same every time),
its time per token (which the load moves, and which is not graded), the dead band between the
least correct style and the most that recomputes, and the threshold's margins. It grades the
graded config (GRADED in mha_kit/assignments/llm_attention/decode_config.py), whatever
MHA_KIT_SPEED_CONFIG says, and prints it.

    python scripts/decode_speed_reliability.py [N]        # N gradings per style (20)
"""

from __future__ import annotations

import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.pop("MHA_KIT_SPEED_CONFIG", None)  # the graded config, never a test config
sys.path.insert(0, str(ROOT / "tests" / "corpus" / "llm"))

from decode_styles import STYLES, source  # noqa: E402

from mha_kit.assignments.llm_attention.decode_config import GRADED, decode_config  # noqa: E402
from mha_kit.assignments.llm_attention.decode_speed import (  # noqa: E402
    DECODE_SPEED_CHECK,
    LESS_WORK_NEEDED,
)
from mha_kit.grading.batch import grade_all  # noqa: E402
from mha_kit.grading.files import discover  # noqa: E402
from mha_kit.runner.policy import Limits  # noqa: E402
from mha_kit.speed.calibration import busy_core  # noqa: E402

MEASURED = re.compile(r"([0-9.]+)× less; time, not graded: ([0-9.]+) ms of CPU")


def graded(n: int) -> dict[str, list[tuple[float, str]]]:
    """Each style written n times and graded in one batch of 2 jobs, beside a busy core: the
    fraction of llm_decode_speed's points and its message (English), n times per style."""
    names = list(STYLES)
    results: dict[str, list[tuple[float, str]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="decode-reliability-") as folder:
        Path(folder).chmod(0o755)  # a worker running as another account reads the files
        for i in range(n):
            for j, name in enumerate(names):
                path = Path(folder, f"r{i:04d}_s{j:02d}.py")
                path.write_text(source(name), encoding="utf-8")
                path.chmod(0o644)
        with busy_core():
            for entry, payload in grade_all(discover(Path(folder)), 2, "cpu", "llm_attention",
                                            Limits.from_settings()):
                test = next(t for t in payload["tests"] if t["name"] == DECODE_SPEED_CHECK)
                results[names[int(entry.student.rpartition("_s")[2])]].append(
                    (test["score"] / test["max_score"], test["output"]))
    return results


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    assert decode_config() == GRADED
    print(f"config: {GRADED}; threshold: {LESS_WORK_NEEDED:g}x less work than recomputing; "
          f"{n} gradings per style by `mha-kit grade --jobs 2`, one more core busy with torch")
    started = time.perf_counter()
    lowest_correct, highest_wrong = math.inf, 0.0
    for style, results in graded(n).items():
        correct = STYLES[style][0]
        found = [MEASURED.search(text) for _, text in results]
        for (_, text), match in zip(results, found):
            if match is None:
                print(f"  {style}: {text}")
        factors = sorted({float(m[1]) for m in found if m})
        cpu = [float(m[2]) for m in found if m]
        points = sum(fraction == 1.0 for fraction, _ in results)
        if factors:
            lowest_correct = min(lowest_correct, factors[0]) if correct else lowest_correct
            highest_wrong = highest_wrong if correct else max(highest_wrong, factors[-1])
        print(f"{'correct' if correct else 'recomputes':10} {style:58} less work "
              f"{'/'.join(f'{f:.1f}x' for f in factors):>8}  full points {points:>2}/{len(results)}"
              f"  CPU ms per token {min(cpu, default=math.nan):5.2f}-"
              f"{max(cpu, default=math.nan):5.2f}")
    print(f"dead band: {highest_wrong:g}x to {lowest_correct:g}x, its geometric middle "
          f"{math.sqrt(lowest_correct * highest_wrong):.1f}x; margins at {LESS_WORK_NEEDED:g}x: "
          f"{lowest_correct / LESS_WORK_NEEDED:.2f} and {LESS_WORK_NEEDED / highest_wrong:.2f} "
          f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
