"""Translated editions of the notebooks: the English master with what a student reads replaced.

The program has one source, the English notebook in solutions/<assignment>/. An overlay
`translations/<lang>/<notebook stem>.json` maps each cell id to the English text it translates
and its translation: every markdown cell, and every code cell but the setup and the test cells
(demo and picture cells, the text around a solution). A translated code cell is the same
program: only its comments and strings (printed text, picture titles, docstrings) may differ,
and a solution's region between `### BEGIN SOLUTION` and `### END SOLUTION` stays as it is, so
an edition grades as its master does. The setup cell stays the master's, so that the address an
instructor sets there reaches every edition; test cells stay the master's, as nbgrader grades
them. An edition is written to solutions/<assignment>_<lang>/<stem>_<lang>.ipynb and released by
`mha-kit release` like any assignment. When the English text of a cell changes, the edition
refuses to build until the overlay is updated, so a translation never silently describes an
older notebook.

    python -m mha_kit.editions status      # what is missing or stale, per overlay
    python -m mha_kit.editions skeleton    # add missing cells to the overlays, untranslated
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import sys
from pathlib import Path

import nbformat

from .grading.files import LANGUAGE_CELL_ID, language_source
from .grading.registry import ASSIGNMENTS, EDITION_LANGUAGES, edition_name
from .runner.loading import is_test_cell

TRANSLATIONS = "translations"

# nbgrader's solution region: the code a student replaces, which no translation touches.
SOLUTION_REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION$.*?^[ \t]*### END SOLUTION$",
                             re.MULTILINE | re.DOTALL)


class TranslationError(Exception):
    """An overlay that does not match its English notebook."""


def overlay_path(course: Path, notebook: Path, lang: str) -> Path:
    return course / TRANSLATIONS / lang / f"{notebook.stem}.json"


def masters(course: Path, assignment: str) -> list[Path]:
    return sorted((course / "solutions" / assignment).glob("*.ipynb"))


def edition_names(course: Path) -> list[str]:
    """Every `<assignment>_<lang>` whose notebooks all have an overlay."""
    return [edition_name(a, lang) for lang in EDITION_LANGUAGES for a in ASSIGNMENTS
            if masters(course, a) and all(overlay_path(course, nb, lang).is_file()
                                          for nb in masters(course, a))]


def read_overlay(path: Path) -> dict[str, dict[str, str]]:
    """cell id -> {"en": text, <lang>: text}; texts are stored as lists of lines."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return {cell_id: {k: "".join(v) for k, v in texts.items()} for cell_id, texts in cells.items()}


def write_overlay(path: Path, overlay: dict[str, dict[str, str]]) -> None:
    cells = {cell_id: {k: v.splitlines(keepends=True) for k, v in texts.items()}
             for cell_id, texts in overlay.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": cells}, ensure_ascii=False, indent=1) + "\n",
                    encoding="utf-8")


def translated_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The cells an overlay translates: markdown, and code but the setup (the first code cell)
    and the test cells."""
    setup = next((cell for cell in nb.cells if cell.cell_type == "code"), None)
    return [cell for cell in nb.cells if cell.cell_type == "markdown"
            or (cell.cell_type == "code" and cell is not setup and not is_test_cell(cell))]


class _StringsBlanked(ast.NodeTransformer):
    """A syntax tree with every string constant emptied and f-strings' literal parts dropped;
    IPython's magic and shell lines (`get_ipython().run_line_magic(...)`) are kept whole."""

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return ast.Constant("") if isinstance(node.value, str) else node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.JoinedStr:
        node.values = [self.visit(part) for part in node.values
                       if not isinstance(part, ast.Constant)]
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        owner = node.func.value if isinstance(node.func, ast.Attribute) else None
        if (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
                and owner.func.id == "get_ipython"):
            return node
        return self.generic_visit(node)


def program(source: str) -> str:
    """A cell's program without its comments and strings (raises SyntaxError)."""
    from IPython.core.inputtransformer2 import TransformerManager

    tree = ast.parse(TransformerManager().transform_cell(source))
    return ast.dump(_StringsBlanked().visit(tree))


def code_change(english: str, translation: str) -> str | None:
    """Why `translation` of a code cell is not the same program as `english`, or None."""
    if SOLUTION_REGION.findall(english) != SOLUTION_REGION.findall(translation):
        return "the translation changes the code between ### BEGIN SOLUTION and ### END SOLUTION"
    try:
        same = program(english) == program(translation)
    except SyntaxError as err:
        return f"the translation does not parse (line {err.lineno}: {err.msg})"
    return None if same else ("the translation is not the same program: only comments and "
                              "strings may differ from the English")


def problems(nb: nbformat.NotebookNode, overlay: dict[str, dict[str, str]], lang: str
             ) -> list[str]:
    """Cells without a translation, whose English changed since it was made, or whose
    translation changes the code."""
    found = []
    cells = translated_cells(nb)
    for cell in cells:
        entry = overlay.get(cell.id)
        if entry is None or not entry.get(lang, "").strip():
            found.append(f"{cell.id}: not translated")
        elif entry.get("en") != cell.source:
            found.append(f"{cell.id}: stale, the English text changed")
        elif cell.cell_type == "code" and (why := code_change(cell.source, entry[lang])):
            found.append(f"{cell.id}: {why}")
    ids = {cell.id for cell in cells}
    found += [f"{cell_id}: no such cell to translate (the setup and test cells stay the "
              "English ones)" for cell_id in overlay if cell_id not in ids]
    return found


def overlay_problems(course: Path, master: Path, lang: str) -> list[str]:
    """What keeps `master`'s edition in `lang` from building (`problems`), or its overlay
    missing."""
    path = overlay_path(course, master, lang)
    if not path.is_file():
        return ["missing"]
    return problems(nbformat.read(str(master), as_version=4), read_overlay(path), lang)


def language_cell(lang: str) -> nbformat.NotebookNode:
    """The one code cell an edition adds: it switches the kernel's grader messages to `lang`."""
    return nbformat.v4.new_code_cell(language_source(lang), id=LANGUAGE_CELL_ID)


def translated_notebook(nb: nbformat.NotebookNode, overlay: dict[str, dict[str, str]], lang: str
              ) -> nbformat.NotebookNode:
    """The edition: every translated cell from the overlay, a language cell after the setup."""
    bad = problems(nb, overlay, lang)
    if bad:
        raise TranslationError("; ".join(bad))
    edition = copy.deepcopy(nb)
    for cell in translated_cells(edition):
        cell.source = overlay[cell.id][lang]
    first_code = next(i for i, c in enumerate(edition.cells) if c.cell_type == "code")
    edition.cells.insert(first_code + 1, language_cell(lang))
    return edition


def write_edition(course: Path, assignment: str, lang: str) -> list[Path]:
    """solutions/<assignment>_<lang>/<stem>_<lang>.ipynb from the master and the overlay."""
    written = []
    for master in masters(course, assignment):
        overlay_file = overlay_path(course, master, lang)
        try:
            edition = translated_notebook(nbformat.read(str(master), as_version=4),
                                read_overlay(overlay_file), lang)
        except TranslationError as err:
            raise TranslationError(f"{overlay_file.relative_to(course)}: {err}") from None
        folder = course / "solutions" / edition_name(assignment, lang)
        target = folder / f"{master.stem}_{lang}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(edition, str(target))
        written.append(target)
    return written


def add_untranslated(course: Path, master: Path, lang: str) -> Path | None:
    """Add to `master`'s overlay the cells to translate it lacks, with their English and no
    `lang`; the overlay's path, or None if none was missing."""
    path = overlay_path(course, master, lang)
    overlay = read_overlay(path) if path.is_file() else {}
    cells = translated_cells(nbformat.read(str(master), as_version=4))
    missing = {c.id: {"en": c.source, lang: ""} for c in cells if c.id not in overlay}
    if not missing:
        return None
    write_overlay(path, {**overlay, **missing})
    return path


def skeleton(course: Path, lang: str) -> list[Path]:
    """Add every cell to translate that the overlays lack, with its English and no `lang`."""
    changed = [add_untranslated(course, master, lang)
               for assignment in ASSIGNMENTS for master in masters(course, assignment)]
    return [path for path in changed if path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mha_kit.editions",
                                     description="Status and skeletons of notebook overlays.")
    parser.add_argument("action", choices=("status", "skeleton"))
    parser.add_argument("--lang", default="zh", choices=EDITION_LANGUAGES)
    parser.add_argument("--course-dir", default=".", type=Path)
    args = parser.parse_args(argv)
    if args.action == "skeleton":
        for path in skeleton(args.course_dir, args.lang):
            print(f"updated {path}")
        return 0
    bad = 0
    for assignment in ASSIGNMENTS:
        for master in masters(args.course_dir, assignment):
            found = overlay_problems(args.course_dir, master, args.lang)
            bad += len(found)
            print(f"{overlay_path(args.course_dir, master, args.lang)}: "
                  + ("; ".join(found) if found else "up to date"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
