"""Finding and reading submissions: one student's file, a folder of them, and which
assignment a notebook answers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import settings
from ..messages import LANG_VARIABLE, Message, msg
from ..runner.loading import defined_names, notebook_cells
from .registry import ASSIGNMENTS, EDITION_LANGUAGES, assignment_folders, split_name

SUFFIXES = (".ipynb", ".py")


@dataclass(frozen=True)
class StudentFile:
    """One student: the file to grade, or why there is none."""

    student: str
    path: Path | None
    problem: Message | None = None


# --------------------------------------------------------------------------- finding files


def _visible(path: Path, root: Path) -> bool:
    return not any(part.startswith((".", "__")) for part in path.relative_to(root).parts)


def find_submission(folder: Path, assignment: str | None = None) -> Path:
    """The one notebook (else the one .py file) anywhere in a student's folder.

    nbgrader's `submitted/STUDENT/ASSIGNMENT/NOTEBOOK.ipynb` and a Gradescope upload both fit.
    With `assignment` (an assignment or an edition's folder name), a student's folder that
    holds folders of assignments (nbgrader's layout, every assignment handed in) is looked in
    the folder of that name only, else in the one folder of that assignment's editions. Raises
    LookupError with a message (its one argument) for the grade sheet when there is none, or
    several.
    """
    places = [folder]
    if assignment:
        folders = [p for p in sorted(folder.iterdir()) if p.is_dir()
                   and p.name in assignment_folders(split_name(assignment)[0])]
        exact = [p for p in folders if p.name == assignment]
        places = exact or folders or places
    for suffix in SUFFIXES:
        found = sorted(p for place in places for p in place.rglob(f"*{suffix}")
                       if p.is_file() and _visible(p, folder))
        if len(found) == 1:
            return found[0]
        if found:
            names = ", ".join(str(p.relative_to(folder)) for p in found)
            raise LookupError(msg("files.several", count=len(found), suffix=suffix, names=names))
    raise LookupError(msg("files.none"))


def discover(root: Path, assignment: str | None = None) -> list[StudentFile]:
    """Students in `root`: each .py/.ipynb directly in it, and each folder in it (in which
    `find_submission` looks for `assignment`'s folder)."""
    items = [p for p in sorted(root.iterdir()) if _visible(p, root)]
    files = [p for p in items if p.is_file() and p.suffix in SUFFIXES]
    stems = Counter(p.stem for p in files)  # alice.py beside alice.ipynb: keep the suffixes
    entries = [StudentFile(p.stem if stems[p.stem] == 1 else p.name, p) for p in files]
    for folder in (p for p in items if p.is_dir()):
        try:
            entries.append(StudentFile(folder.name, find_submission(folder, assignment)))
        except LookupError as err:
            entries.append(StudentFile(folder.name, None, err.args[0]))
    return sorted(entries, key=lambda e: e.student)


class MixedAssignments(Exception):
    """Submissions of a class that answer different assignments; str() says who handed in
    which ("mha (alice, bob, carol, ...), shapes (aaron)")."""


def class_assignment(entries: list[StudentFile]) -> str:
    """The assignment the class's submissions are of: what the notebooks' test cells name, and
    what the .py files define the names of (the `default_assignment` setting's when none says):
    a student must not choose
    the checks the class is graded by (one warm-up notebook among a class of .py files chose
    them all), so submissions that answer different ones raise MixedAssignments. One that says
    none (its test cells deleted, a file that defines nothing) has no say; grading tells what
    is wrong with it."""
    found: dict[str, list[str]] = {}
    for entry in entries:
        named = (_named_assignment(entry.path) or _defined_assignment(entry.path)
                 if entry.path is not None else None)
        if named is not None:
            found.setdefault(named, []).append(entry.student)
    if len(found) > 1:
        raise MixedAssignments(", ".join(
            f"{name} ({', '.join(students[:3])}{', ...' if len(students) > 3 else ''})"
            for name, students in found.items()))
    return next(iter(found), settings.current().default_assignment)


def readable_submission(path: Path) -> Message | None:
    """Why a path cannot be graded at all, or None. Reads, never runs, the file."""
    if not path.is_file():
        return msg("files.no_such_file", path=str(path))
    if path.suffix not in (".py", ".ipynb"):
        return msg("files.not_a_submission", path=str(path))
    try:
        if path.suffix == ".ipynb":
            notebook_cells(path)
        else:
            path.read_text(encoding="utf-8")
    except Exception as err:  # any parse failure means unreadable
        return msg("files.unreadable", path=str(path), type=type(err).__name__, error=str(err))
    return None


def detect_assignment(path: Path) -> str:
    """The assignment one student's file answers: the one whose check ids name a notebook's
    nbgrader test cells, or whose contract names a .py file defines; else the
    `default_assignment` setting's.
    A .py file's definitions count only where the student grades it alone (`mha-kit check`,
    pytest); under nbgrader (`trusted_autograde`) a notebook's restored test cells decide,
    Gradescope takes the instructor's (the zip's `assignment`), and `mha-kit grade` goes by
    the notebooks' test cells alone (`class_assignment`)."""
    return (_named_assignment(path) or _defined_assignment(path)
            or settings.current().default_assignment)


def _defined_assignment(path: Path) -> str | None:
    """The assignment whose contract names a .py file defines the most of at its top level (in
    the blocks that parse, as it loads); None for a notebook, an unreadable file, or one that
    defines none or ties two assignments."""
    if path.suffix != ".py":
        return None
    try:
        defined = defined_names(path)
    except OSError:
        return None
    counts = Counter({name: len(defined & {used for spec in table for used in spec.uses})
                      for name, table in ASSIGNMENTS.items()}).most_common(2)
    (best, most), (_, second) = counts
    return best if most > second else None


def _named_assignment(path: Path) -> str | None:
    """The assignment a notebook's test cells name, or None (a .py file, an unreadable file)."""
    if path.suffix != ".ipynb":
        return None
    try:
        cells = notebook_cells(path)
    except Exception:  # not a notebook: `readable_submission` says why, where it is graded
        return None
    grade_ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in cells}
    return next((name for name, table in ASSIGNMENTS.items()
                 if grade_ids & {spec.id for spec in table}), None)


# An edition's notebook has one code cell more than its master, after the setup cell: it
# switches the grader's messages in the kernel (and in the worker that loads the same cells).
LANGUAGE_CELL_ID = "language"


def language_source(lang: str) -> str:
    """The source of an edition's language cell."""
    return f'import os\n\nos.environ["{LANG_VARIABLE}"] = "{lang}"  # grader messages in {lang}'


def notebook_language(cells: Iterable[dict[str, Any]]) -> str | None:
    """The language an edition's language cell sets, or None for an English master."""
    for cell in cells:
        if cell.get("id") == LANGUAGE_CELL_ID:
            return next((lang for lang in EDITION_LANGUAGES
                         if language_source(lang) == cell.get("source")), None)
    return None


def shown_language(cells: Iterable[dict[str, Any]]) -> str | None:
    """The language a notebook's grader messages are shown in: its edition's, unless the `lang`
    setting was given (None: the setting's)."""
    return settings.unless_given("lang", notebook_language(cells))


def edition_language(path: Path) -> str | None:
    """The language of a translated edition's notebook file, else None (a .py file too)."""
    return notebook_language(notebook_cells(path)) if path.suffix == ".ipynb" else None
