"""Finding and reading submissions: one student's file, a folder of them, and which
assignment a notebook answers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .registry import ASSIGNMENTS

SUFFIXES = (".ipynb", ".py")


@dataclass(frozen=True)
class StudentFile:
    """One student: the file to grade, or why there is none."""

    student: str
    path: Path | None
    problem: str | None = None


# --------------------------------------------------------------------------- finding files


def _visible(path: Path, root: Path) -> bool:
    return not any(part.startswith((".", "__")) for part in path.relative_to(root).parts)


def find_submission(folder: Path) -> Path:
    """The one notebook (else the one .py file) anywhere in a student's folder.

    nbgrader's `submitted/STUDENT/ASSIGNMENT/NOTEBOOK.ipynb` and a Gradescope upload both fit.
    Raises LookupError with a message for the grade sheet when there is none, or several.
    """
    for suffix in SUFFIXES:
        found = sorted(p for p in folder.rglob(f"*{suffix}")
                       if p.is_file() and _visible(p, folder))
        if len(found) == 1:
            return found[0]
        if found:
            names = ", ".join(str(p.relative_to(folder)) for p in found)
            raise LookupError(f"{len(found)} {suffix} files, expected one: {names}")
    raise LookupError(f"no {' or '.join(SUFFIXES)} file found")


def discover(root: Path) -> list[StudentFile]:
    """Students in `root`: each .py/.ipynb directly in it, and each folder in it."""
    items = [p for p in sorted(root.iterdir()) if _visible(p, root)]
    files = [p for p in items if p.is_file() and p.suffix in SUFFIXES]
    stems = Counter(p.stem for p in files)  # alice.py beside alice.ipynb: keep the suffixes
    entries = [StudentFile(p.stem if stems[p.stem] == 1 else p.name, p) for p in files]
    for folder in (p for p in items if p.is_dir()):
        try:
            entries.append(StudentFile(folder.name, find_submission(folder)))
        except LookupError as err:
            entries.append(StudentFile(folder.name, None, str(err)))
    return sorted(entries, key=lambda e: e.student)



def readable_submission(path: Path) -> str | None:
    """Why a path cannot be graded at all, or None. Reads, never runs, the file."""
    if not path.is_file():
        return f"{path}: no such file"
    if path.suffix not in (".py", ".ipynb"):
        return f"{path}: expected a .py file or an .ipynb notebook"
    try:
        if path.suffix == ".ipynb":
            import nbformat

            nbformat.read(str(path), as_version=4)
        else:
            path.read_text(encoding="utf-8")
    except Exception as err:  # any parse failure means unreadable
        return f"{path}: cannot be read ({type(err).__name__}: {err})"
    return None


def detect_assignment(path: Path) -> str:
    """The assignment whose check ids name a notebook's nbgrader test cells; else "mha"."""
    if path.suffix == ".ipynb":
        import nbformat

        cells = nbformat.read(str(path), as_version=4).cells
        grade_ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in cells}
        for name, table in ASSIGNMENTS.items():
            if grade_ids & {spec.id for spec in table}:
                return name
    return "mha"
