"""BigQuery's public groups (a RIGHT OUTER JOIN with UNNEST of a literal list), judged by DuckDB.

Oracle: with noise off, the DP answer equals DuckDB's own answer to the same join with the
clause removed (COUNT of a column and SUM zero-filled: BigQuery releases 0 + noise for a listed
group no row has), and only listed groups are released. The rewrite is the query-text domain
``WHERE k IN (list)``: the same mechanisms, so the same charge, and no δ (no partition
selection).
"""

from __future__ import annotations

import duckdb
import pytest

import privplan as pp
from privplan.sql.bigquery import split_dp_clause
from privplan.testing import noise_disabled

POLICY = {"tables": {"students": {"privacy_unit": "id", "max_rows_per_unit": 3,
                                  "columns": {"id": {"type": "int"}, "item": {"type": "str"},
                                              "quantity": {"type": "int", "lower": 0,
                                                           "upper": 100}}}}}
JOIN = ("RIGHT OUTER JOIN (SELECT DISTINCT item FROM UNNEST(['pen', 'pencil', 'book'])) "
        "USING (item)")


@pytest.fixture()
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("CREATE TABLE students(id INTEGER, item VARCHAR, quantity INTEGER)")
    c.execute("INSERT INTO students VALUES (1, 'pen', 10), (1, 'pencil', 4), (2, 'pen', 7), "
              "(3, 'eraser', 50), (3, 'pencil', 9), (4, 'pencil', 1)")
    return c


def _dp(options: str, body: str) -> str:
    return f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS({options}) {body}"


@pytest.mark.parametrize("options", [
    "epsilon=1, delta=1e-5, max_groups_contributed=2, group_selection_strategy=PUBLIC_GROUPS",
    "epsilon=1, max_groups_contributed=2",  # older docs: the join alone, pure DP
])
def test_listed_groups_only_zero_filled_as_duckdb_answers(
        con: duckdb.DuckDBPyConnection, options: str) -> None:
    body = (f"item, COUNT(quantity) AS n, SUM(quantity) AS s FROM students {JOIN} "
            "GROUP BY item ORDER BY item")
    # DuckDB reads an UNNEST in a join as LATERAL (and refuses it in a RIGHT JOIN): the same
    # list as VALUES
    values = ("RIGHT OUTER JOIN (SELECT DISTINCT item FROM (VALUES ('pen'), ('pencil'), "
              "('book')) AS v(item)) USING (item)")
    plain = con.execute(f"SELECT item, COUNT(quantity) AS n, COALESCE(SUM(quantity), 0) AS s "
                        f"FROM students {values} GROUP BY item ORDER BY item").df()
    with pp.connect(con, policy=POLICY, budget=pp.ApproxDP(10, 1e-3)) as sess, \
            noise_disabled():
        got = sess.sql(_dp(options, body)).df
    assert got["item"].tolist() == plain["item"].tolist() == ["book", "pen", "pencil"]
    assert got["n"].tolist() == plain["n"].tolist() == [0, 2, 3]
    assert got["s"].tolist() == plain["s"].tolist() == [0, 17, 14]


def test_on_form_and_numeric_keys_rewrite_to_the_in_list() -> None:
    stripped, opts = split_dp_clause(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, group_selection_strategy="
        "PUBLIC_GROUPS) t.k, COUNT(*) FROM tab AS t RIGHT JOIN (SELECT k FROM UNNEST([9999, -3])"
        " AS k) AS g ON t.k = g.k GROUP BY t.k")
    assert opts is not None and opts.group_selection_strategy == "PUBLIC_GROUPS"
    assert stripped == "SELECT t.k, COUNT(*) FROM tab AS t WHERE k IN (9999, -3) GROUP BY t.k"


def test_charged_as_the_in_list_query(con: duckdb.DuckDBPyConnection) -> None:
    body = f"item, SUM(quantity) AS s FROM students {JOIN} GROUP BY item"
    with pp.connect(con, policy=POLICY, budget=pp.PureDP(10)) as sess:
        joined = sess.sql(_dp("epsilon=1, max_groups_contributed=2", body)).cost
        listed = sess.explain("SELECT item, SUM(quantity) AS s FROM students WHERE item IN "
                              "('pen', 'pencil', 'book') GROUP BY item", epsilon=1).query_cost
    assert joined == listed


@pytest.mark.parametrize("body, fragment", [
    # PUBLIC_GROUPS with no groups in the query
    ("item, COUNT(*) FROM students GROUP BY item", "needs the public groups"),
    # a NULL group (BigQuery would release it; no IN list can) and a non-literal list
    (("item, COUNT(*) FROM students RIGHT OUTER JOIN (SELECT DISTINCT item FROM "
     "UNNEST(['pen', NULL])) USING (item) GROUP BY item"), "needs the public groups"),
    (("item, COUNT(*) FROM students RIGHT OUTER JOIN (SELECT DISTINCT item FROM students) "
     "USING (item) GROUP BY item"), "needs the public groups"),
    # the key is not a GROUP BY key
    (("COUNT(*) FROM students RIGHT OUTER JOIN (SELECT DISTINCT item FROM UNNEST(['pen'])) "
     "USING (item)"), "needs the public groups"),
])
def test_other_shapes_are_refused_and_spend_nothing(con: duckdb.DuckDBPyConnection,
                                                    body: str, fragment: str) -> None:
    sql = _dp("epsilon=1, delta=1e-5, group_selection_strategy=PUBLIC_GROUPS", body)
    with pp.connect(con, policy=POLICY, budget=pp.ApproxDP(10, 1e-3)) as sess:
        with pytest.raises(pp.UnsupportedQueryError, match=fragment):
            sess.sql(sql)
        assert sess.spent() == pp.ApproxDP(0, 0)


def test_avg_per_unit_keeps_the_listed_groups(con: duckdb.DuckDBPyConnection) -> None:
    """With AVG and a unit, BigQuery aggregates per unit and group first (the per-group
    rewrite); the listed groups stay the released domain there too: a group no unit has is
    released (its average NULL), no partition selection, as in BigQuery's docs example."""
    sql = _dp("epsilon=1, max_groups_contributed=2, group_selection_strategy=PUBLIC_GROUPS",
              f"item, AVG(quantity) AS a FROM students {JOIN} GROUP BY item ORDER BY item")
    per_unit = con.execute(
        "SELECT item, AVG(a) AS a FROM (SELECT id, item, AVG(quantity) AS a FROM students "
        "WHERE item IN ('pen', 'pencil', 'book') GROUP BY id, item) GROUP BY item "
        "ORDER BY item").fetchall()
    with pp.connect(con, policy=POLICY, budget=pp.PureDP(10)) as sess, noise_disabled():
        r = sess.sql(sql)
    assert r.df["item"].tolist() == ["book", "pen", "pencil"]
    assert r.df["a"].isna().tolist() == [True, False, False]
    assert r.df["a"].tolist()[1:] == pytest.approx([a for _, a in per_unit], rel=1e-12)
    assert not any("partition selection" in m.label for m in r.explanation.mechanisms)


def test_listed_groups_win_over_declared_public_values(con: duckdb.DuckDBPyConnection) -> None:
    """BigQuery releases exactly the groups joined in, also on a column whose values the
    policy declares public: book (listed, not declared) is released as 0, eraser (declared,
    not listed) is not. A plain WHERE ... IN keeps privplan's rule (the declared domain)."""
    policy = {"tables": {"students": {**POLICY["tables"]["students"], "columns": {
        **POLICY["tables"]["students"]["columns"],
        "item": {"type": "str", "public_values": ["pen", "pencil", "eraser"]}}}}}
    body = f"item, COUNT(quantity) AS n FROM students {JOIN} GROUP BY item ORDER BY item"
    with pp.connect(con, policy=policy, budget=pp.PureDP(10)) as sess, noise_disabled():
        joined = sess.sql(_dp("epsilon=1, max_groups_contributed=2", body)).df
        plain = sess.sql("SELECT item, COUNT(quantity) AS n FROM students WHERE item IN "
                         "('pen', 'pencil', 'book') GROUP BY item ORDER BY item",
                         epsilon=1).df
    assert joined.values.tolist() == [["book", 0], ["pen", 2], ["pencil", 3]]
    assert plain["item"].tolist() == ["eraser", "pen", "pencil"]


def test_other_subqueries_keep_their_own_refusal() -> None:
    """Only the public-groups shape is recognised; any other statement with a subquery gets
    the refusal it got before (not an error about the recogniser's own parse)."""
    with pytest.raises(pp.UnsupportedQueryError, match="several SELECTs"):
        split_dp_clause("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) item, "
                        "COUNT(*, contribution_bounds_per_group => (0, 5)) FROM "
                        "(SELECT * FROM students) AS m GROUP BY item")
