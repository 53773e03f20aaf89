"""BigQuery's DP aggregates with a privacy unit (privplan.sql.bigquery_per_group): per unit and
group first, clamped to ``contribution_bounds_per_group``, then across units.

Oracles: ZetaSQL's own compliance results (zetasql/compliance/testdata/differential_privacy.test,
run there with epsilon=1e20; here with noise off), the same statistic written in plain SQL and
run by DuckDB, and the engine as judge of each mechanism's sensitivity (remove any one unit)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.errors import UnsupportedQueryError
from privplan.testing import noise_disabled

# ZetaSQL's TestTableWithUid (one row per uid) and TestTableWithUid2 (several rows per uid)
UID1 = [(1, None, None), (2, 2, 1.5), (3, 1, 1.5), (4, None, 2.5), (5, 1, 3.5), (6, 2, None),
        (7, 1, -0.5), (8, 4, -1.5), (9, 2, 1.5), (10, 3, 2.5)]
UID2 = [(1, None, None), (2, 2, 1.5), (3, 1, 1.5), (1, None, 2.5), (2, 1, 3.5), (2, 2, None),
        (1, 1, -0.5), (2, 4, -1.5), (3, 2, 1.5), (2, 3, 2.5)]


def _zeta_session(rows: list[tuple], ledger: Path | None = None) -> pp.Session:
    frame = pd.DataFrame(rows, columns=["uid", "int64_val", "double_val"]).astype(
        {"int64_val": "Int64", "double_val": "float64"})
    policy = {"tables": {"t": {"privacy_unit": "uid", "max_rows_per_unit": 10, "columns": {
        "uid": {"type": "int"},
        "int64_val": {"type": "int", "lower": -10, "upper": 10},
        "double_val": {"type": "float", "lower": -10, "upper": 10}}}}}
    sess = pp.connect(policy=policy, budget=pp.ApproxDP(1000, 0.5), ledger=ledger)
    sess.register("t", frame)
    return sess


def _clause(body: str) -> str:
    return f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=10, delta=1e-5) {body} FROM t"


@pytest.mark.parametrize("rows, body, want", [
    # the expected values are ZetaSQL's (test names in its differential_privacy.test)
    (UID1, "SUM(int64_val, contribution_bounds_per_group => (2, 3))", 18),  # sum_int64_explicit
    (UID2, "SUM(int64_val, contribution_bounds_per_group => (2, 3))", 8),   # ..._multi_user
    (UID2, "AVG(int64_val, contribution_bounds_per_group => (2, 3))", 2.1333333333333333),
    (UID1, "SUM(double_val, contribution_bounds_per_group => (0, 10))", 13),
    (UID2, "SUM(double_val, contribution_bounds_per_group => (0, 10))", 11),
    (UID1, "AVG(double_val, contribution_bounds_per_group => (0, 10))", 1.625),
    (UID2, "AVG(double_val, contribution_bounds_per_group => (0, 10))", 1.3333333333333335),
    (UID1, "AVG(int64_val, contribution_bounds_per_group => (2, 3))", 2.25),
    (UID1, "AVG(double_val)", 1.375),                                       # implicit bounds
    (UID2, "AVG(double_val)", 1.3333333333333333),
    (UID1, "AVG(int64_val)", 2),
])
def test_zetasql_compliance_results_with_noise_off(rows: list[tuple], body: str,
                                                   want: float) -> None:
    with _zeta_session(rows) as sess, noise_disabled():
        got = sess.sql(_clause(body)).df
    assert float(got.iloc[0, 0]) == pytest.approx(want, abs=1e-3)  # (float sums on a grid)


def test_zetasql_sum_and_count_together() -> None:
    # differential_privacy_explicit_bounds_sum_and_count: [{18, 8}]
    body = ("SUM(int64_val, contribution_bounds_per_group => (2, 3)), "
            "COUNT(double_val, contribution_bounds_per_group => (0, 10))")
    with _zeta_session(UID1) as sess, noise_disabled():
        got = sess.sql(_clause(body)).df
    assert [float(v) for v in got.iloc[0]] == pytest.approx([18, 8])


# ------------------------------------------------------------ the same statistic in plain SQL

PROFESSORS = pd.DataFrame({
    "id": [101, 101, 101, 101, 102, 102, 102, 103, 103, 103],
    "item": ["pencil", "pen", "pencil", "pen", "pencil", "pen", "pencil", "scissors",
             "pencil", "pen"],
    "quantity": [24, 16, 24, 16, 56, 22, 56, 8, 48, 18]})


def _professors(frame: pd.DataFrame = PROFESSORS, groups: int | None = None,
                ledger: Path | None = None) -> pp.Session:
    table: dict = {"privacy_unit": "id", "max_rows_per_unit": 10, "columns": {
        "id": {"type": "int"},
        "item": {"type": "str", "public_values": ["pen", "pencil", "scissors"]},
        "quantity": {"type": "int", "lower": 0, "upper": 100}}}
    if groups is not None:
        table["max_groups_per_unit"] = groups
    sess = pp.connect(policy={"tables": {"professors": table}}, budget=pp.PureDP(1000),
                      ledger=ledger)
    sess.register("professors", frame)
    return sess


BQ = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=10, privacy_unit_column=id) item, "
      "AVG(quantity, contribution_bounds_per_group => (20, 50)) AS a, "
      "SUM(quantity, contribution_bounds_per_group => (0, 60)) AS s, COUNT(*) AS n "
      "FROM professors WHERE quantity > 10 GROUP BY item ORDER BY item")
PLAIN = ("SELECT item, AVG(LEAST(GREATEST(a, 20), 50)) AS a, SUM(LEAST(GREATEST(s, 0), 60)) AS s, "
         "SUM(n) AS n FROM (SELECT id, item, AVG(quantity) AS a, SUM(quantity) AS s, "
         "COUNT(*) AS n FROM professors WHERE quantity > 10 GROUP BY id, item) "
         "GROUP BY item ORDER BY item")


def test_noise_off_equals_the_per_unit_statistic_in_plain_sql() -> None:
    with _professors() as sess, noise_disabled():
        got = sess.sql(BQ).df
    con = duckdb.connect()
    con.register("professors", PROFESSORS)
    want = con.execute(PLAIN).df()
    # the public domain is released whole: scissors (no row with quantity > 10) zero-filled
    assert got["item"].tolist() == ["pen", "pencil", "scissors"]
    assert float(got["n"].iloc[2]) == 0 and float(got["s"].iloc[2]) == 0
    got = got.iloc[:2]
    assert got["item"].tolist() == want["item"].tolist()
    for col in ("a", "s", "n"):
        np.testing.assert_allclose(got[col].astype(float), want[col].astype(float), atol=1e-3)


# the `professors` view of BigQuery's differential-privacy docs (query-syntax, dp_clause)
DOCS_PROFESSORS = pd.DataFrame({
    "id": [101, 123, 123, 123, 101, 101, 130, 150],
    "item": ["pencil", "pen", "pencil", "pencil", "pen", "pen", "scissors", "pencil"],
    "quantity": [24, 16, 10, 38, 19, 23, 8, 72]})


def test_bigquery_docs_example_without_noise() -> None:
    """The docs' un-noised AVG per item: scissors 8, pencil 40, pen 18.5 (the average of the
    professors' averages: pen = (16 + (19 + 23) / 2) / 2). The docs' un-noised query says
    max_groups_contributed=1 yet keeps every professor's every item; with 2 (which keeps them
    all here) privplan gives exactly the docs' numbers; with 1 each professor keeps one item."""
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=10, delta=.01, "
           "max_groups_contributed={m}, privacy_unit_column=id) item, "
           "AVG(quantity, contribution_bounds_per_group => (0,100)) average_quantity "
           "FROM professors GROUP BY item ORDER BY item")
    with _professors(DOCS_PROFESSORS) as sess, noise_disabled():
        every = sess.sql(sql.format(m=2)).df
        one = sess.sql(sql.format(m=1)).df
    assert dict(zip(every["item"], every["average_quantity"])) == pytest.approx(
        {"pen": 18.5, "pencil": 40.0, "scissors": 8.0}, abs=1e-3)
    # one item per professor: 101 and 123 each keep pen or pencil
    kept = {i: v for i, v in zip(one["item"], one["average_quantity"]) if pd.notna(v)}
    assert kept["scissors"] == pytest.approx(8.0)
    assert set(kept) <= {"pen", "pencil", "scissors"}


def test_removing_any_unit_moves_each_input_by_at_most_its_sensitivity() -> None:
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"id": rng.integers(0, 15, 60),
                          "item": rng.choice(["pen", "pencil", "scissors"], 60),
                          "quantity": rng.integers(0, 101, 60)})
    sql = ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=10, max_groups_contributed=2) "
           "item, SUM(quantity, contribution_bounds_per_group => (0, 60)) AS s, COUNT(*) AS n "
           "FROM professors GROUP BY item ORDER BY item")
    with _professors(frame) as sess:
        plan = sess.explain(sql)
        with noise_disabled():
            full = sess.sql(sql).df.set_index("item")
    sens = {m.label: m.sensitivity_in_units for m in plan.mechanisms}
    # a unit's clamped total in [0, 60], one derived row per group (under add/remove a unit's
    # row leaves with its whole value); its row counts are charged in base rows: 1 per row,
    # at most k = 10 rows over all its groups
    assert sens == pytest.approx({"SUM(unit_sum_quantity)": 60, "SUM(unit_count_rows)": 1})
    for unit in frame["id"].unique():
        with _professors(frame[frame["id"] != unit]) as sess, noise_disabled():
            less = sess.sql(sql).df.set_index("item").reindex(full.index).fillna(0)
        moved = (full[["s", "n"]].astype(float) - less[["s", "n"]].astype(float)).abs()
        assert (moved["s"] <= 60 + 1e-6).all()  # a unit's clamped total per group
        assert moved["n"].sum() <= 10           # its rows, over all its groups (k = 10)
        assert (moved > 1e-9).any(axis=1).sum() <= 2  # at most 2 groups (the clause's bound)


def test_cost_and_noise_follow_the_group_bound() -> None:
    with _professors() as sess:
        one = sess.explain(BQ.replace("privacy_unit_column=id", "privacy_unit_column=id, "
                                      "max_groups_contributed=1"))
        three = sess.explain(BQ.replace("privacy_unit_column=id", "privacy_unit_column=id, "
                                        "max_groups_contributed=3"))
    assert one.query_cost == three.query_cost == pp.PureDP(10)
    # the same ε spread over 3 groups a unit may touch: three times the noise scale; but the
    # count of rows is charged in base rows, at most k = 10 of a unit's over all its groups
    # (as COUNT(*) GROUP BY item directly), so its noise does not grow with the group bound
    def scale(m: object) -> float:
        return float(str(m.noise).rsplit("scale ", 1)[1])

    for a, b in zip(one.mechanisms, three.mechanisms):
        grows = 1 if a.label == "SUM(unit_count_rows)" else 3
        assert scale(b) == pytest.approx(grows * scale(a), rel=1e-3), a.label


def test_ledger_replays_the_per_group_table(tmp_path: Path) -> None:
    from privplan.ledger.verify import verify_ledger

    ledger = tmp_path / "l.sqlite"
    with _professors(groups=2, ledger=ledger) as sess:
        cost = sess.sql(BQ).cost
        spent = sess.spent()
    with _professors(groups=2, ledger=ledger) as again:
        assert again.spent() == spent
        assert again.sql(BQ).cost == cost
    assert verify_ledger(ledger, policy=_professors(groups=2).policy).ok
    stored = sqlite3.connect(ledger).execute("SELECT sql FROM entries").fetchall()
    assert stored[0][0] == BQ  # the query as written


@pytest.mark.parametrize("body, fragment", [
    ("item, VAR_POP(quantity) AS v, AVG(quantity) AS a FROM professors GROUP BY item",
     "VAR_POP"),
    ("item, AVG(quantity + 1) AS a FROM professors GROUP BY item", "not a column"),
    ("lower(item) AS i, AVG(quantity) AS a FROM professors GROUP BY lower(item)",
     "GROUP BY item"),
    ("item, AVG(quantity, contribution_bounds_per_group => (200, 300)) AS a FROM professors "
     "GROUP BY item", "do not overlap"),
    ("item, COUNT(DISTINCT quantity) AS d, AVG(quantity) AS a FROM professors GROUP BY item",
     "DISTINCT"),
    # as printed in BigQuery's docs (item neither grouped nor aggregated): the user's column
    # named, never the derived table
    ("item, COUNT(*, contribution_bounds_per_group => (0, 100)) FROM professors",
     "column 'item' is neither grouped nor aggregated"),
])
def test_refusals_say_why_and_spend_nothing(body: str, fragment: str, tmp_path: Path) -> None:
    ledger = tmp_path / "l.sqlite"
    sql = f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) {body}"
    with _professors(ledger=ledger) as sess:
        for run in (sess.sql, sess.explain):
            with pytest.raises(UnsupportedQueryError, match=fragment):
                run(sql)
        assert sess.spent() == pp.PureDP(0)
    assert sqlite3.connect(ledger).execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0


# ------------------------------------------------- per-row bounds: VAR_POP, STDDEV_POP, quantiles


def test_per_row_bounds_are_read_and_cut_out() -> None:
    from privplan.sql.bigquery import rewrite_dp_aggregates

    for sql in ("SELECT PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (0, 10)) FROM t",
                "SELECT ANON_PERCENTILE_CONT(x, 0.5 CLAMPED BETWEEN 0 AND 10) FROM t"):
        text, (b,) = rewrite_dp_aggregates(sql)
        assert text == "SELECT PERCENTILE_CONT(x, 0.5) FROM t"
        assert (b.func, b.argument, b.lower, b.upper, b.per_row) == (
            "PERCENTILE_CONT", "x", 0, 10, True)
    text, (b,) = rewrite_dp_aggregates("SELECT ANON_VAR_POP(x CLAMPED BETWEEN 1 AND 2) FROM t")
    assert text == "SELECT VAR_POP(x) FROM t" and b.per_row
    for wrong in ("SELECT SUM(x, contribution_bounds_per_row => (0, 1)) FROM t",
                  "SELECT VAR_POP(x, contribution_bounds_per_group => (0, 1)) FROM t"):
        with pytest.raises(UnsupportedQueryError, match="as its last argument"):
            rewrite_dp_aggregates(wrong)
    with pytest.raises(UnsupportedQueryError, match="one PERCENTILE_CONT"):
        rewrite_dp_aggregates("SELECT ANON_QUANTILES(x, 4 CLAMPED BETWEEN 0 AND 1) FROM t")


CLAUSE = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=10, privacy_unit_column=id) "


def test_narrower_per_row_bounds_clamp_each_row() -> None:
    """Noise off: VAR_POP equals DuckDB's VAR_POP of the rows clamped to [10, 30]; the median's
    candidates are a grid over [10, 30] (not the policy's [0, 100]) and the answer is a median
    of the clamped rows."""
    sql = (CLAUSE + "VAR_POP(quantity, contribution_bounds_per_row => (10, 30)) AS v, "
           "PERCENTILE_CONT(quantity, 0.5, contribution_bounds_per_row => (10, 30)) AS m "
           "FROM professors")
    with _professors(DOCS_PROFESSORS) as sess:
        plan = sess.explain(sql)
        with noise_disabled():
            got = sess.sql(sql).df
    (quantile,) = [m for m in plan.mechanisms if m.quantile is not None]
    assert quantile.grid == (10, 30)
    clamped = DOCS_PROFESSORS["quantity"].clip(10, 30)
    assert float(got["v"].iloc[0]) == pytest.approx(float(clamped.var(ddof=0)), abs=1e-6)
    ranked = sorted(clamped)  # 10, 10, 16, 19, 23, 24, 30, 30
    assert ranked[3] <= float(got["m"].iloc[0]) <= ranked[4]


def test_per_row_bounds_wider_than_the_policy_are_refused() -> None:
    sql = CLAUSE + "VAR_POP(quantity, contribution_bounds_per_row => (0, 1000)) FROM professors"
    with _professors(DOCS_PROFESSORS) as sess, pytest.raises(pp.PolicyError, match="wider"):
        sess.sql(sql)
