"""The single points table and the contract agree with the checks that use them."""

from autograder import checks, contract, points


def test_each_assignment_totals_100():
    for table in points.ASSIGNMENTS.values():
        assert sum(c.points for c in table) == 100
    assert points.ASSIGNMENTS["mha"] == points.CHECKS


def test_every_check_has_a_function_and_known_names():
    assert list(checks.CHECK_FUNCTIONS) == [c.id for c in points.CHECKS]
    for spec in points.CHECKS:
        assert spec.points > 0
        assert set(spec.uses) <= set(contract.ENTRIES), spec.id


def test_every_contract_name_is_graded():
    graded = {name for table in points.ASSIGNMENTS.values() for spec in table
              for name in spec.uses}
    assert graded == set(contract.ENTRIES)
