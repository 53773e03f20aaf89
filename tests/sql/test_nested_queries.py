"""An outer query over a DP subquery (issue: SQL coverage; BigQuery/ZetaSQL style).

The inner query is answered as usual; the outer one runs over its noisy answer alone. Oracle:
DuckDB runs the same outer query over the exact inner answer (noise off)."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.sql.nesting import inner_name, split_outer
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
    # a WITH query over another WITH query's answer is post-processing too (Qrlew's tests)
    ("WITH q AS ({}), r AS (SELECT 2 * n AS twice, a FROM q) "
     "SELECT twice, COUNT(*) AS groups FROM r GROUP BY twice ORDER BY twice",
     "SELECT a, COUNT(*) AS n FROM t GROUP BY a"),
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


# ------------------------------------------------------------- several DP subqueries at once

TWO = ("SELECT x.n - y.n AS diff, x.n + y.n AS total FROM "
       "(SELECT COUNT(*) AS n FROM t WHERE a = 'x') AS x, "
       "(SELECT COUNT(*) AS n FROM t WHERE a = 'y') AS y")


@pytest.mark.parametrize(("sql", "parts"), [
    (TWO, ["SELECT COUNT(*) AS n FROM t WHERE a = 'x'", "SELECT COUNT(*) AS n FROM t WHERE a = 'y'"]),
    ("WITH c AS (SELECT COUNT(*) AS n FROM t), s AS (SELECT SUM(x) AS s FROM t) "
     "SELECT s.s / c.n AS mean FROM c, s",
     ["SELECT COUNT(*) AS n FROM t", "SELECT SUM(x) AS s FROM t"]),
    ("SELECT * FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) UNION ALL "
     "SELECT * FROM (SELECT 'all' AS a, COUNT(*) AS n FROM t) ORDER BY a",
     ["SELECT a, COUNT(*) AS n FROM t GROUP BY a", "SELECT 'all' AS a, COUNT(*) AS n FROM t"]),
    ("SELECT (SELECT COUNT(*) FROM t WHERE x > 1) * 1.0 / (SELECT COUNT(*) FROM t) AS share",
     ["SELECT COUNT(*) FROM t WHERE x > 1", "SELECT COUNT(*) FROM t"]),
])
def test_an_outer_query_over_several_subqueries(sql: str, parts: list[str]) -> None:
    """Noise off, the statement equals DuckDB's outer query over the exact inner answers; the
    statement's budget is shared equally, and disjoint subqueries cost their maximum."""
    s = _session()
    with noise_disabled():
        got = s.sql(sql, epsilon=1)
        exact = [_session().sql(part, epsilon=0.5).df for part in parts]
    nested = split_outer(sql)
    assert nested is not None and list(nested.inners) == parts
    con = duckdb.connect()
    for i, frame in enumerate(exact):
        con.register(inner_name(i), frame)
    want = con.execute(nested.outer).df()
    pd.testing.assert_frame_equal(got.df.reset_index(drop=True), want, check_dtype=False)
    if "GROUP BY" not in sql:  # (a public domain is zero-filled: DuckDB's plain answer lacks z)
        plain = duckdb.connect()
        plain.register("t", DATA)
        pd.testing.assert_frame_equal(want, plain.execute(sql).df(), check_dtype=False)
    assert s.spent() <= pp.PureDP(1)
    assert len(s.explain(sql, epsilon=1).mechanisms) >= len(parts)


def test_disjoint_subqueries_cost_their_maximum() -> None:
    s = _session()
    r = s.sql(TWO, epsilon=1)
    # each subquery gets ε/2; a row is in a = 'x' or a = 'y', and a unit's (at most 3) rows
    # split between them pay 3 x the one-row cost in all: ε/2 for the statement
    assert s.spent() == pp.PureDP(0.5)
    assert r.cost == pp.PureDP(0.5)
    e = _session().explain(TWO, epsilon=1)
    assert len(e.mechanisms) == 2 and e.mechanisms[0].cost == e.mechanisms[1].cost
    assert e.marginal == pp.PureDP(0.5) and e.query_cost == pp.PureDP(1)


def test_union_all_of_bigquery_clause_queries_each_with_its_budget() -> None:
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(10))
    s.register("t", DATA)
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) 'n' AS what, COUNT(*) AS v FROM t "
           "UNION ALL "
           "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=2) 's' AS what, SUM(x) AS v FROM t "
           "ORDER BY what DESC")
    with noise_disabled():
        r = s.sql(sql)
    assert r.df.to_dict("list") == {"what": ["s", "n"], "v": [800, 300]}
    assert s.spent() == pp.PureDP(3)


@pytest.mark.parametrize(("sql", "error", "match"), [
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) COUNT(*) AS v FROM t UNION ALL "
     "SELECT COUNT(*) AS v FROM t", pp.UnsupportedQueryError, "with and without"),
    ("SELECT ABS((SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) SUM(x) FROM t) - "
     "(SELECT SUM(x) FROM t)) < 0.001", pp.UnsupportedQueryError, "raw rows"),
    ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=6) COUNT(*) AS v FROM t UNION ALL "
     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=6) SUM(x) AS v FROM t",
     pp.BudgetExceededError, "Nothing was spent"),
])
def test_several_subqueries_refused_spend_nothing(sql: str, error: type, match: str,
                                                  tmp_path) -> None:
    ledger = tmp_path / "l.sqlite"
    s = pp.connect(":memory:", policy=POLICY, budget=pp.PureDP(10), ledger=ledger)
    s.register("t", DATA)
    with pytest.raises(error, match=match):
        s.sql(sql)
    assert s.spent() == pp.PureDP(0)
    s.close()
    import sqlite3

    assert sqlite3.connect(ledger).execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
