"""Every stored type a policy column type accepts on PostgreSQL and Spark, with the edge values
that type can hold, stored in the real engine and asked through a session.

A private column stored in another type than the policy's is read through a conversion (the
typed view, :func:`privplan.planning.typed_view.typed_view`), and every later expression reads the
converted value. A conversion that fails on some storable value would fail exactly when a
statement reads that row: one un-noised bit after the charge (the reviewers' case: an
unconstrained ``numeric`` holding 1e400, read as ``float``). So for each (engine, stored type,
policy type) the session either refuses the column before anything is charged, or answers
every query over every edge value exactly as a DuckDB *twin* does: a DuckDB table holding the
same values (the twin of an unconstrained ``numeric`` is its text, read as DuckDB reads a
number's text: ±infinity past the double range, ±0.0 below it).

The queries read every row (measures with a FILTER per value, keys, COUNT DISTINCT, WHERE
comparisons, date parts), noise off, so a failing conversion fails the query and a different
conversion changes an answer.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled
from tests.servers import need

pytestmark = pytest.mark.invariant(7)

psycopg = need("psycopg")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROWS = 30  # rows per edge value (enough for its key to pass DP partition selection, noise off)
BUDGET = pp.ApproxDP(10**6, 0.5)
MEASURE = {"epsilon": 1}
KEYS = {"epsilon": 10, "delta": 1e-3}
BOUNDS = {"int": (-100, 100), "float": (-10, 10)}
NAN, INF = float("nan"), float("inf")
OVERFLOW = 2 ** 1024 - 2 ** 970  # (the least number a double cannot hold: rounds to infinity)
UNDERFLOW = "0." + "0" * (1075 - len(str(5 ** 1075))) + str(5 ** 1075)  # 2^-1075: rounds to 0
NFD = "e\u0301"


@dataclass(frozen=True)
class Case:
    """A column stored as ``stored`` (PostgreSQL DDL, or an Arrow type for Spark) declared
    ``policy`` in the policy, holding ``values``; ``twin``: the DuckDB type of the twin
    holding ``twin_values`` (default: the same values), None where the session must refuse."""

    stored: str
    policy: str
    values: tuple[Any, ...]
    twin: str | None
    twin_values: tuple[Any, ...] | None = None

    @property
    def id(self) -> str:
        return f"{self.stored}->{self.policy}"


def _bc(text: str) -> str:
    """PostgreSQL's text of a date before year 1 as DuckDB reads it: '0044-03-15 BC' ->
    '0044-03-15 (BC)', '0044-03-15 10:00:00 BC' -> '0044-03-15 (BC) 10:00:00'."""
    if not text.endswith(" BC"):
        return text
    day, _, time = text.removesuffix(" BC").partition(" ")
    return f"{day} (BC) {time}".strip()


def _twin_pg(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(None if v is None else _bc(v) for v in values)


NUMERIC_EDGES = (str(OVERFLOW), str(OVERFLOW - 1), f"-{OVERFLOW}", "1e400", "-1e400",
                 UNDERFLOW, UNDERFLOW + "1", f"-{UNDERFLOW}", "1e-400", "-1e-400", "NaN",
                 "Infinity", "-Infinity", "123.456", "1e308", "-2.5", "0", None)
STRINGS = ("a", "A", "b", "é", NFD, "", "a ", "\U0001f600", "ab", None)
PG_DATES = ("infinity", "-infinity", "4713-01-01 BC", "0044-03-15 BC", "0001-01-01 BC",
            "0001-01-01", "2020-02-29", "9999-12-31", "10000-01-01", "5874897-12-31", None)
PG_TIMESTAMPS = ("infinity", "-infinity", "4713-01-01 00:00:00 BC", "0044-03-15 10:00:00 BC",
                 "0001-01-01 00:00:00", "2020-01-01 00:00:00.000001",
                 "9999-12-31 23:59:59.999999", "10000-01-01 00:00:00",
                 "294246-12-31 23:59:59.999999", None)

PG_CASES = [
    # policy int: integers only
    Case("smallint", "int", ("-32768", "32767", "0", "-1", None), "SMALLINT"),
    Case("integer", "int", ("-2147483648", "2147483647", "0", None), "INTEGER"),
    Case("bigint", "int", ("-9223372036854775808", "9223372036854775807", "0", "7", None),
         "BIGINT"),
    Case("oid", "int", ("0", "4294967295", "7"), None),
    Case("numeric(10,2)", "int", ("2.50",), None),
    Case("numeric", "int", ("7",), None),
    Case("real", "int", ("2.5",), None),
    Case("double precision", "int", ("2.5",), None),
    Case("text", "int", ("7",), None),
    Case("boolean", "int", ("true",), None),
    # policy float: floats, integers and decimals, each converted where it cannot fail
    Case("real", "float", ("NaN", "Infinity", "-Infinity", "-0", "3.4028235e38", "1.4e-45",
                           "0.1", "-2.5", None), "FLOAT"),
    Case("double precision", "float", ("NaN", "Infinity", "-Infinity", "-0",
                                       "1.7976931348623157e308", "5e-324", "0.1", "-2.5", None),
         "DOUBLE"),
    Case("numeric(38,10)", "float", ("9" * 28 + "." + "9" * 10, "-" + "9" * 28 + "." + "9" * 10,
                                     "0.0000000001", "2.5", "0", None), "DECIMAL(38,10)"),
    Case("numeric(15,2)", "float", ("9999999999999.99", "-0.01", "2.50", None), "DECIMAL(15,2)"),
    Case("numeric", "float", NUMERIC_EDGES, "VARCHAR"),
    Case("numeric(60,0)", "float", ("9" * 60, "-" + "9" * 60, "1", None), "VARCHAR"),
    Case("numeric(5,-3)", "float", ("99999000", "-1000", None), "VARCHAR"),
    Case("bigint", "float", ("9223372036854775807", "-9223372036854775808", "9007199254740993",
                             None), "BIGINT"),
    Case("smallint", "float", ("-32768", "32767", None), "SMALLINT"),
    Case("text", "float", ("1.5",), None),
    # policy str
    Case("text", "str", STRINGS, "VARCHAR"),
    Case("varchar(10)", "str", STRINGS, "VARCHAR"),
    Case("char(3)", "str", ("a",), None),
    Case("name", "str", ("a",), None),
    Case("bytea", "str", ("a",), None),
    Case("integer", "str", ("1",), None),
    # policy bool
    Case("boolean", "bool", ("true", "false", None), "BOOLEAN"),
    Case("integer", "bool", ("1",), None),
    Case("text", "bool", ("true",), None),
    # policy date
    Case("date", "date", PG_DATES, "DATE", _twin_pg(PG_DATES)),
    Case("timestamp", "date", ("2020-01-01 00:00:00",), None),
    Case("timestamptz", "date", ("2020-01-01 00:00:00+00",), None),
    Case("text", "date", ("2020-01-01",), None),
    # policy timestamp
    Case("timestamp", "timestamp", PG_TIMESTAMPS, "TIMESTAMP", _twin_pg(PG_TIMESTAMPS)),
    Case("timestamptz", "timestamp", ("2020-01-01 00:00:00+00",), None),
    Case("date", "timestamp", ("2020-01-01",), None),
    Case("text", "timestamp", ("2020-01-01 00:00:00",), None),
]


def _days(*days: int | None) -> Any:
    return pa.array(list(days), pa.int32()).cast(pa.date32())


def _micros(*days: int | None) -> Any:
    values = [None if d is None else d * 86_400_000_000 + 1 for d in days]
    return pa.array(values, pa.int64()).cast(pa.timestamp("us"))


DAY_1, DAY_9999 = -719_162, 2_932_896  # 0001-01-01 and 9999-12-31, days from 1970-01-01
SPARK_DAYS = (-1_000_000, DAY_1 - 366, DAY_1, -141_428, 0, DAY_9999, 3_000_000, None)
SPARK_CASES = [
    Case("int8", "int", (-128, 127, 0, None), "TINYINT"),
    Case("int16", "int", (-32768, 32767, 0, None), "SMALLINT"),
    Case("int32", "int", (-(2 ** 31), 2 ** 31 - 1, 0, None), "INTEGER"),
    Case("int64", "int", (-(2 ** 63), 2 ** 63 - 1, 0, 7, None), "BIGINT"),
    Case("decimal(38,0)", "int", (7,), None),
    Case("float64", "int", (2.5,), None),
    Case("string", "int", ("7",), None),
    Case("float32", "float", (NAN, INF, -INF, -0.0, 3.4028234663852886e38, 1.401298464324817e-45,
                              0.1, -2.5, None), "FLOAT"),
    Case("float64", "float", (NAN, INF, -INF, -0.0, 1.7976931348623157e308, 5e-324, 0.1, -2.5,
                              None), "DOUBLE"),
    Case("decimal(38,10)", "float", ("9" * 28 + "." + "9" * 10, "-" + "9" * 28 + "." + "9" * 10,
                                     "0.0000000001", "2.5", "0", None), "DECIMAL(38,10)"),
    Case("decimal(38,0)", "float", ("9" * 38, "-" + "9" * 38, "1", None), "DECIMAL(38,0)"),
    Case("decimal(10,2)", "float", ("99999999.99", "-0.01", "2.50", None), "DECIMAL(10,2)"),
    Case("int64", "float", (2 ** 63 - 1, -(2 ** 63), 2 ** 53 + 1, None), "BIGINT"),
    Case("string", "float", ("1.5",), None),
    Case("string", "str", STRINGS, "VARCHAR"),
    Case("binary", "str", (b"a",), None),
    Case("int32", "str", (1,), None),
    Case("bool", "bool", (True, False, None), "BOOLEAN"),
    Case("int32", "bool", (1,), None),
    Case("date32", "date", SPARK_DAYS, "DATE"),
    Case("timestamp", "date", (0,), None),
    Case("string", "date", ("2020-01-01",), None),
    Case("timestamp", "timestamp", SPARK_DAYS, "TIMESTAMP"),
    Case("timestamptz", "timestamp", (0,), None),
    Case("date32", "timestamp", (0,), None),
    Case("string", "timestamp", ("2020-01-01 00:00:00",), None),
]


def _arrow_column(case: Case) -> Any:
    """The Spark column of a case, as Arrow (read back from Parquet by Spark)."""
    values = list(case.values)
    kind = case.stored
    if kind == "date32":
        return _days(*values)
    if kind == "timestamp":
        return _micros(*values)
    if kind == "timestamptz":
        return _micros(*values).cast(pa.timestamp("us", tz="UTC"))
    if kind.startswith("decimal("):
        precision, scale = kind[len("decimal("):-1].split(",")
        from decimal import Decimal
        return pa.array([None if v is None else Decimal(str(v)) for v in values],
                        pa.decimal128(int(precision), int(scale)))
    if kind == "bool":
        return pa.array(values, pa.bool_())
    return pa.array(values, getattr(pa, kind)())


def _table(case: Case, column: Any) -> Any:
    n = len(column)
    grp = [j for j in range(n) for _ in range(ROWS)]
    return pa.table({"grp": pa.array(grp, pa.int32()),
                     "v": column.take(pa.array(grp, pa.int64()))})


# -- queries ---------------------------------------------------------------------------------
def _queries(case: Case) -> list[tuple[str, dict[str, Any]]]:
    """Queries reading every row, per policy type: measures with a FILTER per edge value,
    keys, COUNT DISTINCT, comparisons, date parts."""
    n = len(case.values)
    if case.policy in ("int", "float"):
        per = ", ".join(f"COUNT(v) FILTER (WHERE grp = {j}) AS c{j}, "
                        f"SUM(v) FILTER (WHERE grp = {j}) AS s{j}" for j in range(n))
        return [(f"SELECT {per} FROM t", MEASURE),
                (("SELECT COUNT(*) FILTER (WHERE v > 0) AS pos, COUNT(*) FILTER (WHERE v = 0) "
                 "AS zero, COUNT(*) FILTER (WHERE v < -1e300) AS low, COUNT(DISTINCT v) AS d, "
                 "AVG(v) AS a FROM t"), MEASURE),
                ("SELECT v, COUNT(*) AS c FROM t GROUP BY v", KEYS)]
    if case.policy == "str":
        per = ", ".join(f"COUNT(v) FILTER (WHERE grp = {j}) AS c{j}" for j in range(n))
        return [((f"SELECT {per}, COUNT(*) FILTER (WHERE v < 'b') AS lt, COUNT(*) FILTER "
                 "(WHERE v LIKE 'a%') AS la, COUNT(*) FILTER (WHERE v = 'é') AS e, "
                 "COUNT(DISTINCT v) AS d FROM t"), MEASURE),
                ("SELECT v, COUNT(*) AS c FROM t GROUP BY v", KEYS)]
    if case.policy == "bool":
        return [(("SELECT COUNT(*) FILTER (WHERE v) AS yes, COUNT(*) FILTER (WHERE NOT v) AS no, "
                 "COUNT(v) AS c FROM t"), MEASURE),
                ("SELECT v, COUNT(*) AS c FROM t GROUP BY v", KEYS)]
    low = "DATE '2000-01-01'" if case.policy == "date" else "TIMESTAMP '2000-01-01 00:00:00'"
    per = ", ".join(f"COUNT(v) FILTER (WHERE grp = {j}) AS c{j}" for j in range(n))
    return [((f"SELECT {per}, COUNT(*) FILTER (WHERE v > {low}) AS late, "
             "COUNT(*) FILTER (WHERE v < DATE '0001-01-02') AS early, "
             "COUNT(DISTINCT v) AS d FROM t"), MEASURE),
            ("SELECT v, COUNT(*) AS c FROM t GROUP BY v", KEYS),
            (("SELECT YEAR(v) AS y, MONTH(v) AS m, DAY(v) AS d, COUNT(*) AS c FROM t "
             "GROUP BY YEAR(v), MONTH(v), DAY(v)"), KEYS)]


def _policy(case: Case) -> dict[str, Any]:
    column: dict[str, Any] = {"type": case.policy}
    if case.policy in BOUNDS:
        column["lower"], column["upper"] = BOUNDS[case.policy]
    return {"tables": {"t": {"columns": {"grp": {"type": "int"}, "v": column}}}}


def _answers(database: Any, case: Case) -> list[pd.DataFrame]:
    out = []
    with pp.connect(database, policy=_policy(case), budget=BUDGET) as sess, noise_disabled():
        for sql, budget in _queries(case):
            frame = sess.sql(sql, **budget).df
            out.append(frame.sort_values(list(frame.columns), ignore_index=True,
                                         na_position="last"))
    return out


def _refused(database: Any, case: Case) -> None:
    with pp.connect(database, policy=_policy(case), budget=BUDGET) as sess:
        for sql, budget in _queries(case):
            with pytest.raises((pp.PolicyError, pp.UnsupportedQueryError)) as info:
                sess.sql(sql, **budget)
            assert "Nothing was charged" in str(info.value) or "nothing" in str(info.value)
            assert sess.spent() == BUDGET.zero()


def _same(got: list[pd.DataFrame], want: list[pd.DataFrame], case: Case) -> None:
    for (sql, _), g, w in zip(_queries(case), got, want, strict=True):
        pd.testing.assert_frame_equal(g, w, obj=f"{case.id}: {sql[:60]}")


def _twin(case: Case, values: tuple[Any, ...]) -> duckdb.DuckDBPyConnection:
    """The DuckDB twin: each value (DuckDB's text of it) cast to the twin type, ROWS times."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t (grp INTEGER, v {case.twin})")
    for j, value in enumerate(values):
        con.execute(f"INSERT INTO t SELECT ?, CAST(? AS {case.twin}) FROM range({ROWS})",
                    [j, value])
    return con


# -- PostgreSQL ------------------------------------------------------------------------------
def _load_pg(url: str, case: Case) -> None:
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DROP TABLE IF EXISTS t")
        con.execute(f"CREATE TABLE t (grp integer, v {case.stored})")
        with con.cursor() as cur:
            cur.executemany(
                f"INSERT INTO t SELECT %s, CAST(%s AS {case.stored}) "
                f"FROM generate_series(1, {ROWS})",
                [(j, v) for j, v in enumerate(case.values)])


@pytest.mark.parametrize("case", PG_CASES, ids=lambda c: c.id)
def test_postgres_storage_type(pg_url: str, case: Case) -> None:
    _load_pg(pg_url, case)
    if case.twin is None:
        _refused(pg_url, case)
        return
    twin = _twin(case, case.twin_values or case.values)
    try:
        _same(_answers(pg_url, case), _answers(twin, case), case)
    finally:
        twin.close()


def test_postgres_values_duckdb_cannot_hold(pg_url: str) -> None:
    """PostgreSQL's timestamps run to the year 294276, DuckDB's to 294247: such a value is
    read, compared and counted like any (a key outside years 1-9999 is released as NULL), and
    nothing fails."""
    case = Case("timestamp", "timestamp", ("294276-12-31 23:59:59.999999",
                                           "294247-01-11 00:00:00", "2020-01-01 00:00:00"), None)
    _load_pg(pg_url, case)
    got = _answers(pg_url, case)
    assert got[0].iloc[0].tolist() == [ROWS, ROWS, ROWS, 3 * ROWS, 0, 3]
    keys = got[1]
    assert keys["v"].isna().sum() == 1 and int(keys.loc[keys["v"].isna(), "c"].iloc[0]) == 2 * ROWS
    years = got[2]
    assert sorted(years["y"].dropna().astype(int).tolist()) == [2020, 294247, 294276]


# -- Spark -----------------------------------------------------------------------------------
@pytest.fixture
def spark_table(spark: Any, tmp_path: Path) -> Iterator[Any]:
    def load(table: Any) -> None:
        path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.parquet"
        pq.write_table(table, path)
        spark.read.parquet(str(path)).createOrReplaceTempView("t")

    yield load
    spark.catalog.dropTempView("t")


@pytest.mark.slow  # (about two minutes: one local Spark job per query)
@pytest.mark.parametrize("case", SPARK_CASES, ids=lambda c: c.id)
def test_spark_storage_type(spark: Any, spark_table: Any, case: Case) -> None:
    table = _table(case, _arrow_column(case))
    spark_table(table)
    if case.twin is None:
        _refused(spark, case)
        return
    twin = duckdb.connect()
    twin.register("rows", table)
    twin.execute("CREATE TABLE t AS SELECT * FROM rows")
    twin.unregister("rows")
    try:
        _same(_answers(spark, case), _answers(twin, case), case)
    finally:
        twin.close()


def test_spark_char_columns_are_refused(spark: Any) -> None:
    """Spark pads CHAR(n) values and compares them padded ('a' = 'a  '), where the analysis
    compares strings as they are ('a' and 'a ' are two values): a CHAR column is not read as
    a policy str (refused before the charge, as PostgreSQL's char(n))."""
    spark.sql("DROP TABLE IF EXISTS privplan_char_t")
    spark.sql("CREATE TABLE privplan_char_t (grp INT, v CHAR(3)) USING parquet")
    try:
        spark.sql("INSERT INTO privplan_char_t VALUES (0, 'a'), (1, 'a ')")
        policy = {"tables": {"privplan_char_t": {"columns": {"grp": {"type": "int"},
                                                           "v": {"type": "str"}}}}}
        with pp.connect(spark, policy=policy, budget=BUDGET) as sess:
            with pytest.raises(pp.PolicyError, match="CHAR"):
                sess.sql("SELECT COUNT(*) AS c FROM privplan_char_t WHERE v = 'a'", epsilon=1)
            assert sess.spent() == BUDGET.zero()
    finally:
        spark.sql("DROP TABLE IF EXISTS privplan_char_t")


def test_the_edges_are_what_they_say() -> None:
    """The boundary constants: the least number a double cannot hold and 2^-1075."""
    assert float(str(OVERFLOW - 1)) == 1.7976931348623157e308
    assert math.isinf(float(str(OVERFLOW)))
    assert float(UNDERFLOW) == 0.0 and float(UNDERFLOW + "1") == 5e-324
    assert dt.date(1970, 1, 1) + dt.timedelta(days=DAY_1) == dt.date(1, 1, 1)
    assert dt.date(1970, 1, 1) + dt.timedelta(days=DAY_9999) == dt.date(9999, 12, 31)
