"""Parameter types inferred from a prepared statement's context (privplan.server.param_types)."""

from __future__ import annotations

import pytest

from privplan.demo.data import demo_policy_path
from privplan.policy import Policy
from privplan.server.param_types import infer_param_types


@pytest.mark.parametrize(("sql", "given", "count", "expected"), [
    ("SELECT COUNT(*) FROM visits WHERE age > $1", (), 1, [20]),
    ("SELECT COUNT(*) FROM visits v WHERE $1 <= v.cost", (), 1, [701]),
    ("SELECT COUNT(*) FROM visits WHERE hospital IN ($1, $2) AND insured = $3", (), 3,
     [25, 25, 16]),
    ("SELECT COUNT(*) FROM visits WHERE visit_date BETWEEN $1 AND $2", (), 2, [1082, 1082]),
    ("SELECT hospital, COUNT(*) FROM visits GROUP BY hospital LIMIT $1", (), 1, [20]),
    ("SELECT COUNT(*) FROM visits WHERE age > $1 + 1", (), 1, [25]),  # (not a comparison)
    ("SELECT COUNT(*) FROM visits WHERE age > $1", (23,), 1, [23]),  # (the Parse's type)
    ("SELECT COUNT(*) FROM visits WHERE age > $2", (0,), 2, [25, 20]),
    ("not sql at all $1 (", (), 1, [25]),
])
def test_inferred(sql: str, given: tuple[int, ...], count: int, expected: list[int]) -> None:
    assert infer_param_types(sql, given, count, Policy.from_yaml(demo_policy_path())) == expected
