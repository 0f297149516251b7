"""Which checks a single-edit mutant's change can reach, so that the corpus tests grade a
mutant on those alone and take the reference's results for the rest: a check calls only the
names of its `uses` and `stand_ins`, and what they refer to, by name, at the top level."""

from __future__ import annotations

import ast
from collections.abc import Sequence


def _statements(source: str) -> dict[str, str]:
    """A file's top-level statements, by the names each binds (one that binds none, by its
    code), as code."""
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        else:
            names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                     and isinstance(n.ctx, ast.Store)] + [
                (a.asname or a.name).split(".")[0] for a in getattr(node, "names", ())]
        found[",".join(names) or ast.unparse(node)] = ast.unparse(node)
    return found


def checks_reaching_edits(reference: str, source: str, specs: Sequence,
                          check_ids: list[str]) -> list[str]:
    """The checks of `check_ids` (specs: the assignment's) whose names (`uses`, `stand_ins`)
    reach, through the names the code refers to, a top-level statement that `source` changes
    in `reference`. Every other check runs only unchanged code: its result is the reference's."""
    before, after = _statements(reference), _statements(source)
    changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    if any(not name.isidentifier() for key in changed for name in key.split(",")):
        return check_ids  # a statement that binds no name: it may change anything
    refers = {name: {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
              for key, code in after.items() for name in key.split(",")}
    edited = {name for key in changed for name in key.split(",")}

    def reaches(roots: tuple[str, ...]) -> bool:
        seen, todo = set(), list(roots)
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += refers.get(name, ())
        return bool(seen & edited)

    return [spec.id for spec in specs
            if spec.id in check_ids and reaches((*spec.uses, *spec.stand_ins))]
