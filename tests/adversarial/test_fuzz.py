"""SQL fuzz of privplan's public boundary: every input ends in a ``PrivplanError`` or in a
correctly charged answer, and admissibility never depends on the data (DESIGN.md §4).

Inputs
------
Two generators, one fixed seed each run:

* **grammar**: queries in and around privplan's subset, over a schema that covers every
  policy type (``t``: int/float/str/bool/date/timestamp columns, some stored in another
  engine type, a NOCASE column, an unsigned one), the demo ``visits`` table, the PUMS table
  (str columns stored as BIGINT), two user-level tables (``tu``, ``tv``: bounded copies, a
  private join on the unit) and public tables (``pub``, ``hospitals``, ``pubdup`` whose key
  is not unique). SELECT lists of COUNT/SUM/AVG/VAR/STDDEV (and aggregates outside the list)
  with FILTER, CASE arguments and arithmetic on aggregates; WHERE with comparisons, IN,
  BETWEEN, LIKE/GLOB/SIMILAR TO/regexp, IS [NOT] NULL/TRUE, NOT/AND/OR; GROUP BY columns, CASE
  and expressions (by expression, alias or position); HAVING, ORDER BY, LIMIT/OFFSET; UNION
  ALL; public joins; casts; functions from the allow-list of ``privplan.sql.totality`` and
  outside it; literals of every kind with edge values (int64/int128 limits, NaN, ±inf, -0.0,
  denormals, 40-digit decimals, infinite and far dates, NFD/emoji/zero-width strings); and a
  share of statements outside the subset (subqueries, CTEs, windows, DDL, table functions,
  sampling, set operations, the BigQuery ``WITH DIFFERENTIAL_PRIVACY`` clause).
* **mutation**: the queries of ``sql_examples/*.sql`` with one to three mutations each: token
  deletion / duplication / swap, literal replacement with edge values, keyword insertion, deep
  nesting (parentheses, NOT, functions, CASE), long AND chains and IN lists, unbalanced quotes
  and parentheses, huge literals, unicode (homoglyphs, fullwidth letters, zero-width and
  bidi marks, combining marks, lone surrogates), NUL bytes, comments and statement tails.

Each query carries a budget: mostly ordinary values of the session's kind, sometimes odd ones
(1e-300, 1e300, 0, negative, NaN, inf, strings, booleans, Decimal, Fraction, the wrong
parameter, none, two). Sessions are PureDP / ApproxDP / zCDP / GDP with huge budgets, plus a
few with tiny budgets so that BudgetExceededError appears; a fresh pair every ``BATCH``
queries.

Oracles (for every query, each run on two sessions over two datasets with the same schema and
policy: ``edge`` = ordinary rows + edge values; the other alternates per batch between
``empty`` and ``plain`` = other ordinary rows; public tables are identical)
-------------------------------------------------------------------------------------------
1. *only PrivplanErrors*: ``explain`` and ``sql`` succeed or raise a ``PrivplanError``, never
   an ``InternalError`` (its ``__cause__`` is printed) nor anything else;
2. *admissibility does not depend on the data*: both sessions answer, or both refuse with the
   same error class (and message) before the charge; a refusal spends nothing (ledger and
   ``spent()`` unchanged); after the charge only a ``PostProcessingError`` is allowed (it must
   be charged); an ``ExecutionError`` is a failure (engine statements are meant to be total);
3. *explain and sql agree*: explain refuses → sql refuses with the same class, spending
   nothing; explain accepts within budget → sql does not refuse before the charge; explain
   accepts over budget → sql raises BudgetExceededError;
4. *charged when answered*: ``res.cost`` equals the marginal cost ``explain`` projected just
   before, ``spent()`` afterwards equals its projected total, and both datasets are charged
   the same (and their answers have the same columns).

Besides: a query that does not finish within ``QUERY_TIMEOUT`` (explain + sql on both
datasets) is a failure (``hang``), and so is one that kills the process. So queries run in
spawned worker processes (two, one per core), batch by batch; the parent kills a worker that
hangs and goes on with the rest of its batch in a new one (warnings are errors there, as in
the suite's ``filterwarnings``, so a warning inside privplan shows as an InternalError, as it
would in-process under pytest). Each run also includes ``PINNED``
inputs (a 5,000-digit integer, a 1e99999999 literal, 5,000 nested parentheses or NOTs, NUL
bytes, a lone surrogate, a 200,000-character string, ...) that the mutations reach only
rarely, and ``REGRESSIONS``: the minimal reproducers of what earlier runs of this fuzz found
(in the first batches, whose sessions take the kind each needs), so every seed checks them.

Failures are grouped by kind (and cause); each group's first query is shrunk automatically in
fresh sessions, keeping the same failure kind and cause (drop a clause, a list item, an
AND/OR operand, a call; unwrap a call; then delete token spans), and the report shows both
datasets' outcomes. ``python tests/adversarial/test_fuzz.py [N] [seed]`` prints the full
report (default: the slow run).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import random
import re
import sys
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import pytest

import privplan as pp
from privplan.demo.data import generate_hospitals, generate_visits
from privplan.errors import ExecutionError, InternalError, PostProcessingError
from privplan.explain import Explanation as _Expl
from privplan.testing import noise_disabled

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "sql_examples"

SLOW_SEED, SLOW_QUERIES = 20_240_607, 2_000
FAST_SEED, FAST_QUERIES = 4_711, 150
BATCH = 40
"""Queries per session pair before a fresh one (the accountant's work grows with history)."""

SHRINK_GROUPS = 12
"""At most this many failure groups get a shrunk reproducer."""

SHRINK_RUNS = 150
"""Fresh-session runs spent shrinking one group's query (at most)."""

SHRINK_GROUP_SECONDS = 20.0
"""Time spent shrinking one group's query (at most)."""

# -----------------------------------------------------------------------------------------------
# Schema, policy and datasets
# -----------------------------------------------------------------------------------------------

T_COLUMNS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # name: (engine type, policy type, policy options)
    "i": ("BIGINT", "int", {"lower": -1000, "upper": 1000}),
    "f": ("DOUBLE", "float", {"lower": -1e6, "upper": 1e6}),
    "s": ("VARCHAR", "str", {"public_values": ["a", "b", "A", "é"]}),
    "u": ("VARCHAR", "str", {}),
    "b": ("BOOLEAN", "bool", {}),
    "d": ("DATE", "date", {"lower": "2000-01-01", "upper": "2030-12-31"}),
    "ts": ("TIMESTAMP", "timestamp", {}),
    "n": ("BIGINT", "int", {}),
    "v": ("VARCHAR", "int", {"lower": 0, "upper": 100}),      # read through TRY_CAST
    "h": ("UBIGINT", "int", {"lower": 0, "upper": 1_000_000}),  # read as HUGEINT
    "dc": ("DECIMAL(18,3)", "float", {"lower": -100, "upper": 100}),
    "ci": ("VARCHAR COLLATE NOCASE", "str", {"public_values": ["x", "y", "X"]}),
    "tn": ("TIMESTAMP_NS", "timestamp", {}),
}

VISITS_ENGINE = {"visit_id": "BIGINT", "patient_id": "BIGINT", "hospital": "VARCHAR",
                 "department": "VARCHAR", "visit_date": "DATE", "age": "INTEGER",
                 "sex": "VARCHAR", "cost": "DOUBLE", "length_of_stay": "INTEGER",
                 "insured": "BOOLEAN"}
PUMS_COLUMNS = ("age", "sex", "educ", "race", "income", "married")


def _policy() -> pp.Policy:
    fmt = _examples()
    d = fmt.demo_policy().to_dict()
    d["tables"].update(fmt.pums_policy().to_dict()["tables"])
    d["tables"]["t"] = {"privacy_unit": "row", "columns": {
        name: {"type": kind, **opts} for name, (_, kind, opts) in T_COLUMNS.items()}}
    d["tables"]["tu"] = {"privacy_unit": "uid", "max_rows_per_unit": 3, "columns": {
        "uid": {"type": "int"}, "x": {"type": "int", "lower": 0, "upper": 10},
        "g": {"type": "str", "public_values": ["p", "q"]},
        "w": {"type": "float", "lower": 0, "upper": 1}}}
    d["tables"]["tv"] = {"privacy_unit": "uid", "max_rows_per_unit": 1, "columns": {
        "uid": {"type": "int"}, "area": {"type": "str", "public_values": ["n", "s"]},
        "score": {"type": "int", "lower": 0, "upper": 5}}}
    d["tables"]["pub"] = {"public": True}
    d["tables"]["pubdup"] = {"public": True}
    return pp.Policy.from_dict(d)


def _sql_value(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


def _ordinary_t(rng: random.Random, rows: int) -> list[str]:
    out = []
    for _ in range(rows):
        vals = [rng.randint(-50, 50), round(rng.uniform(-1000, 1000), 3),
                rng.choice(["a", "b", "A", "é", None]), rng.choice(["x", "yy", "zzz", "a", None]),
                rng.choice([True, False, None]),
                f"20{rng.randint(0, 29):02d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                (f"20{rng.randint(0, 29):02d}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} "
                f"{rng.randint(10, 23)}:{rng.randint(10, 59)}:00"),
                rng.randint(-10**6, 10**6), str(rng.randint(0, 100)), rng.randint(0, 10**6),
                round(rng.uniform(-100, 100), 3), rng.choice(["x", "y", "X", "Y"]),
                f"2020-01-0{rng.randint(1, 9)} 12:00:00"]
        out.append("(" + ", ".join(_sql_value(v) for v in vals) + ")")
    return out


# edge rows of t, in T_COLUMNS order (SQL text: typed by the INSERT)
T_EDGE_ROWS = [
    "(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    ("(9223372036854775807, 'nan', 'a', '', TRUE, 'infinity', 'infinity', 9223372036854775807,"
    " '99999999999999999999', 18446744073709551615, 999999999999999.999, 'X', '2262-04-11')"),
    ("(-9223372036854775808, 'inf', 'b', 'e\u0301', FALSE, '-infinity', '-infinity',"
    " -9223372036854775808, 'abc', 0, -999999999999999.999, 'x', '1677-09-22')"),
    ("(0, '-inf', 'A', repeat('z', 3000), NULL, DATE '5877642-06-25',"
    " TIMESTAMP '294247-01-10 04:00:54.775806', 0, '-1', 9223372036854775808, 0, 'Y ', NULL)"),
    ("(-1, -0.0, '\u00e9', '\U0001F600', TRUE, DATE '5877642-06-25 (BC)',"
    " TIMESTAMP '290309-12-22 (BC) 00:00:00', -1, '1e5', 1, 0.001, '', '1970-01-01')"),
    ("(1000000, 1e308, 'zz', 'NULL', FALSE, '0001-01-01', '0001-01-01 00:00:00',"
    " 4611686018427387904, '0x10', 12345, 99.999, '\u01c5', '2000-02-29 23:59:59')"),
    ("(-1000000, -1.7976931348623157e308, '', chr(0) || 'a', NULL, '2020-02-29',"
    " '2020-02-29 23:59:59.999999', -4611686018427387904, ' 42 ', 4294967296, -100.001,"
    " '\u00df', '2000-01-01')"),
    ("(5, 5e-324, 'a ', 'a%_\\', TRUE, '1970-01-01', '1970-01-01', 7, '007', 100, 50.5,"
    " '\u0130', '1970-01-01')"),
    ("(1000, 1000000.0000001, 'A', '2020-01-01', FALSE, '2030-12-31', '2030-12-31 23:59:59',"
    " -9223372036854775807, '2147483648', 1000000, 100, 'x', '2030-01-01')"),
]

VISITS_EDGE_ROWS = [
    "(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    ("(9223372036854775807, -1, 'a', 'Cardiology', 'infinity', 2147483647, 'X', 'nan',"
    " 2147483647, NULL)"),
    "(-9223372036854775808, 0, 'E', '', '-infinity', -2147483648, '', 'inf', -2147483648, TRUE)",
    "(1, 1, 'A', 'oncology', DATE '5877642-06-25', -1, 'F', '-inf', -1, FALSE)",
    "(2, 2, 'B ', 'pediatrics', '0001-01-01', 101, 'M', 1e308, 31, TRUE)",
    "(3, 3, '\u00c1', 'e\u0301mergency', '2023-06-01', 0, 'f', -0.0, 0, NULL)",
    "(4, 4, 'D', 'orthopedics', '2024-12-31', 100, 'M', 5e-324, 30, FALSE)",
]

PUMS_EDGE_ROWS = [
    "(NULL, NULL, NULL, NULL, NULL, NULL)",
    "(-5, 2, 99, 7, 9223372036854775807, 2)",
    "(200, -1, 0, 0, -9223372036854775808, NULL)",
    "(2147483648, 1, -9223372036854775808, 1, 0, 1)",
]

TU_EDGE_ROWS = (["(NULL, 1, 'p', 0.5)", "(9223372036854775807, 2147483647, 'q', 'nan')",
                 "(-9223372036854775808, -2147483648, 'Q', 'inf')", "(5, NULL, NULL, -0.0)"]
                + [f"(7, {k}, 'p', 1e308)" for k in range(12)])
TV_EDGE_ROWS = ["(NULL, 'n', 1)", "(9223372036854775807, 's', 2147483647)",
                "(7, 'N', -1)", "(7, 's', 3)", "(5, NULL, NULL)"]

PUB_ROWS = ["('a', 1, 'north', 1, DATE '2020-01-01')", "('b', 2, 'south', 2, '2021-01-01')",
            "('A', 3, 'north', 3, '2022-01-01')", "('é', -1, 'east', NULL, 'infinity')",
            "('zz', 9223372036854775807, NULL, 5, '2030-12-31')",
            "(NULL, NULL, 'west', 6, NULL)"]
PUBDUP_ROWS = ["('a', 'p'), ('a', 'q'), ('b', 'r')"]

DATASETS = ("edge", "empty", "plain")


@dataclass(frozen=True)
class Data:
    """The DDL/DML that builds one dataset (cached per process)."""

    statements: tuple[str, ...]
    frames: dict[str, Any]


_DATA_CACHE: dict[str, Data] = {}
_EXAMPLES_MODULE: Any = None


def _examples() -> Any:
    global _EXAMPLES_MODULE
    if _EXAMPLES_MODULE is None:
        spec = importlib.util.spec_from_file_location("sql_example_format",
                                                      EXAMPLES / "example_format.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(spec.name, module)
        spec.loader.exec_module(module)
        _EXAMPLES_MODULE = module
    return _EXAMPLES_MODULE


def _dataset(name: str) -> Data:
    if name in _DATA_CACHE:
        return _DATA_CACHE[name]
    cols = ", ".join(f'"{c}" {t}' for c, (t, _, _) in T_COLUMNS.items())
    stmts = [f"CREATE TABLE t({cols})",
             "CREATE TABLE visits(" + ", ".join(f"{c} {t}" for c, t in VISITS_ENGINE.items())
             + ")",
             'CREATE SCHEMA "PUMS"',
             'CREATE TABLE "PUMS"."PUMS"(' + ", ".join(f"{c} BIGINT" for c in PUMS_COLUMNS) + ")",
             "CREATE TABLE tu(uid BIGINT, x INTEGER, g VARCHAR, w DOUBLE)",
             "CREATE TABLE tv(uid BIGINT, area VARCHAR, score INTEGER)",
             "CREATE TABLE pub(s VARCHAR, k BIGINT, region VARCHAR, w INTEGER, dd DATE)",
             "INSERT INTO pub VALUES " + ", ".join(PUB_ROWS),
             "CREATE TABLE pubdup(s VARCHAR, tag VARCHAR)",
             "INSERT INTO pubdup VALUES " + ", ".join(PUBDUP_ROWS),
             ("CREATE TABLE hospitals AS SELECT CAST(hospital AS VARCHAR) AS hospital, "
             "CAST(region AS VARCHAR) AS region, CAST(beds AS INTEGER) AS beds FROM __hosp")]
    frames: dict[str, Any] = {"__hosp": generate_hospitals()}
    rng = random.Random(name)
    if name != "empty":
        n_visits = 150 if name == "edge" else 40
        frames["__visits"] = generate_visits(rows=n_visits, seed=11 if name == "edge" else 12)
        stmts.append("INSERT INTO visits SELECT " + ", ".join(
            f"CAST({c} AS {t})" for c, t in VISITS_ENGINE.items()) + " FROM __visits")
        csv = str(EXAMPLES / "data" / "PUMS.csv").replace("'", "''")
        limit, offset = (100, 0) if name == "edge" else (30, 500)
        stmts.append(f"INSERT INTO \"PUMS\".\"PUMS\" SELECT * FROM read_csv_auto('{csv}') "
                     f"LIMIT {limit} OFFSET {offset}")
        stmts.append("INSERT INTO t VALUES " + ", ".join(
            _ordinary_t(rng, 30 if name == "edge" else 8)))
        stmts.append("INSERT INTO tu VALUES " + ", ".join(
            f"({rng.randint(1, 10)}, {rng.randint(0, 10)}, '{rng.choice('pq')}', "
            f"{rng.random():.3f})" for _ in range(25 if name == "edge" else 6)))
        stmts.append("INSERT INTO tv VALUES " + ", ".join(
            f"({k}, '{rng.choice('ns')}', {rng.randint(0, 5)})" for k in range(1, 11)))
    if name == "edge":
        stmts += ["INSERT INTO t VALUES " + ", ".join(T_EDGE_ROWS),
                  "INSERT INTO visits VALUES " + ", ".join(VISITS_EDGE_ROWS),
                  'INSERT INTO "PUMS"."PUMS" VALUES ' + ", ".join(PUMS_EDGE_ROWS),
                  "INSERT INTO tu VALUES " + ", ".join(TU_EDGE_ROWS),
                  "INSERT INTO tv VALUES " + ", ".join(TV_EDGE_ROWS)]
    data = Data(tuple(stmts), frames)
    _DATA_CACHE[name] = data
    return data


def _connection(name: str) -> duckdb.DuckDBPyConnection:
    data = _dataset(name)
    con = duckdb.connect(":memory:")
    for k, frame in data.frames.items():
        con.register(k, frame)
    for stmt in data.statements:
        con.execute(stmt)
    for k in data.frames:
        con.unregister(k)
    return con


_POLICY: pp.Policy | None = None


def _session(dataset: str, budget: Any) -> pp.Session:
    global _POLICY
    if _POLICY is None:
        _POLICY = _policy()
    return pp.connect(_connection(dataset), policy=_POLICY, budget=budget)


# -----------------------------------------------------------------------------------------------
# Literal pools (edge values of every kind)
# -----------------------------------------------------------------------------------------------

INT_LITS = ["0", "1", "-1", "18", "7", "100", "1000", "-1000", "2147483647", "-2147483648",
            "2147483648", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
            "18446744073709551615", "170141183460469231731687303715884105727",
            "-170141183460469231731687303715884105728", "340282366920938463463374607431768211456",
            "100000000000000000000000000000000000000000", "007", "1_000", "0x1F",
            "CAST(1 AS HUGEINT)", "CAST(255 AS UTINYINT)", "-0", "(-(-3))"]
FLOAT_LITS = ["0.0", "-0.0", "1.5", "0.1", ".5", "5.", "1e0", "1e308", "1.7976931348623157e308",
              "1e309", "-1e309", "5e-324", "1e-400", "123456789.123456789",
              "1.00000000000000000000000000000000000000001", "99999999999999999999.999",
              "CAST('nan' AS DOUBLE)", "CAST('inf' AS DOUBLE)", "CAST('-inf' AS DOUBLE)",
              "'NaN'::DOUBLE", "CAST(1.5 AS FLOAT)", "CAST(1.5 AS DECIMAL(4,1))",
              "CAST(99999.999 AS DECIMAL(8,3))", "18.5", "-1e-10", "1e18", "9.2233720368547758e18"]
STR_LITS = ["''", "' '", "'a'", "'A'", "'b'", "'a '", "'\u00e9'", "'e\u0301'", "'\U0001F600'",
            "'x'", "'X'", "'y'", "'zz'", "'O''Brien'", "'%'", "'_'", "'\\'", "'\u01c5'", "'\u00df'",
            "'\u0130'", "'\u200b'", "'NULL'", "'1'", "'01'", "'1e5'", "'nan'", "'inf'",
            "'2020-01-01'", "'true'", "'" + "x" * 300 + "'", "'a\nb'", "'\u202etxt'",
            "'\ufeff'", "'p'", "'q'", "'n'", "'F'", "'M'", "'oncology'", "'cardiology'"]
BOOL_LITS = ["TRUE", "FALSE", "NULL", "'t'", "'yes'", "1", "CAST(NULL AS BOOLEAN)"]
DATE_LITS = ["DATE '2020-01-01'", "DATE '2023-06-15'", "DATE '0001-01-01'", "DATE '9999-12-31'",
             "DATE 'infinity'", "DATE '-infinity'", "DATE '294247-01-10'",
             "DATE '5877642-06-25'", "DATE '2020-02-30'", "'2024-01-01'", "'2020-13-01'",
             "DATE '1970-01-01 (BC)'", "CAST('2020-01-01' AS DATE)", "'not a date'",
             "DATE '2000-01-01'", "DATE '2030-12-31'", "make_date(2020, 1, 1)"]
TS_LITS = ["TIMESTAMP '2020-01-01 00:00:00'", "TIMESTAMP '2020-01-01 00:00:00.000001'",
           "TIMESTAMP 'infinity'", "TIMESTAMP '-infinity'",
           "TIMESTAMP '294247-01-10 04:00:54.775806'", "TIMESTAMP '1677-09-21 00:12:43.145225'",
           "TIMESTAMPTZ '2020-01-01 00:00:00+05'", "'2020-01-01T10:00:00'", "'2020-01-01 25:00'",
           "TIMESTAMP_NS '2020-01-01 00:00:00.123456789'", "TIMESTAMP '2030-12-31 23:59:59'"]
INTERVAL_LITS = ["INTERVAL 1 DAY", "INTERVAL '1' YEAR", "INTERVAL 2147483647 DAY",
                 "INTERVAL '1000000000 years'", "INTERVAL '-1 microsecond'", "INTERVAL 0 DAY"]
PATTERNS = ["'a%'", "'%'", "'_'", "'%a%'", "''", "'['", "'('", "'\\'", "'a*'", "'[z-a]'",
            "'(?i)a'", "'.*'", "'\u00e9%'", "'%\U0001F600'", "'a\\%'", "NULL",
            "'" + "%_" * 50 + "'"]
LIMITS = ["0", "1", "2", "3", "10", "-1", "9223372036854775807", "9223372036854775808",
          "18446744073709551616", "'1'", "1.5", "NULL", "'abc'", "(1+1)", "100000000000000000000",
          "1e400", "CAST(2 AS HUGEINT)", "2 * 3", "abs(-2)"]

ALLOWED_NUM_FUNCS = ["abs({})", "floor({})", "ceil({})", "round({})", "round({}, 2)",
                     "round({}, -1)", "trunc({})", "sign({})", "sqrt({})", "ln({})", "log({})",
                     "exp({})", "pow({}, 2)", "power({}, 0.5)", "greatest({}, 0)",
                     "least({}, 1)", "coalesce({}, 0)", "nullif({}, 0)", "isnan({})::INT",
                     "TRY_CAST({} AS INTEGER)", "CAST({} AS DOUBLE)", "CAST({} AS VARCHAR)"]
OFF_NUM_FUNCS = ["factorial({})", "gcd({}, 6)", "lcm({}, 4)", "bit_count({})", "cbrt({})",
                 "atan2({}, 1)", "degrees({})", "even({})", "gamma({})", "lgamma({})",
                 "CAST({} AS INTEGER)", "CAST({} AS UTINYINT)", "CAST({} AS DECIMAL(3,1))",
                 "{}::BIGINT", "xor({}, 1)", "{} << 70", "{} >> 1", "{} & 3", "hash({})",
                 "error('boom')", "try({} // 0)", "TRY({} * 9223372036854775807)",
                 "to_base({}, 2)", "epoch_ms({})", "random() * {}", "setseed(0.5)",
                 "nextafter({}, 0)", "typeof({})", "{} ** 2", "@{}", "fdiv({}, 0)",
                 "list_value({})[1]", "[{}, 1][1]", "{{'a': {}}}.a"]
ALLOWED_STR_FUNCS = ["lower({})", "upper({})", "trim({})", "ltrim({})", "rtrim({})",
                     "substring({}, 1, 2)", "substr({}, 2)", "left({}, 1)", "right({}, 1)",
                     "replace({}, 'a', 'b')", "concat({}, 'x')", "{} || '-'", "reverse({})",
                     "split_part({}, '-', 1)", "coalesce({}, '')", "nullif({}, '')",
                     "TRY_CAST({} AS VARCHAR)", "CASE WHEN {} IS NULL THEN 'none' ELSE 'some' END"]
OFF_STR_FUNCS = ["repeat({}, 3)", "lpad({}, 5, 'x')", "rpad({}, 1000000, 'x')",
                 "regexp_replace({}, 'a', 'b')", "format('{{}}', {})", "printf('%s', {})",
                 "md5({})", "to_base64(encode({}))", "levenshtein({}, 'a')", "chr(ascii({}))",
                 "unicode({})", "strptime({}, '%Y')", "{} COLLATE NOCASE",
                 "string_split({}, ',')[1]",
                 "regexp_extract({}, '(a)')", "json_extract({}, '$.a')", "ord({})", "hex({})",
                 "translate({}, 'a', 'b')", "strip_accents({})", "nfc_normalize({})",
                 "{}[1]", "array_to_string([{}], ',')", "CAST({} AS INTEGER)", "{}::DATE",
                 "instr({}, 'a')", "position('a' IN {})", "bar(length({}), 0, 10)"]
ALLOWED_DATE_FUNCS = ["year({})", "month({})", "day({})", "quarter({})", "week({})",
                      "dayofweek({})", "dayofyear({})", "isodow({})", "extract(year FROM {})",
                      "date_part('month', {})", "datepart('day', {})", "last_day({})",
                      "date_trunc('month', {})", "date_diff('day', {}, DATE '2020-01-01')",
                      "datediff('year', DATE '2000-01-01', {})", "strftime({}, '%Y-%m')",
                      "monthname({})", "dayname({})", "isfinite({})", "epoch({})",
                      "{} + INTERVAL 1 DAY", "{} - INTERVAL '1' YEAR", "{} + 1", "{} - {}",
                      "CAST({} AS DATE)", "CAST({} AS TIMESTAMP)", "CAST({} AS VARCHAR)"]
OFF_DATE_FUNCS = ["age({})", "date_add({}, INTERVAL 1 DAY)", "make_date(year({}), 13, 1)",
                  "strftime({}, '%Q')", "date_trunc('fortnight', {})", "date_part('eon', {})",
                  "to_timestamp(epoch({}))", "timezone('UTC', {})", "{} AT TIME ZONE 'UTC'",
                  "CAST({} AS TIME)", "{}::TIMESTAMPTZ", "julian({})", "yearweek({})",
                  "extract(epoch FROM {})", "time_bucket(INTERVAL 1 DAY, {})"]

AGG_VALUE_FUNCS = ["SUM", "AVG", "VAR_POP", "VAR_SAMP", "VARIANCE", "STDDEV", "STDDEV_POP",
                   "STDDEV_SAMP"]
OFF_AGGS = ["MIN({})", "MAX({})", "MEDIAN({})", "COUNT(DISTINCT {})", "SUM(DISTINCT {})",
            "string_agg(CAST({} AS VARCHAR), ',')", "list({})", "quantile_cont({}, 0.5)",
            "approx_count_distinct({})", "mode({})", "arg_max({}, 1)", "first({})",
            "product({})", "bit_or(CAST({} AS BIGINT))", "entropy({})", "kurtosis({})",
            "corr({}, 1)", "covar_pop({}, 2)", "SUM(*)", "AVG(DISTINCT {})", "any_value({})",
            "COUNT(ALL {})", "fsum({})", "sumkahan({})", "histogram({})", "bool_or({} > 0)",
            "SUM({}) OVER ()", "COUNT(*) OVER (PARTITION BY 1)", "AVG({} ORDER BY 1)"]

BAD_CONSTANTS = {"DATE '2020-02-30'", "'2020-13-01'", "'not a date'",
                 "'2020-01-01 25:00'", "340282366920938463463374607431768211456",
                 "100000000000000000000000000000000000000000", "0x1F", "1e309", "-1e309",
                 "1e-400", "'t'", "'yes'", "1", "CAST(255 AS UTINYINT)",
                 "TIMESTAMPTZ '2020-01-01 00:00:00+05'",
                 "TIMESTAMP_NS '2020-01-01 00:00:00.123456789'", "'a\nb'"}

KEYWORDS = ["SELECT", "FROM", "WHERE", "GROUP BY", "HAVING", "ORDER BY", "LIMIT", "OFFSET",
            "UNION ALL", "UNION", "DISTINCT", "ALL", "NOT", "AND", "OR", "NULL", "IS", "IN",
            "BETWEEN", "LIKE", "CASE", "WHEN", "THEN", "ELSE", "END", "AS", "JOIN", "ON", "USING",
            "FILTER", "OVER", "WITH", "EXISTS", "CAST", "TRY_CAST", "INTERVAL", "DATE", "*", ",",
            "(", ")", ";", "--", "/*", "=", "<>", "||", "::", "COLLATE", "ESCAPE", "QUALIFY",
            "SAMPLE", "WINDOW", "LATERAL", "RECURSIVE", "TRUE", "FALSE", "DESC", "NULLS FIRST"]


# -----------------------------------------------------------------------------------------------
# The grammar
# -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Join:
    sql: str                       # "JOIN pub p ON x.s = p.s"
    columns: dict[str, str]        # public columns, qualified: {"p.region": "str"}
    keys: tuple[str, ...]          # public group keys (qualified)


@dataclass(frozen=True)
class TableSpec:
    sql: str
    columns: dict[str, str]                      # policy types
    bounded: tuple[str, ...]                     # numeric columns with bounds
    public_keys: tuple[str, ...]                 # public-domain group keys
    joins: tuple[Callable[[str], Join], ...] = ()
    weight: float = 1.0


def _pub_join(col: str, key: str, kind: str = "JOIN") -> Callable[[str], Join]:
    def make(alias: str) -> Join:
        cond = (f"USING ({col})" if key == "using" else f"ON {alias}.{col} = p.{key}")
        table = "pubdup" if key == "dup" else "pub"
        if key == "dup":
            cond = f"ON {alias}.{col} = p.s"
        return Join(f"{kind} {table} p {cond}",
                    {"p.region": "str", "p.w": "int", "p.k": "int", "p.dd": "date"}
                    if table == "pub" else {"p.tag": "str"},
                    ("p.region",) if table == "pub" else ("p.tag",))
    make.wild = key == "dup" or (col, key) == ("s", "k")  # type: ignore[attr-defined]
    return make


def _hosp_join(kind: str = "JOIN") -> Callable[[str], Join]:
    def make(alias: str) -> Join:
        return Join(f"{kind} hospitals h ON {alias}.hospital = h.hospital",
                    {"h.region": "str", "h.beds": "int"}, ("h.region",))
    return make


def _tv_join(alias: str) -> Join:
    return Join(f"JOIN tv z ON {alias}.uid = z.uid", {"z.area": "str", "z.score": "int"},
                ("z.area",))


TABLES = [
    TableSpec("t", {c: k for c, (_, k, _) in T_COLUMNS.items()},
              ("i", "f", "v", "h", "dc"), ("s", "b", "ci"),
              (_pub_join("s", "s"), _pub_join("i", "k"), _pub_join("n", "k"),
               _pub_join("u", "s", "LEFT JOIN"), _pub_join("ci", "s"), _pub_join("v", "k"),
               _pub_join("h", "k"), _pub_join("d", "dd"), _pub_join("f", "k"),
               _pub_join("s", "k"), _pub_join("s", "dup"), _pub_join("s", "using")),
              weight=5),
    TableSpec("visits", {"visit_id": "int", "patient_id": "int", "hospital": "str",
                         "department": "str", "visit_date": "date", "age": "int", "sex": "str",
                         "cost": "float", "length_of_stay": "int", "insured": "bool"},
              ("age", "cost", "length_of_stay"), ("hospital", "department", "sex", "insured"),
              (_hosp_join(), _hosp_join("LEFT JOIN")), weight=2.5),
    TableSpec("PUMS.PUMS", {"age": "int", "sex": "str", "educ": "str", "race": "str",
                            "income": "int", "married": "str"},
              ("age", "income"), (), weight=1),
    TableSpec("tu", {"uid": "int", "x": "int", "g": "str", "w": "float"}, ("x", "w"), ("g",),
              (_tv_join,), weight=1.2),
    TableSpec("tv", {"uid": "int", "area": "str", "score": "int"}, ("score",), ("area",),
              weight=0.5),
]


class Grammar:
    """Random queries in and around privplan's SQL subset.

    A *clean* query uses only constructs privplan should answer (types that match, functions
    on the allow-list, valid patterns, aggregates of bounded columns, consistent GROUP BY and
    aliases): most of them reach the engine, which is where a data-dependent failure would
    show. A *wild* query mixes in everything else (mismatched types, functions outside the
    list, odd aggregates, positions out of range, ...)."""

    CLEAN_NUM = tuple(f for f in ALLOWED_NUM_FUNCS if "CAST({} AS VARCHAR)" not in f)
    CLEAN_PATTERNS = ("'a%'", "'%'", "'_'", "'%a%'", "''", "'\u00e9%'", "'a\\%'", "'x_'",
                      "'%\U0001F600'", "'" + "%_" * 50 + "'")

    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.clean = True
        self.cols: dict[str, str] = {}
        self.bounded: list[str] = []
        self.public_keys: list[str] = []
        self.join_keys: list[str] = []

    # -- helpers ---------------------------------------------------------------------------
    def p(self, prob: float) -> bool:
        return self.r.random() < prob

    def wild(self, prob: float) -> bool:
        """True with probability ``prob`` in a wild query, never in a clean one."""
        return not self.clean and self.r.random() < prob

    def pick(self, seq: Any) -> Any:
        return self.r.choice(seq)

    def lit(self, kind: str) -> str:
        kind = "int" if kind == "num" else kind
        if kind in ("int", "float") and self.p(0.6):
            return str(self.r.randint(-20, 120)) if kind == "int" \
                else f"{self.r.uniform(-10, 10):.2f}"
        pool = {"int": INT_LITS, "float": FLOAT_LITS, "str": STR_LITS, "bool": BOOL_LITS,
                "date": DATE_LITS, "timestamp": TS_LITS}[kind]
        if self.clean:
            pool = [x for x in pool if x not in BAD_CONSTANTS]
        return self.pick(pool)

    def col(self, kind: str | None = None) -> str | None:
        cols = [c for c, k in self.cols.items() if kind is None or k == kind
                or (kind == "num" and k in ("int", "float"))]
        return self.pick(cols) if cols else None

    # -- expressions -----------------------------------------------------------------------
    def value(self, kind: str, depth: int) -> str:
        """An expression of ``kind`` (int, float, num, str, bool, date, timestamp)."""
        roll = self.r.random()
        if depth <= 0 or roll < 0.5:
            c = self.col(kind)
            if c is not None and self.p(0.8):
                return c
            return self.lit(kind)
        if roll < 0.57:
            return self.lit(kind)
        if kind in ("int", "float", "num"):
            return self.num_expr(depth - 1)
        if kind == "str":
            return self.str_expr(depth - 1)
        if kind in ("date", "timestamp"):
            return self.date_expr(kind, depth - 1)
        return f"({self.cond(depth - 1)})"

    def num_expr(self, depth: int) -> str:
        roll = self.r.random()
        x = self.value("num", depth)
        if roll < 0.3:
            op = self.pick(["+", "-", "*", "/", "//", "%"])
            return f"({x} {op} {self.value('num', depth)})"
        if roll < 0.6:
            return self.pick(self.CLEAN_NUM if self.clean else ALLOWED_NUM_FUNCS).format(x)
        if roll < 0.7:
            return f"length({self.value('str', depth)})"
        if roll < 0.78:
            d = self.value(self.pick(["date", "timestamp"]), depth)
            return self.pick(["year({})", "month({})", "extract(day FROM {})",
                              "date_diff('day', {}, DATE '2020-01-01')", "dayofyear({})",
                              "quarter({})"]).format(d)
        if roll < 0.88 or self.clean:
            return (f"CASE WHEN {self.cond(depth)} THEN {x} "
                    f"ELSE {self.value('num', depth)} END")
        if roll < 0.92:
            to = self.pick(["INTEGER", "BIGINT", "DOUBLE", "HUGEINT", "DECIMAL(10,2)",
                            "UTINYINT"])
            return f"TRY_CAST({self.value(self.pick(['str', 'float', 'int']), depth)} AS {to})"
        return self.pick(OFF_NUM_FUNCS).format(x)

    def str_expr(self, depth: int) -> str:
        x = self.value("str", depth)
        roll = self.r.random()
        if roll < 0.6 or (self.clean and roll < 0.8):
            return self.pick(ALLOWED_STR_FUNCS).format(x)
        if roll < 0.7 or self.clean:
            d = self.value(self.pick(["date", "timestamp"]), depth)
            return self.pick(["strftime({}, '%Y')", "monthname({})", "dayname({})",
                              "CAST({} AS VARCHAR)"]).format(d)
        if roll < 0.78:
            return f"CAST({self.value('num', depth)} AS VARCHAR)"
        return self.pick(OFF_STR_FUNCS).format(x)

    def date_expr(self, kind: str, depth: int) -> str:
        x = self.value(kind, depth)
        if self.p(0.75) or self.clean:
            return self.pick(["date_trunc('month', {})", "date_trunc('year', {})",
                              "{} + INTERVAL 1 DAY", "{} - INTERVAL '1' YEAR", "last_day({})",
                              "coalesce({}, DATE '2020-01-01')"]).format(x)
        if self.p(0.3):
            return f"TRY_CAST({self.value('str', depth)} AS {kind.upper()})"
        return self.pick(OFF_DATE_FUNCS).format(x)

    def operand_pair(self, depth: int) -> tuple[str, str]:
        kind = self.pick(["int", "float", "str", "str", "date", "timestamp", "bool", "num"])
        left = self.value(kind, depth)
        if self.wild(0.15):  # a deliberately mismatched type
            kind = self.pick(["int", "float", "str", "date", "timestamp", "bool"])
        right = self.lit(kind) if self.p(0.75) else self.value(kind, depth)
        return left, right

    def cond(self, depth: int) -> str:
        r = self.r.random()
        if depth <= 0:
            r = min(r, 0.59)
        if r < 0.22:
            a, b = self.operand_pair(depth)
            op = self.pick(["=", "<>", "!=", "<", "<=", ">", ">=", "<=>", "IS DISTINCT FROM",
                            "IS NOT DISTINCT FROM", "=="])
            return f"{a} {op} {b}"
        if r < 0.32:
            kind = self.pick(["int", "str", "float", "date"])
            x = self.value(kind, depth)
            n = self.pick([1, 2, 3, 5, 40])
            items = [self.lit(self.pick(["str", "int"]) if self.wild(0.1) else kind)
                     for _ in range(n)]
            return f"{x} {self.pick(['IN', 'NOT IN'])} ({', '.join(items)})"
        if r < 0.40:
            kind = self.pick(["int", "float", "date", "timestamp", "str"])
            return (f"{self.value(kind, depth)} {self.pick(['BETWEEN', 'NOT BETWEEN'])} "
                    f"{self.lit(kind)} AND {self.lit(kind)}")
        if r < 0.48:
            s = self.value("int", depth) if self.wild(0.1) else self.value("str", depth)
            op = self.pick(["LIKE", "NOT LIKE", "ILIKE", "GLOB", "~~", "!~~", "LIKE"]
                           + ([] if self.clean else ["SIMILAR TO", "~"]))
            pat = (self.value("str", depth) if self.wild(0.1) else
                   self.pick(self.CLEAN_PATTERNS if self.clean else PATTERNS))
            esc = " ESCAPE '\\'" if op in ("LIKE", "ILIKE") and self.p(0.15) else ""
            if self.p(0.1):
                rx = self.pick(["'a.*'", "'b'", "'[0-9]+'"]) if self.clean else pat
                return f"{self.pick(['regexp_matches', 'regexp_full_match'])}({s}, {rx})"
            return f"{s} {op} {pat}{esc}"
        if r < 0.56:
            return f"{self.value(self.pick(['int', 'str', 'float', 'date', 'bool']), depth)} " \
                   f"{self.pick(['IS NULL', 'IS NOT NULL', 'ISNULL', 'NOTNULL'])}"
        if r < 0.60:
            b = self.col("bool")
            if b is None:
                return self.pick(["TRUE", "FALSE", "NULL"])
            return self.pick([b, f"{b} IS TRUE", f"{b} IS NOT FALSE", f"NOT {b}", f"{b} = TRUE"])
        if r < 0.66:
            return f"NOT ({self.cond(depth - 1)})"
        if r < 0.80:
            return (f"({self.cond(depth - 1)} {self.pick(['AND', 'OR'])} "
                    f"{self.cond(depth - 1)})")
        if r < 0.86:
            return self.pick(["starts_with({}, 'a')", "contains({}, 'b')", "prefix({}, 'x')",
                              "suffix({}, '')", "ends_with({}, 'z')"]).format(
                self.value("str", depth))
        if r < 0.90:
            f = self.col("float") or "1.5"
            return self.pick([f"isnan({f})", f"isinf({f})", f"NOT isnan({f})",
                              f"isfinite({self.value('date', depth)})"])
        if r < 0.94 or self.clean:
            return self.pick(["TRUE", "FALSE", "NULL", "1 = 1", "1 = 0", "NULL IS NULL",
                              "'a' < 'b'"] + ([] if self.clean else ["1", "'true'", "42 = '42'"]))
        return f"{self.pick(OFF_NUM_FUNCS + OFF_STR_FUNCS).format(self.value('num', depth))} " \
               f"IS NOT NULL"

    # -- aggregates ------------------------------------------------------------------------
    def agg_arg(self, func: str) -> str:
        r = self.r.random()
        bounded = self.bounded or ["1"]
        if r < 0.7 or (self.clean and r < 0.8):
            return self.pick(bounded)
        if r < 0.9 or self.clean:
            if func == "SUM" and self.p(0.3):
                return f"CASE WHEN {self.cond(1)} THEN 1 ELSE 0 END"
            default = "0" if func == "SUM" and self.p(0.5) else "NULL"
            if not self.clean:
                default = self.pick(["0", "NULL", "1", "-5", "0.5"])
            return f"CASE WHEN {self.cond(1)} THEN {self.pick(bounded)} ELSE {default} END" \
                if self.p(0.8) else f"CASE WHEN {self.cond(1)} THEN {self.pick(bounded)} END"
        if r < 0.93:
            return self.pick(list(self.cols)) if self.cols else "1"
        if r < 0.97:
            c = self.pick(bounded)
            return self.pick([f"{c} * 2", f"{c} + 1", f"abs({c})", f"-{c}", f"{c} / 3",
                              f"coalesce({c}, 0)", f"greatest({c}, 0)", f"round({c})",
                              f"IF({self.cond(0)}, {c}, 0)", f"TRY_CAST({c} AS INTEGER)",
                              f"{c} * 1e300", f"CAST({c} AS DOUBLE)"])
        return self.pick(["1", "0", "NULL", "1.5", "'a'", "TRUE", "-1", "9223372036854775807"])

    def agg(self) -> str:
        r = self.r.random()
        if r < 0.25:
            out = "COUNT(*)"
        elif r < 0.33:
            out = f"COUNT({self.pick(list(self.cols) + ['1'])})"
        elif r < 0.88 or self.clean:
            func = self.pick(AGG_VALUE_FUNCS)
            out = f"{func}({self.agg_arg(func)})"
        else:
            out = self.pick(OFF_AGGS).format(self.pick(self.bounded or list(self.cols)))
        if self.p(0.2) and "OVER" not in out:
            out += f" FILTER (WHERE {self.cond(2)})"
        return out

    def agg_item(self) -> str:
        r = self.r.random()
        a = self.agg()
        if r < 0.66:
            return a
        if r < 0.80:
            return (f"{a} {self.pick(['+', '-', '*', '/', '//', '%'])} "
                    f"{self.agg() if self.p(0.5) else self.lit(self.pick(['int', 'float']))}")
        if r < 0.93:
            return self.pick(["ROUND({}, 1)", "abs({})", "CAST({} AS BIGINT)", "coalesce({}, 0)",
                              "CAST({} AS VARCHAR)",
                              "CASE WHEN {} > 10 THEN 'big' ELSE 'small' END",
                              "100.0 * {} / 7", "greatest({}, 0)", "{} IS NULL", "-({})",
                              "floor({})", "round({}, -2)", "{} > 0"]).format(a)
        # fail on some noisy values only: allowed after the charge (PostProcessingError)
        return self.pick(["sqrt({})", "ln({})", "{} // 0", "{} % 0", "CAST({} AS UTINYINT)",
                          "1 / ({} - {})", "exp({})", "{} * 9223372036854775807",
                          "CAST({} AS INTEGER)", "{} // ({} - {})", "CAST({} * 1e30 AS BIGINT)",
                          "CAST({} AS DECIMAL(3,1))"]
                         + ([] if self.clean else
                            ["repeat('x', CAST({} AS INTEGER))", "error('x')", "CAST({} AS DATE)",
                             "{} || 'x'", "list_value({})[2]", "random() * {}"])
                         ).format(a, a, a)

    # -- select ----------------------------------------------------------------------------
    def key(self) -> str:
        r = self.r.random()
        if r < 0.45 and self.public_keys:
            return self.pick(self.public_keys)
        if r < 0.62:
            values = self.case_values()
            branches = " ".join(f"WHEN {self.cond(1)} THEN {v}" for v in self.r.sample(
                values, self.r.randint(1, min(3, len(values)))))
            default = f" ELSE {self.pick(values)}" if self.p(0.7) else ""
            return f"CASE {branches}{default} END"
        if r < 0.74:
            return self.pick(list(self.cols))
        if r < 0.9 or not self.join_keys:
            num, s = self.col("num"), self.col("str")
            d = self.col("date") or self.col("timestamp")
            opts = []
            if num:
                opts += [f"FLOOR({num} / 10) * 10", f"{num} % 3", f"{num} > 0",
                         f"sign({num})", f"{num} IS NULL"]
            if s:
                opts += [f"substring({s}, 1, 1)", f"lower({s})", f"length({s})", f"{s} = 'a'"]
            if d:
                opts += [f"year({d})", f"date_trunc('month', {d})", f"{d} < DATE '2024-01-01'"]
            if not self.clean:
                opts += ["1", "'const'", "NULL", "TRUE", "random()", "1 + 1"]
            return self.pick(opts) if opts else "1"
        return self.pick(self.join_keys)

    def case_values(self) -> list[str]:
        clean = [["'x'", "'y'", "'z'", "NULL"], ["1", "2", "3"], ["'a'", "'A'", "'a '", "'é'",
                                                                    "'e\u0301'"],
                 ["TRUE", "FALSE", "NULL"], ["DATE '2020-01-01'", "DATE '2021-01-01'"],
                 ["1", "9223372036854775807", "-1", "0"], ["1.5", "-0.0", "0.0", "1e308"]]
        wild = [["1", "2", "3", "'01'", "1.0"], ["DATE '2020-01-01'", "'2021-01-01'",
                                                 "TIMESTAMP '2020-01-01 00:00:00'"],
                ["1", "9223372036854775808", "-1e308", "'nan'"]]
        return self.pick(clean if self.clean else clean + wild)

    def setup(self, table: TableSpec) -> str:
        """Choose the table (maybe a join) and fix the columns visible to expressions."""
        alias = self.pick(["", "", "x"]) if table.sql != "PUMS.PUMS" else ""
        self.join_keys = []
        join = ""
        if table.joins and self.p(0.22):
            joins = [j for j in table.joins if not (self.clean and getattr(j, "wild", False))]
            j = self.pick(joins)(alias or table.sql)
            join = " " + j.sql
            self.cols = {f"{alias or table.sql}.{c}": k for c, k in table.columns.items()}
            self.cols.update(j.columns)
            self.join_keys = list(j.keys)
            if self.wild(0.3):  # unqualified names (ambiguous for some)
                self.cols = {c.split(".")[-1]: k for c, k in self.cols.items()}
        elif alias and self.p(0.5):
            self.cols = {f"{alias}.{c}": k for c, k in table.columns.items()}
        elif self.p(0.05):
            self.cols = {f"{table.sql}.{c}": k for c, k in table.columns.items()}
        else:
            self.cols = dict(table.columns)
        short = {c.split(".", 1)[-1] if not c.startswith("PUMS.PUMS.") else
                 c.removeprefix("PUMS.PUMS."): c for c in self.cols}
        self.bounded = [short[b] for b in table.bounded if b in short]
        self.public_keys = [short[k] for k in table.public_keys if k in short]
        return f"{table.sql}{(' ' + alias) if alias else ''}{join}"

    def select(self, table: TableSpec | None = None, shape: tuple[int, int] | None = None,
               label: str | None = None, branch: bool = False) -> str:
        table = table or self.r.choices(TABLES, weights=[t.weight for t in TABLES])[0]
        source = self.setup(table)
        n_keys, n_aggs = shape or (self.pick([0, 0, 0, 1, 1, 1, 2]), self.pick([1, 1, 2, 3]))
        keys = [self.key() for _ in range(n_keys)]
        if self.clean:
            keys = list(dict.fromkeys(keys))
            n_keys = len(keys)
        items: list[str] = [label] if label else []
        aliases: list[str] = []
        by_alias = self.p(0.25)
        for i, k in enumerate(keys):
            name = f"k{i}"
            aliases.append(name if by_alias or self.p(0.7) else "")
            items.append(f"{k} AS {name}" if aliases[-1] else k)
        for j in range(n_aggs):
            a = self.agg_item()
            name = f"m{j}" if self.clean else self.pick(
                [f"m{j}", f"m{j}", '"weird ""name"""', "n", f"k{j}", "x"])
            named = self.p(0.75) or (label is not None)
            items.append(f"{a} AS {name}" if named else a)
            aliases.append(name if named else "")
        if self.wild(0.05):
            self.r.shuffle(items)
        distinct = "DISTINCT " if self.wild(0.02) else ""
        sql = f"SELECT {distinct}{', '.join(items)} FROM {source}"
        if self.p(0.5):
            sql += f" WHERE {self.cond(self.pick([1, 2, 3]))}"
        if keys:
            form = self.r.random()
            if by_alias:
                sql += " GROUP BY " + ", ".join(f"k{i}" for i in range(n_keys))
            elif form < 0.6 or self.clean:
                sql += " GROUP BY " + ", ".join(keys) if form < 0.8 else \
                    " GROUP BY " + ", ".join(str(i + 1 + (1 if label else 0))
                                             for i in range(n_keys))
            elif form < 0.95:
                sql += " GROUP BY ALL"
        elif self.wild(0.04):
            sql += f" GROUP BY {self.pick(list(self.cols))}"
        if self.p(0.15) and not (branch and self.clean):
            sql += f" HAVING {self.having(keys)}"
        if not branch:
            sql += self.tail([a for a in aliases if a], len(aliases))
        return sql

    def having(self, keys: list[str]) -> str:
        opts = [(f"{self.agg()} {self.pick(['>', '<', '>=', '=', '<>'])} "
                f"{self.lit(self.pick(['int', 'float']))}"),
                f"{self.agg()} > 0 AND {self.agg()} < 1000000"]
        if not self.clean:
            opts.append(f"{self.agg()} > {self.lit('str')}")
            opts.append(f"{self.agg()} IS NOT NULL OR {self.cond(0)}")
            if keys:
                opts.append(f"{keys[0]} <> {self.pick(STR_LITS + INT_LITS[:4])}")
        return self.pick(opts)

    def tail(self, aliases: list[str], width: int) -> str:
        out = ""
        if self.p(0.3):
            terms = []
            for _ in range(self.pick([1, 1, 2])):
                choices = aliases + [str(self.r.randint(1, width)), "COUNT(*)"]
                if not self.clean:
                    choices += [str(self.r.randint(0, width + 2)), self.agg(), "1 + 1", "NULL",
                                "random()"]
                terms.append(self.pick(choices) + self.pick(["", "", " DESC", " ASC",
                                                             " NULLS FIRST", " DESC NULLS LAST"]))
            out += " ORDER BY " + ", ".join(terms)
        limits = LIMITS[:5] + ["9223372036854775807", "CAST(2 AS HUGEINT)", "2 * 3"] \
            if self.clean else LIMITS
        if self.p(0.2):
            out += f" LIMIT {self.pick(limits)}"
            if self.p(0.4):
                out += f" OFFSET {self.pick(limits)}"
        elif self.p(0.03):
            out += f" OFFSET {self.pick(limits)}"
        return out

    def union(self) -> str:
        table = self.r.choices(TABLES, weights=[t.weight for t in TABLES])[0]
        n_keys, n_aggs = self.pick([0, 0, 1]), self.pick([1, 1, 2])
        labels = self.pick([["'a'", "'b'", "'c'"], ["1", "2", "3"],
                            ["'e\u0301'", "'\u00e9'", "'é'"], [None, None, None]]
                           + ([] if self.clean else [["'x'", "2", "NULL"]]))
        branches = []
        for i in range(self.pick([2, 2, 2, 3])):
            lab = labels[i]
            shape = (n_keys, n_aggs + 1) if self.wild(0.1) else (n_keys, n_aggs)
            t = self.pick(TABLES) if self.wild(0.15) else table
            branches.append(self.select(t, shape, None if lab is None else f"{lab} AS grp",
                                        branch=True))
        sql = " UNION ALL ".join(branches)
        width = n_keys + n_aggs + (1 if labels[0] else 0)
        if self.p(0.45):
            pool = [str(self.r.randint(1, width)), "m0", "1 DESC"] + (["grp"] if labels[0] else [])
            if not self.clean:
                pool += [str(self.r.randint(0, width + 1)), "k0", "x", "COUNT(*)"]
            sql += " ORDER BY " + ", ".join(self.pick(pool) for _ in range(self.pick([1, 2])))
        if self.p(0.25):
            sql += f" LIMIT {self.pick(LIMITS[:5] if self.clean else LIMITS)}"
        if self.wild(0.05):
            sql = f"({sql})"
        return sql

    def outside(self) -> str:
        """Statements outside the subset (or at its edges)."""
        c = self.pick(["i", "s", "f", "d", "u"])
        return self.pick([
            "SELECT * FROM t", f"SELECT {c} FROM t", f"SELECT {c}, COUNT(*) FROM t",
            "SELECT COUNT(*) FROM (SELECT * FROM t)", "SELECT COUNT(*) FROM (SELECT i FROM t) q",
            "WITH q AS (SELECT * FROM t) SELECT COUNT(*) FROM q",
            ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
            "SELECT COUNT(*) FROM t"),
            "SELECT COUNT(*) OVER () FROM t", "SELECT DISTINCT s, COUNT(*) FROM t GROUP BY s",
            "SELECT COUNT(*) FROM t WHERE i IN (SELECT k FROM pub)",
            "SELECT COUNT(*) FROM t WHERE EXISTS (SELECT 1)",
            "SELECT COUNT(*) FROM t, pub", "SELECT COUNT(*) FROM t CROSS JOIN pub",
            "SELECT COUNT(*) FROM t NATURAL JOIN pub",
            "SELECT COUNT(*) FROM t a JOIN t b ON a.i = b.i",
            "SELECT COUNT(*) FROM t JOIN visits ON t.i = visits.visit_id",
            "SELECT COUNT(*) FROM t RIGHT JOIN pub p ON t.s = p.s",
            "SELECT COUNT(*) FROM t FULL JOIN pub p ON t.s = p.s",
            "SELECT COUNT(*) FROM t JOIN pub p ON t.s = p.s AND t.i = p.k",
            "SELECT COUNT(*) FROM t JOIN pub p ON lower(t.s) = p.s",
            "SELECT COUNT(*) FROM t JOIN pub p ON t.s = p.s JOIN pub q ON t.i = q.k",
            "SELECT COUNT(*) FROM t ASOF JOIN pub p ON t.i >= p.k",
            "SELECT COUNT(*) FROM t POSITIONAL JOIN pub",
            "SELECT COUNT(*) FROM tu JOIN tv ON tu.x = tv.uid",
            "SELECT COUNT(*) FROM tu LEFT JOIN tv ON tu.uid = tv.uid",
            "SELECT COUNT(*) FROM t USING SAMPLE 10%", "SELECT COUNT(*) FROM t TABLESAMPLE 10%",
            "FROM t SELECT COUNT(*)", "FROM t", "SELECT COUNT(*) FROM t QUALIFY COUNT(*) > 1",
            "SELECT s, COUNT(*) FROM t GROUP BY ROLLUP (s)",
            "SELECT s, COUNT(*) FROM t GROUP BY GROUPING SETS ((s), ())",
            "SELECT s, COUNT(*) FROM t GROUP BY CUBE (s, b)",
            "SELECT COUNT(*) FROM t INTERSECT SELECT COUNT(*) FROM t",
            "SELECT COUNT(*) FROM t EXCEPT SELECT COUNT(*) FROM t",
            "SELECT COUNT(*) FROM t UNION SELECT COUNT(*) FROM t",
            "SELECT COUNT(*) FROM t UNION ALL BY NAME SELECT COUNT(*) FROM t",
            "SELECT COUNT(*) FROM read_csv('x.csv')", "SELECT COUNT(*) FROM range(10)",
            "SELECT COUNT(*) FROM 'nope.parquet'", "SELECT COUNT(*) FROM information_schema.tables",
            "SELECT COUNT(*) FROM duckdb_tables()", "SELECT COUNT(*) FROM nope",
            "SELECT COUNT(nope) FROM t", "SELECT 1", "SELECT COUNT(*)", "VALUES (1)",
            "INSERT INTO t (i) VALUES (1)", "DELETE FROM t", "DROP TABLE t",
            "CREATE TABLE q AS SELECT * FROM t", "UPDATE t SET i = 1", "PRAGMA version",
            "SET threads = 1", "ATTACH ':memory:' AS q", "EXPLAIN SELECT COUNT(*) FROM t",
            "DESCRIBE t", "SHOW TABLES", "SELECT COUNT(*) FROM t; SELECT COUNT(*) FROM t",
            "SELECT COUNT(*) FROM t;", "SELECT COUNT(*) FROM t; DROP TABLE t", "", " ", ";",
            "--", "/* */", "SELECT COUNT(*) FROM t GROUP BY ALL",
            "SELECT COUNT(*) FROM t ORDER BY ALL", "SELECT COLUMNS('i') FROM t",
            "SELECT COUNT(COLUMNS(*)) FROM t", "SELECT COUNT(*) FROM t WHERE i = $1",
            "SELECT COUNT(*) FROM t WHERE i = ?", "SELECT COUNT(*) FROM t WHERE i = :x",
            "SELECT COUNT(*) FROM t, LATERAL (SELECT t.i) q",
            "SELECT s, COUNT(*) FROM t GROUP BY s HAVING s = (SELECT 'a')",
            "SELECT list(i) FROM t", "SELECT COUNT(*) FROM main.t",
            "SELECT COUNT(*) FROM memory.main.t", 'SELECT COUNT(*) FROM "t"',
            "SELECT COUNT(*) FROM T", 'SELECT COUNT(*) FROM "T"', "SELECT COUNT(*) FROM pub",
            "SELECT COUNT(*) FROM hospitals", "SELECT COUNT(*) FROM pums",
            'SELECT COUNT(*) FROM "PUMS".pums', "SELECT COUNT(*) FROM PUMS",
            "SELECT COUNT(*) FILTER (i > 0) FROM t", "SELECT SELECT",
            "SELECT COUNT(*) FROM t -- comment", "SELECT /* c */ COUNT(*) FROM t",
            "SELECT COUNT(*) FROM t WHERE i > 0 WHERE i < 5",
            'SELECT COUNT(*) AS "" FROM t', "SELECT COUNT(*) AS a, COUNT(*) AS a FROM t",
            "SELECT s, s, COUNT(*) FROM t GROUP BY s", "SELECT COUNT(*) FROM t GROUP BY 1",
            "SELECT s, COUNT(*) FROM t GROUP BY s ORDER BY u",
            "SELECT s, COUNT(*) FROM t GROUP BY s ORDER BY i",
            "SELECT COUNT(*), i FROM t GROUP BY s",
            "SELECT COUNT(*) FROM t GROUP BY s, s, s",
            "SELECT s AS i, COUNT(*) FROM t GROUP BY i",
            "SELECT COUNT(*) AS s FROM t GROUP BY s",
            "SELECT COUNT(*) FROM t WHERE COUNT(*) > 1",
            "SELECT SUM(COUNT(*)) FROM t", "SELECT COUNT(*) FROM t GROUP BY COUNT(*)",
            "SELECT SUM(i) FILTER (WHERE SUM(i) > 0) FROM t",
            "SELECT COUNT(*) FROM t WHERE i > (SELECT 1)",
            "SELECT COUNT(*) FROM t WINDOW w AS (PARTITION BY s)",
            "SELECT COUNT(*) FROM t AT (VERSION => 1)",
            "PIVOT t ON s USING COUNT(*)", "UNPIVOT t ON i, n INTO NAME k VALUE v",
            "SELECT COUNT(*) FROM t WHERE s IN pub",
            "SELECT COUNT(*) FROM t WHERE getenv('HOME') = s",
            "SELECT COUNT(*) FROM t WHERE current_setting('threads') = 2",
            "SELECT COUNT(*) FROM t WHERE i = nextval('x')",
            "SELECT COUNT(*) FROM t WHERE now() > ts",
            "SELECT COUNT(*) FROM t WHERE ts < current_date",
            "SELECT COUNT(*) FROM t WHERE uuid() IS NULL",
            "SELECT COUNT(*) FROM t WHERE query('SELECT 1') IS NULL",
            "SELECT COUNT(*) FROM t WHERE (SELECT COUNT(*) FROM pub) > 1",
            "SELECT COUNT(*) FROM t WHERE i = ANY (SELECT k FROM pub)",
            "SELECT COUNT(*) FROM t WHERE i = ANY ([1, 2])",
            "SELECT COUNT(*) FROM t WHERE i IN [1, 2]",
            "SELECT COUNT(*) FROM t WHERE s IN ('a', NULL)",
            "SELECT COUNT(*) FROM t WHERE (i, s) = (1, 'a')",
            "SELECT COUNT(*) FROM t WHERE (i, s) IN ((1, 'a'))",
            "SELECT COUNT(*) FROM t WHERE struct_pack(a := i).a = 1",
            "SELECT COUNT(*) FROM t WHERE [i][1] = 1",
            "SELECT COUNT(*) FROM t WHERE i::VARCHAR = '1'",
            "SELECT COUNT(*) FROM t WHERE u::INTEGER = 1",
            "SELECT COUNT(*) FROM t WHERE d::VARCHAR LIKE '2020%'",
            "SELECT COUNT(*) FROM t WHERE lambda x: x > 1",
            "SELECT COUNT(*) FROM t WHERE list_filter([i], x -> x > 1) = [2]",
            "SELECT COUNT(*) FROM t WHERE i BETWEEN SYMMETRIC 10 AND 1",
            "SELECT COUNT(*) FROM t WHERE s LIKE ANY ('a%', 'b%')",
            "SELECT COUNT(*) FROM t WHERE s ~ '['", "SELECT COUNT(*) FROM t WHERE s SIMILAR TO '('",
            "SELECT COUNT(*) FROM t WHERE s LIKE 'a' ESCAPE 'ab'",
            "SELECT COUNT(*) FROM t WHERE d > 'not a date'",
            "SELECT COUNT(*) FROM t WHERE ts > '2020-13-45'",
            "SELECT COUNT(*) FROM t WHERE i > '1.5'", "SELECT COUNT(*) FROM t WHERE i = 'abc'",
            "SELECT COUNT(*) FROM t WHERE i = 1e400", "SELECT COUNT(*) FROM t WHERE f = 1e400",
            "SELECT COUNT(*) FROM t WHERE b = 'maybe'", "SELECT COUNT(*) FROM t WHERE b = 2",
            "SELECT COUNT(*) FROM t WHERE h > -1", "SELECT COUNT(*) FROM t WHERE h = 2 * h",
            "SELECT COUNT(*) FROM t WHERE dc * dc > 1e30", "SELECT COUNT(*) FROM t WHERE v + 1 > 0",
            "SELECT COUNT(*) FROM t WHERE ci = 'x'", "SELECT ci, COUNT(*) FROM t GROUP BY ci",
            "SELECT COUNT(*) FROM t WHERE i * i * i * i > 0",
            "SELECT COUNT(*) FROM t WHERE n * n > 0", "SELECT COUNT(*) FROM t WHERE -n > 0",
            "SELECT COUNT(*) FROM t WHERE abs(n) > 0", "SELECT COUNT(*) FROM t WHERE n % 0 = 0",
            "SELECT COUNT(*) FROM t WHERE n // 0 = 0", "SELECT COUNT(*) FROM t WHERE d + 1 > d",
            "SELECT COUNT(*) FROM t WHERE d + INTERVAL 1000000 YEAR > d",
            "SELECT COUNT(*) FROM t WHERE ts - ts > INTERVAL 1 DAY",
            "SELECT COUNT(*) FROM t WHERE year(d) > 2000",
            "SELECT COUNT(*) FROM t WHERE date_trunc('day', tn) > ts",
            "SELECT COUNT(*) FROM t WHERE tn = ts", "SELECT COUNT(*) FROM t WHERE d = ts",
            "SELECT COUNT(*) FROM t WHERE strftime(d, '%Y') = '2020'",
            "SELECT COUNT(*) FROM t WHERE length(u) > 2",
            "SELECT COUNT(*) FROM t WHERE u || u = 'aa'",
            "SELECT COUNT(*) FROM t WHERE CAST(f AS BIGINT) = 1",
            "SELECT COUNT(*) FROM t WHERE TRY_CAST(f AS BIGINT) = 1",
            "SELECT COUNT(*) FROM t WHERE CAST(i AS HUGEINT) * 10 > 0",
            "SELECT COUNT(*) FROM t WHERE round(f, 400) > 0",
            "SELECT COUNT(*) FROM t WHERE round(f, n) > 0",
            "SELECT COUNT(*) FROM t WHERE substring(u, n, 2) = 'a'",
            "SELECT COUNT(*) FROM t WHERE date_trunc(u, d) > d",
            "SELECT COUNT(*) FROM t WHERE s LIKE u", "SELECT COUNT(*) FROM t WHERE u LIKE s",
            "SELECT SUM(i) / 0 AS z FROM t", "SELECT SUM(i) // 0 AS z FROM t",
            "SELECT CAST(COUNT(*) AS UTINYINT) AS z FROM t",
            "SELECT COUNT(*) * 9223372036854775807 AS z FROM t",
            "SELECT ln(COUNT(*) - COUNT(*)) AS z FROM t",
            "SELECT sqrt(SUM(i) - 1000000) AS z FROM t",
            "SELECT repeat('x', CAST(COUNT(*) AS INTEGER)) AS z FROM t",
            "SELECT s, COUNT(*) AS n FROM t GROUP BY s HAVING n > 'a'",
            "SELECT s, COUNT(*) AS n FROM t GROUP BY s ORDER BY 7",
            "SELECT s, COUNT(*) AS n FROM t GROUP BY s LIMIT -1",
            "SELECT s, COUNT(*) AS n FROM t GROUP BY s LIMIT n",
            "SELECT s, COUNT(*) AS n FROM t GROUP BY s LIMIT (SELECT 1)",
            "SELECT COUNT(*) AS n FROM t UNION ALL SELECT 'a' AS n FROM t",
            "SELECT COUNT(*) AS n FROM t UNION ALL SELECT COUNT(*), SUM(i) FROM t",
            "SELECT COUNT(*) AS n FROM t UNION ALL SELECT COUNT(*) FROM pub",
            "SELECT COUNT(*) AS n FROM t UNION ALL SELECT 1",
            ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-5, "
            "privacy_unit_column=uid) COUNT(*) FROM tu"),
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=-1) COUNT(*) FROM t",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon='a') COUNT(*) FROM t",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1e400, delta=2) COUNT(*) FROM t",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(bogus=1) COUNT(*) FROM t",
            ("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, max_groups_contributed=0) "
            "s, COUNT(*) FROM t GROUP BY s"),
            "SELECT WITH DIFFERENTIAL_PRIVACY COUNT(*) FROM t",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS() COUNT(*) FROM t",
        ])


# -----------------------------------------------------------------------------------------------
# Mutation of the sql_examples queries
# -----------------------------------------------------------------------------------------------

TOKEN = re.compile(r"""
    '(?:[^']|'')*'?          # string literal (maybe unterminated)
  | "(?:[^"]|"")*"?          # quoted identifier
  | --[^\n]*                 # line comment
  | /\*.*?(?:\*/|$)          # block comment
  | \d+(?:\.\d*)?(?:[eE][+-]?\d+)? | \.\d+(?:[eE][+-]?\d+)?
  | [^\W\d]\w*               # word
  | <>|!=|<=|>=|::|\|\||<=>
  | \s+
  | .
""", re.VERBOSE | re.DOTALL)


def tokens(sql: str) -> list[str]:
    return TOKEN.findall(sql)


def _solid(toks: list[str]) -> list[int]:
    return [i for i, t in enumerate(toks) if not t.isspace()]


def _seed_queries() -> list[tuple[str, str]]:
    fmt = _examples()
    out = []
    for path in fmt.example_files():
        for q in fmt.parse_file(path).queries:
            out.append((f"{path.name}#{q.index}", q.sql.strip().rstrip(";")))
    return out


UNICODE = ["\u200b", "\u200d", "\u202e", "\u2066", "\ufeff", "\u00a0", "\u3000", "\u0301",
           "\U0001F600", "\u0430", "\u0455", "\uff33", "\u2028", "\ud800", "\x7f", "\x1b",
           "\u00e9", "e\u0301", "\u0130", "\u212a", "\ufffd"]
HOMOGLYPHS = {"a": "\u0430", "e": "\u0435", "o": "\u043e", "c": "\u0441", "S": "\u0405",
              "E": "\uff25", "T": "\uff34", "C": "\u216d"}


class Mutator:
    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def mutate(self, sql: str) -> tuple[str, list[str]]:
        ops = []
        for _ in range(self.r.choice([0, 1, 1, 1, 2, 2, 3])):
            name, fn = self.r.choice(self.OPS)
            new = fn(self, sql)
            if new is not None:
                sql = new
                ops.append(name)
        return sql, ops

    # each op returns the new text (or None when it does not apply)
    def delete(self, sql: str) -> str | None:
        toks = tokens(sql)
        s = _solid(toks)
        if not s:
            return None
        i = self.r.choice(s)
        span = self.r.choice([1, 1, 1, 2, 3])
        return "".join(toks[:i] + toks[i + span:])

    def duplicate(self, sql: str) -> str | None:
        toks = tokens(sql)
        s = _solid(toks)
        i = self.r.choice(s)
        return "".join(toks[:i + 1] + [" ", toks[i]] + toks[i + 1:])

    def swap(self, sql: str) -> str | None:
        toks = tokens(sql)
        s = _solid(toks)
        if len(s) < 2:
            return None
        if self.r.random() < 0.6:
            k = self.r.randrange(len(s) - 1)
            i, j = s[k], s[k + 1]
        else:
            i, j = self.r.sample(s, 2)
        toks[i], toks[j] = toks[j], toks[i]
        return "".join(toks)

    def literal(self, sql: str) -> str | None:
        toks = tokens(sql)
        lits = [i for i, t in enumerate(toks) if t[0].isdigit() or t[0] == "'"]
        if not lits:
            return None
        i = self.r.choice(lits)
        pool = self.r.choice([INT_LITS, FLOAT_LITS, STR_LITS, DATE_LITS, TS_LITS, BOOL_LITS,
                              INTERVAL_LITS, ["NULL"]])
        toks[i] = self.r.choice(pool)
        return "".join(toks)

    def keyword(self, sql: str) -> str | None:
        toks = tokens(sql)
        i = self.r.randrange(len(toks) + 1)
        return "".join(toks[:i] + [f" {self.r.choice(KEYWORDS)} "] + toks[i:])

    def nest(self, sql: str) -> str | None:
        toks = tokens(sql)
        s = [i for i in _solid(toks) if toks[i][0].isalnum() or toks[i][0] in "'\""]
        if not s:
            return None
        i = self.r.choice(s)
        n = self.r.choice([20, 150, 199, 200, 201, 260, 1200, 4000])
        style = self.r.randrange(5)
        if style == 0:
            toks[i] = "(" * n + toks[i] + ")" * n
        elif style == 1:
            toks[i] = "abs(" * n + toks[i] + ")" * n
        elif style == 2:
            toks[i] = "CASE WHEN TRUE THEN " * n + toks[i] + " END" * n
        elif style == 3:
            toks[i] = "-" * n + toks[i]  # a run of unary minus (or a comment after --)
        else:
            where = sql.upper().find(" WHERE ")
            if where < 0:
                return None
            return sql[:where + 7] + "NOT " * n + sql[where + 7:]
        return "".join(toks)

    def chain(self, sql: str) -> str | None:
        n = self.r.choice([20, 50, 300])
        if self.r.random() < 0.5:
            extra = " AND ".join(f"age <> {k}" for k in range(n))
        else:
            extra = f"age IN ({', '.join(str(k) for k in range(n))})"
        where = sql.upper().find(" WHERE ")
        if where >= 0:
            return sql[:where + 7] + extra + " AND " + sql[where + 7:]
        frm = re.search(r"FROM\s+(visits|PUMS\.PUMS)", sql)
        if frm is None:
            return None
        return sql[:frm.end()] + " WHERE " + extra + sql[frm.end():]

    def unbalance(self, sql: str) -> str | None:
        toks = tokens(sql)
        i = self.r.randrange(len(toks) + 1)
        ch = self.r.choice(["'", '"', "(", ")", "[", "]", "{", "}", "''", "\\", "`", "$$",
                            "E'", "/*", "*/"])
        if self.r.random() < 0.3:
            closes = [k for k, t in enumerate(toks) if t in (")", "'")]
            if closes:
                del toks[self.r.choice(closes)]
                return "".join(toks)
        return "".join(toks[:i] + [ch] + toks[i:])

    def huge(self, sql: str) -> str | None:
        toks = tokens(sql)
        lits = [i for i, t in enumerate(toks) if t[0].isdigit() or t[0] == "'"]
        if not lits:
            return None
        i = self.r.choice(lits)
        k = self.r.choice([20, 39, 40, 400, 5000])
        toks[i] = self.r.choice([
            "9" * k, "-" + "9" * k, "0." + "0" * k + "1",
            "1e" + self.r.choice(["+", "-"]) + "9" * self.r.choice([2, 3, 5, 6, 6, 8]),
            "'" + "x" * (k * 20) + "'", "'" + "\U0001F600" * k + "'", "1" + "0" * k + ".5",
            "'" + "%" * k + "'"])
        return "".join(toks)

    def unicode(self, sql: str) -> str | None:
        toks = tokens(sql)
        style = self.r.randrange(3)
        if style == 0:
            i = self.r.randrange(len(toks) + 1)
            return "".join(toks[:i] + [self.r.choice(UNICODE)] + toks[i:])
        words = [i for i, t in enumerate(toks) if t[0].isalpha()]
        if not words:
            return None
        i = self.r.choice(words)
        if style == 1:
            toks[i] = "".join(HOMOGLYPHS.get(ch, ch) for ch in toks[i])
        else:  # fullwidth
            toks[i] = "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch
                              for ch in toks[i])
        return "".join(toks)

    def nul(self, sql: str) -> str | None:
        toks = tokens(sql)
        strings = [i for i, t in enumerate(toks) if t.startswith("'") and len(t) > 1]
        if strings and self.r.random() < 0.4:
            i = self.r.choice(strings)
            toks[i] = toks[i][:1] + "\x00" + toks[i][1:]
            return "".join(toks)
        i = self.r.randrange(len(sql) + 1)
        return sql[:i] + "\x00" + sql[i:]

    def case_space(self, sql: str) -> str | None:
        style = self.r.randrange(4)
        if style == 0:
            return "".join(ch.swapcase() if self.r.random() < 0.3 else ch for ch in sql)
        if style == 1:
            return re.sub(r"\s+", lambda m: self.r.choice(["\t", "\n", "  ", "\r\n", " /**/ ",
                                                            "\f", "\v"]), sql)
        if style == 2:
            return sql + self.r.choice([" -- trailing", " /* unterminated", ";", ";;", "; ",
                                        "; SELECT 1", "\n;\n", " ;--"])
        return self.r.choice(["/* lead */ ", "-- c\n", "\n\n", "(", " "]) + sql

    def clause(self, sql: str) -> str | None:
        style = self.r.randrange(4)
        if style == 0:
            return f"{sql} UNION ALL {sql}"
        if style == 1:
            m = re.search(r" WHERE .*?(?= GROUP BY| ORDER BY| HAVING| LIMIT|$)", sql, re.DOTALL)
            return None if m is None else sql[:m.end()] + m.group(0) + sql[m.end():]
        if style == 2:
            return f"SELECT COUNT(*) FROM ({sql})"
        return sql + self.r.choice([" LIMIT 1", " ORDER BY 1", " OFFSET 1", " GROUP BY 1",
                                    " HAVING TRUE", " LIMIT -1", " ORDER BY 99"])

    OPS: ClassVar[list[tuple[str, Callable[[Mutator, str], str | None]]]] = [
        ("delete", delete), ("duplicate", duplicate), ("swap", swap), ("literal", literal),
        ("literal", literal), ("keyword", keyword), ("nest", nest), ("chain", chain),
        ("unbalance", unbalance), ("huge", huge), ("unicode", unicode), ("nul", nul),
        ("case/space", case_space), ("clause", clause), ("delete", delete), ("swap", swap),
    ]


# -----------------------------------------------------------------------------------------------
# Budgets and sessions
# -----------------------------------------------------------------------------------------------

KINDS = [  # (weight, session budget, the parameter a query passes)
    (10, pp.PureDP(1e9), "epsilon"),
    (4, pp.ApproxDP(1e9, 0.5), "epsilon+delta"),
    (2, pp.ZCDP(1e9), "rho"),
    (1, pp.GDP(1e6), "mu"),
    (1, pp.PureDP(2.5), "epsilon"),            # tiny: BudgetExceededError after a few
    (1, pp.ApproxDP(2, 1e-6), "epsilon+delta"),
]


def _budget(rng: random.Random, param: str) -> dict[str, Any]:
    if rng.random() < 0.86:
        v = rng.choice([0.1, 0.5, 1.0, 1.0, 1.0, 3.7, 1e3])
        if param == "epsilon+delta":
            return {"epsilon": v, "delta": rng.choice([1e-6, 1e-3, 0.1, 1e-5])} \
                if rng.random() < 0.85 else {"epsilon": v}
        return {param: v}
    main = "epsilon" if param == "epsilon+delta" else param
    odd = rng.choice([1e-300, 1e-12, 1e300, 1e308, 0, 0.0, -1, float("nan"), float("inf"),
                      "1", True, Decimal("0.5"), Fraction(1, 3), 2**70, 5e-324, -0.0, None,
                      "wrong", "two", "delta-only", "bad-delta", "budget-obj", "budget-str"])
    if odd is None:
        return {}
    if odd == "wrong":
        return {rng.choice(["epsilon", "rho", "mu"]): 1.0}
    if odd == "two":
        return {"epsilon": 1.0, "rho": 1.0}
    if odd == "delta-only":
        return {"delta": 1e-6}
    if odd == "bad-delta":
        return {"epsilon": 1.0, "delta": rng.choice([1.5, -0.1, float("nan"), 1.0, "x"])}
    if odd == "budget-obj":
        return {"budget": rng.choice([pp.PureDP(1), pp.ApproxDP(1, 1e-6), pp.ZCDP(0.5),
                                      pp.GDP(0.5)])}
    if odd == "budget-str":
        return {"budget": "epsilon=1"}
    return {main: odd}


PINNED = [
    # inputs every run includes (first batch): the extremes the mutations reach only rarely
    "SELECT COUNT(*) FROM t WHERE f < 1e99999999",
    "SELECT COUNT(*) FROM t WHERE i > " + "9" * 5000,
    "SELECT COUNT(*) FROM t WHERE f > 0." + "0" * 5000 + "1",
    "SELECT COUNT(*) FROM t WHERE " + "(" * 5000 + "i > 0" + ")" * 5000,
    "SELECT COUNT(*) FROM t WHERE " + "NOT " * 5000 + "b",
    "SELECT COUNT(*) FROM t WHERE " + "abs(" * 3000 + "i" + ")" * 3000 + " > 0",
    "SELECT COUNT(*) FROM t WHERE " + " OR ".join(f"i = {k}" for k in range(400)),
    "SELECT COUNT(*) FROM t WHERE i IN (" + ", ".join(map(str, range(1000))) + ")",
    "SELECT COUNT(*) FROM t WHERE u = '\x00'",
    "SELECT COUNT(*) FROM t WHERE u = 'a\ud800'",
    "SELECT COUNT(*) FROM t WHERE u = '" + "x" * 200_000 + "'",
    "SELECT COUNT(*) FROM t WHERE u = 'unterminated",
    "SELECT COUNT(*) FROM t WHERE (i > 0",
    "SELECT \uff23\uff2f\uff35\uff2e\uff34(*) FROM t",
    "SELECT COUNT(*) FROM t\x00; DROP TABLE t",
    "SELECT s, COUNT(*) AS n FROM t GROUP BY s ORDER BY s",
]

_EPS = {"epsilon": 1.0}
_EPS_DELTA = {"epsilon": 1.0, "delta": 1e-6}
REGRESSIONS: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    # what earlier runs of this fuzz found (minimal reproducers over the edge dataset), so that
    # every run checks them whatever the seed; by the session kind they need
    ("epsilon", [
        ("SELECT COUNT() FROM t", _EPS),
        ("SELECT 'x' AS g, COUNT(*) AS g FROM t", _EPS),
        (("SELECT 'x' AS g, COUNT(*) AS n FROM t UNION ALL "
         "SELECT 'y', CASE WHEN COUNT(*) > 10 THEN 'big' ELSE 'small' END FROM t"), _EPS),
        ("SELECT COUNT(*) AS a, COUNT(*) AS b FROM t UNION ALL SELECT COUNT(*), COUNT(*) FROM t",
         _EPS),
        (("SELECT CASE WHEN i > 0 THEN 'a' WHEN DATE '2020-01-01' IN (DATE '2020-01-01', "
         "DATE '2020-02-30') THEN 'b' END AS k, COUNT(*) AS n FROM t GROUP BY k"), _EPS),
        ("SELECT VARIANCE(score) AS v FROM tv WHERE score > 100", {"epsilon": 1e308}),
        ('SELECT COUNT(*) AS "\ud800" FROM t UNION ALL SELECT COUNT(*) FROM t', _EPS),
        ("SELECT COUNT(*) FROM t WHERE (6 % i) = 1.5", _EPS),
        ("SELECT COUNT(*) FROM t WHERE (i + 9223372036854775807) > 1.5", _EPS),
        ("SELECT COUNT(*) FROM t WHERE TRY_CAST(f // f AS INTEGER) BETWEEN 0.5 AND 1.5", _EPS),
    ]),
    ("epsilon+delta", [
        ("SELECT f, COUNT(*) AS n FROM t GROUP BY f", _EPS_DELTA),
        ("SELECT f % 3 AS k, AVG(i) AS a FROM t GROUP BY k", _EPS_DELTA),
        ("SELECT d, COUNT(*) AS n FROM t GROUP BY d", _EPS_DELTA),
        ("SELECT visit_date, COUNT(*) AS n FROM visits GROUP BY visit_date", _EPS_DELTA),
        ("SELECT VAR_POP(cost * 1e300) FROM visits", _EPS_DELTA),
        ("SELECT SUM(cost * 1e300) AS s, STDDEV(cost * 1e160) AS d FROM visits", _EPS_DELTA),
    ]),
    ("mu", [
        ("SELECT COUNT(*) FROM t", {"mu": 1e155}),
        ("SELECT SUM(i) FROM t", {"mu": 1e300}),
        ("SELECT COUNT() FROM visits", {"mu": 1e-300}),  # Laplace's variance at scale 1e300
    ]),
]
"""Fixed inputs of the first batches (the batch's session takes the kind they need)."""

_SESSION_OF = {"epsilon": pp.PureDP(1e9), "epsilon+delta": pp.ApproxDP(1e9, 0.5),
               "mu": pp.GDP(1e6)}


@dataclass
class Case:
    index: int
    sql: str
    origin: str
    budget: dict[str, Any]
    batch: int


@dataclass(frozen=True)
class BatchSetup:
    budget: Any
    param: str
    other: str  # the second dataset: "empty" or "plain"


def generate(n: int, seed: int) -> tuple[list[Case], list[BatchSetup]]:
    rng = random.Random(seed)
    grammar, mutator = Grammar(random.Random(rng.random())), Mutator(random.Random(rng.random()))
    seeds = _seed_queries()
    brng = random.Random(rng.random())
    setups = []
    for b in range((n + BATCH - 1) // BATCH):
        _, budget, param = brng.choices(KINDS, weights=[k[0] for k in KINDS])[0]
        setups.append(BatchSetup(budget, param, "empty" if b % 2 == 0 else "plain"))
    fixed: dict[int, tuple[str, str, dict[str, Any]]] = {}
    batches = [("epsilon", [(sql, _EPS) for sql in PINNED] + REGRESSIONS[0][1]),
               *REGRESSIONS[1:]]
    for b, (param, items) in enumerate(batches[:len(setups)]):
        setups[b] = BatchSetup(_SESSION_OF[param], param, setups[b].other)
        for j, (sql, budget) in enumerate(items[:BATCH]):
            origin = "pinned" if j < len(PINNED) and b == 0 else "regression"
            fixed[b * BATCH + j] = (sql, origin, budget)
    cases = []
    for i in range(n):
        if i in fixed:
            sql, origin, budget = fixed[i]
            cases.append(Case(i, sql, origin, dict(budget), i // BATCH))
            continue
        roll = rng.random()
        grammar.clean = rng.random() < 0.6
        mode = "clean" if grammar.clean else "wild"
        if roll < 0.45:
            sql, origin = grammar.select(), f"grammar:select-{mode}"
        elif roll < 0.53:
            sql, origin = grammar.union(), f"grammar:union-{mode}"
        elif roll < 0.58:
            sql, origin = grammar.outside(), "grammar:outside"
        else:
            name, seed_sql = rng.choice(seeds)
            sql, ops = mutator.mutate(seed_sql)
            origin = f"mutation:{name}:{'+'.join(ops) or 'none'}"
        batch = i // BATCH
        cases.append(Case(i, sql, origin, _budget(rng, setups[batch].param), batch))
    return cases, setups


# -----------------------------------------------------------------------------------------------
# Running one query and the oracles
# -----------------------------------------------------------------------------------------------

PRE_CHARGE = (pp.ParseError, pp.UnsupportedQueryError, pp.PolicyError, pp.BudgetExceededError,
              pp.LedgerError)


@dataclass
class Outcome:
    dataset: str
    explain: Any = None            # Explanation, or the exception
    result: Any = None             # Result, or the exception
    entries_before: int = 0
    entries_after: int = 0
    spent_before: Any = None
    spent_after: Any = None
    seconds: float = 0.0

    @property
    def charged(self) -> bool:
        return self.entries_after > self.entries_before

    @property
    def answered(self) -> bool:
        return isinstance(self.result, pp.Result)

    def error(self) -> BaseException | None:
        return self.result if isinstance(self.result, BaseException) else None

    def describe(self) -> str:
        def one(x: Any) -> str:
            if isinstance(x, BaseException):
                text = f"{type(x).__name__}: {_short(str(x), 160)}"
                if x.__cause__ is not None:
                    text += f"  [cause {type(x.__cause__).__name__}: " \
                            f"{_short(str(x.__cause__), 200)}]"
                return text
            if isinstance(x, pp.Result):
                return f"answered {len(x.df)} row(s) {list(x.df.columns)}, cost {x.cost!r}"
            if x is None:
                return "-"
            return (f"ok, marginal {x.marginal!r}" +
                    ("" if x.within_budget else " (over budget)"))
        return (f"{self.dataset:>5}: explain -> {one(self.explain)}; sql -> {one(self.result)}"
                f"; {'charged' if self.charged else 'nothing charged'}")


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 3] + "..."


def run_query(sess: pp.Session, dataset: str, sql: str, budget: dict[str, Any]) -> Outcome:
    out = Outcome(dataset)
    t0 = time.perf_counter()
    out.entries_before = len(sess.ledger.entries())
    out.spent_before = sess.spent()
    try:
        out.explain = sess.explain(sql, **budget)
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            raise
        out.explain = err
    try:
        with noise_disabled():
            out.result = sess.sql(sql, **budget)
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            raise
        out.result = err
    out.entries_after = len(sess.ledger.entries())
    out.spent_after = sess.spent()
    out.seconds = time.perf_counter() - t0
    return out


@dataclass
class Failure:
    kind: str
    key: str          # what must stay the same while shrinking
    detail: str


def _cause_key(err: BaseException) -> str:
    """What groups failures: the cause's type and message (numbers and quoted values masked,
    they may be data) and, for a Python exception, the privplan function that raised it."""
    cause = err.__cause__ or err.__context__
    if cause is None:
        return type(err).__name__
    msg = re.sub(r"\d+", "N", str(cause).split("\n")[0])
    msg = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", msg)
    site = "" if isinstance(cause, duckdb.Error) else _site(cause)
    return f"{type(cause).__name__}: {_short(msg, 90)}{site}"


def _site(err: BaseException) -> str:
    import traceback

    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if "privplan" in f.filename and not f.filename.endswith("boundary.py")]
    return f" in {Path(frames[-1].filename).name}:{frames[-1].name}" if frames else ""


def _traceback_tail(err: BaseException) -> str:
    import traceback

    cause = err.__cause__ or err
    frames = traceback.extract_tb(cause.__traceback__)
    own = [f for f in frames if "privplan" in f.filename]
    f = (own or frames)[-1] if (own or frames) else None
    return "" if f is None else f" at {Path(f.filename).name}:{f.lineno} ({f.name})"


def judge(a: Outcome, b: Outcome) -> list[Failure]:
    """Every oracle, on both datasets' outcomes of one query."""
    fails: list[Failure] = []
    for o in (a, b):
        # 1. only PrivplanErrors, never an InternalError
        internal = [(what, x) for what, x in (("explain", o.explain), ("sql", o.result))
                    if isinstance(x, InternalError)]
        for key in dict.fromkeys(_cause_key(x) for _, x in internal):
            calls = [what for what, x in internal if _cause_key(x) == key]
            x = next(x for _, x in internal if _cause_key(x) == key)
            fails.append(Failure("InternalError", key,
                                 f"{o.dataset} {' and '.join(calls)}: {key}"
                                 f"{_traceback_tail(x)}"))
        for what, x in (("explain", o.explain), ("sql", o.result)):
            if isinstance(x, BaseException) and not isinstance(x, pp.PrivplanError):
                fails.append(Failure("non-PrivplanError", f"{what}|{type(x).__name__}",
                                     f"{o.dataset} {what}: {type(x).__name__}: {x}"))
        err = o.error()
        # 2. what a failure may have spent
        if isinstance(err, ExecutionError):
            fails.append(Failure("ExecutionError after the charge", _cause_key(err),
                                 f"{o.dataset}: {_cause_key(err)}"))
        elif isinstance(err, PostProcessingError):
            if not o.charged:
                fails.append(Failure("PostProcessingError not charged", "",
                                     f"{o.dataset}: {_short(str(err), 120)}"))
        elif isinstance(err, pp.PrivplanError) and not isinstance(err, InternalError) and (
                o.charged or o.spent_after != o.spent_before):
            fails.append(Failure("refusal spent budget", type(err).__name__,
                                 f"{o.dataset}: {type(err).__name__} after a charge "
                                 f"({o.spent_before!r} -> {o.spent_after!r})"))
        # 3. explain and sql agree
        e = o.explain
        if isinstance(e, pp.PrivplanError) and not isinstance(e, InternalError):
            if type(err) is not type(e):
                fails.append(Failure("explain/sql disagree",
                                     f"explain {type(e).__name__} / sql {_kind(o.result)}",
                                     f"{o.dataset}: explain refused with {type(e).__name__}, "
                                     f"sql gave {_kind(o.result)}"))
        elif isinstance(e, _Expl):
            if not e.within_budget:
                if not isinstance(err, pp.BudgetExceededError):
                    fails.append(Failure("explain/sql disagree",
                                         f"explain over budget / sql {_kind(o.result)}",
                                         f"{o.dataset}: explain said over budget, sql gave "
                                         f"{_kind(o.result)}"))
            elif isinstance(err, PRE_CHARGE):
                fails.append(Failure("explain/sql disagree",
                                     f"explain ok / sql {type(err).__name__}",
                                     f"{o.dataset}: explain accepted, sql refused: "
                                     f"{type(err).__name__}: {_short(str(err), 160)}"))
            # 4. charged what explain projected
            if o.answered and o.result.cost != e.marginal:
                fails.append(Failure("cost differs from explain", "",
                                     f"{o.dataset}: res.cost {o.result.cost!r} != explain "
                                     f"marginal {e.marginal!r}"))
            if (o.answered or isinstance(err, PostProcessingError)) and \
                    o.spent_after != e.projected_total:
                fails.append(Failure("cost differs from explain", "total",
                                     f"{o.dataset}: spent() {o.spent_after!r} != explain "
                                     f"projected total {e.projected_total!r}"))
    # 2. admissibility does not depend on the data
    ka, kb = _verdict(a), _verdict(b)
    if ka != kb and not ({ka, kb} <= {"answered", "PostProcessingError"}):
        fails.append(Failure("data-dependent outcome", " vs ".join(sorted((ka, kb))),
                             f"{a.dataset}: {ka}; {b.dataset}: {kb}"))
    elif ka == kb and ka not in ("answered", "PostProcessingError") and \
            isinstance(a.result, pp.PrivplanError) and isinstance(b.result, pp.PrivplanError) \
            and str(a.result) != str(b.result) and not isinstance(a.result, InternalError):
        fails.append(Failure("data-dependent refusal message", ka,
                             f"{a.dataset}: {_short(str(a.result), 200)}\n"
                             f"{b.dataset}: {_short(str(b.result), 200)}"))
    ea, eb = a.explain, b.explain
    if isinstance(ea, _Expl) and isinstance(eb, _Expl) and (
            ea.marginal != eb.marginal or ea.query_cost != eb.query_cost):
        fails.append(Failure("data-dependent cost", "explain",
                             f"explain marginal {ea.marginal!r} vs {eb.marginal!r}"))
    elif (isinstance(ea, _Expl)) != (isinstance(eb, _Expl)):
        fails.append(Failure("data-dependent outcome", "explain",
                             f"explain: {_kind(ea)} vs {_kind(eb)}"))
    if a.answered and b.answered:
        if a.result.cost != b.result.cost:
            fails.append(Failure("data-dependent cost", "sql",
                                 f"res.cost {a.result.cost!r} vs {b.result.cost!r}"))
        if list(a.result.df.columns) != list(b.result.df.columns):
            fails.append(Failure("data-dependent columns", "",
                                 f"{list(a.result.df.columns)} vs {list(b.result.df.columns)}"))
    if a.charged != b.charged:
        fails.append(Failure("data-dependent charge", "",
                             f"{a.dataset} charged {a.charged}, {b.dataset} charged {b.charged}"))
    return fails



def _kind(x: Any) -> str:
    if isinstance(x, BaseException):
        return type(x).__name__
    if isinstance(x, pp.Result):
        return "answered"
    if isinstance(x, _Expl):
        return "explained"
    return repr(x)


def _verdict(o: Outcome) -> str:
    return _kind(o.result)


# -----------------------------------------------------------------------------------------------
# The run: worker processes, the shrinker and the report
# -----------------------------------------------------------------------------------------------
#
# Queries run in worker processes (spawned: no DuckDB threads are forked) so that a query that
# hangs or crashes the process is a reported failure, not a stuck test: the parent waits at most
# QUERY_TIMEOUT seconds for each answer, then kills the worker and carries on with the rest of
# the batch in a new one (fresh sessions).

QUERY_TIMEOUT = 20.0
"""Seconds one query (explain + sql on both datasets) may take before it counts as a hang."""

STARTUP_TIMEOUT = 90.0
"""Seconds a fresh worker may take to import privplan before its first answer."""

SHRINK_SECONDS = 60.0
"""Total time spent shrinking reproducers (only when something failed)."""

WORKERS = max(1, min(2, os.cpu_count() or 1))


@dataclass
class QueryResult:
    """What a worker reports for one query (picklable: strings and Failures only)."""

    index: int
    verdict: str
    answered: bool
    failures: list[Failure]
    outcomes: tuple[str, ...]
    seconds: float


class Pair:
    """A session pair: the edge dataset and the other one, with the same budget."""

    def __init__(self, setup: BatchSetup) -> None:
        self.setup = setup
        self.sessions = (("edge", _session("edge", setup.budget)),
                         (setup.other, _session(setup.other, setup.budget)))

    def run(self, index: int, sql: str, budget: dict[str, Any]) -> QueryResult:
        t0 = time.perf_counter()
        a = run_query(self.sessions[0][1], self.sessions[0][0], sql, budget)
        b = run_query(self.sessions[1][1], self.sessions[1][0], sql, budget)
        va, vb = _verdict(a), _verdict(b)
        return QueryResult(index, va if va == vb else f"{va}|{vb}", a.answered, judge(a, b),
                           (a.describe(), b.describe()), time.perf_counter() - t0)

    def close(self) -> None:
        for _, s in self.sessions:
            s.close()


def _worker_main(conn: Any) -> None:
    """Run what the parent sends: ``("batch", setup, [(index, sql, budget), ...])`` or
    ``("check", setup, sql, budget)``; ``None`` stops. Warnings are errors, as in the suite
    (pyproject's ``filterwarnings``), so a warning inside privplan shows as it would there."""
    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its parse warnings are noise here
    warnings.simplefilter("error")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="mypy_extensions")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="libcst.*")
    conn.send(("ready", None))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if msg[0] == "batch":
            _, setup, items = msg
            pair = Pair(setup)
            try:
                for index, sql, budget in items:
                    conn.send(("result", pair.run(index, sql, budget)))
            finally:
                pair.close()
            conn.send(("done", None))
        else:
            _, setup, sql, budget = msg
            pair = Pair(setup)
            try:
                conn.send(("checked", pair.run(-1, sql, budget)))
            finally:
                pair.close()


class Worker:
    def __init__(self, ctx: Any) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.deadline = time.monotonic() + STARTUP_TIMEOUT
        self.items: list[tuple[int, str, dict[str, Any]]] = []  # the batch in flight
        self.answered = 0  # how many of them are answered
        self.batch = -1

    def send(self, msg: Any) -> None:
        self.conn.send(msg)
        self.deadline = max(self.deadline, time.monotonic() + QUERY_TIMEOUT)

    def recv(self) -> Any:
        msg = self.conn.recv()
        self.deadline = time.monotonic() + QUERY_TIMEOUT
        return msg

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(10)
        if self.proc.is_alive():
            self.kill()


def _lost(index: int, why: str, seconds: float) -> QueryResult:
    kind = "hang" if why == "hang" else "worker crashed"
    detail = (f"no answer within {QUERY_TIMEOUT:.0f} s (explain + sql on both datasets)"
              if why == "hang" else f"the worker process died: {why}")
    return QueryResult(index, kind, False, [Failure(kind, "", detail)], (kind,), seconds)


def run_cases(cases: list[Case], setups: list[BatchSetup],
              workers: int = WORKERS) -> dict[int, QueryResult]:
    """Run every case, batch by batch (one session pair per batch), on ``workers`` processes."""
    ctx = multiprocessing.get_context("spawn")
    todo: deque[tuple[int, list[tuple[int, str, dict[str, Any]]]]] = deque()
    for case in cases:
        if not todo or todo[-1][0] != case.batch:
            todo.append((case.batch, []))
        todo[-1][1].append((case.index, case.sql, case.budget))
    results: dict[int, QueryResult] = {}
    pool = [Worker(ctx) for _ in range(max(1, min(workers, len(todo))))]
    try:
        while todo or any(w.items for w in pool):
            for w in pool:
                if not w.items and todo:
                    w.batch, w.items = todo.popleft()
                    w.answered = 0
                    w.send(("batch", setups[w.batch], w.items))
            busy = [w for w in pool if w.items]
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = multiprocessing.connection.wait([w.conn for w in busy], timeout)
            for i, w in enumerate(pool):
                if not w.items:
                    continue
                lost = None
                if w.conn in ready:
                    try:
                        kind, payload = w.recv()
                    except (EOFError, OSError) as err:
                        lost = f"{type(err).__name__} (exit code {w.proc.exitcode})"
                    else:
                        if kind == "result":
                            results[payload.index] = payload
                            w.answered += 1
                        elif kind == "done":
                            w.items = []
                        continue
                elif time.monotonic() < w.deadline:
                    continue
                # the first query in flight hangs (or killed the process): report it, go on
                index = w.items[w.answered][0]
                results[index] = _lost(index, lost or "hang", QUERY_TIMEOUT)
                rest = w.items[w.answered + 1:]
                w.kill()
                pool[i] = Worker(ctx)
                if rest:
                    todo.appendleft((w.batch, rest))
    finally:
        for w in pool:
            w.stop()
    return results


class Checker:
    """One worker that runs single queries in fresh sessions (for the shrinker)."""

    def __init__(self) -> None:
        self.ctx = multiprocessing.get_context("spawn")
        self.worker = Worker(self.ctx)

    def run(self, setup: BatchSetup, sql: str, budget: dict[str, Any]) -> QueryResult:
        w = self.worker
        try:
            fresh = w.deadline - time.monotonic() > QUERY_TIMEOUT
            if fresh and w.conn.poll(STARTUP_TIMEOUT):  # wait for its "ready"
                w.recv()
            w.send(("check", setup, sql, budget))
            if w.conn.poll(QUERY_TIMEOUT):
                return w.recv()[1]
            why = "hang"
        except (EOFError, OSError) as err:
            why = type(err).__name__
        w.kill()
        self.worker = Worker(self.ctx)
        return _lost(-1, why, QUERY_TIMEOUT)

    def close(self) -> None:
        self.worker.stop()


@dataclass
class Found:
    case: Case
    failure: Failure
    outcomes: tuple[str, ...]


@dataclass
class Report:
    n: int
    seed: int
    seconds: float = 0.0
    verdicts: Counter = field(default_factory=Counter)
    by_origin: Counter = field(default_factory=Counter)
    found: list[Found] = field(default_factory=list)
    slowest: list[tuple[float, str]] = field(default_factory=list)
    shrunk: dict[tuple[str, str], tuple[str, tuple[str, ...], int]] = field(default_factory=dict)
    shrink_seconds: float = 0.0

    @property
    def groups(self) -> dict[tuple[str, str], list[Found]]:
        out: dict[tuple[str, str], list[Found]] = {}
        for f in self.found:
            out.setdefault((f.failure.kind, f.failure.key), []).append(f)
        return out


def fuzz(n: int, seed: int, *, shrink: bool = True, workers: int = WORKERS) -> Report:
    cases, setups = generate(n, seed)
    report = Report(n, seed)
    t0 = time.perf_counter()
    results = run_cases(cases, setups, workers)
    report.seconds = time.perf_counter() - t0
    for case in cases:
        res = results[case.index]
        report.verdicts[res.verdict] += 1
        origin = case.origin.split(":")
        report.by_origin[(":".join(origin[:2]) if origin[0] == "grammar" else origin[0],
                          "answered" if res.answered else "not answered")] += 1
        for failure in res.failures:
            report.found.append(Found(case, failure, res.outcomes))
    report.slowest = sorted(((results[c.index].seconds, c.sql) for c in cases),
                            reverse=True)[:5]
    if shrink and report.found:
        t1 = time.perf_counter()
        checker = Checker()
        done: dict[str, tuple[str, tuple[str, ...], int]] = {}  # first query -> its shrink
        try:
            for (kind, key), items in list(report.groups.items())[:SHRINK_GROUPS]:
                if kind in ("hang", "worker crashed") or \
                        time.perf_counter() - t1 > SHRINK_SECONDS:
                    continue
                first = items[0]
                earlier = done.get(first.case.sql)
                if earlier is not None:  # another failure of the same query: same reproducer?
                    res = checker.run(setups[first.case.batch], earlier[0], first.case.budget)
                    if any((f.kind, f.key) == (kind, key) for f in res.failures):
                        report.shrunk[(kind, key)] = (earlier[0], res.outcomes, 1)
                        continue
                report.shrunk[(kind, key)] = done[first.case.sql] = shrink_case(
                    checker, first, setups)
        finally:
            checker.close()
        report.shrink_seconds = time.perf_counter() - t1
    return report


_CLAUSES = frozenset({"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "UNION",
                      "FILTER", "QUALIFY", "WINDOW", "FROM", "JOIN", "LEFT", "ON", "USING"})
_WORDS = frozenset({"SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "IN", "ON", "BY", "AS",
                    "WHEN", "THEN", "ELSE", "CASE", "END", "FILTER", "OVER", "EXISTS", "IS",
                    "BETWEEN", "LIKE", "USING", "ALL", "ANY", "VALUES", "HAVING"})


def _join(toks: list[str]) -> str:
    """Tokens back to SQL, spaced as a person would write them."""
    out = ""
    for t in toks:
        prev = out[-1:] if out else ""
        glue = (not out or prev in "(.\n" or t in (")", ",", ".", ";", "::")
                or out.endswith("::")
                or (t == "(" and re.fullmatch(r"\w+", out.split(" ")[-1] or "") is not None
                    and out.split(" ")[-1].upper() not in _WORDS))
        out += ("" if glue else " ") + t + ("\n" if t.startswith("--") else "")
    return out.strip()


def _depths(toks: list[str]) -> list[int]:
    """The parenthesis depth of each token (a parenthesis has its outside's depth)."""
    out, d = [], 0
    for t in toks:
        if t == ")":
            d -= 1
        out.append(d)
        if t == "(":
            d += 1
    return out


def _structural(toks: list[str]) -> list[list[str]]:
    """Candidate simplifications, most aggressive first: drop a clause, a list item, an
    AND/OR operand, a parenthesised group or call; unwrap a call or parentheses."""
    depth, n = _depths(toks), len(toks)
    upper = [t.upper() for t in toks]
    out: list[list[str]] = []

    def end_of(i: int, stops: frozenset[str]) -> int:
        j = i + 1
        while j < n and depth[j] >= depth[i] and not (
                depth[j] == depth[i] and upper[j] in stops):
            j += 1
        return j

    for i, u in enumerate(upper):
        if u in _CLAUSES:
            out.append(toks[:i] + toks[end_of(i, _CLAUSES):])
        elif u in ("AND", "OR"):
            j = end_of(i, _CLAUSES | {"AND", "OR", ",", "THEN", "WHEN", "ELSE", "END"})
            out.append(toks[:i] + toks[j:])
            k = i - 1  # the operand before it
            while k > 0 and depth[k - 1] >= depth[i] and not (
                    depth[k - 1] == depth[i] and upper[k - 1] in
                    _CLAUSES | {"AND", "OR", ",", "WHEN", "SELECT", "NOT", "BETWEEN"}):
                k -= 1
            out.append(toks[:k] + toks[i + 1:])
        elif u == ",":
            out.append(toks[:i] + toks[end_of(i, _CLAUSES | {","}):])
            k = i - 1
            while k > 0 and depth[k - 1] >= depth[i] and not (
                    depth[k - 1] == depth[i] and upper[k - 1] in {",", "SELECT", "BY"}):
                k -= 1
            out.append(toks[:k] + toks[i + 1:])
        elif toks[i] == "(":
            k = i + 1
            while k < n and not (toks[k] == ")" and depth[k] == depth[i]):
                k += 1
            if k >= n:
                continue
            call = i > 0 and re.fullmatch(r"\w+", toks[i - 1]) is not None and \
                upper[i - 1] not in _WORDS
            start = i - 1 if call else i
            out.append(toks[:start] + toks[k + 1:])
            out.append(toks[:start] + toks[i + 1:k] + toks[k + 1:])
    out.sort(key=len)
    return out


def shrink_case(checker: Checker, found: Found, setups: list[BatchSetup],
                ) -> tuple[str, tuple[str, ...], int]:
    """Simplify the query while the failure (same kind and key) still shows in fresh
    sessions: structural steps first (drop a clause, list item, operand, call; unwrap a call),
    then deletion of token spans (ddmin: halving the span). Returns the query, both outcomes
    and the runs used."""
    setup, budget = setups[found.case.batch], found.case.budget
    runs, t0 = 0, time.perf_counter()

    def fails(sql: str) -> QueryResult | None:
        nonlocal runs
        runs += 1
        res = checker.run(setup, sql, budget)
        same = any(f.kind == found.failure.kind and f.key == found.failure.key
                   for f in res.failures)
        return res if same else None

    def more() -> bool:
        return runs < SHRINK_RUNS and time.perf_counter() - t0 < SHRINK_GROUP_SECONDS

    best = fails(found.case.sql)
    if best is None:
        alone = ("(does not fail alone in fresh sessions: it depends on the session's "
                 "history)")
        return found.case.sql, (alone,), runs
    toks = [t for t in tokens(found.case.sql) if not t.isspace()]
    join: Callable[[list[str]], str] = _join
    res = fails(join(toks))
    if res is None:  # the spacing matters: shrink the raw tokens instead
        toks, join = tokens(found.case.sql), "".join
    else:
        best = res
    progressed = True
    while progressed and more():
        progressed = False
        for candidate in _structural(toks):
            if not more():
                break
            res = fails(join(candidate))
            if res is not None:
                toks, best, progressed = candidate, res, True
                break
    size = max(1, len(toks) // 2)
    while size >= 1 and more():
        i, progressed = 0, False
        while i < len(toks) and more():
            candidate = toks[:i] + toks[i + size:]
            if candidate and not all(t.isspace() for t in toks[i:i + size]):
                res = fails(join(candidate))
                if res is not None:
                    toks, best, progressed = candidate, res, True
                    continue
            i += size
        if not progressed:
            size //= 2
    return join(toks), best.outcomes, runs


def format_report(report: Report) -> str:
    lines = [f"SQL fuzz: {report.n} queries (seed {report.seed}) in {report.seconds:.1f} s "
             f"on {WORKERS} worker(s)"
             + (f" (+{report.shrink_seconds:.1f} s shrinking)" if report.shrink_seconds else "")]
    lines.append(f"  answered on both datasets: {report.verdicts.get('answered', 0)}")
    for verdict, count in sorted(report.verdicts.items(), key=lambda kv: -kv[1]):
        if verdict != "answered":
            lines.append(f"  {verdict}: {count}")
    lines.append("  by origin: " + ", ".join(f"{o}/{v} {c}" for (o, v), c in
                                             sorted(report.by_origin.items())))
    lines.append("  slowest: " + "; ".join(f"{s * 1000:.0f} ms {_short(repr(q), 60)}"
                                           for s, q in report.slowest))
    groups = report.groups
    lines.append(f"  failures: {len(report.found)} in {len(groups)} group(s)")
    for (kind, key), items in groups.items():
        first = items[0]
        lines.append("")
        lines.append(f"== {kind} [{key}]: {len(items)} quer{'y' if len(items) == 1 else 'ies'}")
        lines.append(f"   detail: {first.failure.detail}")
        lines.append(f"   origin: {first.case.origin}; budget {first.case.budget}; "
                     f"query #{first.case.index} (batch {first.case.batch})")
        lines.append(f"   query:  {_short(repr(first.case.sql), 400)}")
        shrunk = report.shrunk.get((kind, key))
        if shrunk is not None:
            sql, outcomes, runs = shrunk
            lines.append(f"   minimal ({runs} runs): {_short(repr(sql), 400)}")
            lines += [f"      {o}" for o in outcomes]
        else:
            lines += [f"      {o}" for o in first.outcomes]
        for more in items[1:4]:
            lines.append(f"   also: {_short(repr(more.case.sql), 200)}")
    return "\n".join(lines)


def _check(report: Report) -> None:
    text = format_report(report)
    if not report.found:
        print(text)  # the counts and timings (shown with -s)
    assert not report.found, "fuzz failures:\n" + text


# -----------------------------------------------------------------------------------------------
# Tests
# -----------------------------------------------------------------------------------------------


def test_generators_are_deterministic_and_varied() -> None:
    a, _ = generate(130, 3)
    b, _ = generate(130, 3)
    assert [c.sql for c in a] == [c.sql for c in b]
    origins = {c.origin.split(":")[0] for c in a}
    assert origins == {"pinned", "regression", "grammar", "mutation"}


@pytest.mark.invariant(2)
@pytest.mark.invariant(8)
def test_fuzz_fast() -> None:
    _check(fuzz(FAST_QUERIES, FAST_SEED))


@pytest.mark.invariant(2)
@pytest.mark.invariant(8)
@pytest.mark.slow
def test_fuzz_slow() -> None:
    _check(fuzz(SLOW_QUERIES, SLOW_SEED))


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else SLOW_QUERIES
    s = int(sys.argv[2]) if len(sys.argv) > 2 else SLOW_SEED
    print(format_report(fuzz(n, s)))
