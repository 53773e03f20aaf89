"""Constants PostgreSQL and Spark read differently from DuckDB: rendered so they compute
DuckDB's value, or refused before anything is charged (no server needed here; the sessions
over the same rows are compared in test_session_edges.py).

* A decimal literal of more than 38 digits is a DOUBLE in DuckDB; PostgreSQL compared it
  exactly, so ``n = 4611686018427387904.00000000000000000000001`` held for n = 2^62 on DuckDB
  only. It is rendered as the text of DuckDB's double, cast (Spark could not read it at all).
* ``TRY_CAST(n AS DECIMAL(38, 20))`` (how a BIGINT is compared with a constant of scale 20) is
  NULL in DuckDB for |n| >= 10^18; PostgreSQL's CAST failed there, after the charge and only
  when such a row exists. It is guarded.
* Dates and timestamps written as text: DuckDB truncates a seventh fractional digit where
  PostgreSQL rounds it, Spark reads '2020-01-01 (BC)' as the year 2020 AD and fails on
  'infinity' or '24:00:00' when the statement runs. Only the ISO form every engine reads
  alike goes to a remote engine.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest
import sqlglot

from privplan.engines.portable import _Check, _plain_temporal_text
from privplan.engines.render import render
from privplan.errors import UnsupportedQueryError

TYPES = {"n": "BIGINT", "x": "DOUBLE", "s": "VARCHAR", "d": "DATE", "ts": "TIMESTAMP"}


def test_long_decimal_literals_are_doubles_on_postgres() -> None:
    sql = "SELECT COUNT(*) FROM t WHERE n = 4611686018427387904.00000000000000000000001"
    # (the text of DuckDB's double: exact on both engines; Spark cannot read the literal)
    for dialect, name in (("postgres", "DOUBLE PRECISION"), ("spark", "DOUBLE")):
        assert f"n = CAST('4.611686018427388e+18' AS {name})" in render(sql, dialect)
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


@pytest.mark.parametrize("text,plain", [
    ("2020-01-01", True), ("2020-01-01 00:00:00", True), ("2020-01-01T12:30", True),
    ("2020-01-01 00:00:00.000001", True), ("0001-01-01", True), ("9999-12-31 23:59:59", True),
    ("2020-02-29", True),
    ("2020-01-01 00:00:00.0000009", False), ("2020-01-01 (BC)", False), ("infinity", False),
    ("-infinity", False), ("epoch", False), ("2020-01-01 24:00:00", False),
    ("10000-01-01", False), ("0000-01-01", False), ("2020-1-1", False), ("2021-02-29", False),
    (" 2020-01-01", False), ("2020-01-01 00:00:00+05", False), ("20200101", False),
])
def test_plain_temporal_text(text: str, plain: bool) -> None:
    assert _plain_temporal_text(text) is plain


def test_duckdb_reads_refused_texts_its_own_way() -> None:
    """What the refused texts are in DuckDB, the reference (PostgreSQL rounds the first to a
    microsecond after midnight; Spark reads the second as 2020-01-01 AD)."""
    with duckdb.connect() as con:
        got = con.execute("SELECT TIMESTAMP '2020-01-01 00:00:00.0000009', "
                          "CAST(DATE '2020-01-01 (BC)' AS VARCHAR)").fetchone()
    assert got == (dt.datetime(2020, 1, 1), "2020-01-01 (BC)")


def _check(condition: str, dialect: str) -> None:
    engine = {"postgres": "PostgreSQL", "spark": "Spark"}[dialect]
    _Check(TYPES, dialect, engine).check(sqlglot.parse_one(condition, read="duckdb"),
                                         in_try=False)


REFUSED = [
    "ts < '2020-01-01 00:00:00.0000009'",  # implicit: the text becomes a TIMESTAMP
    "ts < CAST('2020-01-01 00:00:00.0000009' AS TIMESTAMP)",
    "d > CAST('2020-01-01 (BC)' AS DATE)",
    "d > '2020-01-01 (BC)'",
    "d < CAST('infinity' AS DATE)",
    "ts IN ('2020-01-01', 'epoch')",
    "ts BETWEEN '2020-01-01' AND '10000-01-01'",
    "COALESCE(ts, '2020-01-01 24:00:00') > TIMESTAMP '2020-01-01 00:00:00'",
    "CASE WHEN n > 0 THEN ts ELSE '-infinity' END = ts",
    "CASE ts WHEN 'epoch' THEN 1 END = 1",
    "(ts) = ('2020-01-01 00:00:00.1234567')",
]
ACCEPTED = [
    "ts < '2020-01-01 00:00:00.000001'",
    "ts = CAST('2020-01-01' AS TIMESTAMP)",
    "d = '2020-01-01 12:00'",
    "s = 'infinity'",  # a string column: text stays text
    "s IN ('2020-01-01 (BC)', 'epoch')",
    "CASE ts WHEN '2020-01-01' THEN 'epoch' ELSE '24:00' END = 'epoch'",
    "x < -1e300",  # a negative constant is a constant, as a positive one
    "x > -5e-324 AND n > -9223372036854775808",
]


@pytest.mark.parametrize("dialect", ["postgres", "spark"])
@pytest.mark.parametrize("condition", REFUSED)
def test_temporal_text_outside_the_common_form_is_refused(condition: str, dialect: str) -> None:
    with pytest.raises(UnsupportedQueryError, match="a date or time written in a form"):
        _check(condition, dialect)


@pytest.mark.parametrize("dialect", ["postgres", "spark"])
@pytest.mark.parametrize("condition", ACCEPTED)
def test_portable_constants_are_accepted(condition: str, dialect: str) -> None:
    _check(condition, dialect)


def test_float_arithmetic_is_still_refused() -> None:
    """(A negative constant is accepted; arithmetic on an unbounded float still is not.)"""
    with pytest.raises(UnsupportedQueryError, match="not bounded far from overflow"):
        _check("x + 1 > 2", "postgres")


CLAMP = "CASE WHEN {v} < -100.0 THEN -100.0 WHEN {v} > 100.0 THEN 100.0 ELSE {v} END"


@pytest.mark.parametrize("dialect", ["postgres", "spark"])
def test_the_planners_clamp_bounds_an_expression(dialect: str) -> None:
    """The SUM of an expression clamps the column to its bounds before the arithmetic (the
    planner's CASE): the CASE is bounded by its limits (a NaN compares above every number on
    every engine, so it becomes the upper limit), so the product is far from overflow."""
    for v in ("x", "CAST(n AS DOUBLE)"):
        _check(f"({CLAMP.format(v=v)}) * 2.0 > 0", dialect)
        _check(f"({CLAMP.format(v=v)}) / 3 > 0", dialect)


@pytest.mark.parametrize("sql, why", [
    # not the clamp: the ELSE branch is the unbounded column itself
    ("(CASE WHEN x < -100.0 THEN -100.0 ELSE x END) * 2.0 > 0", "not bounded"),
    # (the clamp written in the other order is not recognised: refused, conservatively)
    ("(CASE WHEN x > 100.0 THEN 100.0 WHEN x < -100.0 THEN -100.0 ELSE x END) * 2.0 > 0",
     "not bounded"),
    # bounded, but an operand outside the portable subset is still refused
    ("(CASE WHEN lower(s) = 'a' THEN 1 ELSE 0 END) * 2 > 0", "LOWER"),
])
def test_other_cases_in_arithmetic_are_refused(sql: str, why: str) -> None:
    with pytest.raises(UnsupportedQueryError, match=why):
        _check(sql, "postgres")
