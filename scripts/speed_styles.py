"""The style set through the real speed check: `mha-kit bench --calibrate N`, with knobs for
choosing a config (docs/speed.md). The styles live in mha_kit/assignments/mha/styles.py and
styleset.py.

    .venv/bin/python scripts/speed_styles.py --repeats 5 [--device cuda] [--only NAME ...]
        [--config B,T,E,H] [--wall-clock] [--busy-core]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from mha_kit.assignments.mha import speed_config
from mha_kit.assignments.mha.calibration import calibrate
from mha_kit.assignments.mha.styleset import STYLES
from mha_kit.runtime import default_device
from mha_kit.speed import timing as speed_timing
from mha_kit.speed.calibration import busy_core


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="speed checks per style")
    parser.add_argument("--device", default=None, choices=("cpu", "cuda"))
    parser.add_argument("--only", action="append", metavar="NAME", help="only this style")
    parser.add_argument("--config", metavar="B,T,E,H", help="try another graded config")
    parser.add_argument("--wall-clock", action="store_true",
                        help="time with time.perf_counter instead of the process's CPU time")
    parser.add_argument("--busy-core", action="store_true",
                        help="keep one CPU core busy with another process meanwhile")
    args = parser.parse_args()
    device = args.device or default_device()
    if args.wall_clock:
        speed_timing.CPU_CLOCK = time.perf_counter
    if args.config:
        B, T, E, H = (int(n) for n in args.config.split(","))
        key = "cuda" if device == "cuda" else "cpu"
        speed_config.CONFIGS[key] = replace(speed_config.CONFIGS[key], B=B, T=T, E=E, H=H)
    styles = {name: cls for name, cls in STYLES.items() if not args.only or name in args.only}
    with busy_core(args.busy_core):
        report, _ = calibrate(args.repeats, device, styles)
    print(report, f"(clock: {speed_timing.CPU_CLOCK.__name__}"
                  f"{'; one core busy' if args.busy_core else ''})", sep="\n")


if __name__ == "__main__":
    main()
