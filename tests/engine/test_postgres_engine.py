"""The PostgreSQL engine against a real server (tests/servers/postgres_server.py), judged by the
embedded DuckDB engine: the same rows are loaded into both, and every DuckDB-dialect statement
must give the same frame (columns, dtypes, values, edge values included) on both.

Statements here are ones the renderer already carries over; where it does not yet (string
ordering under the server's ICU collation), the test is an expected failure naming the gap.
"""

from __future__ import annotations

import datetime as dt
import functools
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

from privplan.engines.duckdb_engine import DuckDBEngine
from privplan.errors import ExecutionError, PolicyError, UnsupportedQueryError
from tests.engine.float32_rows import float32_counts
from tests.servers import need
from tests.servers.postgres_server import load_frame

psycopg = need("psycopg")

from privplan.engines.postgres_engine import PostgresEngine

UTC = dt.UTC
TYPES = {"k": "VARCHAR", "i": "INTEGER", "b": "BIGINT", "x": "DOUBLE", "f": "BOOLEAN",
         "d": "DATE", "ts": "TIMESTAMP", "tz": "TIMESTAMP WITH TIME ZONE", "n": "DECIMAL(10,2)"}
INF = float("inf")
ROWS: list[tuple[Any, ...]] = [
    ("a", 1, 10, 1.5, True, dt.date(2020, 1, 1), dt.datetime(2020, 1, 1, 12, 0, 0, 1),
     dt.datetime(2020, 1, 1, 23, 30, tzinfo=UTC), Decimal("1.25")),
    ("A", 2, -(2**62), float("nan"), False, dt.date(1999, 12, 31),
     dt.datetime(1999, 12, 31, 23, 59, 59, 999999),
     dt.datetime(2021, 6, 1, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=5))), Decimal("-3.50")),
    ("É", 3, 2**62, INF, True, dt.date(2020, 1, 1), dt.datetime(2020, 1, 1, 12, 0, 0, 1),
     None, Decimal("0.01")),
    ("é", 4, 0, -INF, None, None, None, dt.datetime(1970, 1, 1, tzinfo=UTC), None),
    ("a", 5, None, -0.0, False, dt.date(2020, 1, 1), dt.datetime(2024, 2, 29), None,
     Decimal("99999999.99")),
    (None, 6, 7, None, True, dt.date(2000, 2, 29), None,
     dt.datetime(2000, 2, 29, 12, tzinfo=UTC), Decimal("0.00")),
    ("日本", 7, 8, 1e-300, True, dt.date(1900, 1, 1), dt.datetime(1900, 1, 1),
     dt.datetime(2099, 12, 31, 23, 59, 59, tzinfo=UTC), Decimal("-0.01")),
    ("b b", None, 9, 2.5, False, dt.date(2020, 1, 2), dt.datetime(2020, 1, 2),
     dt.datetime(2020, 1, 2, tzinfo=UTC), Decimal(5)),
]


@pytest.fixture(scope="module")
def loaded(pg_url: str) -> str:
    frame = pd.DataFrame(ROWS, columns=list(TYPES), dtype=object)
    load_frame(pg_url, "t", frame, TYPES)
    return pg_url


@pytest.fixture(scope="module")
def engines(loaded: str) -> Iterator[tuple[PostgresEngine, DuckDBEngine]]:
    con = duckdb.connect(":memory:")
    cols = ", ".join(f'"{c}" {t}' for c, t in TYPES.items())
    con.execute(f"CREATE TABLE t ({cols})")
    con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(TYPES))})",
                    [list(r) for r in ROWS])
    pg, ref = PostgresEngine(loaded), DuckDBEngine(con)
    yield pg, ref
    pg.close()
    ref.close()
    con.close()


def _same(pg: PostgresEngine, ref: DuckDBEngine, sql: str, *, sort: bool = True) -> pd.DataFrame:
    got, want = pg.run(sql), ref.run(sql)
    if sort:  # (group order is no part of the contract; strings sorted by code point here)
        got = got.sort_values(list(got.columns), ignore_index=True, na_position="last")
        want = want.sort_values(list(want.columns), ignore_index=True, na_position="last")
    pd.testing.assert_frame_equal(got, want)
    for column in got.columns:  # -0.0 and 0.0 compare equal: the sign must agree too
        if got[column].dtype.kind == "f":  # (a NaN's sign bit means nothing)
            a, b = got[column].to_numpy(), want[column].to_numpy()
            assert list(np.signbit(a[~np.isnan(a)])) == list(np.signbit(b[~np.isnan(b)])), column
    assert pg.bind(sql) == ref.bind(sql)
    return got


STATEMENTS = [
    "SELECT COUNT(*) AS n FROM t",
    "SELECT CAST(COALESCE(SUM(CAST(b AS BIGINT)), 0) AS BIGINT) AS s FROM t",
    "SELECT SUM(CAST(i AS BIGINT)) AS s, SUM(i) AS s2, COUNT(k) AS c FROM t",
    "SELECT k, COUNT(*) AS n, CAST(COALESCE(SUM(i), 0) AS BIGINT) AS s FROM t GROUP BY k",
    "SELECT i, COUNT(*) AS n FROM t GROUP BY i",
    "SELECT d, COUNT(*) AS n, MIN(ts) AS first_ts, MAX(tz) AS last_tz FROM t GROUP BY d",
    "SELECT f, COUNT(*) AS n, MIN(x) AS lo, MAX(x) AS hi FROM t GROUP BY f",
    "SELECT ts, tz, COUNT(*) AS n FROM t GROUP BY ts, tz",
    ("SELECT COUNT(*) FILTER (WHERE x > 0) AS pos, COUNT(*) FILTER (WHERE k = 'É') AS e, "
     "COUNT(*) FILTER (WHERE f) AS t FROM t"),
    "SELECT k, x FROM t",
    "SELECT i, k, ROW_NUMBER() OVER (PARTITION BY f ORDER BY i) AS rn FROM t",
    "SELECT SUM(n) AS s, MIN(n) AS lo, n FROM t GROUP BY n",
    "SELECT k, b, n, d, ts, tz, f FROM t WHERE i > 100",
    "SELECT CAST(i AS DOUBLE) / 4 AS q, -x AS neg FROM t",
]


@pytest.mark.parametrize("sql", STATEMENTS)
def test_run_and_bind_match_duckdb(engines: tuple[PostgresEngine, DuckDBEngine],
                                   sql: str) -> None:
    _same(*engines, sql)


HISTOGRAMS = [  # a quantile's per-group histogram (a two-level aggregate on PostgreSQL)
    ('SELECT k COLLATE "binary" AS __k0, COUNT(*) AS n, histogram(i) FILTER (WHERE x > 0) AS h, '
     "histogram(CAST(CASE WHEN x < -2 THEN -2 WHEN x > 2 THEN 2 ELSE x END AS BIGINT)) AS hx "
     "FROM t GROUP BY __k0"),
    "SELECT f AS __k0, d AS __k1, histogram(b) AS h FROM t GROUP BY __k0, __k1",
    "SELECT COUNT(*) AS n, histogram(i) AS h FROM t",
    "SELECT histogram(i) AS h FROM t WHERE i > 100",
]


@pytest.mark.parametrize("sql", HISTOGRAMS)
def test_histograms_match_duckdb(engines: tuple[PostgresEngine, DuckDBEngine], sql: str) -> None:
    pg, ref = engines
    got, want = pg.run(sql), ref.run(sql)
    keys = [c for c in got.columns if c.startswith("__k")]
    if keys:  # (the rows in one order: keys are unique, sorted by their text)
        got = got.iloc[sorted(range(len(got)), key=lambda r: repr(list(got.loc[r, keys])))]
        want = want.iloc[sorted(range(len(want)), key=lambda r: repr(list(want.loc[r, keys])))]
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))
    assert pg.bind(sql) == ref.bind(sql)
    assert any(isinstance(v, dict) and v for v in got["h"]) or "i > 100" in sql


def test_edge_values_arrive_exactly(engines: tuple[PostgresEngine, DuckDBEngine]) -> None:
    frame = _same(*engines, "SELECT i, k, x, tz FROM t")
    x = dict(zip(frame["i"], frame["x"]))
    assert np.isnan(x[2]) and x[3] == INF and x[4] == -INF and x[7] == 1e-300
    assert x[5] == 0 and np.signbit(x[5])
    assert set(frame["k"].dropna()) == {"a", "A", "É", "é", "日本", "b b"}
    assert str(frame["tz"].dtype).startswith("datetime64[us,")


def test_fetch_public_gives_duckdb_values(engines: tuple[PostgresEngine, DuckDBEngine]) -> None:
    pg, ref = engines
    sql = "SELECT i, k, b, x, f, d, ts, tz, n FROM t WHERE i <> 2 ORDER BY i"
    got, want = pg.fetch_public(sql), ref.fetch_public(sql)
    assert [tuple(map(type, r)) for r in got] == [tuple(map(type, r)) for r in want]
    assert repr(got) == repr(want)  # (NaN != NaN: compared as text)
    with pytest.raises(UnsupportedQueryError, match="public table failed"):
        pg.fetch_public("SELECT nope FROM t")


def test_columns_map_postgres_types(loaded: str) -> None:
    with psycopg.connect(loaded, autocommit=True) as con:
        con.execute(
            "DROP TABLE IF EXISTS typed; CREATE TABLE typed (a int2, b int4, c int8, d float4, "
            "e float8, f numeric(10,2), g numeric(38,5), h numeric, i numeric(40,2), j text, "
            "k varchar(10), l char(3), m bool, n date, o timestamp, p timestamptz, q uuid, "
            '"MiXed" jsonb, r bytea, s interval)')
    engine = PostgresEngine(loaded)
    try:
        assert engine.columns('"typed"') == {
            "a": "SMALLINT", "b": "INTEGER", "c": "BIGINT", "d": "FLOAT", "e": "DOUBLE",
            "f": "DECIMAL(10,2)", "g": "DECIMAL(38,5)", "h": "NUMERIC", "i": "NUMERIC",
            "j": "VARCHAR", "k": "VARCHAR", "l": "BPCHAR", "m": "BOOLEAN", "n": "DATE",
            "o": "TIMESTAMP", "p": "TIMESTAMP WITH TIME ZONE", "q": "UUID", "mixed": "JSONB",
            "r": "BLOB", "s": "INTERVAL"}
        assert engine.columns('"public"."typed"')["a"] == "SMALLINT"
        with pytest.raises(PolicyError, match="no such table"):
            engine.columns('"missing"')
    finally:
        engine.close()


def test_run_errors_are_withheld(engines: tuple[PostgresEngine, DuckDBEngine]) -> None:
    pg, ref = engines
    sql = "SELECT COUNT(*) AS n FROM t WHERE CAST(k AS INTEGER) > 0"  # fails on a value
    with pytest.raises(ExecutionError) as info:
        pg.run(sql)
    with pytest.raises(ExecutionError):
        ref.run(sql)
    for value in ("É", "日本", '"a"', "b b", "invalid input"):
        assert value not in str(info.value)
    assert "withheld" in str(info.value)


def test_bind_errors_are_shown(engines: tuple[PostgresEngine, DuckDBEngine]) -> None:
    pg, _ = engines
    with pytest.raises(UnsupportedQueryError, match='column "nope" does not exist'):
        pg.bind("SELECT nope FROM t")
    with pytest.raises(UnsupportedQueryError):
        pg.bind("SELECT COUNT(*) FROM t WHERE k > 1")  # (text vs integer: a type error)


def test_reads_are_read_only(loaded: str) -> None:
    engine = PostgresEngine(loaded)
    try:
        with pytest.raises(ExecutionError):
            engine.run("CREATE TABLE written AS SELECT 1 AS x")
        with pytest.raises(ExecutionError):
            engine.run("DELETE FROM t")
        with pytest.raises(UnsupportedQueryError):
            engine.bind("SELECT 1 AS x; DROP TABLE t")
        try:  # (one statement per call, whatever the renderer keeps: no COMMIT escapes
            engine.run("SELECT 1 AS x; COMMIT; DROP TABLE t")  # the read-only transaction)
        except ExecutionError:
            pass
    finally:
        engine.close()
    with psycopg.connect(loaded) as con:
        assert con.execute("SELECT to_regclass('written')").fetchone() == (None,)
        assert con.execute("SELECT COUNT(*) FROM t").fetchone() == (len(ROWS),)


def test_statement_timeout(loaded: str) -> None:
    engine = PostgresEngine(loaded, statement_timeout_ms=50)
    try:
        with pytest.raises(ExecutionError, match="statement_timeout"):
            engine.run("SELECT COUNT(*) AS n FROM (SELECT pg_sleep(1)) AS s")
        assert engine.run("SELECT COUNT(*) AS n FROM t")["n"].tolist() == [len(ROWS)]
    finally:
        engine.close()
    with pytest.raises(PolicyError):
        PostgresEngine(loaded, statement_timeout_ms=-1)


@pytest.mark.parametrize("autocommit", [True, False])
def test_callers_connection_is_left_as_it_was(loaded: str, autocommit: bool) -> None:
    con = psycopg.connect(loaded, autocommit=autocommit)
    idle = psycopg.pq.TransactionStatus.IDLE
    try:
        zone = con.execute("SHOW TimeZone").fetchone()
        con.commit()
        engine = PostgresEngine(con)
        assert engine.run("SELECT COUNT(*) AS n FROM t")["n"].tolist() == [len(ROWS)]
        assert con.info.transaction_status == idle
        for call, bad in ((engine.run, "SELECT 1 / CAST(k AS INTEGER) AS x FROM t"),
                          (engine.bind, "SELECT nope FROM t")):
            with pytest.raises((ExecutionError, UnsupportedQueryError)):
                call(bad)
            assert con.info.transaction_status == idle
        engine.close()
        assert not con.closed
        assert con.execute("SHOW TimeZone").fetchone() == zone  # (settings were LOCAL)
        assert con.execute("SELECT COUNT(*) FROM t").fetchone() == (len(ROWS),)
        con.rollback()
        con.execute("SELECT 1")
        if not autocommit:  # a transaction the caller left open is theirs: refused
            engine = PostgresEngine(con)
            with pytest.raises(PolicyError, match="inside a transaction"):
                engine.run("SELECT COUNT(*) AS n FROM t")
            engine.close()
    finally:
        con.close()


def test_owned_connection_closes(loaded: str) -> None:
    engine = PostgresEngine(loaded)
    con = engine._con
    engine.close()
    assert con.closed
    with pytest.raises(PolicyError, match="cannot connect"):
        PostgresEngine("postgresql://nobody@127.0.0.1:1/none")


def test_session_views_inlined_copies_temporary(engines: tuple[PostgresEngine, DuckDBEngine]) -> None:
    pg, ref = engines

    class Table:
        name, schema, source = "per_unit", None, None

    select = "SELECT k, COUNT(*) AS c FROM t GROUP BY k"
    generation = pg.generation
    pg.create_view("per_unit", select)
    ref.create_view("per_unit", select)
    assert pg.generation > generation
    assert pg.table_sql(Table()) == f"({select})"
    _same(pg, ref, f"SELECT SUM(c) AS s FROM {pg.table_sql(Table())} AS v")
    with pytest.raises(UnsupportedQueryError, match="per-unit subquery"):
        pg.create_view("bad", "SELECT nope FROM t")

    class Policy:
        name, schema, source = "t", "public", None

    assert pg.table_sql(Policy()) == '"public"."t"'
    # the session's copy: a temporary table, made once (when the session asks: from its
    # second query, see session.copies), holding the SELECT's rows
    assert pg.materialized(select) is None
    copy = pg.materialize(select)
    assert copy.startswith('pg_temp."__privplan_copy_') and pg.materialized(select) == copy
    assert pg.materialize(select) == copy
    got = pg.run(f"SELECT k, c FROM {copy} AS v")
    want = ref.run(f"SELECT k, c FROM {ref.materialize(select)} AS v")
    pd.testing.assert_frame_equal(got.sort_values("k", ignore_index=True),
                                  want.sort_values("k", ignore_index=True))
    domain = pg.domain_table(["a", "É", "it's", "zz"])
    sql = f"SELECT u.x, COUNT(t.k) AS n FROM {domain} AS u(x) LEFT JOIN t ON t.k = u.x GROUP BY u.x"
    got = pg.run(sql).sort_values("x", ignore_index=True)
    assert got["x"].tolist() == ["a", "it's", "zz", "É"] and got["n"].tolist() == [2, 0, 0, 1]
    pg.forget_durable()
    with pytest.raises(PolicyError, match="reads the tables in its database"):
        pg.register("frame", pd.DataFrame({"a": [1]}))


def test_import_privplan_does_not_import_psycopg() -> None:
    code = ("import sys, privplan, privplan.engines.postgres_engine\n"
            "print('psycopg' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.strip()
    assert out == "False"


def test_string_order_is_duckdbs(engines: tuple[PostgresEngine, DuckDBEngine]) -> None:
    """Strings are ordered by code point on every engine where privplan reads them: its
    statements read every ``str`` column in binary collation (the typed view, public join
    keys and columns), which the renderer writes as ``COLLATE "C"`` on PostgreSQL. The
    server's own collation (ICU or libc: ``'a' < 'B'``) orders the column read bare — a form
    privplan never sends (the oracle below asks both, so the test fails if the data stop
    telling the two orders apart)."""
    pg, ref = engines
    bare = "SELECT MIN(k) AS lo, MAX(k) AS hi FROM t"
    read = ('SELECT MIN(k) AS lo, MAX(k) AS hi FROM (SELECT k COLLATE "binary" AS k FROM t) '
            "AS typed")
    _same(pg, ref, read, sort=False)
    assert not pg.run(bare).equals(ref.run(bare))  # (the server's collation: not DuckDB's)


def test_bind_gives_duckdb_types(loaded: str) -> None:
    """DuckDB's result types, bound over the shadow (PostgreSQL's own: AVG of an integer is a
    numeric, SUM of a bigint a numeric)."""
    frame = pd.DataFrame({"x": [3, 1, 2], "d": [1.5, -0.5, 2.0]}, dtype=object)
    types = {"x": "BIGINT", "d": "DOUBLE"}
    load_frame(loaded, "shadow_t", frame, types)
    con = duckdb.connect(":memory:")
    con.execute("CREATE TABLE shadow_t (x BIGINT, d DOUBLE)")
    con.executemany("INSERT INTO shadow_t VALUES (?, ?)", frame.values.tolist())
    pg, ref = PostgresEngine(loaded), DuckDBEngine(con)
    try:
        sql = "SELECT ROW_NUMBER() OVER (ORDER BY x) AS r, FLOOR(d) AS f FROM shadow_t"
        assert pg.bind(sql) == ref.bind(sql) == [("r", "BIGINT"), ("f", "DOUBLE")]
        _same(pg, ref, sql)
        _same(pg, ref, "SELECT SUM(x) AS s, AVG(x) AS a, AVG(d) AS ad FROM shadow_t")
    finally:
        pg.close()
        con.close()


def _iso_policy(table: str) -> dict[str, Any]:
    return {"tables": {table: {"privacy_unit": "row", "neighbourhood": "add_remove", "columns": {
        "d": {"type": "date"}, "ts": {"type": "timestamp"}}}}}


def test_date_time_constants_only_in_iso_form(loaded: str) -> None:
    """A date or timestamp written as text is read by each engine its own way: DuckDB reads
    '5877642-06-25' as a date, PostgreSQL refuses it (out of its range) when it binds the query
    (the disjointness oracle on PostgreSQL found it). privplan refuses every such constant not in
    the ISO form all engines read alike, before anything is charged, and answers ISO ones as
    DuckDB does."""
    import privplan as pp
    from privplan.testing import noise_disabled

    with pp.connect(loaded, policy=_iso_policy("t"), budget=pp.PureDP(10)) as sess:
        for where in ("d = '5877642-06-25'", "d < '0044-03-15 (BC)'", "ts <> 'infinity'",
                      "d IN (' 2020-01-01', NULL)",
                      "d BETWEEN '2020-1-1' AND '2020-12-31'",
                      "ts = CAST('2020-01-01 24:00:00' AS TIMESTAMP)"):
            with pytest.raises(UnsupportedQueryError, match="YYYY-MM-DD"):
                sess.sql(f"SELECT COUNT(*) AS n FROM t WHERE {where}", epsilon=1.0)
        assert sess.spent() == pp.PureDP(0)
        with noise_disabled():
            got = sess.sql("SELECT COUNT(*) AS n FROM t WHERE d BETWEEN '2020-01-01' AND "
                           "DATE '2020-12-31' AND ts < '2020-01-01 12:00:00.000002'",
                           epsilon=1.0)
    assert int(got.df["n"].iloc[0]) == 2  # (rows 1 and 3)


def test_numbers_the_server_reads_otherwise(loaded: str) -> None:
    """Found by the disjointness oracle on PostgreSQL. `b = 1.00000000000000000001` compares a
    BIGINT with a DECIMAL(21,20): DuckDB converts b with TRY_CAST to DECIMAL(38,20), NULL where
    it overflows; PostgreSQL has no TRY_CAST and failed on |b| >= 10^18, while reading rows (a
    failure that depends on them, here on a query charged nothing: its region is empty). The
    renderer now guards that cast (NULL outside, as DuckDB), so it is answered as DuckDB
    answers; a cast to HUGEINT (PostgreSQL has none) is refused before any charge; and `1e400`
    (DuckDB's infinity, which PostgreSQL refused to read) is answered as DuckDB answers."""
    import privplan as pp
    from privplan.testing import noise_disabled

    policy = {"tables": {"t": {"privacy_unit": "row", "neighbourhood": "add_remove", "columns": {
        "b": {"type": "int"}, "x": {"type": "float"}}}}}
    with pp.connect(loaded, policy=policy, budget=pp.PureDP(10)) as sess:
        with pytest.raises(UnsupportedQueryError, match="compute the same values"):
            sess.sql("SELECT COUNT(*) AS n FROM t WHERE b = CAST(1 AS HUGEINT)", epsilon=1.0)
        assert sess.spent() == pp.PureDP(0)
        with noise_disabled():  # (t holds b = ±2^62: the unguarded cast failed on them)
            empty = sess.sql("SELECT COUNT(*) AS n FROM t WHERE b = 1.00000000000000000001",
                             epsilon=1.0)
            assert int(empty.df["n"].iloc[0]) == 0 and sess.spent() == pp.PureDP(0)
            got = sess.sql("SELECT COUNT(*) AS n FROM t WHERE b < 1.00000000000000000001 AND "
                           "b > -1", epsilon=1.0)
            assert int(got.df["n"].iloc[0]) == 1  # (b 0: the guard's NULL for ±2^62, as DuckDB)
            got = sess.sql("SELECT COUNT(*) AS n FROM t WHERE x IS DISTINCT FROM 1e400 AND "
                           "b < 1.0000000000000000001", epsilon=1.0)  # (DECIMAL(38,19): holds b)
    assert int(got.df["n"].iloc[0]) == 2  # (b -2^62, x NaN; b 0, x -inf)


def test_real_column_compares_as_duckdb(loaded: str) -> None:
    """A REAL column compared with a decimal constant counts alike on DuckDB and here
    (tests/engine/float32_rows.py says what differed before)."""
    counts = float32_counts(loaded, functools.partial(load_frame, loaded), "REAL")
    assert counts == [1, 1]  # (1.0 only: the float32 0.1 is not the double 0.1)
