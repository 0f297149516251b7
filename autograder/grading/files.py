"""Finding and reading submissions: one student's file, a folder of them, and which
assignment a notebook answers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..messages import Message, msg
from ..runner.loading import notebook_cells
from .registry import ASSIGNMENTS, assignment_folders

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
    With `assignment`, a student's folder that holds that assignment's folder (nbgrader's
    layout, every assignment handed in) is looked in there only. Raises LookupError with a
    message (its one argument) for the grade sheet when there is none, or several.
    """
    names = assignment_folders(assignment) if assignment else set()
    places = [p for p in sorted(folder.iterdir()) if p.is_dir() and p.name in names] or [folder]
    for suffix in SUFFIXES:
        found = sorted(p for place in places for p in place.rglob(f"*{suffix}")
                       if p.is_file() and _visible(p, folder))
        if len(found) == 1:
            return found[0]
        if found:
            names = ", ".join(str(p.relative_to(folder)) for p in found)
            raise LookupError(msg("files.several", count=len(found), suffix=suffix, names=names))
    raise LookupError(msg("files.none", suffixes=" or ".join(SUFFIXES)))


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



def class_assignment(entries: list[StudentFile]) -> str:
    """The assignment every notebook is of ("mha" without notebooks). ValueError when they
    differ, saying who handed in which ("mha (alice, bob, carol, ...), shapes (aaron)"): a
    student must not choose the checks the class is graded by."""
    found: dict[str, list[str]] = {}
    for entry in entries:
        if entry.path is not None and entry.path.suffix == ".ipynb":
            found.setdefault(detect_assignment(entry.path), []).append(entry.student)
    if len(found) > 1:
        raise ValueError(", ".join(
            f"{name} ({', '.join(students[:3])}{', ...' if len(students) > 3 else ''})"
            for name, students in found.items()))
    return next(iter(found), "mha")


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
    """The assignment whose check ids name a notebook's nbgrader test cells; else "mha".
    The student's file says so: Gradescope takes the instructor's (`gradescope/assignment`),
    and `mha-kit grade` refuses a class whose notebooks disagree."""
    if path.suffix == ".ipynb":
        cells = notebook_cells(path)
        grade_ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in cells}
        for name, table in ASSIGNMENTS.items():
            if grade_ids & {spec.id for spec in table}:
                return name
    return "mha"
