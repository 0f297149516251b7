"""The single points table and the contract agree with the checks that use them.

(That each table totals 100 and that ids are unique is asserted when points.py is imported.)
"""

from autograder import checks, contract, points


def test_checks_are_in_the_tables_order_and_each_earns_points():
    assert list(checks.CHECK_FUNCTIONS) == [c.id for c in points.CHECKS]
    for table in points.ASSIGNMENTS.values():
        assert [c.id for c in table if c.points <= 0] == []


def test_every_contract_name_is_graded():
    """Each contract name is used by some check, and each check uses only contract names."""
    graded = {name for table in points.ASSIGNMENTS.values() for spec in table
              for name in spec.uses}
    assert graded == set(contract.ENTRIES)
