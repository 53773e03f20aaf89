"""Constants PostgreSQL reads differently from DuckDB, rendered so it computes DuckDB's value
(no server needed here; the sessions over the same rows are compared in test_session_edges.py).

* A decimal literal of more than 38 digits is a DOUBLE in DuckDB; PostgreSQL compared it
  exactly, so ``n = 4611686018427387904.00000000000000000000001`` held for n = 2^62 on DuckDB
  only. It is rendered as a DOUBLE PRECISION.
* ``TRY_CAST(n AS DECIMAL(38, 20))`` (how a BIGINT is compared with a constant of scale 20) is
  NULL in DuckDB for |n| >= 10^18; PostgreSQL's CAST failed there, after the charge and only
  when such a row exists. It is guarded.
"""

from __future__ import annotations

import duckdb

from privplan.engines.render import render


def test_long_decimal_literals_are_doubles_on_postgres() -> None:
    sql = "SELECT COUNT(*) FROM t WHERE n = 4611686018427387904.00000000000000000000001"
    assert "n = CAST(4611686018427387904.00000000000000000000001 AS DOUBLE PRECISION)" in render(
        sql, "postgres")
    for exact in ("n > 2.5", "n >= 461168601842738790.40000000000000000001", "n > 10"):
        assert "DOUBLE" not in render(f"SELECT COUNT(*) FROM t WHERE {exact}", "postgres")
    with duckdb.connect() as con:  # (DuckDB's own typing, which the rendering follows)
        assert con.execute("SELECT typeof(4611686018427387904.00000000000000000000001), "
                           "typeof(461168601842738790.40000000000000000001)").fetchone() == (
            "DOUBLE", "DECIMAL(38,20)")


def test_try_cast_to_a_narrow_decimal_is_guarded_on_postgres() -> None:
    got = render("SELECT COUNT(*) FROM t WHERE TRY_CAST(n AS DECIMAL(38, 20)) >= 1.5",
                 "postgres")
    assert ("CASE WHEN n > -1000000000000000000 AND n < 1000000000000000000 THEN "
            "CAST(n AS DECIMAL(38, 20)) END >= 1.5") in got
    for wide in ("DECIMAL(38, 1)", "DECIMAL(38, 19)", "BIGINT", "VARCHAR"):
        assert "CASE" not in render(f"SELECT TRY_CAST(n AS {wide}) FROM t", "postgres")
    # (Spark's TRY_CAST is NULL where DuckDB's is: left as it is)
    assert "TRY_CAST(n AS DECIMAL(38, 20))" in render(
        "SELECT TRY_CAST(n AS DECIMAL(38, 20)) FROM t", "spark")
    with duckdb.connect() as con:  # (the bound is DuckDB's: 18 integer digits)
        assert con.execute("SELECT TRY_CAST(999999999999999999 AS DECIMAL(38, 20)) IS NULL, "
                           "TRY_CAST(1000000000000000000 AS DECIMAL(38, 20)) IS NULL, "
                           "TRY_CAST(-1000000000000000000 AS DECIMAL(38, 20)) IS NULL"
                           ).fetchone() == (False, True, True)
