"""The decoding speed check's veto (llm_decode_speed, `decode_speed.contradicted`): each style of
tests/corpus/llm/decode_styles.py, each correct module of tests/corpus/llm/alternatives, red team
52's decoding that recomputes the prefix beside a cache kept right, and its attack (the kit's
work count patched to count a thirtieth; tests/corpus/attacks.py), in a worker: N runs of
`decode_speed.timed_decoding` (the decoding's CPU time counted from outside, against the kit's
recomputing decoding in a clean worker), optionally while one more process does torch work on
one thread. Each one's speedup over recomputing (min / median / max), the band between the
slowest correct and the fastest that recomputes everything (a run each: the check takes the
fastest of up to 3), and the margins of MEASURED_SPEEDUP_NEEDED (a speedup within a request's
overhead of the kit's shows as about 1e8: `speed.verdict.FASTEST_SEEN`). The graded config, whatever
MHA_KIT_SPEED_CONFIG says.

    python scripts/decode_time_margins.py [N] [--busy]      # N runs per file (5)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.pop("MHA_KIT_SPEED_CONFIG", None)  # the graded config, never a test config
sys.path[:0] = [str(ROOT / "tests" / "corpus" / "llm"), str(ROOT / "tests" / "corpus")]

from attacks import ATTACKS, RECOMPUTING_BESIDE_CACHE  # noqa: E402
from decode_styles import REFERENCE, STYLES, source  # noqa: E402

from mha_kit.assignments.llm_attention.decode_config import GRADED, decode_config  # noqa: E402
from mha_kit.assignments.llm_attention.decode_speed import (  # noqa: E402
    MEASURED_SPEEDUP_NEEDED,
    timed_decoding,
)
from mha_kit.grading.batch import loaded_worker  # noqa: E402
from mha_kit.speed.calibration import band_between, busy_core, spread  # noqa: E402

PATCHED_COUNT = next(a for a in ATTACKS if a.trick.startswith(RECOMPUTING_BESIDE_CACHE)
                     and a.message == "llm.speed_time_contradicts")


# The styles that recompute the keys and values of the prefix alone: a third of the work of
# recomputing, or less, and about a cache's time. Their count fails them; no time could (the
# veto's target is a decoding that does all the work of recomputing), so they are shown apart.
PARTLY = ("recomputes the keys and values of every token",
          "recomputes the keys of every token, caches the values")
_BUFFER = "a static buffer of 2048 tokens attended whole (gpt-fast)"
CORRECT, RECOMPUTES = "correct", "recomputes"


def files() -> dict[str, tuple[str, str]]:
    """Name -> (kind: CORRECT, RECOMPUTES or PARTLY's "partly", source)."""
    found = {name: (CORRECT if correct else "partly" if name in PARTLY else RECOMPUTES,
                    source(name)) for name, (correct, _) in STYLES.items()}
    # The longest static buffer the count passes by the margin of the 2048 one's to 12x
    # (docs/speed.md: 17.2x less work), and about half the time of recomputing.
    found["a static buffer of 4096 tokens attended whole"] = (
        CORRECT, source(_BUFFER).replace("MAX_LEN = 2048", "MAX_LEN = 4096"))
    for path in sorted((ROOT / "tests" / "corpus" / "llm" / "alternatives").glob("*.py")):
        found[f"alternatives/{path.name}"] = (CORRECT, path.read_text())
    found["red team 52's twin: recomputes beside a cache kept right"] = (
        RECOMPUTES, f"{REFERENCE.read_text()}\n\n{RECOMPUTING_BESIDE_CACHE}")
    found["red team 52's attack (a6): the same, its count patched"] = (
        RECOMPUTES, PATCHED_COUNT.source())
    return found


def speedups(text: str, runs: int, folder: Path) -> tuple[list[float], list[str]]:
    """The speedups of `runs` timed runs of the file, and the problems of those not scored."""
    path = folder / f"f{len(list(folder.iterdir()))}.py"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o644)
    with loaded_worker(path, "cpu", None) as sub:
        clean = sub.clean_worker()
        clean.ensure_loaded()
        timings = [timed_decoding(sub, clean) for _ in range(runs)]
    return ([t.speedup for t in timings if t.problem is None],
            [t.problem.id for t in timings if t.problem is not None])


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--busy"]
    runs, busy = int(args[0]) if args else 5, "--busy" in sys.argv
    assert decode_config() == GRADED
    print(f"config: {GRADED}; veto below {MEASURED_SPEEDUP_NEEDED:g}x faster than the kit's "
          f"recomputing; {runs} runs per file{', one more core busy with torch' if busy else ''}")
    started = time.perf_counter()
    measured: dict[str, dict[str, list[float]]] = {CORRECT: {}, RECOMPUTES: {}, "partly": {}}
    with tempfile.TemporaryDirectory(prefix="decode-time-") as name, busy_core(busy):
        folder = Path(name)
        folder.chmod(0o755)  # a worker running as another account reads the files
        for label, (kind, text) in files().items():
            found, problems = speedups(text, runs, folder)
            measured[kind][label] = found
            print(f"{kind:10} {label:58} {spread(found, '{:.2f}')}"
                  f"{'  ' + ', '.join(problems) if problems else ''}", flush=True)
    band = band_between(measured[CORRECT], measured[RECOMPUTES])
    if band is None or band.slowest <= band.fastest:
        print(f"no band: {band}")
        return
    below, above = band.margins(MEASURED_SPEEDUP_NEEDED)
    print(f"band: {band.fastest:.2f}x ({band.fastest_style}) to {band.slowest:.2f}x "
          f"({band.slowest_style}); geometric middle {band.threshold:g}x; margins at "
          f"{MEASURED_SPEEDUP_NEEDED:g}x: {below:.2f} below the slowest correct, {above:.2f} "
          f"above the fastest that recomputes ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
