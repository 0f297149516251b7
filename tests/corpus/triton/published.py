"""Published Triton FlashAttention kernels, graded as a student's submission would be.

Their code is not kept in this repository. Each adapter in public/ names the files it needs
(`UPSTREAM`: repository, commit, path, licence) and the few exact text edits that let them run
in Triton's interpreter on the CPU (`ADAPTATIONS`, each with its reason); the rest of the
adapter is glue to the assignment's contract (the names and signatures the notebook asks for).
A submission is the published files, edited so, one after another, then the adapter.

The published files are looked for under $MHA_KIT_PUBLISHED_KERNELS (default:
public/upstream/, ignored by git), each at <owner>+<name>/<commit>/<path>, e.g. from a
clone: `git -C clone show <commit>:<path> > <that file>`.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

PUBLIC = Path(__file__).with_name("public")
UPSTREAM_DIR = Path(os.environ.get("MHA_KIT_PUBLISHED_KERNELS", PUBLIC / "upstream"))


@dataclass(frozen=True)
class Upstream:
    repo: str
    commit: str
    path: str
    licence: str

    @property
    def file(self) -> Path:
        return UPSTREAM_DIR / self.repo.replace("/", "+") / self.commit / self.path


def _constants(adapter: Path) -> dict[str, object]:
    """The adapter's UPSTREAM and ADAPTATIONS, read as literals (the adapter itself runs only
    after the published code)."""
    found = {}
    for node in ast.parse(adapter.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("UPSTREAM", "ADAPTATIONS"):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def upstream(adapter: Path) -> list[Upstream]:
    return [Upstream(*u) for u in _constants(adapter)["UPSTREAM"]]


def missing(adapter: Path) -> list[Path]:
    """The published files the adapter needs that are not here."""
    return [u.file for u in upstream(adapter) if not u.file.is_file()]


def submission(adapter: Path) -> str:
    """The published files with each adaptation made (its old text must be in them: the count
    of its occurrences is given and checked), then the adapter."""
    text = "\n\n".join(u.file.read_text() for u in upstream(adapter))
    for old, new, count, _why in _constants(adapter)["ADAPTATIONS"]:
        assert text.count(old) == count, f"{adapter.name}: {old!r} is not there {count} times"
        text = text.replace(old, new)
    return f"{text}\n\n{adapter.read_text()}"
