"""The registry's points tables and the contract agree with the checks that use them.

(That each table totals 100 and that ids are unique is checked when the registry is imported.)
"""

from autograder import contract
from autograder.grading import registry


def test_each_check_earns_points():
    for table in registry.ASSIGNMENTS.values():
        assert [c.id for c in table if c.points <= 0] == []


def test_every_contract_name_is_graded():
    """Each contract name is used by some check, and each check uses only contract names."""
    graded = {name for table in registry.ASSIGNMENTS.values() for spec in table
              for name in spec.uses}
    assert graded == set(contract.ENTRIES)
