"""GROUP BY ROLLUP / CUBE / GROUPING SETS (issue: SQL coverage): each grouping set is a
partition, composed by the theorem like a UNION ALL of GROUP BYs. Oracle: DuckDB's own
grouping sets over the same rows (noise off; every key combination occurs, so privplan's
zero-filled public domain adds no row)."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.sql.parse import parse_statement
from privplan.testing import noise_disabled

POLICY = pp.Policy.from_dict({"tables": {"t": {"privacy_unit": "row", "columns": {
    "a": {"type": "str", "public_values": ["x", "y"]},
    "b": {"type": "str", "public_values": ["p", "q", "r"]},
    "v": {"type": "int", "lower": 0, "upper": 10}}}}})


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    rows = [(a, b, int(v)) for a in "xy" for b in "pqr" for v in rng.integers(0, 11, 5)]
    return pd.DataFrame(rows, columns=["a", "b", "v"])


@pytest.mark.parametrize("group", ["ROLLUP(a, b)", "CUBE(a, b)", "GROUPING SETS ((a, b), (b), ())",
                                   "a, ROLLUP(b)"])
def test_noise_free_equals_duckdb(group: str) -> None:
    sql = (f"SELECT a, b, COUNT(*) AS n, SUM(v) AS s, GROUPING(a, b) AS g FROM t "
           f"GROUP BY {group} ORDER BY g, a NULLS LAST, b NULLS LAST")
    df = _data()
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", df)
    with noise_disabled():
        got = s.sql(sql, epsilon=1).df
    con = duckdb.connect()
    con.register("t", df)
    want = con.execute(sql).df()
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)


def test_each_set_is_a_partition_of_the_budget() -> None:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", _data())
    plan = s.explain("SELECT a, b, COUNT(*) FROM t GROUP BY ROLLUP(a, b)", epsilon=1)
    assert [m.cost for m in plan.mechanisms] == [pp.PureDP("1/3")] * 3  # a record: 3 groups
    assert plan.query_cost == pp.PureDP(1)
    # a CUBE of disjoint filters still composes in parallel with what came before
    s.sql("SELECT COUNT(*) FROM t WHERE a = 'x'", epsilon=1)
    assert s.sql("SELECT b, COUNT(*) FROM t WHERE a = 'y' GROUP BY CUBE(b)",
                 epsilon=1).cost == pp.PureDP(0)


@pytest.mark.parametrize(("sql", "match"), [
    ("SELECT a, COUNT(*) FROM t GROUP BY CUBE(a, b, v, a, b, v, a)", "at most 64"),
    ("SELECT a, COUNT(*) FROM t GROUP BY GROUPING SETS (ROLLUP(a))", "list the grouping sets"),
])
def test_refusals(sql: str, match: str) -> None:
    with pytest.raises(pp.UnsupportedQueryError, match=match):
        parse_statement(sql)
