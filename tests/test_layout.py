"""The package's layout: dependencies point one way, with no cycles, and modules stay small.

Imports are read from the source (those inside functions included), never by importing.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "autograder"
# Each layer may import its own and lower layers only: cli → grading → speed → checks →
# runner/oracle → contract, messages, runtime.
LAYERS = {
    "contract": 0, "messages": 0, "runtime": 0,
    "oracle": 1, "runner": 1,
    "checks": 2,
    "speed": 3,
    "grading": 4,
    "notebook": 5, "training": 5, "trusted_autograde": 5, "release": 5, "editions": 5,
    "course_autograde": 5, "sandboxed_kernel": 5,
    "conftest": 5, "test_submission": 5,
    "cli": 6,
}
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """The autograder modules a file imports, anywhere in it, resolved to dotted names."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    return imported_from(path.read_text(encoding="utf-8"), package)


def imported_from(source: str, package: str) -> set[str]:
    """The autograder names imported by `source`, a module of `package`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[:len(base) - node.level + 1] if node.level else []
            stem = ".".join(base + ([node.module] if node.module else []))
            found |= {f"{stem}.{alias.name}" for alias in node.names} | {stem}
    return {name for name in found if name == "autograder" or name.startswith("autograder.")}


def graph() -> dict[str, set[str]]:
    """module -> the autograder modules it imports (a name that is an attribute, not a module,
    is resolved to the module that holds it)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges = {}
    for name, path in files.items():
        targets = set()
        for target in imported(path):
            while target not in files and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != name and target != "autograder":
                targets.add(target)
        edges[name] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def layer(module: str) -> int:
    return LAYERS[module.split(".")[1]]


def test_the_walker_sees_imports_inside_functions_and_relative_ones():
    source = "import os\ndef f():\n    from ..grading import registry\n    import autograder.cli\n"
    assert imported_from(source, "autograder.speed") == {
        "autograder.grading", "autograder.grading.registry", "autograder.cli"}


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_every_module_is_in_a_layer_and_imports_point_down():
    edges = graph()
    assert {name.split(".")[1] for name in edges if "." in name} <= set(LAYERS)
    upward = [f"{a} -> {b}" for a, targets in edges.items() if "." in a
              for b in targets if layer(b) > layer(a)]
    assert upward == []


def test_nothing_outside_the_cli_imports_it():
    outside = [p for p in (*PACKAGE.rglob("*.py"), *(ROOT / "scripts").glob("*.py"),
                           ROOT / "gradescope" / "run_autograder")
               if "cli" not in p.relative_to(ROOT).parts]
    users = [str(p.relative_to(ROOT)) for p in outside
             if any(name.startswith("autograder.cli") for name in imported(p))]
    assert users == []


def test_no_module_is_longer_than_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
