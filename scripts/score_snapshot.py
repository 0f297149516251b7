"""Snapshot every corpus and hostile file's scores through `mha-kit grade`, to compare versions.

    python scripts/score_snapshot.py OUT.json            # grade and write the snapshot
    python scripts/score_snapshot.py OUT.json --compare BEFORE.json

The corpus (template, stubs, mutants, alternatives, extension seeds) and the hostile files are
copied into scratch folders and graded as a user would, one `mha-kit grade` per assignment.
The speed check's score depends on the machine, so it is recorded as earned or not.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
SPEED = "speed_fused_vs_looped"
LIMITS = {"MHA_KIT_CALL_TIMEOUT": "3", "MHA_KIT_LOAD_TIMEOUT": "5",
          "MHA_KIT_TOTAL_TIMEOUT": "30", "MHA_KIT_LANG": "en"}


def _mha_files(folder: Path) -> None:
    sys.path.insert(0, str(CORPUS))
    from mutants import MUTANTS  # noqa: PLC0415

    for name in ("template.py", "stubs.py"):
        shutil.copy(CORPUS / name, folder / name)
    for path in sorted((CORPUS / "alternatives").glob("*.py")):
        shutil.copy(path, folder / f"alt_{path.name}")
    for i, mutant in enumerate(MUTANTS):
        (folder / f"mutant_{i:02d}_{mutant.mistake}.py").write_text(mutant.source())


def _grade(folder: Path, assignment: str, scratch: Path) -> dict[str, dict[str, str]]:
    sheet = scratch / f"{folder.name}.csv"
    subprocess.run([sys.executable, "-m", "mha_kit.cli", "grade", str(folder), "--jobs", "2",
                    "--csv", str(sheet), "--assignment", assignment], cwd=scratch, check=True,
                   env={**os.environ, **LIMITS}, stdout=subprocess.DEVNULL)
    rows = {}
    with open(sheet, encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            student = row.pop("student")
            row.pop("file"), row.pop("notes"), row.pop("total"), row.pop("mistakes", None)
            if SPEED in row:
                row[SPEED] = "earned" if float(row[SPEED]) > 0 else "0"
            rows[f"{folder.name}/{student}"] = row
    return rows


def snapshot() -> dict[str, dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix="mha-kit-snapshot-") as tmp:
        scratch = Path(tmp)
        mha, ext, hostile = (scratch / n for n in ("corpus", "extensions", "hostile"))
        mha.mkdir()
        _mha_files(mha)
        shutil.copytree(CORPUS / "extensions", ext)
        shutil.copytree(ROOT / "tests" / "hostile", hostile,
                        ignore=shutil.ignore_patterns("*.md"))
        os.chmod(scratch, 0o755)
        return {**_grade(mha, "mha", scratch), **_grade(ext, "mha_extensions", scratch),
                **_grade(hostile, "mha", scratch)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--compare", metavar="BEFORE")
    args = parser.parse_args()
    scores = snapshot()
    Path(args.out).write_text(json.dumps(scores, indent=1, sort_keys=True) + "\n")
    print(f"{len(scores)} submissions graded into {args.out}")
    if not args.compare:
        return 0
    before = json.loads(Path(args.compare).read_text())
    changed = {k for k in before.keys() | scores.keys() if before.get(k) != scores.get(k)}
    for key in sorted(changed):
        print(f"  {key}: {before.get(key)} -> {scores.get(key)}")
    print(f"{len(scores) - len(changed)} of {len(scores)} unchanged")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
