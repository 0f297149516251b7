"""The registry's points tables and the contract agree with the checks that use them, and the
docs list the assignments there are.

(That each table totals 100 and that ids are unique is checked when the registry is imported.)
"""

import re

from conftest import ROOT

from mha_kit import catalog, contract
from mha_kit.grading import registry
from mha_kit.release import LISTING_ROW, LISTINGS


def test_each_check_earns_points():
    for table in registry.ASSIGNMENTS.values():
        assert [c.id for c in table if c.points <= 0] == []


def test_every_contract_name_is_graded():
    """Each contract name is used by some check, and each check uses only contract names."""
    graded = {name for table in registry.ASSIGNMENTS.values() for spec in table
              for name in spec.uses}
    assert graded == set(contract.ENTRIES)


_NUMBER = r"(?:two|three|four|five|six|seven|eight)"
COUNTED = re.compile(rf"\b(?:all )?{_NUMBER}\s+(?:nbgrader\s+)?(?:assignments|releases)\b", re.I)


def test_the_docs_list_every_assignment_and_count_none():
    """The tables of assignments follow the packages; no prose counts them, so adding one
    leaves no sentence wrong."""
    names = set(catalog.names())
    assert names == set(registry.ASSIGNMENTS)
    for doc in LISTINGS:  # `mha-kit release` says which row is missing (release.todo)
        assert set(LISTING_ROW.findall((ROOT / doc).read_text(encoding="utf-8"))) == names, doc
    counting = {str(p.relative_to(ROOT)): COUNTED.findall(p.read_text(encoding="utf-8"))
                for p in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))}
    assert {doc: found for doc, found in counting.items() if found} == {}


def test_the_docs_check_catches_a_missing_row_and_a_count():
    assert LISTING_ROW.findall("| `shapes` | `shapes_warmup.ipynb` | ... |") == ["shapes"]
    assert COUNTED.findall("The course holds six nbgrader assignments; all six releases.") == [
        "six nbgrader assignments", "all six releases"]


def test_a_count_of_checks_the_docs_cite_is_the_points_tables():
    """"`mha` | ... (12 checks)" in a table row: the number follows the assignment's table."""
    row = re.compile(r"^\| `(\w+)` \|.*\((\d+) checks\)", re.MULTILINE)
    cited = [(doc.name, name, int(count)) for doc in (ROOT / "README.md",
                                                      *sorted((ROOT / "docs").glob("*.md")))
             for name, count in row.findall(doc.read_text(encoding="utf-8"))]
    assert cited and [c for c in cited if c[2] != len(registry.ASSIGNMENTS[c[1]])] == []
