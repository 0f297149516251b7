"""Time `mha-kit check` on the reference notebook against a bare `import torch`, interleaved:

    .venv/bin/python scripts/check_timing.py [--rounds 5]

Each round runs `python -c "import torch"`, then `mha-kit check` on
solutions/mha/multi_head_attention.ipynb, and prints both wall times and their ratio (the
target is at most 2.5x). The machine's load is printed with each round: on a shared machine,
compare rounds, not runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "mha" / "multi_head_attention.ipynb"
MHA_KIT = Path(sys.executable).with_name("mha-kit")


def wall_s(command: list[str]) -> float:
    """Seconds one run of the command took; it must succeed."""
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    print("round  import torch (s)  mha-kit check (s)  ratio  load")
    ratios = []
    for number in range(1, rounds + 1):
        torch_s = wall_s([sys.executable, "-c", "import torch"])
        check_s = wall_s([str(MHA_KIT), "check", str(NOTEBOOK)])
        ratios.append(check_s / torch_s)
        print(f"{number:>5}  {torch_s:>16.2f}  {check_s:>17.2f}  {ratios[-1]:>4.2f}x"
              f"  {os.getloadavg()[0]:.1f}", flush=True)
    print(f"median ratio {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
