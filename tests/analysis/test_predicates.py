"""Truth regions of predicates, checked against DuckDB on every point of a small product domain.

The oracle: a DuckDB table holds every combination of a few values per column (NULL and values
that no predicate names included). For a supported predicate p, the rows where DuckDB finds p
TRUE must be exactly the rows inside ``truth_regions(p).true``, and the rows where ``NOT p`` is
TRUE exactly those inside ``.false``. Unsupported pieces may only make the sets larger, and must
leave a note.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import date, datetime
from typing import Any

import duckdb
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from privplan.analysis.predicates import (
    MAX_BOXES,
    ColumnType,
    TruthRegions,
    _intersect_sets,
    region_of,
    truth_regions,
)
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet, Interval

COLUMNS: dict[str, ColumnType] = {"i": "int", "s": "str", "d": "date", "f": "float", "b": "bool"}
DOMAIN: dict[str, list[Any]] = {
    "i": [-3, 0, 1, 2, 3, 5, 10, None],
    "s": ["", "a", "ab", "b", "it's", None],
    "d": [date(2019, 12, 31), date(2020, 1, 1), date(2020, 1, 2), date(2020, 3, 1), None],
    "f": [-1.5, 0.0, 0.5, 2.5, 3.0, None],
    "b": [True, False, None],
}
NAMES = list(DOMAIN)
SQL_TYPES = {"i": "INTEGER", "s": "VARCHAR", "d": "DATE", "f": "DOUBLE", "b": "BOOLEAN"}


def parse(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, dialect="duckdb")


class Oracle:
    """The product-domain table in DuckDB, and region membership by row id."""

    def __init__(self) -> None:
        self.con = duckdb.connect()
        strides, stride = {}, 1
        for c in reversed(NAMES):
            strides[c], stride = stride, stride * len(DOMAIN[c])
        for c in NAMES:
            self.con.execute(f"CREATE TABLE d_{c} (k_{c} INTEGER, {c} {SQL_TYPES[c]})")
            self.con.executemany(f"INSERT INTO d_{c} VALUES (?, ?)", list(enumerate(DOMAIN[c])))
        rid = " + ".join(f"k_{c} * {strides[c]}" for c in NAMES)
        tables = ", ".join(f"d_{c}" for c in NAMES)
        self.con.execute(f"CREATE TABLE t AS SELECT {rid} AS rid, {', '.join(NAMES)} FROM {tables}")
        # An undeclared column: present in the table, unknown to the analyser.
        self.con.execute("ALTER TABLE t ADD COLUMN q INTEGER DEFAULT 1")
        self.rid: dict[tuple[int, ...], int] = {
            idx: sum(k * strides[c] for c, k in zip(NAMES, idx))
            for idx in itertools.product(*(range(len(DOMAIN[c])) for c in NAMES))
        }
        assert self.con.execute("SELECT count(DISTINCT rid) FROM t").fetchone() == (len(self.rid),)

    def where(self, predicate: str) -> frozenset[int]:
        return frozenset(
            r for (r,) in self.con.execute(f"SELECT rid FROM t WHERE {predicate}").fetchall()
        )

    def rows_in(self, region: Region) -> frozenset[int]:
        out: set[int] = set()
        for box in region.boxes:
            allowed = [
                [k for k, v in enumerate(DOMAIN[c]) if box.get(c).contains(v)] for c in NAMES
            ]
            out.update(self.rid[idx] for idx in itertools.product(*allowed))
        return frozenset(out)

    def check(self, predicate: str, *, exact: bool) -> TruthRegions:
        tr = truth_regions(parse(predicate), COLUMNS)
        true_rows, false_rows = self.where(f"({predicate})"), self.where(f"NOT ({predicate})")
        got_true, got_false = self.rows_in(tr.true), self.rows_in(tr.false)
        assert true_rows <= got_true, f"TRUE-region misses rows for {predicate}"
        assert false_rows <= got_false, f"FALSE-region misses rows for {predicate}"
        if exact:
            assert got_true == true_rows, f"TRUE-region too large for {predicate}: {tr.true}"
            assert got_false == false_rows, f"FALSE-region too large for {predicate}: {tr.false}"
        return tr


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    o = Oracle()
    yield o
    o.con.close()


# -- hand-written predicates: exact --------------------------------------------------------------

# fmt: off
EXACT = [
    # comparisons, each operator, each type
    "i = 2", "i <> 2", "i != 2", "i < 3", "i <= 3", "i > 3", "i >= 3", "i == 5",
    "i = 4", "i < 4", "i > 100", "i >= -100",
    "s = 'a'", "s <> 'a'", "s < 'b'", "s <= 'ab'", "s > 'a'", "s >= ''", "s = 'it''s'",
    "s = 'B'", "s < 'aa'",
    "d = DATE '2020-01-01'", "d < DATE '2020-01-02'", "d >= DATE '2020-01-02'", "d <> '2020-01-01'",
    "d > '2019-12-31'", "d <= '2020-02-15'",
    "f = 2.5", "f <> 0.5", "f < 0.5", "f <= 0", "f > -1.5", "f >= 3", "f < 1.25", "f = 1",
    "b = TRUE", "b <> FALSE", "b < TRUE", "b >= FALSE",
    # non-integer literals on int columns, timestamps on date columns
    "i > 2.5", "i = 2.5", "i < 2.5", "i >= -0.5", "i <= 3.0", "i = 3.0", "i > 2.5e0",
    "d < TIMESTAMP '2020-01-01 10:00:00'", "d = TIMESTAMP '2020-01-01 10:00:00'",
    "d = TIMESTAMP '2020-01-01 00:00:00'", "d > TIMESTAMP '2020-01-01 10:00:00'",
    "d <= TIMESTAMP '2020-01-02 00:00:00'",
    # literal on the left
    "3 < i", "5 = i", "2.5 <= i", "'b' > s", "DATE '2020-01-01' < d", "0.5 >= f", "TRUE = b",
    # negative numbers and casts of literals
    "i > -3", "i = -3", "f < -1", "i = '5'::INT", "i = CAST('3' AS INTEGER)", "i < CAST(2 AS BIGINT)",
    "d = CAST('2020-01-02' AS DATE)", "d < '2020-03-01'::DATE", "s = CAST('a' AS VARCHAR)",
    "d = CAST(TIMESTAMP '2020-01-01 12:00:00' AS DATE)", "i = -(2)", "i = CAST(3.0 AS INT)",
    # BETWEEN / NOT BETWEEN
    "i BETWEEN 1 AND 3", "i NOT BETWEEN 1 AND 3", "i BETWEEN 3 AND 1", "i BETWEEN 0.5 AND 2.5",
    "s BETWEEN 'a' AND 'b'", "d BETWEEN '2020-01-01' AND DATE '2020-01-02'",
    "f BETWEEN 0 AND 2.5", "NOT (f BETWEEN 0 AND 2.5)", "i BETWEEN NULL AND 5",
    "i NOT BETWEEN NULL AND 2",
    # IN / NOT IN, with NULLs
    "i IN (1, 2, 5)", "i NOT IN (1, 2, 5)", "i IN (1, NULL)", "i NOT IN (1, NULL)",
    "i IN (NULL)", "s IN ('a', 'zz')", "s NOT IN ('a', 'b', NULL)", "d IN ('2020-01-01', '2020-03-01')",
    "f IN (0.5, 3)", "b IN (TRUE)", "i IN (2.5, 3)", "NOT (i IN (1, 2) OR s IN ('a'))",
    # NULL tests and NULL-safe comparison
    "i IS NULL", "i IS NOT NULL", "s IS NULL", "NOT (d IS NULL)", "b IS NULL",
    "i IS DISTINCT FROM 2", "i IS NOT DISTINCT FROM 2", "i IS DISTINCT FROM NULL",
    "i IS NOT DISTINCT FROM NULL", "NULL IS NOT DISTINCT FROM s", "NULL IS DISTINCT FROM NULL",
    "s IS DISTINCT FROM 'a'", "NOT (f IS DISTINCT FROM 0.5)", "i ISNULL", "i NOTNULL",
    # NULL operands
    "i = NULL", "i <> NULL", "NULL < i", "NOT (i = NULL)", "i > CAST(NULL AS INTEGER)",
    "NULL", "NOT NULL",
    # boolean columns and literals
    "b", "NOT b", "b IS TRUE", "b IS FALSE", "b IS NOT TRUE", "b IS NOT FALSE", "TRUE", "FALSE",
    "NOT TRUE", "b AND i = 1", "b OR i = 1", "NOT (b OR i = 1)",
    # nested AND / OR / NOT, qualified names, odd case
    "i > 1 AND i < 5", "i > 2 AND i < 3", "i < 2 OR i > 3", "(i < 2 OR i > 3) AND s = 'a'",
    "NOT (i < 2 OR i > 3) AND NOT s = 'a'", "NOT (NOT (i = 1))",
    "(i = 1 AND s = 'a') OR (i = 2 AND s = 'b') OR d IS NULL",
    "NOT ((i = 1 AND s = 'a') OR (i = 2 AND s = 'b') OR d IS NULL)",
    "t.i = 1 AND T.S = 'a'", "\"I\" >= 2", "I IN (0, 1)",
    "(i <= 3 OR i >= 4) OR i IS NULL", "NOT (i <= 3 OR i >= 4)",
    "(b OR NOT b) AND (i = 2 OR i <> 2)", "i = 1 OR NULL", "i = 1 AND NULL", "NOT (i = 1 AND NULL)",
    "NOT (i = 1 OR NULL)", "(f > 0 OR s < 'b') AND NOT (d = '2020-01-01' AND b)",
]
# fmt: on


@pytest.mark.invariant(1)
@pytest.mark.invariant(6)
@pytest.mark.parametrize("predicate", EXACT)
def test_exact_on_product_domain(oracle: Oracle, predicate: str) -> None:
    tr = oracle.check(predicate, exact=True)
    assert not tr.true.notes and not tr.false.notes, tr.true.notes + tr.false.notes


# -- unsupported: whole domain, with a note -------------------------------------------------------

FALLBACKS = [
    ("s LIKE 'a%'", "LIKE on s"),
    ("s ILIKE 'A%'", "ILIKE on s"),
    ("NOT (s LIKE 'a%')", "LIKE on s"),
    ("lower(s) = 'a'", "LOWER()"),
    ("length(s) > 1", "LENGTH()"),
    ("i < f", "two columns"),
    ("i = i", "two columns"),
    ("i + 1 > 3", "arithmetic"),
    ("3 < i * 2", "arithmetic"),
    ("i IN (SELECT 1)", "subquery"),
    ("EXISTS (SELECT 1)", "subquery"),
    ("i = (SELECT 1)", "subquery"),
    ("CASE WHEN i > 1 THEN b ELSE FALSE END", "CASE"),
    ("(CASE WHEN i > 1 THEN 1 ELSE 0 END) = 1", "CASE"),
    ("q = 1", "column q is not declared"),
    ("i = '5'", "does not fit int column i"),
    ("d = '2020-1-1'", "does not fit date column d"),
    ("b = 1", "does not fit bool column b"),
    ("CAST(i AS DOUBLE) = 2", "CAST of column i"),
    ("1 = 1", "two constants"),
    ("i", "int column i used as a condition"),
    ("i = CAST(2.5 AS INT)", "CAST of a decimal"),
    ("i = 1e300", "too large to compare exactly"),
    ("lower(s) IS NULL", "IS test"),
    ("s || 'x' = 'ax'", "arithmetic"),
]


@pytest.mark.invariant(1)
@pytest.mark.parametrize(("predicate", "reason"), FALLBACKS)
def test_unsupported_is_whole_domain_with_note(oracle: Oracle, predicate: str, reason: str) -> None:
    tr = oracle.check(predicate, exact=False)
    assert tr.true.is_full() and tr.false.is_full()
    for region in (tr.true, tr.false):
        assert any(reason in n and "conservative" in n for n in region.notes), region.notes


@pytest.mark.invariant(1)
@pytest.mark.parametrize(
    "predicate",
    [
        "i = 1 AND lower(s) = 'a'",
        "i = 1 OR lower(s) = 'a'",
        "NOT (i = 1 AND s LIKE 'a%')",
        "(i < f OR b) AND NOT (i + 1 > 3 OR s = 'a')",
        "i IN (1, 2) AND s NOT IN (SELECT 'a')",
        "2 IN (i, 5)",
        "3 BETWEEN i AND 10",
    ],
)
def test_partly_unsupported_is_sound_and_noted(oracle: Oracle, predicate: str) -> None:
    tr = oracle.check(predicate, exact=False)
    assert tr.true.notes and tr.false.notes


@pytest.mark.invariant(1)
@pytest.mark.parametrize(
    "predicate",
    [
        "f = CAST(2.5 AS DOUBLE) OR f > 2.5e0",
        "f < 2.5e0",
        "f = 0.1",
        "f <> 0.1",
        # IN / BETWEEN type all operands together: a DOUBLE makes DuckDB round the decimals.
        "i IN (3.00000000000000000001, CAST(2 AS DOUBLE))",
        "i NOT IN (3.00000000000000000001, 2.5e0)",
        "i BETWEEN 3.00000000000000000001 AND 5e0",
        "i NOT BETWEEN 1 AND 2.99999999999999999999e0",
        "f IN (2.5, 1e0)",
        "f NOT BETWEEN 0.5 AND 2.5e0",
    ],
)
def test_widened_literals_are_sound(oracle: Oracle, predicate: str) -> None:
    oracle.check(predicate, exact=False)


def test_decimal_literal_beyond_every_double_is_not_analysed() -> None:
    """A decimal literal too long for DuckDB's DECIMAL and beyond the double range (a fuzz
    find: float() overflowed into an InternalError) leaves the predicate unanalysed."""
    from privplan.analysis.predicates import region_of

    huge = "1" + "0" * 400 + ".5"
    where = sqlglot.parse_one(f"SELECT 1 FROM t WHERE i >= {huge}", dialect="duckdb")
    assert region_of(where.args["where"].this, {"i": "int"}).is_full()


def test_partly_unsupported_keeps_the_supported_part() -> None:
    region = region_of(parse("i = 1 AND lower(s) = 'a'"), COLUMNS)
    assert region.boxes == Region.column("i", ColumnSet.points([1])).boxes
    assert region.notes


def test_between_symmetric_is_not_analysed() -> None:
    # DuckDB has no BETWEEN SYMMETRIC, so this one is checked without the oracle.
    tr = truth_regions(parse("i BETWEEN SYMMETRIC 3 AND 1"), COLUMNS)
    assert tr.true.is_full() and tr.false.is_full() and "SYMMETRIC" in tr.true.notes[0]


def test_like_note_text() -> None:
    (note,) = region_of(parse("name LIKE 'a%'"), {"name": "str"}).notes
    assert note.startswith("LIKE on name: pattern predicates are not analysed")
    assert note.endswith("assuming the whole domain (conservative)")


# -- float literals: sound for DOUBLE, REAL and DECIMAL storage ------------------------------------

# fmt: off
FLOAT_VALUES = [
    "0.1", "0.099", "0.101", "0.3", "2.5", "0.001", "-0.1", "100", "2.50000000000000000001",
    "0.09999999999999999999", "0.30000000000000000001",
]
FLOAT_PREDICATES = [
    "x = 0.1", "x <> 0.1", "x < 0.1", "x <= 0.1", "x > 0.1", "x >= 0.1", "x = 0.1e0",
    "x < 0.1e0", "x >= 0.1e0", "x BETWEEN 0.1 AND 0.3", "x IN (0.1, 0.3)", "x NOT IN (0.1, 0.3)",
    "x = CAST(0.1 AS REAL)", "x >= 0.3 AND x <= 0.30000001", "x > 0.09999999999999999999",
    "x <= 0.1000000000000000000001", "x = 100", "x < 100.0", "x IS DISTINCT FROM 0.3",
    "x > 2.4999999999999999", "x < 2.5000000000000001",
    "x IN (2.5, 1e0)", "x BETWEEN 0.3 AND 3e0", "x NOT IN (0.1, 2.5, 1e0)", "x = 2.5",
    "x <> 2.5", "x BETWEEN 2.5 AND 2.5", "x > 0.30000000000000000001",
]
# fmt: on


@pytest.mark.parametrize("storage", ["DOUBLE", "REAL", "DECIMAL(18,3)", "DECIMAL(38,20)"])
@pytest.mark.parametrize("predicate", FLOAT_PREDICATES)
def test_float_literals_sound_for_every_storage(storage: str, predicate: str) -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE u (rid INTEGER, x {storage})")
    con.executemany(
        "INSERT INTO u VALUES (?, CAST(? AS DECIMAL(38,20)))", list(enumerate(FLOAT_VALUES))
    )
    con.execute("INSERT INTO u VALUES (99, NULL)")
    values = dict(con.execute("SELECT rid, x FROM u").fetchall())
    tr = truth_regions(parse(predicate), {"x": "float"})
    for sql, region in ((f"({predicate})", tr.true), (f"NOT ({predicate})", tr.false)):
        for (rid,) in con.execute(f"SELECT rid FROM u WHERE {sql}").fetchall():
            assert region.contains({"x": values[rid]}), (storage, sql, values[rid], region)
    con.close()


def test_float_literals_exact_when_real_represents_them() -> None:
    tr = truth_regions(parse("x < 2.5"), {"x": "float"})
    assert tr.true == Region.column("x", ColumnSet.interval(None, 2.5, hi_closed=False))
    assert tr.false == Region.column("x", ColumnSet.interval(2.5, None))
    widened = region_of(parse("x = 0.1"), {"x": "float"})
    (box,) = widened.boxes
    (iv,) = box.get("x").intervals
    assert iv.lo < 0.1 < iv.hi and iv.hi - iv.lo < 1e-8


# -- timestamps -------------------------------------------------------------------------------------

TS_VALUES = [
    datetime(2020, 1, 1),
    datetime(2020, 1, 1, 10),
    datetime(2020, 1, 1, 10, 0, 0, 500000),
    datetime(2020, 1, 2),
    datetime(2019, 6, 1, 23, 59, 59),
    None,
]
# fmt: off
TS_PREDICATES = [
    "ts = TIMESTAMP '2020-01-01 10:00:00'", "ts > TIMESTAMP '2020-01-01 10:00:00'",
    "ts >= '2020-01-01 10:00:00.5'", "ts < DATE '2020-01-02'", "ts <= '2020-01-01'",
    "ts BETWEEN '2020-01-01' AND '2020-01-01 10:00'", "ts IN ('2020-01-02', TIMESTAMP '2020-01-01 10:00:00')",
    "ts IS DISTINCT FROM '2020-01-01T10:00:00'", "NOT (ts < DATETIME '2020-01-01 10:00:00.25')",
    "ts = CAST('2020-01-02' AS TIMESTAMP)", "ts IS NULL OR ts < '2019-12-31'",
]
# fmt: on


@pytest.mark.parametrize("predicate", TS_PREDICATES)
def test_timestamps_exact(predicate: str) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE u (rid INTEGER, ts TIMESTAMP)")
    con.executemany("INSERT INTO u VALUES (?, ?)", list(enumerate(TS_VALUES)))
    tr = truth_regions(parse(predicate), {"ts": "timestamp"})
    assert not tr.true.notes
    for sql, region in ((f"({predicate})", tr.true), (f"NOT ({predicate})", tr.false)):
        rows = {r for (r,) in con.execute(f"SELECT rid FROM u WHERE {sql}").fetchall()}
        assert rows == {k for k, v in enumerate(TS_VALUES) if region.contains({"ts": v})}, sql
    con.close()


# -- normalisation of discrete columns -------------------------------------------------------------


@pytest.mark.parametrize(
    ("predicate", "expected"),
    [
        ("i < 5", ColumnSet.interval(None, 4)),
        ("i > 2.5", ColumnSet.interval(3, None)),
        ("i = 2.5", ColumnSet.empty()),
        ("i > 2 AND i < 3", ColumnSet.empty()),
        ("i <> 5", ColumnSet.of([Interval(None, 4), Interval(6, None)])),
        ("i <= 3 OR i >= 4", ColumnSet.not_null()),
        ("i BETWEEN 1 AND 3 OR i BETWEEN 4 AND 6", ColumnSet.interval(1, 6)),
        ("d < DATE '2020-01-05'", ColumnSet.interval(None, date(2020, 1, 4))),
        ("d > TIMESTAMP '2020-01-05 00:00:01'", ColumnSet.interval(date(2020, 1, 6), None)),
        ("b OR NOT b", ColumnSet.not_null()),
        ("b IS NOT FALSE", ColumnSet.points([True], null=True)),
    ],
)
def test_discrete_normal_form(predicate: str, expected: ColumnSet) -> None:
    col = "b" if predicate.startswith("b") else predicate[0]
    assert region_of(parse(predicate), COLUMNS) == Region.column(col, expected)


def test_dates_beyond_python_range_stay_non_empty() -> None:
    above = region_of(parse("d > DATE '9999-12-31'"), {"d": "date"})
    below = region_of(parse("d < DATE '0001-01-01'"), {"d": "date"})
    assert above == Region.column("d", ColumnSet.interval(date.max, None, lo_closed=False))
    assert below == Region.column("d", ColumnSet.interval(None, date.min, hi_closed=False))
    assert region_of(parse("d >= DATE '9999-12-31'"), {"d": "date"}).contains({"d": date.max})


# -- API details -------------------------------------------------------------------------------------


def test_no_where_is_full() -> None:
    assert region_of(None, COLUMNS) == Region.full()


@pytest.mark.invariant(6)
def test_three_valued_logic_examples() -> None:
    lt5 = truth_regions(parse("x < 5"), {"x": "float"})
    assert lt5.true == Region.column("x", ColumnSet.interval(None, 5.0, hi_closed=False))
    assert lt5.false == Region.column("x", ColumnSet.interval(5.0, None))
    assert not lt5.true.contains({"x": None}) and not lt5.false.contains({"x": None})
    assert truth_regions(parse("x = NULL"), {"x": "int"}) == TruthRegions(
        Region.empty(), Region.empty()
    )
    assert truth_regions(parse("x NOT IN (1, NULL)"), {"x": "int"}).true.is_empty()
    assert truth_regions(parse("x IN (1, NULL)"), {"x": "int"}).false.is_empty()
    distinct = truth_regions(parse("x IS DISTINCT FROM 1"), {"x": "int"})
    assert distinct.true.contains({"x": None}) and not distinct.false.contains({"x": None})


def test_input_tree_is_not_modified() -> None:
    tree = parse("i BETWEEN 1 AND 3 AND s IN ('a', NULL) AND NOT (5 < i)")
    before = tree.copy()
    truth_regions(tree, COLUMNS)
    assert tree == before and tree.sql() == before.sql()


def test_accepts_a_where_node_and_uppercase_column_keys() -> None:
    where = parse("SELECT * FROM t WHERE I = 1").args["where"]
    assert region_of(where, {"I": "int"}) == Region.column("i", ColumnSet.points([1]))


@pytest.mark.invariant(1)
def test_box_cap_falls_back_to_sound_hull(oracle: Oracle) -> None:
    # 10 clauses of 2 alternatives over two columns -> 2**10 boxes without the cap.
    clauses = [f"(i <> {k} OR s <> 'v{k}')" for k in range(10)]
    clauses += [f"(i = {k} OR s = 'a' OR d IS NULL)" for k in (0, 1, 2)]
    predicate = " AND ".join(clauses)
    tr = oracle.check(predicate, exact=False)
    assert len(tr.true.boxes) <= MAX_BOXES and len(tr.false.boxes) <= MAX_BOXES
    big = " OR ".join(f"(i = {k} AND s = 'x{k}')" for k in range(MAX_BOXES + 5))
    tr2 = oracle.check(big, exact=False)
    assert len(tr2.true.boxes) <= MAX_BOXES
    assert any("hull" in n and "conservative" in n for n in tr2.true.notes)


def test_long_chains_and_deep_nesting_do_not_crash() -> None:
    chain = " AND ".join(f"i <> {k}" for k in range(3000))
    region = region_of(parse(chain), COLUMNS)
    assert region.contains({"i": -1}) and not region.contains({"i": 2999})
    assert not region.notes
    nots: exp.Expression = parse("i = 1")
    for _ in range(20_001):
        nots = exp.Not(this=nots)
    assert truth_regions(nots, COLUMNS) == truth_regions(parse("NOT i = 1"), COLUMNS)
    deep: exp.Expression = parse("i = 1")
    for k in range(5_000):  # alternating AND / OR: too deep to walk, so the whole domain
        deep = exp.And(this=exp.Or(this=deep, expression=parse(f"i = {k}")), expression=parse("b"))
    out = truth_regions(deep, COLUMNS)
    assert out.true.is_full() and out.false.is_full()
    assert "nested too deeply" in out.true.notes[0]


# -- random predicates against DuckDB ----------------------------------------------------------------

LITERALS: dict[str, list[str]] = {
    "i": ["-3", "0", "1", "2", "3", "4", "5", "11", "2.5", "-0.5", "3.0", "'5'::INT", "2.5e0"],
    "s": ["''", "'a'", "'ab'", "'b'", "'it''s'", "'zz'", "'B'", "CAST('a' AS VARCHAR)"],
    "d": [
        "DATE '2020-01-01'",
        "'2020-01-02'",
        "DATE '2019-12-31'",
        "'2020-02-15'",
        "TIMESTAMP '2020-01-01 10:00:00'",
        "TIMESTAMP '2020-01-02 00:00:00'",
        "CAST('2020-03-01' AS DATE)",
    ],
    "f": ["-1.5", "0", "0.5", "2.5", "3", "1.25", "100", "-2"],
    "b": ["TRUE", "FALSE"],
}
OPS = ["=", "<>", "!=", "<", "<=", ">", ">="]


@st.composite
def literal(draw: st.DrawFn, col: str) -> str:
    if draw(st.integers(0, 9)) == 0:
        return "NULL"
    return draw(st.sampled_from(LITERALS[col]))


@st.composite
def leaf(draw: st.DrawFn) -> str:
    col = draw(st.sampled_from(NAMES))
    kind = draw(st.sampled_from(["cmp", "cmp", "between", "in", "null", "distinct", "bool"]))
    if kind == "cmp":
        op, lit = draw(st.sampled_from(OPS)), draw(literal(col))
        return f"{lit} {op} {col}" if draw(st.booleans()) else f"{col} {op} {lit}"
    if kind == "between":
        neg = "NOT " if draw(st.booleans()) else ""
        return f"{col} {neg}BETWEEN {draw(literal(col))} AND {draw(literal(col))}"
    if kind == "in":
        items = draw(st.lists(literal(col), min_size=1, max_size=4))
        neg = "NOT " if draw(st.booleans()) else ""
        return f"{col} {neg}IN ({', '.join(items)})"
    if kind == "null":
        return f"{col} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
    if kind == "distinct":
        return f"{col} IS {'NOT ' if draw(st.booleans()) else ''}DISTINCT FROM {draw(literal(col))}"
    return draw(
        st.sampled_from(
            ["b", "b IS TRUE", "b IS NOT FALSE", "b IS NOT TRUE", "TRUE", "FALSE", "NULL"]
        )
    )


predicates = st.recursive(
    leaf(),
    lambda inner: st.one_of(
        inner.map(lambda p: f"NOT ({p})"),
        st.tuples(inner, inner).map(lambda ab: f"({ab[0]}) AND ({ab[1]})"),
        st.tuples(inner, inner).map(lambda ab: f"({ab[0]}) OR ({ab[1]})"),
    ),
    max_leaves=8,
)


@pytest.mark.invariant(1)
@pytest.mark.invariant(6)
@pytest.mark.slow
@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(predicate=predicates)
def test_random_predicates_exact(oracle: Oracle, predicate: str) -> None:
    tr = oracle.check(predicate, exact=True)
    assert not tr.true.notes and not tr.false.notes


def test_values_kept_as_column_types() -> None:
    region = region_of(parse("i = 2.0 AND f = 2 AND d = '2020-01-01' AND s = 'a'"), COLUMNS)
    (box,) = region.boxes
    kinds = {c: type(s.intervals[0].lo) for c, s in box.constraints}
    assert kinds == {"i": int, "f": float, "d": date, "s": str}


@st.composite
def int_sets(draw: st.DrawFn) -> ColumnSet:
    pieces = []
    for _ in range(draw(st.integers(0, 4))):
        lo, hi = (
            draw(st.one_of(st.none(), st.integers(-6, 6))),
            draw(st.one_of(st.none(), st.integers(-6, 6))),
        )
        if lo is not None and hi is not None and hi < lo:
            lo, hi = hi, lo
        pieces.append(Interval(lo, hi, draw(st.booleans()), draw(st.booleans())))
    return ColumnSet.of(pieces, draw(st.booleans()))


@given(int_sets(), int_sets())
def test_sweep_intersection_matches_column_set(x: ColumnSet, y: ColumnSet) -> None:
    assert _intersect_sets(x, y) == x.intersect(y)
