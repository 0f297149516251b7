"""Record that the Chinese templates of these message ids translate today's English.

    python scripts/mark_translated.py ID [ID ...]     # after updating their zh templates
    python scripts/mark_translated.py --all           # every id (a new catalogue, say)

`translations/zh/messages.json` holds, for each id, the English text its Chinese template was
written from, as the notebooks' overlays beside it do for cells. `tests/test_messages.py` fails
while an English template differs from the text recorded for it: its translation is stale.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mha_kit.messages import TEMPLATES

RECORD = Path(__file__).resolve().parents[1] / "translations" / "zh" / "messages.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", help="message ids whose zh templates are up to date")
    parser.add_argument("--all", action="store_true", help="mark every id")
    args = parser.parse_args()
    english = TEMPLATES["en"]
    unknown = [i for i in args.ids if i not in english]
    if unknown or not (args.ids or args.all):
        parser.error(f"unknown ids: {', '.join(unknown)}" if unknown else "name ids or --all")
    record = json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.exists() else {}
    for message_id in english if args.all else args.ids:
        record[message_id] = english[message_id]
    record = {k: record[k] for k in sorted(record) if k in english}
    RECORD.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{RECORD.relative_to(RECORD.parents[2])}: {len(record)} ids")


if __name__ == "__main__":
    main()
