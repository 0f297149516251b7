"""The package's layout: dependencies point one way, with no cycles, and modules stay small.

Imports are read from the source, never by importing: plain imports (those inside functions
included), names of kit code in strings ("mha_kit.assignments.mha.jobs:measure_speed"), and
an assignment's modules loaded through `catalog.modules("points")`.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from mha_kit import catalog
from mha_kit.cli import COMMANDS
from mha_kit.contract import ENTRIES
from mha_kit.grading.registry import SPECS
from mha_kit.runner.kit_names import is_job

PACKAGE = ROOT / "mha_kit"
# Each layer may import its own and lower layers only: cli → grading → assignments → speed →
# checks → runner/oracle → contract, messages, runtime, settings, catalog (and the assignments'
# data modules).
LAYERS = {
    "contract": 0, "messages": 0, "runtime": 0, "settings": 0, "catalog": 0, "course_layout": 0,
    "oracle": 1, "runner": 1,
    "checks": 2,
    "speed": 3,
    "assignments": 4,
    "grading": 5,
    "notebook": 6, "training": 6, "trusted_autograde": 6, "release": 6, "editions": 6,
    "scaffold": 6, "course_folder": 6,
    "course_autograde": 6, "sandboxed_kernel": 6, "course_settings": 6, "gradescope": 6,
    "conftest": 6, "test_submission": 6,
    "cli": 7,
}
# An assignment's data, read by the lowest layers: its contract and its message templates
# (the Chinese ones, or a group's sentences, apart where they make messages.py too long).
ASSIGNMENT_DATA = ("contract", "messages", "messages_zh", "messages_decoding", "messages_flash",
                   "mistakes")
MAX_LINES = 500
KIT_NAME = re.compile(r"mha_kit(\.[A-Za-z_][A-Za-z0-9_]*)+(:[A-Za-z_][A-Za-z0-9_]*)?")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """The autograder modules a file imports (by `import` only), anywhere in it, resolved to
    dotted names."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    return imported_from(path.read_text(encoding="utf-8"), package, strings=False)


def imported_from(source: str, package: str, top_level: bool = False, strings: bool = True
                  ) -> set[str]:
    """The autograder names imported by `source`, a module of `package`: by `import`, by
    `modules(part)` (each assignment's `part`) and, with `strings`, by a string naming kit
    code (a job, a module run as a process). With `top_level`, only what importing the module
    runs (not the bodies of functions)."""
    found = set()
    for node in walk(ast.parse(source), top_level):
        if strings and isinstance(node, ast.Constant) and isinstance(node.value, str):
            if KIT_NAME.fullmatch(node.value):
                found.add(node.value.partition(":")[0])
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "modules"
              and node.args and isinstance(node.args[0], ast.Constant)):  # may be optional
            found |= {f"mha_kit.assignments.{name}.{node.args[0].value}"
                      for name in ASSIGNMENT_NAMES}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[:len(base) - node.level + 1] if node.level else []
            stem = ".".join(base + ([node.module] if node.module else []))
            found |= {f"{stem}.{alias.name}" for alias in node.names} | {stem}
    return {name for name in found if name == "mha_kit" or name.startswith("mha_kit.")}


def walk(tree: ast.AST, top_level: bool) -> list[ast.AST]:
    """Every node of `tree`; with `top_level`, none inside a function."""
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        if not (top_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.Lambda))):
            todo.extend(ast.iter_child_nodes(node))
    return nodes


ASSIGNMENT_NAMES = sorted(p.parent.name for p in (PACKAGE / "assignments").glob("*/points.py"))


def graph(top_level: bool = False, sources: dict[str, str] | None = None, strings: bool = True
          ) -> dict[str, set[str]]:
    """module -> the autograder modules it imports (a name that is an attribute, not a module,
    is resolved to the module that holds it). `sources` replaces or adds modules' text."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    texts = {name: path.read_text(encoding="utf-8") for name, path in files.items()}
    texts.update(sources or {})
    edges = {}
    for name, text in texts.items():
        is_package = name in files and files[name].name == "__init__.py"
        targets = set()
        for target in imported_from(text, name if is_package else name.rsplit(".", 1)[0],
                                    top_level, strings):
            while target not in texts and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != name and target != "mha_kit":
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
    parts = module.split(".")
    if parts[1] == "assignments" and (len(parts) <= 3 or parts[-1] in ASSIGNMENT_DATA):
        return 0  # the discovery, a package's docstring, its data
    return LAYERS[parts[1]]


def upward(edges: dict[str, set[str]]) -> list[str]:
    return [f"{a} -> {b}" for a, targets in edges.items() if "." in a
            for b in targets if layer(b) > layer(a)]


def across_assignments(edges: dict[str, set[str]]) -> list[str]:
    """Imports from one assignment's package into another's."""
    def owner(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if parts[1] == "assignments" and len(parts) > 2 else None
    return [f"{a} -> {b}" for a, targets in edges.items() for b in targets
            if owner(a) and owner(b) and owner(a) != owner(b)]


def loaded_by_check(edges: dict[str, set[str]]) -> set[str]:
    """What `mha-kit check` imports: the CLI and its command modules, and what their imports
    run (not what their functions import when called)."""
    todo = ["mha_kit.cli", *(f"mha_kit.cli.{name}" for name in COMMANDS)]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(edges.get(module, ()))
    return seen


def test_the_walker_sees_imports_inside_functions_and_relative_ones():
    source = "import os\ndef f():\n    from ..grading import registry\n    import mha_kit.cli\n"
    assert imported_from(source, "mha_kit.speed") == {
        "mha_kit.grading", "mha_kit.grading.registry", "mha_kit.cli"}


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    """A module named in a string is started as a process (`-m`), not imported."""
    assert cycles(graph(strings=False)) == []


def test_every_module_is_in_a_layer_and_imports_point_down():
    edges = graph()
    assert {name.split(".")[1] for name in edges if "." in name} <= set(LAYERS)
    assert upward(edges) == []


@pytest.mark.parametrize(("source", "named"), [
    ('JOB = "mha_kit.grading.registry:run_check"', "mha_kit.grading.registry"),
    ('importlib.import_module("mha_kit.grading.batch")', "mha_kit.grading.batch"),
])
def test_a_string_naming_kit_code_above_is_an_upward_import(source: str, named: str):
    planted = graph(sources={"mha_kit.runner.planted": source})
    assert upward(planted) == [f"mha_kit.runner.planted -> {named}"]


def test_only_an_assignments_jobs_run_beside_the_students_code():
    assert is_job("mha_kit.assignments.mha.jobs:measure_speed")
    assert not is_job("mha_kit.speed.timing:count_ops")
    planted = graph(sources={"mha_kit.runner.planted":
                             'run_job("mha_kit.assignments.mha.jobs:measure_speed")'})
    assert upward(planted) == ["mha_kit.runner.planted -> mha_kit.assignments.mha.jobs"]


def knows_an_assignment(edges: dict[str, set[str]], texts: dict[str, str]) -> list[str]:
    """What the speed layer imports of any assignment (its data included), and the contract
    names and check ids its code names (as a string or a name)."""
    named = {*ENTRIES, *SPECS}
    found = [f"{a} -> {b}" for a, targets in edges.items() if a.startswith("mha_kit.speed")
             for b in targets if b.startswith("mha_kit.assignments")]
    for module, text in texts.items():
        for node in walk(ast.parse(text), top_level=False):
            word = (node.value if isinstance(node, ast.Constant) else
                    getattr(node, "id", None) or getattr(node, "attr", None))
            if isinstance(word, str) and word in named:
                found.append(f"{module} names {word}")
    return found


def test_the_speed_layer_knows_no_assignment():
    """It times and judges any callables: what an assignment times lives in its package."""
    texts = {module_name(p): p.read_text(encoding="utf-8")
             for p in (PACKAGE / "speed").rglob("*.py")}
    assert knows_an_assignment(graph(), texts) == []
    planted = {"mha_kit.speed.planted": "from ..assignments.mha import contract\n"
                                          'SPEED_CHECK = "speed_fused_vs_looped"\n'}
    assert {"mha_kit.speed.planted -> mha_kit.assignments.mha.contract",
            "mha_kit.speed.planted names speed_fused_vs_looped"} <= set(
        knows_an_assignment(graph(sources=planted), planted))


def test_no_assignment_imports_another():
    assert across_assignments(graph()) == []
    assert ASSIGNMENT_NAMES == list(catalog.names()) and "mha" in ASSIGNMENT_NAMES
    planted = graph(sources={"mha_kit.assignments.shapes.planted":
                             "from ..mha import steps"})
    assert "mha_kit.assignments.shapes.planted -> mha_kit.assignments.mha.steps" in \
        across_assignments(planted)


def test_an_assignments_data_is_read_through_modules_by_the_lowest_layers():
    edges = graph()
    assert {f"mha_kit.assignments.{name}.contract" for name in ASSIGNMENT_NAMES} <= \
        edges["mha_kit.contract"]
    assert {f"mha_kit.assignments.{name}.points" for name in ASSIGNMENT_NAMES} <= \
        edges["mha_kit.grading.registry"]
    planted = graph(sources={"mha_kit.messages.planted": 'modules("points")'})
    assert "mha_kit.messages.planted -> mha_kit.assignments.mha.points" in upward(planted)


def test_mha_kit_check_does_not_load_the_calibration_code():
    assert "mha_kit.assignments.mha.styles" not in loaded_by_check(graph(top_level=True))
    planted = graph(top_level=True, sources={
        "mha_kit.cli.check": (PACKAGE / "cli" / "check.py").read_text(encoding="utf-8")
        + "\nfrom ..assignments.mha import calibration\n"})
    assert "mha_kit.assignments.mha.styles" in loaded_by_check(planted)


def test_nothing_outside_the_cli_imports_it():
    outside = [p for p in (*PACKAGE.rglob("*.py"), *(ROOT / "scripts").glob("*.py"),
                           ROOT / "mha_kit" / "gradescope" / "run_autograder")
               if "cli" not in p.relative_to(ROOT).parts]
    users = [str(p.relative_to(ROOT)) for p in outside
             if any(name.startswith("mha_kit.cli") for name in imported(p))]
    assert users == []


def test_no_module_is_longer_than_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_reading_a_notebook_compiles_no_grammar_it_never_uses():
    """jsonschema's optional `rfc3987_syntax` (3 s of grammars at import) stays out of the kit's
    processes that read notebooks."""
    probe = ("import sys, mha_kit.course_autograde, nbformat\n"
             "print(sys.modules.get('rfc3987_syntax') is None)")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert run.stdout.strip() == "True", run.stderr


def test_the_lowest_layers_find_assignments_through_the_catalog():
    """Not through the assignments' package, whose folder holds the top layer's checks."""
    edges = graph()
    users = [m for m in ("mha_kit.contract", "mha_kit.messages",
                         "mha_kit.checks.diagnosis", "mha_kit.grading.registry")
             if "mha_kit.assignments" in edges[m]]
    assert users == [] and "mha_kit.catalog" in edges["mha_kit.contract"]
