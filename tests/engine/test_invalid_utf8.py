"""Strings that are not UTF-8: a Spark string can hold any bytes (a Parquet file can carry them),
and so can a PostgreSQL database whose server_encoding is SQL_ASCII. No DuckDB VARCHAR holds
one, and converting the rows to DuckDB failed exactly when a statement read such a row (a
GROUP BY key whose filter kept it): one un-noised bit after the charge.

* Spark: a string that is not valid UTF-8 is read as NULL wherever a column is read (the typed
  view), so keys, WHERE comparisons, LIKE, COUNT(DISTINCT), COUNT and public key domains all
  see the same NULL, and every query answers as a DuckDB twin whose such values are NULL.
* PostgreSQL: a database whose server_encoding is not UTF8 is refused for ``str`` columns
  before anything is charged, saying why (SQL_ASCII does not check its strings; any other
  encoding compares its own bytes, not code points); its other columns are read as usual.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled
from tests.servers import need

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROWS = 20
VALUES = [b"a", b"b", b"\xff", b"a\xfe", b"\xc3\xa9", b"\xc3", b"", None]  # (é; a cut é)
VALID = ["a", "b", None, None, "é", None, "", None]  # (as the twin holds them)
BUDGET = pp.ApproxDP(10**6, 0.5)
KEYS = {"epsilon": 10, "delta": 1e-3}


def _columns(strings: list[Any], binary: bool) -> Any:
    grp = [j for j in range(len(strings)) for _ in range(ROWS)]
    values = [strings[j] for j in grp]
    column = (pa.array(values, pa.binary()).view(pa.string()) if binary
              else pa.array(values, pa.string()))
    return pa.table({"grp": pa.array(grp, pa.int32()), "s": column})


def _policy(source: str | None = None) -> dict[str, Any]:
    table: dict[str, Any] = {"columns": {"grp": {"type": "int"}, "s": {"type": "str"}}}
    if source:
        table["source"] = source
    return {"tables": {"t": table, "k": {"columns": {
        "grp": {"type": "int"}, "s": {"type": "str", "public_values": ["a", "é", "zz"]}}}}}


QUERIES = [
    ("SELECT s, COUNT(*) AS c FROM t WHERE grp >= 2 GROUP BY s", KEYS),
    ("SELECT s, COUNT(*) AS c FROM t GROUP BY s", KEYS),
    ("SELECT s, COUNT(*) AS c FROM k GROUP BY s", {"epsilon": 1}),
    (("SELECT COUNT(*) FILTER (WHERE s = 'a') AS a, COUNT(*) FILTER (WHERE s > 'b') AS gt, "
     "COUNT(*) FILTER (WHERE s LIKE 'a%') AS la, COUNT(*) FILTER (WHERE s IS NULL) AS nul, "
     "COUNT(s) AS c, COUNT(DISTINCT s) AS d FROM t"), {"epsilon": 1}),
    ("SELECT COUNT(*) AS c FROM t WHERE s < 'b' AND grp >= 2", {"epsilon": 1}),
]


def _answers(database: Any, policy: dict[str, Any]) -> list[pd.DataFrame]:
    out = []
    with pp.connect(database, policy=policy, budget=BUDGET) as sess, noise_disabled():
        for sql, budget in QUERIES:
            frame = sess.sql(sql, **budget).df
            out.append(frame.sort_values(list(frame.columns), ignore_index=True,
                                         na_position="last"))
    return out


@pytest.fixture
def bad_file(tmp_path: Path) -> str:
    path = tmp_path / "bad.parquet"
    pq.write_table(_columns(VALUES, binary=True), path)
    return str(path)


@pytest.fixture
def twin() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.register("rows", _columns(VALID, binary=False))
    for name in ("t", "k"):
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM rows")
    con.unregister("rows")
    yield con
    con.close()


def test_the_file_holds_bytes_that_are_no_text(bad_file: str) -> None:
    with pytest.raises(duckdb.Error):  # (DuckDB itself refuses to read them as text)
        duckdb.sql(f"SELECT s FROM '{bad_file}'").fetchall()


@pytest.mark.parametrize("how", ["view", "source"])
def test_spark_reads_invalid_utf8_as_null(spark: Any, bad_file: str,
                                          twin: duckdb.DuckDBPyConnection, how: str) -> None:
    for name in ("t", "k"):
        spark.read.parquet(bad_file).createOrReplaceTempView(name)
    try:
        policy = _policy(bad_file if how == "source" else None)
        got, want = _answers(spark, policy), _answers(twin, _policy())
        for (sql, _), g, w in zip(QUERIES, got, want, strict=True):
            pd.testing.assert_frame_equal(g, w, obj=sql)
    finally:
        for name in ("t", "k"):
            spark.catalog.dropTempView(name)


# -- PostgreSQL ------------------------------------------------------------------------------
@pytest.fixture(params=["SQL_ASCII", "LATIN1"])
def encoded_db(request: pytest.FixtureRequest, pg_url: str) -> Iterator[str]:
    psycopg = need("psycopg")
    encoding = request.param
    name = f"privplan_{encoding.lower()}"
    base, _, _ = pg_url.rpartition("/")
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS {name}")
        con.execute(f"CREATE DATABASE {name} WITH ENCODING '{encoding}' TEMPLATE template0 "
                    "LOCALE_PROVIDER libc LOCALE 'C'")
    url = f"{base}/{name}"
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE t (grp integer, s text)")
        raw = "E'\\\\xff'" if encoding == "SQL_ASCII" else "'\u00e9'"
        con.execute(f"INSERT INTO t SELECT g % 3, CASE WHEN g % 3 = 2 THEN {raw} ELSE 'a' END "
                    "FROM generate_series(1, 60) g")
        con.execute("CREATE TABLE k AS SELECT * FROM t")
    yield url
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_postgres_database_not_in_utf8_is_refused_for_strings(encoded_db: str) -> None:
    with pp.connect(encoded_db, policy=_policy(), budget=BUDGET) as sess:
        for sql, budget in QUERIES:
            with pytest.raises(pp.PolicyError, match="server_encoding") as info:
                sess.sql(sql, **budget)
            assert "UTF8" in str(info.value) and "Nothing was charged" in str(info.value)
        assert sess.spent() == BUDGET.zero()
        numbers = {"tables": {"t": {"columns": {"grp": {"type": "int"}}}}}
    with pp.connect(encoded_db, policy=numbers, budget=BUDGET) as sess, noise_disabled():
        assert int(sess.sql("SELECT COUNT(*) AS c FROM t", epsilon=1).df["c"].iloc[0]) == 60
