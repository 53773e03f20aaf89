"""COUNT(DISTINCT <column>) of any column (issue: SQL coverage): one row adds at most one
distinct value, so the count has sensitivity 1 per row; with units of k rows a unit's r rows
in a group move it by at most r (per-row growth). User-level neighbours are checked against
the engine in tests/test_user_level.py (QUERIES)."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled

POLICY = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
    "a": {"type": "str", "public_values": ["x", "y", "z"]},
    "s": {"type": "str"},
    "x": {"type": "float", "lower": 0, "upper": 10}}}}})


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    x = rng.integers(0, 6, 300).astype(float)
    x[::17] = np.nan
    x[1::29] = -0.0
    s = rng.choice(["p", "P", "q", "p "], 300)
    return pd.DataFrame({"a": rng.choice(["x", "y"], 300), "s": s, "x": x})


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(DISTINCT x) AS n FROM t",
    "SELECT a, COUNT(DISTINCT x) AS n FROM t GROUP BY a ORDER BY a",
    "SELECT a, COUNT(DISTINCT s) AS n FROM t GROUP BY a ORDER BY a",
    "SELECT a, COUNT(DISTINCT x) FILTER (WHERE x > 1) AS n, COUNT(*) AS c FROM t "
    "GROUP BY a ORDER BY a",
])
def test_noise_free_equals_duckdb(sql: str) -> None:
    df = _data()
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", df)
    with noise_disabled():
        got = s.sql(sql, epsilon=1).df
    con = duckdb.connect()
    con.register("t", df)
    want = con.execute(sql.replace("ORDER BY a", "ORDER BY a")).df()
    if "GROUP BY" in sql:  # privplan zero-fills the public domain ('z')
        want = pd.DataFrame({"a": ["x", "y", "z"]}).merge(want, how="left").fillna(0)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)


def test_one_row_moves_it_by_one() -> None:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", _data())
    (m,) = s.explain("SELECT COUNT(DISTINCT s) FROM t", epsilon=1).mechanisms
    assert m.sensitivity == 1 and m.cost == pp.PureDP(1)


@pytest.mark.parametrize("sql", ["SELECT SUM(DISTINCT x + 1) FROM t",
                                 "SELECT COUNT(DISTINCT (a, s)) FROM t"])
def test_other_distinct_aggregates_are_refused(sql: str) -> None:
    """(aggregates of one column's DISTINCT values: tests/sql/test_distinct_aggregates.py)"""
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", _data())
    with pytest.raises(pp.UnsupportedQueryError, match=r"DISTINCT values of one column"):
        s.sql(sql, epsilon=1)
    assert s.spent() == pp.PureDP(0)
