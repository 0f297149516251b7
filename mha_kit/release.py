"""`mha-kit release`: regenerate assignments/ from solutions/ with nbgrader.

For each assignment, the points of every test cell in solutions/<assignment>/*.ipynb are first
set from that assignment's table, `assignments/<assignment>/points.py` (the one place points are
decided); then
`nbgrader generate_assignment` writes assignments/<assignment>/ and records the test cells in
gradebook.db, from which `nbgrader autograde` restores them. `todo` says what an assignment
still lacks that the kit's tests require, so that no test is the first to tell.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

from . import catalog
from .checks.diagnosis import OPENINGS
from .editions import TRANSLATIONS, masters, overlay_path, overlay_problems
from .grading.registry import ASSIGNMENTS, EDITION_LANGUAGES, edition_name
from .messages import TEMPLATES, Message, msg
from .runner.loading import is_test_cell

# The install address the kit's own notebooks ship with, to be replaced by each course.
PLACEHOLDER_SOURCE = "git+https://github.com/YOUR-ORG/mha-kit.git"
# The kit's tables of assignments: a row `| `<name>` | `<notebook>.ipynb`...` each.
LISTINGS = ("README.md", "docs/extensions.md", "docs/student-guide.md")
LISTING_ROW = re.compile(r"^\| `(\w+)` \| `\w+\.ipynb`", re.M)
# What each Chinese template translates: scripts/mark_translated.py writes it.
MESSAGES_RECORD = "messages.json"


def sync_points(notebook: Path, assignment: str) -> list[str]:
    """Set each test cell's points from the assignment's table; the grade ids changed."""
    points = {spec.id: spec.points for spec in ASSIGNMENTS[assignment]}
    nb = nbformat.read(str(notebook), as_version=4)
    changed = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if is_test_cell(cell) and meta.get("grade_id") in points:
            if meta.get("points") != points[meta["grade_id"]]:
                meta["points"] = points[meta["grade_id"]]
                changed.append(meta["grade_id"])
    if changed:
        nbformat.write(nb, str(notebook))
    return changed


def with_interpreter_on_path(env: dict[str, str]) -> dict[str, str]:
    """`env` with this interpreter's bin/ first on PATH.

    nbgrader runs the `alembic` command to set up gradebook.db; it lives beside the
    interpreter, which is not on PATH when the venv is not activated.
    """
    return {**env, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                            env.get("PATH", "")])}


def run_nbgrader(course: Path, *args: str, env: dict[str, str] | None = None,
                 **kwargs) -> subprocess.CompletedProcess:
    """`nbgrader ARGS` in the course directory, with this interpreter's bin/ on PATH."""
    env = with_interpreter_on_path(dict(os.environ if env is None else env))
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          **kwargs)


def stale_translations(english: dict[str, str], recorded: dict[str, str]) -> list[str]:
    """The ids whose English is not the text their translation was written from."""
    return sorted(i for i in english if recorded.get(i) != english[i])


def todo(course: Path, assignment: str) -> list[Message]:
    """What `assignment` lacks that the kit's tests require, as what to add: for every
    assignment, a test cell per check and its mistakes' sentences begun as the feedback reads
    them; for the kit's own, released in the kit's checkout, also its row in each table of
    assignments, its Chinese edition and the record of its translated messages."""
    notebooks = masters(course, assignment)
    celled = {cell.metadata.nbgrader.grade_id for path in notebooks
              for cell in nbformat.read(str(path), as_version=4).cells if is_test_cell(cell)}
    found = [msg("release.no_test_cell", check=spec.id, folder=f"solutions/{assignment}")
             for spec in ASSIGNMENTS[assignment] if spec.id not in celled]
    own = catalog.modules("mistakes", optional=True).get(assignment)
    found += [msg("release.mistake_opening", mistake=mistake, **OPENINGS)
              for mistake in (own.CATALOGUE if own else ())
              if not all(TEMPLATES[lang][f"mistake.{mistake}"].startswith(opening)
                         for lang, opening in OPENINGS.items())]
    kits_own = catalog.folder(assignment) == course.resolve() / "mha_kit" / "assignments" / \
        assignment
    return found + (_kits_own_todo(course, assignment, notebooks) if kits_own else [])


def _kits_own_todo(course: Path, assignment: str, notebooks: list[Path]) -> list[Message]:
    notebook = notebooks[0].name if notebooks else f"{assignment}.ipynb"
    found = [msg("release.listing", doc=doc, assignment=assignment, notebook=notebook)
             for doc in LISTINGS if assignment not in LISTING_ROW.findall(
                 (course / doc).read_text(encoding="utf-8"))]
    english = catalog.load(assignment, "messages").TEMPLATES["en"]
    for lang in EDITION_LANGUAGES:
        for master in notebooks:
            problems = overlay_problems(course, master, lang)
            if problems:
                found.append(msg("release.edition", problems="; ".join(problems),
                                 edition=edition_name(assignment, lang),
                                 overlay=overlay_path(course, master, lang).relative_to(course)))
        record = course / TRANSLATIONS / lang / MESSAGES_RECORD
        stale = stale_translations(english, json.loads(record.read_text(encoding="utf-8"))
                                   if record.is_file() else {})
        if stale:
            found.append(msg("release.unmarked", ids=", ".join(stale), command=" ".join(
                [sys.executable, "scripts/mark_translated.py", *stale])))
    return found
