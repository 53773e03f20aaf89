"""SELECT of group keys only (issue: SQL coverage): `SELECT educ FROM pums GROUP BY educ`.

Public keys are released as their domain — no private row is read and nothing is charged;
other keys go through DP partition selection, which is all the query costs."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import privplan as pp

POLICY = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
    "a": {"type": "str", "public_values": ["x", "y", "z"]},
    "b": {"type": "str"},
    "x": {"type": "int", "lower": 0, "upper": 10}}}}})
DATA = pd.DataFrame({"a": ["x", "y", "y"] * 200, "b": ["p", "q", "r"] * 199 + ["s", "t", "u"],
                     "x": [1, 2, 5] * 200})


def _session(budget: Any = None) -> tuple[pp.Session, list[str]]:
    s = pp.connect(":memory:", policy=POLICY, budget=budget or pp.ApproxDP(100, 1e-3))
    s.register("t", DATA)
    ran: list[str] = []
    real = s.engine.run

    def run(sql: str) -> pd.DataFrame:
        ran.append(sql)
        return real(sql)

    s.engine.run = run  # type: ignore[method-assign]
    return s, ran


def test_public_keys_are_their_domain_and_cost_nothing() -> None:
    s, ran = _session(pp.PureDP(1))
    r = s.sql("SELECT a FROM t GROUP BY a ORDER BY a", epsilon=1)
    assert r.df["a"].tolist() == ["x", "y", "z"]  # 'z' has no row: the domain, not the data
    assert r.cost == pp.PureDP(0) and s.spent() == pp.PureDP(0)
    assert ran and all(" t " not in f" {sql} " and "FROM t" not in sql for sql in ran), ran


def test_other_keys_cost_partition_selection_only() -> None:
    s, _ = _session()
    plan = s.explain("SELECT b FROM t GROUP BY b", epsilon=1, delta=1e-6)
    assert [m.label for m in plan.mechanisms] == [
        "partition selection (noisy row count over a threshold)"]
    r = s.sql("SELECT b FROM t GROUP BY b ORDER BY b", epsilon=1, delta=1e-6)
    assert r.cost == pp.ApproxDP(1, 1e-6)
    released = set(r.df["b"])
    assert released <= set(DATA["b"])
    assert {"p", "q", "r"} <= released  # 199 rows each: far above any threshold at ε = 1
    # one row each: released with probability <= δ each (the selection's guarantee)
    assert not {"s", "t", "u"} & released


def test_other_keys_under_pure_dp_are_refused_with_the_fix() -> None:
    s, _ = _session(pp.PureDP(1))
    with pytest.raises(pp.UnsupportedQueryError, match="partition selection"):
        s.sql("SELECT b FROM t GROUP BY b", epsilon=1)
    assert s.spent() == pp.PureDP(0)


def test_a_select_without_keys_or_aggregates_is_still_refused() -> None:
    s, _ = _session()
    with pytest.raises(pp.UnsupportedQueryError, match="releases no aggregate"):
        s.sql("SELECT a FROM t", epsilon=1, delta=1e-6)
