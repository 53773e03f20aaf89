"""Edge values through sessions: the same DP queries over the same edge-value rows, with seeded
noise, release the same values, keys and dtypes, and charge the same costs, on DuckDB,
PostgreSQL and Spark, under a row-level and a user-level policy (issue #14).

The table ``t`` holds, per column kind, the values where engines part ways: floats (NULL, NaN,
±inf, -0.0, subnormals, values inside, on and outside the policy's bounds, ±1e300), integers
(NULL, the bounds and past them, 2^53 ± 1, ±2^62, the BIGINT extremes), strings (mixed case, é
as one code point and as e + a combining accent, trailing and leading spaces, '', NULL, LIKE's
own characters), dates and timestamps (midnight and one microsecond either side, leap day, the
years 1 and 9999). Every edge value sits on its own number of rows (filler rows make up the
rest), so a row an engine reads differently changes a count, hence the released value.

For each policy level and remote engine, one DuckDB session and one remote session run the
same list of queries in order, each under ``seeded_noise``: the frames must be equal (values,
keys, dtypes), and so must each query's marginal cost, its own cost and the session total after
it — the pairs of queries with disjoint WHEREs make the marginal costs depend on what the
analysis proved about the regions, so an engine that selected other rows would show up there
as a different answer for the same charge. Queries one engine refuses and another answers
break that lock-step, so they are listed apart (``REMOTE_REFUSED``, with the reason), checked
to be refused there before anything is charged, and answered like DuckDB where they are not
refused. A "noise off" check compares each engine's answers with plain SQL over the clamped
values on DuckDB. Timestamps with a time zone are held in a table of their own (``z``): both
loaders hold them, and privplan reads them on DuckDB only (a policy ``timestamp`` over such a
column is a conversion that depends on the time zone).

The sign of a zero group key: DuckDB and PostgreSQL keep the sign of the first stored zero of
the group {-0.0, 0.0}, Spark writes 0.0; privplan releases 0.0 on every engine (the sign would
be a bit about one row), checked whatever the rows' order.

The list of queries fits the time of a normal run (Spark answers about one query a second);
the longer list, more disjoint pairs and more edges per query, is marked slow.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

import privplan as pp
from privplan.testing import noise_disabled, seeded_noise
from tests.servers import postgres_server, spark_session

INF, NAN = float("inf"), float("nan")
NFC, NFD = "\u00e9", "e\u0301"  # é as one code point, and as e + COMBINING ACUTE ACCENT
MIDNIGHT = dt.datetime(2020, 1, 1)
MICRO = dt.timedelta(microseconds=1)
ROWS = 300
TYPES = {"uid": "BIGINT", "x": "DOUBLE", "h": "DOUBLE", "n": "BIGINT", "k": "VARCHAR",
         "s": "VARCHAR", "d": "DATE", "ts": "TIMESTAMP"}
TZ_TYPES = {"uid": "BIGINT", "tz": "TIMESTAMP WITH TIME ZONE"}

# (edge values, the value of the remaining rows, the stride that spreads them over the rows);
# the j-th edge value is on j + 2 rows
EDGES: dict[str, tuple[list[Any], Any, int]] = {
    "x": ([None, NAN, INF, -INF, -0.0, 0.0, 9.99999, 10.0, 10.00001, -10.0, -10.00001, 1e300,
           -1e300, 5e-324, -5e-324, 1e-310, 2.5e-05, 7.5e-06], 1.5, 7),
    # resolution 0.5: 0.25 and 0.75 are halfway between two grid points (half to even)
    "h": ([0.25, -0.25, 0.75, -0.75, 1.25, 2.25, -2.25, NAN, None, 1.75, -0.0], 1.0, 11),
    "n": ([None, -100, 100, 101, -101, 0, 2**53, 2**53 + 1, -(2**53 + 1), 2**62, -(2**62),
           2**63 - 1, -(2**63), 10**18 - 1, 10**18, -7], 42, 13),
    "k": (["a", "A", "B", "b", NFC, NFD, "a ", "", None, "É", "ab", "a%", " a", "_"], "q", 17),
    "s": (["a", "A", "B", "b", NFC, NFD, "a ", "", None, "É", "ab", "a%", " a", "_"], "q", 19),
    "d": ([dt.date(2020, 1, 1), dt.date(2019, 12, 31), dt.date(2020, 1, 2),
           dt.date(2020, 2, 29), None, dt.date(1970, 1, 1), dt.date(2021, 12, 31),
           dt.date(1999, 12, 31), dt.date(2030, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31),
           dt.date(2020, 12, 31), dt.date(2021, 1, 1)], dt.date(2020, 6, 15), 23),
    "ts": ([MIDNIGHT, MIDNIGHT + MICRO, MIDNIGHT - MICRO, dt.datetime(2020, 2, 29, 12), None,
            dt.datetime(1970, 1, 1), dt.datetime(2020, 1, 2), dt.datetime(2021, 1, 1) - MICRO,
            dt.datetime(2021, 1, 1), dt.datetime(1, 1, 1),
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(2019, 12, 31, 23, 59, 59)],
           dt.datetime(2020, 6, 15, 12), 29),
}
PUBLIC_K = ["a", "A", "B", "b", NFC, NFD, "a ", "", "zz"]  # 'zz' is in no row


def _column(name: str) -> list[Any]:
    edges, filler, stride = EDGES[name]
    values = [v for j, v in enumerate(edges) for _ in range(j + 2)]
    values += [filler] * (ROWS - len(values))
    return [values[(i * stride) % ROWS] for i in range(ROWS)]  # (stride coprime with ROWS)


def _units() -> list[Any]:
    """Privacy units of 1 to 6 rows each, and three rows that belong to no unit (NULL)."""
    out: list[Any] = []
    unit = 0
    while len(out) < ROWS:
        out += [unit] * (1 + unit * 5 % 6)
        unit += 1
    out = out[:ROWS]
    for i in (5, 150, 299):
        out[i] = None
    return out


def edge_frame() -> pd.DataFrame:
    columns = {"uid": _units(), **{c: _column(c) for c in EDGES}}
    return pd.DataFrame({c: columns[c] for c in TYPES}, dtype=object)


def tz_frame() -> pd.DataFrame:
    utc, plus5 = dt.UTC, dt.timezone(dt.timedelta(hours=5))
    values = [dt.datetime(2020, 1, 1, tzinfo=utc), dt.datetime(2020, 1, 1, 4, 59, tzinfo=plus5),
              dt.datetime(2019, 12, 31, 23, 59, 59, 999999, tzinfo=utc), None]
    return pd.DataFrame({"uid": list(range(40)), "tz": [values[i % 4] for i in range(40)]},
                        dtype=object)


def _policy(level: str) -> pp.Policy:
    columns = {
        "uid": {"type": "int"},
        "x": {"type": "float", "lower": -10, "upper": 10},
        "h": {"type": "float", "lower": -2, "upper": 2, "resolution": 0.5},
        "n": {"type": "int", "lower": -100, "upper": 100},
        "k": {"type": "str", "public_values": PUBLIC_K},
        "s": {"type": "str"},
        "d": {"type": "date", "lower": "2019-01-01", "upper": "2021-12-31"},
        "ts": {"type": "timestamp", "lower": "2019-01-01 00:00:00",
               "upper": "2021-12-31 23:59:59"},
    }
    table: dict[str, Any] = {"columns": columns}
    z: dict[str, Any] = {"columns": {"uid": {"type": "int"}, "tz": {"type": "timestamp"}}}
    if level == "user":
        table.update(privacy_unit="uid", max_rows_per_unit=3)
        z.update(privacy_unit="uid", max_rows_per_unit=1)
    return pp.Policy.from_dict({"tables": {"t": table, "z": z}})


ONE = {"epsilon": 1, "delta": 1e-6}
GROUPS = {"epsilon": 10, "delta": 1e-6}  # private keys: enough for groups to pass

# (query, budget); run in this order in one session per engine
QUERIES: list[tuple[str, dict[str, Any]]] = [
    # disjoint pairs first (later queries over every row would make them free): the first of a
    # pair is charged, the second only what its region adds to the first's (nothing)
    ("SELECT COUNT(*) AS c FROM t WHERE ts < TIMESTAMP '2020-01-01 00:00:00.000001'", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE ts >= TIMESTAMP '2020-01-01 00:00:00.000001'", ONE),
    (f"SELECT COUNT(*) AS c, SUM(x) AS sx FROM t WHERE s = '{NFC}'", ONE),
    (f"SELECT COUNT(*) AS c, SUM(x) AS sx FROM t WHERE s = '{NFD}'", ONE),
    (("SELECT COUNT(*) AS c, COUNT(x) AS cx, SUM(x) AS sx, AVG(x) AS ax, SUM(h) AS sh, "
      "AVG(h) AS ah, SUM(n) AS sn, AVG(n) AS an, COUNT(DISTINCT s) AS ds, "
      "COUNT(DISTINCT x) AS dx FROM t"), ONE),
    (("SELECT COUNT(*) FILTER (WHERE x > 1e308) AS big, COUNT(*) FILTER (WHERE x <> x) AS nan, "
      "COUNT(*) FILTER (WHERE x = 0.0) AS zero, COUNT(*) FILTER (WHERE x = -0.0) AS negzero, "
      "COUNT(*) FILTER (WHERE x = 10) AS on_hi, COUNT(*) FILTER (WHERE x > 10) AS above, "
      "COUNT(*) FILTER (WHERE x < -1e300) AS below, "
      "COUNT(*) FILTER (WHERE x BETWEEN -10 AND 10) AS inside, "
      "COUNT(*) FILTER (WHERE x IS NULL) AS nul, COUNT(*) FILTER (WHERE x = 5e-324) AS tiny, "
      "COUNT(*) FILTER (WHERE x > 0 AND x < 1e-300) AS subnormal, "
      "COUNT(*) FILTER (WHERE x = CAST('NaN' AS DOUBLE)) AS is_nan, "
      "COUNT(*) FILTER (WHERE x = CAST('-inf' AS DOUBLE)) AS neg_inf, "
      "COUNT(*) FILTER (WHERE n = 9007199254740993) AS n_exact, "
      "COUNT(*) FILTER (WHERE n = 9.007199254740993e15) AS n_as_double, "
      "COUNT(*) FILTER (WHERE n > 1e18) AS n_big, COUNT(*) FILTER (WHERE n < -100) AS n_below, "
      "COUNT(*) FILTER (WHERE n BETWEEN -100 AND 100) AS n_inside, "
      "COUNT(*) FILTER (WHERE n = 9007199254740993.0) AS n_as_decimal, "
      "COUNT(*) FILTER (WHERE n >= 461168601842738790.40000000000000000001) AS n_scale20, "
      "COUNT(*) FILTER (WHERE n = -9223372036854775808) AS n_lowest, "
      "COUNT(*) FILTER (WHERE n IS NULL) AS n_null FROM t"), ONE),
    ((f"SELECT COUNT(*) FILTER (WHERE s = '{NFC}') AS nfc, "
      f"COUNT(*) FILTER (WHERE s = '{NFD}') AS nfd, "
      "COUNT(*) FILTER (WHERE s = 'a ') AS trailing, COUNT(*) FILTER (WHERE s = '') AS empty, "
      "COUNT(*) FILTER (WHERE s < 'a') AS lt_a, COUNT(*) FILTER (WHERE s < 'B') AS lt_b, "
      "COUNT(*) FILTER (WHERE s LIKE 'a%') AS like_a, COUNT(*) FILTER (WHERE s LIKE '_') AS one, "
      "COUNT(*) FILTER (WHERE s LIKE 'e_') AS e_accent, "
      "COUNT(*) FILTER (WHERE s IN ('a', 'A')) AS in_a, COUNT(*) FILTER (WHERE s > 'Z') AS gt_z, "
      "COUNT(*) FILTER (WHERE s IS NULL) AS nul, COUNT(*) FILTER (WHERE s = 'É') AS upper_e, "
      "COUNT(*) FILTER (WHERE ts = DATE '2020-01-01') AS at_midnight, "
      "COUNT(*) FILTER (WHERE ts = TIMESTAMP '2020-01-01 00:00:00.000001') AS micro_after, "
      "COUNT(*) FILTER (WHERE ts < DATE '2020-01-01') AS before_day, "
      "COUNT(*) FILTER (WHERE ts > '2019-12-31 23:59:59.999999') AS after_text, "
      "COUNT(*) FILTER (WHERE d < DATE '2020-01-01') AS d_before, "
      "COUNT(*) FILTER (WHERE d = '2020-02-29') AS leap, "
      "COUNT(*) FILTER (WHERE d = '2020-01-01 12:00') AS d_with_time, "
      "COUNT(*) FILTER (WHERE d > DATE '9999-12-30') AS last_day, "
      "COUNT(*) FILTER (WHERE YEAR(ts) = 2020) AS y2020, "
      "COUNT(*) FILTER (WHERE MONTH(d) = 2) AS feb, COUNT(*) FILTER (WHERE DAY(ts) = 31) AS d31 "
      "FROM t"), ONE),
    ("SELECT k, COUNT(*) AS c, SUM(x) AS sx, AVG(n) AS an FROM t GROUP BY k", ONE),
    ("SELECT s, COUNT(*) AS c FROM t GROUP BY s", GROUPS),
    ("SELECT YEAR(d) AS y, MONTH(d) AS m, COUNT(*) AS c FROM t GROUP BY YEAR(d), MONTH(d)",
     GROUPS),
]

SLOW_QUERIES: list[tuple[str, dict[str, Any]]] = [
    # disjoint pairs first
    ("SELECT COUNT(*) AS c FROM t WHERE x > 1e308", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE x < 1e308", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE s < 'a'", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE s >= 'a'", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE d < DATE '2020-01-01'", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE d >= DATE '2020-01-01'", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE ts = DATE '2020-01-01'", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE ts > DATE '2020-01-01'", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE s LIKE 'a%'", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE s LIKE 'b%'", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE n > 9007199254740992", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE n <= 9007199254740992", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE s IN ('a', 'A')", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE s IN ('b', 'B')", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE x = 0.0", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE x > 0", ONE),
    ("SELECT MIN(x) AS lo, MAX(n) AS hi FROM t", ONE),
    # the SUM of an expression: the column clamped to its bounds (a CASE the portable subset
    # bounds by its limits: NaN compares above every number on every engine), then scaled
    ("SELECT SUM(n * 2) AS s2, SUM(n / 3) AS s3, SUM(x * 2) AS x2, AVG(h - 1) AS h1 FROM t",
     ONE),
    # literals DuckDB reads as doubles the other engines cannot read as such (1e400: DuckDB's
    # infinity; more than 38 digits): written as the text of DuckDB's double, cast
    ("SELECT COUNT(*) AS c FROM t WHERE x > 1e400", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE n = 4611686018427387904.00000000000000000000001", ONE),
    ("SELECT COUNT(*) AS c FROM t WHERE n IN (4611686018427387904.00000000000000000000001, -7)",
     ONE),
    ("SELECT k, MEDIAN(h) AS m FROM t GROUP BY k", ONE),
    ("SELECT ts, COUNT(*) AS c FROM t GROUP BY ts", GROUPS),
    (("SELECT COUNT(DISTINCT k) AS dk, COUNT(DISTINCT n) AS dn, COUNT(DISTINCT ts) AS dts, "
      "COUNT(DISTINCT d) AS dd FROM t"), ONE),
    ("SELECT k, COUNT(*) AS c FROM t WHERE s LIKE 'a%' GROUP BY k", ONE),
    (f"SELECT k, SUM(h) AS sh, AVG(x) AS ax FROM t WHERE k IN ('a', 'A', '{NFD}') GROUP BY k",
     ONE),
    ("SELECT MONTH(ts) AS m, COUNT(*) AS c, SUM(n) AS sn FROM t GROUP BY MONTH(ts)", GROUPS),
    ("SELECT d, COUNT(*) AS c FROM t GROUP BY d", GROUPS),
    ("SELECT n, COUNT(*) AS c FROM t GROUP BY n", GROUPS),
    (("SELECT COUNT(*) FILTER (WHERE h > 0) AS pos, SUM(h) FILTER (WHERE h < 0) AS neg, "
      "SUM(x) FILTER (WHERE x <> x) AS nan_sum, SUM(x) FILTER (WHERE x > 1e308) AS big_sum, "
      "SUM(n) FILTER (WHERE n > 100) AS above_sum FROM t"), ONE),
]

BOTH = frozenset({"postgres", "spark"})
# query -> (engines that refuse it, the refusal's class, why); DuckDB answers every one
REMOTE_REFUSED: dict[str, tuple[frozenset[str], type[pp.PrivplanError], str]] = {
    "SELECT COUNT(*) AS c FROM t WHERE d = TIMESTAMP '2020-01-01 00:00:00'": (
        BOTH, pp.UnsupportedQueryError,
        ("a DATE compared with a TIMESTAMP is read as TRY_CAST(d AS TIMESTAMP), which the "
         "portable subset does not carry over")),
    "SELECT COUNT(*) FILTER (WHERE x + 1 > 2) AS c FROM t": (
        BOTH, pp.UnsupportedQueryError, "arithmetic on a float column: no bound on its value"),
    "SELECT COUNT(*) FILTER (WHERE n + 1 > 100) AS c FROM t": (
        frozenset({"postgres"}), pp.UnsupportedQueryError,
        ("TRY(n + 1) on a BIGINT near overflow: PostgreSQL has no NULL-on-overflow addition "
         "(Spark: try_add)")),
    "SELECT COUNT(*) AS c FROM t WHERE lower(s) = 'a'": (
        BOTH, pp.UnsupportedQueryError, "LOWER is not in the portable subset (case mapping)"),
    "SELECT COUNT(*) AS c FROM t WHERE s ILIKE 'a%'": (
        BOTH, pp.UnsupportedQueryError, "ILIKE is not in the portable subset (case folding)"),
    # seven fractional digits: DuckDB (and Spark) truncate, PostgreSQL rounds
    "SELECT COUNT(*) AS c FROM t WHERE ts < TIMESTAMP '2020-01-01 00:00:00.0000009'": (
        BOTH, pp.UnsupportedQueryError, "timestamp text the engines read differently"),
    "SELECT COUNT(*) AS c FROM t WHERE ts < '2020-01-01 00:00:00.0000009'": (
        BOTH, pp.UnsupportedQueryError, "timestamp text the engines read differently"),
    # Spark reads '(BC)' as nothing: the year 2020 AD
    "SELECT COUNT(*) AS c FROM t WHERE d > DATE '2020-01-01 (BC)'": (
        BOTH, pp.UnsupportedQueryError, "date text the engines read differently"),
    "SELECT COUNT(*) AS c FROM t WHERE d > '2020-01-01 (BC)'": (
        BOTH, pp.UnsupportedQueryError, "date text the engines read differently"),
    # Spark fails on these when the statement runs (after the charge)
    "SELECT COUNT(*) AS c FROM t WHERE d < DATE 'infinity'": (
        BOTH, pp.UnsupportedQueryError, "date text only DuckDB and PostgreSQL read"),
    "SELECT COUNT(*) AS c FROM t WHERE ts < TIMESTAMP '2020-01-01 24:00:00'": (
        BOTH, pp.UnsupportedQueryError, "timestamp text only DuckDB and PostgreSQL read"),
    "SELECT COUNT(*) AS c FROM z WHERE tz > TIMESTAMP '2020-01-01 00:00:00'": (
        BOTH, pp.PolicyError,
        ("a timestamp with time zone read as the policy's timestamp: a conversion that "
         "depends on the time zone, DuckDB only")),
}
LISTED = [(sql, ONE) for sql in REMOTE_REFUSED]


# -- the same rows in each engine ------------------------------------------------------------
@pytest.fixture(scope="module")
def edge_duckdb(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("edges") / "edges.duckdb"
    with duckdb.connect(str(path)) as con:
        for name, frame, types in (("t", edge_frame(), TYPES), ("z", tz_frame(), TZ_TYPES)):
            rows = spark_session.arrow_table(frame, types)  # (exact values, these types)
            con.register("rows", rows)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM rows")
            con.unregister("rows")
    return str(path)


@pytest.fixture(scope="module")
def edge_postgres(pg_url: str) -> str:
    postgres_server.load_frame(pg_url, "t", edge_frame(), TYPES)
    postgres_server.load_frame(pg_url, "z", tz_frame(), TZ_TYPES)
    return pg_url


@pytest.fixture(scope="module")
def edge_spark(spark: Any) -> Iterator[Any]:
    spark_session.load_frame(spark, "t", edge_frame(), TYPES)
    spark_session.load_frame(spark, "z", tz_frame(), TZ_TYPES)
    yield spark
    for name in ("t", "z"):
        spark.catalog.dropTempView(name)


def _remote(request: pytest.FixtureRequest, engine: str) -> Any:
    """The loaded remote database of ``engine`` (a PostgreSQL URL or the SparkSession)."""
    return request.getfixturevalue({"postgres": "edge_postgres", "spark": "edge_spark"}[engine])


def test_frames_hold_the_edges() -> None:
    """The data itself: each edge value on its own number of rows, units of 1 to 6 rows."""
    frame = edge_frame()
    assert len(frame) == ROWS
    x = frame["x"].tolist()
    assert sum(v is None for v in x) == 2
    assert sum(isinstance(v, float) and math.isnan(v) for v in x) == 3
    negzero = [v for v in x if isinstance(v, float) and v == 0 and np.signbit(v)]
    assert len(negzero) == 6
    assert frame["s"].tolist().count(NFD) == 7 and frame["s"].tolist().count(NFC) == 6
    assert frame["ts"].tolist().count(MIDNIGHT) == 2
    assert frame["ts"].tolist().count(MIDNIGHT + MICRO) == 3
    sizes = frame["uid"].dropna().value_counts()
    assert sizes.max() == 6 and sizes.min() >= 1 and frame["uid"].isna().sum() == 3


# -- answers ---------------------------------------------------------------------------------
def _run(database: Any, level: str, queries: list[tuple[str, dict[str, Any]]],
         ) -> list[tuple[str, Any, Any]]:
    """Each query's outcome in one session: ("ok", frame, (cost, query cost, spent after))
    or ("refused", error class, message)."""
    out: list[tuple[str, Any, Any]] = []
    with pp.connect(database, policy=_policy(level), budget=pp.ApproxDP(1000, 1e-2)) as sess:
        for i, (sql, budget) in enumerate(queries):
            try:
                with seeded_noise(1000 + i):
                    res = sess.sql(sql, **budget)
            except pp.PrivplanError as err:
                out.append(("refused", type(err), str(err)))
                continue
            out.append(("ok", res.df, (res.cost, res.query_cost, sess.spent())))
    return out


_REFERENCE: dict[tuple[str, str, tuple[str, ...]], list[tuple[str, Any, Any]]] = {}


def _duckdb_answers(path: str, level: str, queries: list[tuple[str, dict[str, Any]]],
                    ) -> list[tuple[str, Any, Any]]:
    """DuckDB's outcomes (computed once per list and level, for both remote engines)."""
    key = (path, level, tuple(sql for sql, _ in queries))
    if key not in _REFERENCE:
        _REFERENCE[key] = _run(path, level, queries)
    return _REFERENCE[key]


def _same(engine: str, level: str, queries: list[tuple[str, dict[str, Any]]],
          want: list[tuple[str, Any, Any]], got: list[tuple[str, Any, Any]]) -> None:
    for (sql, _), (wk, wv, wc), (gk, gv, gc) in zip(queries, want, got, strict=True):
        where = f"{engine} ({level} level): {sql}"
        assert wk == "ok", f"DuckDB refused {sql}: {wc}"
        assert gk == "ok", f"{where}: refused ({gv.__name__}: {gc})"
        pd.testing.assert_frame_equal(gv, wv, obj=where)
        for column in gv.columns:  # -0.0 and 0.0 compare equal: the sign must agree too
            if gv[column].dtype.kind == "f":  # (a NaN's sign bit means nothing)
                a, b = gv[column].to_numpy(), wv[column].to_numpy()
                assert list(np.signbit(a[~np.isnan(a)])) == list(np.signbit(b[~np.isnan(b)])), (
                    f"{where}: {column}")
        assert gc == wc, f"{where}: (cost, query cost, spent) {gc} != DuckDB's {wc}"


@pytest.mark.parametrize("level", ["row", "user"])
@pytest.mark.parametrize("engine", ["postgres", "spark"])
def test_same_answers_and_costs(edge_duckdb: str, engine: str, level: str,
                                request: pytest.FixtureRequest) -> None:
    _same(engine, level, QUERIES, _duckdb_answers(edge_duckdb, level, QUERIES),
          _run(_remote(request, engine), level, QUERIES))


@pytest.mark.slow
@pytest.mark.parametrize("level", ["row", "user"])
@pytest.mark.parametrize("engine", ["postgres", "spark"])
def test_same_answers_and_costs_more_edges(edge_duckdb: str, engine: str, level: str,
                                           request: pytest.FixtureRequest) -> None:
    _same(engine, level, SLOW_QUERIES, _duckdb_answers(edge_duckdb, level, SLOW_QUERIES),
          _run(_remote(request, engine), level, SLOW_QUERIES))


@pytest.mark.parametrize("engine", ["postgres", "spark"])
def test_refused_remotely_before_any_charge(edge_duckdb: str, engine: str,
                                            request: pytest.FixtureRequest) -> None:
    """What one remote engine refuses: refused there with the listed class, nothing charged;
    where it is not refused, DuckDB's answer and cost; DuckDB answers every one."""
    want = _duckdb_answers(edge_duckdb, "user", LISTED)
    database = _remote(request, engine)
    with pp.connect(database, policy=_policy("user"), budget=pp.ApproxDP(1000, 1e-2)) as sess:
        for i, (sql, budget) in enumerate(LISTED):
            engines, error, why = REMOTE_REFUSED[sql]
            assert want[i][0] == "ok", f"DuckDB refused {sql}: {want[i][2]}"
            before = sess.spent()
            if engine in engines:
                with pytest.raises(error), seeded_noise(1000 + i):
                    sess.sql(sql, **budget)
                assert sess.spent() == before, f"{engine} charged the refused {sql} ({why})"
                continue
            with seeded_noise(1000 + i):
                res = sess.sql(sql, **budget)
            pd.testing.assert_frame_equal(res.df, want[i][1], obj=f"{engine}: {sql}")
            assert res.query_cost == want[i][2][1], f"{engine}: {sql}"


# -- the sign of a zero key (a difference found here, reported, not fixed) --------------------
ZERO_KEY = "SELECT x, COUNT(*) AS c FROM t GROUP BY x"
# The analysis takes -0.0 and 0.0 as one value, so they are one group; DuckDB and PostgreSQL
# keep the sign of the first zero they meet (Spark writes 0.0). Released as it came, the sign
# would be a bit about one row, without noise: every engine releases the group's key as 0.0.


def _zero_key_signs(database: Any, policy: pp.Policy) -> list[bool]:
    """The sign bits of the zero keys ``ZERO_KEY`` releases (noise off)."""
    budget = pp.ApproxDP(1000, 1e-2)
    with pp.connect(database, policy=policy, budget=budget) as sess, noise_disabled():
        keys = sess.sql(ZERO_KEY, **GROUPS).df["x"].to_numpy()
    return [bool(v) for v in np.signbit(keys[keys == 0])]


def test_zero_key_sign_does_not_depend_on_the_row_order() -> None:
    policy = pp.Policy.from_dict({"tables": {"t": {"columns": {
        "x": {"type": "float", "lower": -10, "upper": 10}}}}})
    signs = []
    for first in (-0.0, 0.0):  # the same rows, the first zero negative or positive
        with duckdb.connect() as con:
            con.execute("CREATE TABLE t (x DOUBLE)")
            con.executemany("INSERT INTO t VALUES (?)", [[first], [-first]] * 20)
            signs.append(_zero_key_signs(con, policy))
    assert signs[0] == signs[1] == [False]


@pytest.mark.parametrize("engine", ["postgres", "spark"])
def test_zero_key_sign_is_duckdbs(edge_duckdb: str, engine: str,
                                  request: pytest.FixtureRequest) -> None:
    want = _zero_key_signs(edge_duckdb, _policy("row"))
    assert want == [False]  # (the first zero stored in t is -0.0: released as 0.0)
    assert _zero_key_signs(_remote(request, engine), _policy("row")) == want


# -- noise off: the exact answers --------------------------------------------------------------
def _clamp(column: str, lo: float, hi: float) -> str:
    """``column`` clamped to [lo, hi] as the policy says: NULL stays NULL (DuckDB's GREATEST
    skips a NULL argument), NaN compares above every number (so it becomes hi)."""
    return f"CASE WHEN {column} IS NOT NULL THEN LEAST(GREATEST({column}, {lo}), {hi}) END"


def _grid(column: str, lo: float, hi: float, scale: int) -> str:
    """The clamped value on the SUM grid: a multiple of 1/scale, rounded half to even (DuckDB's
    cast of a DOUBLE to BIGINT)."""
    return f"CAST(({_clamp(column, lo, hi)}) * {scale} AS BIGINT)"


_COUNTS = ("SELECT COUNT(*) FILTER (WHERE x > 1e308) AS big, "
           "COUNT(*) FILTER (WHERE x <> x) AS nan, COUNT(*) FILTER (WHERE x = 0.0) AS zero, "
           "COUNT(*) FILTER (WHERE x < -1e300) AS below, "
           "COUNT(*) FILTER (WHERE n = 9.007199254740993e15) AS as_double, "
           f"COUNT(*) FILTER (WHERE s = '{NFD}') AS nfd, COUNT(*) FILTER (WHERE s < 'B') AS lt_b, "
           "COUNT(*) FILTER (WHERE ts = TIMESTAMP '2020-01-01 00:00:00.000001') AS micro "
           "FROM t")
# (privplan query, plain SQL on DuckDB over the clamped values); the counts are their own oracle
EXACT: list[tuple[str, str]] = [
    ("SELECT COUNT(*) AS c, COUNT(x) AS cx, SUM(x) AS sx, SUM(h) AS sh, SUM(n) AS sn FROM t",
     (f"SELECT COUNT(*) AS c, COUNT(x) AS cx, SUM({_grid('x', -10, 10, 100000)}) / 100000 "
      f"AS sx, SUM({_grid('h', -2, 2, 2)}) / 2 AS sh, SUM({_clamp('n', -100, 100)}) AS sn "
      "FROM t")),
    (_COUNTS, _COUNTS),
    ("SELECT k, COUNT(*) AS c, SUM(n) AS sn FROM t GROUP BY k",
     (f"SELECT k, COUNT(t.k) AS c, COALESCE(SUM({_clamp('n', -100, 100)}), 0) AS sn "
      "FROM (SELECT unnest($keys) AS k) AS keys LEFT JOIN t USING (k) GROUP BY k")),
]


@pytest.mark.parametrize("engine", ["duckdb", "postgres", "spark"])
def test_noise_off_answers_are_the_clamped_sums(edge_duckdb: str, engine: str,
                                                request: pytest.FixtureRequest) -> None:
    """With noise off, each engine's row-level answer is plain SQL over the clamped values
    (on DuckDB, the reference): the edge rows are counted and clamped as the policy says."""
    database = edge_duckdb if engine == "duckdb" else _remote(request, engine)
    with duckdb.connect(edge_duckdb, read_only=True) as con:
        wants = [con.execute(oracle, {"keys": PUBLIC_K} if "$keys" in oracle else None).df()
                 for _, oracle in EXACT]
    with pp.connect(database, policy=_policy("row"), budget=pp.ApproxDP(1000, 1e-2)) as sess:
        for (sql, _), want in zip(EXACT, wants):
            with noise_disabled():
                got = sess.sql(sql, **ONE).df
            keyed = "k" in want.columns
            if keyed:
                got, want = (f.set_index("k").loc[PUBLIC_K].reset_index() for f in (got, want))
            assert list(got.columns) == list(want.columns), sql
            for column in want.columns:
                g, w = got[column].tolist(), want[column].tolist()
                if column == "k":
                    assert g == w, sql
                else:  # (the grid sums are exact: equal as numbers, whatever the dtype)
                    assert [float(v) for v in g] == pytest.approx([float(v) for v in w],
                                                                  rel=1e-12, abs=1e-9), (
                        f"{engine}: {sql}: {column}")


def test_noise_off_sees_the_edges(edge_duckdb: str) -> None:
    """The exact values above are the edges themselves (a check of the oracle and the data)."""
    with duckdb.connect(edge_duckdb, read_only=True) as con:
        row = con.execute(_COUNTS).fetchone()
    # x > 1e308: +inf (4 rows) and NaN (3); x <> x: none (NaN = NaN in DuckDB); x = 0.0: -0.0
    # (6) and 0.0 (7); x < -1e300: -inf (5), not -1e300 itself; n = 2^53 as a double: 2^53 (8)
    # and 2^53 + 1 (9); 'e' + accent (7); below 'B' by code point: 'A' (3), '' (9), ' a' (14);
    # one microsecond after midnight (3)
    assert row == (7, 0, 13, 5, 17, 7, 3 + 9 + 14, 3)
