"""`mha-kit new NAME`: a new assignment that loads and grades as written.

It writes the package `<into>/NAME/` (by default in the kit's own `mha_kit/assignments/`): a
contract of one function `NAME(x)`, one check of it against PyTorch (a softmax over the last
dimension) with one named mistake, its sentences in English and Chinese, and a points table of
100; then the English master `solutions/NAME/NAME.ipynb` of the course, with the kit's setup
cell, a solution cell and a locked test cell with hidden inputs, and the Chinese overlay's
skeleton (`editions.add_untranslated`). The solution gets 100/100, its release 0, "not
implemented"; the author then replaces the example with the exercise.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from . import catalog, settings
from .contract import ENTRIES
from .editions import add_untranslated, overlay_path
from .grading.registry import EDITION_LANGUAGES, SPECS, edition_name
from .messages import Message, MessageError, msg
from .release import PLACEHOLDER_SOURCE
from .settings import SOURCE_VARIABLE

NAME = re.compile(r"[a-z][a-z0-9_]*")

# The start of every notebook's setup cell (its first code cell): the kit installed from
# its SOURCE_VARIABLE where it is missing (tests/test_adding_an_assignment.py holds the kit's
# notebooks to it).
INSTALL = '''\
# Where to install the grading kit from when it is missing (a fresh Colab runtime): a pip URL
# or a local path. Your instructor replaces the placeholder below. Working from a clone of
# mha-kit, `make lab` installs the kit and opens JupyterLab: this line is then never used.
$variable = "$source"

import importlib
import importlib.metadata


def kit_installed() -> bool:
    """Whether the distribution mha-kit is installed (its module name alone proves nothing)."""
    try:
        importlib.metadata.distribution("mha-kit")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


if not kit_installed():  # e.g. a fresh Colab runtime
    if "YOUR-ORG" in $variable:
        raise RuntimeError("The grading kit is not installed: set $variable above to the "
                           "address your instructor gave you, or run `make lab` in a \
clone of mha-kit.")
    %pip install -q "{$variable}"
    importlib.invalidate_caches()
    if not kit_installed():
        raise RuntimeError(f"Installing the grading kit from {$variable} failed (see pip's "
                           "message above): check the address, or run `make lab` in a \
clone of mha-kit.")
'''.replace("$source", PLACEHOLDER_SOURCE).replace("$variable", SOURCE_VARIABLE)

PACKAGE: dict[str, str] = {
    "__init__.py": '''\
"""$name: the softmax of a tensor over its last dimension (the example `mha-kit new` wrote:
say here what students build)."""
''',
    "contract.py": '''\
"""The names a $name submission defines."""

from mha_kit.catalog import Entry

ENTRIES: tuple[Entry, ...] = (Entry("$name", "$name(x)"),)
''',
    "messages.py": '''\
"""The sentences of $name's checks and mistakes, by id, in English and Chinese (see
`mha_kit.messages`). A mistake's sentence begins "This matches " in English and "这与“" in
Chinese: the feedback shows it after what went wrong."""

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "case.${name}_x": "x of shape {shape}",
        "mistake.${name}_wrong_dim": (
            "This matches the softmax taken over the first dimension: take it over the last, "
            "dim=-1."),
    },
    "zh": {
        "case.${name}_x": "形状为 {shape} 的 x",
        "mistake.${name}_wrong_dim": (
            "这与“在第一维上做 softmax”的结果一致：应在最后一维上做，dim=-1。"),
    },
}
''',
    "mistakes.py": '''\
"""The known mistakes of $name, by id (their sentences: `mistake.<id>` in messages.py)."""

CATALOGUE: tuple[str, ...] = ("${name}_wrong_dim",)
''',
    "checks.py": '''\
"""The checks of $name: the student's function against PyTorch."""

from __future__ import annotations

import torch

from mha_kit.checks.core import TIGHT, Context
from mha_kit.checks.expect import expect_close
from mha_kit.messages import msg
from mha_kit.runner.protocol import Submission


def check_$name(sub: Submission, ctx: Context) -> float:
    """`$name(x)` against torch.softmax over the last dimension, for a random x; a softmax
    over the first dimension is named."""
    x = torch.randn(3, 4, dtype=torch.float64, generator=ctx.generator("$name"))
    got = sub.call("$name", x).value
    expect_close("$name(x)", got, torch.softmax(x, dim=-1),
                 msg("case.${name}_x", shape=tuple(x.shape)), TIGHT,
                 mistakes=[("${name}_wrong_dim", lambda: torch.softmax(x, dim=0))])
    return 1.0
''',
    "points.py": '''\
"""The points table of $name: 100 points."""

from mha_kit.checks.spec import CheckSpec

from . import checks

CHECKS: tuple[CheckSpec, ...] = (CheckSpec("$name", 100, ("$name",), checks.check_$name),)
''',
}


class ScaffoldError(MessageError):
    """A name that cannot be scaffolded."""


def master_notebook(name: str) -> nbformat.NotebookNode:
    """The English master: title, setup, the exercise, its solution and its test cell."""
    slug = name.replace("_", "-")
    grade = {"schema_version": 3, "points": 100}
    return new_notebook(cells=[
        new_markdown_cell(f"# {name}\n\n"
                          "- Write your code where a cell says `# YOUR CODE HERE`, in place of "
                          "`raise NotImplementedError()`.\n"
                          "- Run the **test cell** after the exercise: it prints ✓, or ✗ and "
                          "what is wrong. Test cells are locked; leave them as they are.",
                          id="title"),
        new_markdown_cell("## 0. Setup\n\nThe next cell installs the grading kit when it is "
                          f"missing (as on a fresh Colab runtime), from `{SOURCE_VARIABLE}`, which "
                          "your instructor has set, and imports what this notebook uses.",
                          id="setup-intro"),
        new_code_cell(f"{INSTALL}\nimport torch\n\nfrom mha_kit.notebook import check",
                      id="setup"),
        new_markdown_cell(f"## 1. Exercise: `{name}(x)`\n\n**`{name}(x)`**: the softmax of `x` "
                          "over its last dimension, as `torch.softmax(x, dim=-1)` computes it.",
                          id=f"{slug}-intro"),
        new_code_cell(f'def {name}(x):\n    """The softmax of x over its last dimension."""\n'
                      "    ### BEGIN SOLUTION\n    return torch.softmax(x, dim=-1)\n"
                      "    ### END SOLUTION", id=f"{slug}-solution",
                      metadata={"nbgrader": {"grade": False, "grade_id": f"{name}_solution",
                                             "locked": False, "schema_version": 3,
                                             "solution": True}}),
        new_code_cell(f'check("{name}")\n### BEGIN HIDDEN TESTS\ncheck("{name}", hidden=True)\n'
                      "### END HIDDEN TESTS", id=f"{slug}-test",
                      metadata={"deletable": False, "editable": False, "nbgrader": {
                          **grade, "grade": True, "grade_id": name, "locked": True,
                          "solution": False}}),
    ], metadata={"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                "name": "python3"}, "language_info": {"name": "python"}})


def scaffold(name: str, into: Path | None, course: Path) -> list[Path]:
    """Write assignment `name`'s package in `into` (None: the kit's own folder), its English
    master and its overlays' skeletons in `course`; the paths written."""
    endings = tuple(f"_{lang}" for lang in EDITION_LANGUAGES)
    if not NAME.fullmatch(name) or name.endswith(endings):
        raise ScaffoldError(msg("new.bad_name", name=name, endings=", ".join(endings)))
    package = (into or catalog.KIT_FOLDER) / name
    master = course / "solutions" / name / f"{name}.ipynb"
    for path in (package, master.parent):
        if path.exists():
            raise ScaffoldError(msg("new.exists", name=name, path=path))
    if name in {*catalog.names(), *ENTRIES, *SPECS}:  # its package, function and check id
        raise ScaffoldError(msg("new.name_used", name=name))
    package.mkdir(parents=True)
    written = []
    for file, text in PACKAGE.items():
        (package / file).write_text(Template(text).substitute(name=name), encoding="utf-8")
        written.append(package / file)
    master.parent.mkdir(parents=True)
    nbformat.write(master_notebook(name), str(master))
    written.append(master)
    return written + [path for lang in EDITION_LANGUAGES
                      if (path := add_untranslated(course, master, lang))]


def next_steps(name: str, into: Path | None, course: Path) -> list[Message]:
    """What to do once `scaffold` has written `name`: where `into` is not in the `assignments`
    setting yet, how to name it there first."""
    package = (into or catalog.KIT_FOLDER) / name
    master = course / "solutions" / name / f"{name}.ipynb"
    steps = []
    if into is not None and str(into.resolve()) not in {
            str(Path(folder).resolve()) for folder in settings.current().assignments}:
        steps.append(msg("new.setting", name=name, folder=str(into.resolve()),
                         variable=settings.variable("assignments")))
    return steps + [msg("new.next", course=course, notebook=master, package=package, name=name,
                        overlays=", ".join(str(overlay_path(course, master, lang))
                                           for lang in EDITION_LANGUAGES),
                        editions=", ".join(edition_name(name, lang)
                                           for lang in EDITION_LANGUAGES))]
