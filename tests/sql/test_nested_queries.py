"""An outer query over a DP subquery (issue: SQL coverage; BigQuery/ZetaSQL style).

The inner query is answered as usual; the outer one runs over its noisy answer alone. Oracle:
DuckDB runs the same outer query over the exact inner answer (noise off)."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.sql.nesting import split_outer
from privplan.testing import noise_disabled

POLICY = pp.Policy.from_dict({"tables": {"t": {
    "privacy_unit": "pid", "max_rows_per_unit": 3, "columns": {
        "pid": {"type": "int"}, "a": {"type": "str", "public_values": ["x", "y", "z"]},
        "x": {"type": "int", "lower": 0, "upper": 10}}}}})
DATA = pd.DataFrame({"pid": range(300), "a": ["x", "y", "y"] * 100, "x": [1, 2, 5] * 100})
BQ = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, "
      "privacy_unit_column=pid) ")


def _session() -> pp.Session:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(100))
    s.register("t", DATA)
    return s


@pytest.mark.parametrize(("outer", "inner"), [
    ("SELECT a, n FROM ({}) AS q WHERE n > 150 ORDER BY a",
     "SELECT a, COUNT(*) AS n FROM t GROUP BY a"),
    ("WITH q AS ({}) SELECT a, ROUND(m, 1) AS m FROM q ORDER BY a",
     "SELECT a, AVG(x) AS m FROM t GROUP BY a"),
    ("SELECT SUM(n) AS total, MAX(n) AS top FROM ({})",
     "SELECT a, COUNT(*) AS n FROM t GROUP BY a"),
    ("SELECT a, s / n AS mean FROM ({}) ORDER BY a",
     "SELECT a, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY a HAVING COUNT(*) > 0"),
])
def test_outer_query_runs_over_the_inner_answer(outer: str, inner: str) -> None:
    s = _session()
    with noise_disabled():
        got = s.sql(outer.format(inner), epsilon=1)
        exact_inner = _session().sql(inner, epsilon=1).df
    con = duckdb.connect()
    con.register("inner_answer", exact_inner)
    want = con.execute(outer.format("SELECT * FROM inner_answer")).df()
    pd.testing.assert_frame_equal(got.df.reset_index(drop=True), want, check_dtype=False)
    assert got.cost == pp.PureDP(1) and s.spent() == pp.PureDP(1)
    assert "post-processes" in got.notes[-1]


def test_bigquery_clause_in_the_subquery() -> None:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.ApproxDP(10, 1e-3))
    s.register("t", DATA)
    sql = f"SELECT a, n * 2 AS twice FROM ({BQ}a, COUNT(*) AS n FROM t GROUP BY a) ORDER BY a"
    with noise_disabled():
        r = s.sql(sql)
    assert r.df.to_dict("list") == {"a": ["x", "y", "z"], "twice": [200, 400, 0]}
    assert s.spent() == pp.ApproxDP(1, 0)
    plain = s.explain(f"{BQ}a, COUNT(*) AS n FROM t GROUP BY a")
    nested = s.explain(sql)
    assert [m.to_dict() for m in nested.mechanisms] == [m.to_dict() for m in plain.mechanisms]


@pytest.mark.parametrize(("sql", "match"), [
    ("SELECT a, nope FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) AS q",
     "fails on any answer"),
    ("SELECT q.a FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) AS q JOIN t ON q.a = t.a",
     "reads table 't' besides the DP subquery"),
    ("SELECT * FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) AS q, read_csv('x.csv') AS f",
     "besides the DP subquery"),
])
def test_outer_queries_that_cannot_run_spend_nothing(sql: str, match: str) -> None:
    s = _session()
    for call in (s.sql, s.explain):
        with pytest.raises(pp.UnsupportedQueryError, match=match):
            call(sql, epsilon=1)
    assert s.spent() == pp.PureDP(0)


def test_only_one_parenthesised_select_is_split() -> None:
    assert split_outer("SELECT COUNT(*) FROM t") is None
    assert split_outer("SELECT (SELECT 1), (SELECT 2)") is None
    nested = split_outer("SELECT n FROM (SELECT COUNT(*) AS n FROM t) q WHERE n > 1")
    assert nested is not None
    assert nested.inner == "SELECT COUNT(*) AS n FROM t"
    assert nested.outer == "SELECT n FROM (SELECT * FROM __privplan_inner) q WHERE n > 1"
