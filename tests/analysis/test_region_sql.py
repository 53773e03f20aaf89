"""region_to_sql: readable text, DuckDB agrees with its meaning, and it parses back to the region."""

from __future__ import annotations

import itertools
from datetime import date, datetime, timedelta
from typing import Any

import duckdb
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privplan.analysis.predicates import ColumnType, region_of, simplify_region
from privplan.analysis.region_sql import quote_identifier, region_to_sql, sql_literal
from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet, Interval

COLUMNS: dict[str, ColumnType] = {
    "i": "int",
    "s": "str",
    "d": "date",
    "f": "float",
    "b": "bool",
    "ts": "timestamp",
    "order": "int",
    "my col": "str",
}
D0 = date(2020, 1, 1)
T0 = datetime(2020, 1, 1)

VALUES: dict[str, st.SearchStrategy[Any]] = {
    "i": st.integers(-6, 6),
    "s": st.sampled_from(["", "a", "ab", "b", "it's", "z", 'q"t', "é"]),
    "d": st.integers(-5, 5).map(lambda k: D0 + timedelta(days=k)),
    "f": st.integers(-16, 16).map(lambda k: k / 4),
    "b": st.booleans(),
    "ts": st.integers(-10, 10).map(lambda k: T0 + timedelta(minutes=30 * k)),
}
VALUES["order"] = VALUES["i"]
VALUES["my col"] = VALUES["s"]


def parse_back(sql: str, columns: dict[str, ColumnType] = COLUMNS) -> Region:
    return region_of(sqlglot.parse_one(sql, dialect="duckdb"), columns)


@st.composite
def column_set(draw: st.DrawFn, col: str) -> ColumnSet:
    pieces = []
    for _ in range(draw(st.integers(0, 3))):
        lo = draw(st.one_of(st.none(), VALUES[col]))
        hi = draw(st.one_of(st.none(), VALUES[col]))
        if lo is not None and hi is not None and hi < lo:
            lo, hi = hi, lo
        pieces.append(Interval(lo, hi, draw(st.booleans()), draw(st.booleans())))
    return ColumnSet.of(pieces, draw(st.booleans()))


@st.composite
def raw_regions(draw: st.DrawFn, columns: list[str]) -> Region:
    boxes = []
    for _ in range(draw(st.integers(0, 4))):
        cols = draw(st.lists(st.sampled_from(columns), unique=True, min_size=1, max_size=3))
        boxes.append(Box.of({c: draw(column_set(c)) for c in cols}))
    return Region.of(boxes)


# -- readable text ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("region", "sql"),
    [
        (Region.full(), "TRUE"),
        (Region.empty(), "FALSE"),
        (Region.column("grp", ColumnSet.points(["a"])), "grp = 'a'"),
        (
            Region.column("age", ColumnSet.interval(18, 65, hi_closed=False)),
            "age >= 18 AND age < 65",
        ),
        (Region.column("age", ColumnSet.interval(18, 64)), "age BETWEEN 18 AND 64"),
        (Region.column("age", ColumnSet.interval(None, 17)), "age <= 17"),
        (
            Region.of(
                [
                    Box.of({"grp": ColumnSet.points(["a", "b"]), "x": ColumnSet.only_null()}),
                    Box.of({"y": ColumnSet.interval(0, None, lo_closed=False)}),
                ]
            ),
            "(grp IN ('a', 'b') AND x IS NULL) OR y > 0",
        ),
        (Region.column("x", ColumnSet.points([1, 3], null=True)), "x IN (1, 3) OR x IS NULL"),
        (
            Region.box(x=ColumnSet.points([1, 3], null=True), g=ColumnSet.points(["a"])),
            "g = 'a' AND (x IN (1, 3) OR x IS NULL)",
        ),
        (Region.column("x", ColumnSet.not_null()), "x IS NOT NULL"),
        (Region.column("x", ColumnSet.of([Interval(None, 4), Interval(6, None)])), "x <> 5"),
        (
            Region.column("x", ColumnSet.of([Interval(None, 4), Interval(6, None)], null=True)),
            "x IS DISTINCT FROM 5",
        ),
        (
            Region.column(
                "x", ColumnSet.of([Interval(None, 0), Interval(2, 4), Interval(6, None)])
            ),
            "x NOT IN (1, 5)",
        ),
        (
            Region.column(
                "x", ColumnSet.of([Interval(None, 0), Interval(2, 4), Interval(6, None)], True)
            ),
            "x NOT IN (1, 5) OR x IS NULL",
        ),
        (
            Region.column(
                "s", ColumnSet.of([Interval(None, "a", False, False), Interval("a", None, False)])
            ),
            "s <> 'a'",
        ),
        (
            Region.column(
                "x", ColumnSet.of([Interval(None, 0), Interval(3, 3), Interval(7, 9, False)])
            ),
            "x <= 0 OR x = 3 OR (x > 7 AND x <= 9)",
        ),
        (Region.column("b", ColumnSet.points([True])), "b = TRUE"),
        (Region.column("b", ColumnSet.points([False], null=True)), "b IS NOT TRUE"),
        (Region.column("d", ColumnSet.points([date(2020, 1, 5)])), "d = DATE '2020-01-05'"),
        (
            Region.column("ts", ColumnSet.interval(datetime(2020, 1, 1, 10, 30), None)),
            "ts >= TIMESTAMP '2020-01-01 10:30:00'",
        ),
        (Region.column("s", ColumnSet.points(["it's"])), "s = 'it''s'"),
        (Region.column("order", ColumnSet.points([1])), '"order" = 1'),
        (Region.column("my col", ColumnSet.points([1])), '"my col" = 1'),
        (Region.column("f", ColumnSet.interval(-1.5, 2.5)), "f BETWEEN -1.5 AND 2.5"),
    ],
)
def test_readable_sql(region: Region, sql: str) -> None:
    assert region_to_sql(region) == sql


def test_literals_and_identifiers() -> None:
    assert sql_literal(datetime(2020, 1, 2, 3, 4, 5, 6)) == "TIMESTAMP '2020-01-02 03:04:05.000006'"
    assert sql_literal(1e20) == "100000000000000000000"
    assert sql_literal(float("inf")) == "CAST('Infinity' AS DOUBLE)"
    assert sql_literal(False) == "FALSE" and sql_literal(-3) == "-3"
    assert quote_identifier("select") == '"select"' and quote_identifier('a"b') == '"a""b"'
    assert quote_identifier("age") == "age" and quote_identifier("Age") == '"Age"'


# -- DuckDB reads the text as the region ------------------------------------------------------------

DUCK_DOMAIN: dict[str, list[Any]] = {
    "i": [-7, -1, 0, 2, 5, 7, None],
    "s": ["", "a", "ab", "it's", "zz", None],
    "d": [D0 + timedelta(days=k) for k in (-6, -1, 0, 3)] + [None],
    "f": [-4.5, -0.25, 0.0, 1.0, 3.75, None],
    "b": [True, False, None],
    "ts": [T0 + timedelta(minutes=k) for k in (-301, 0, 30, 299)] + [None],
}
DUCK_TYPES = {
    "i": "INTEGER",
    "s": "VARCHAR",
    "d": "DATE",
    "f": "DOUBLE",
    "b": "BOOLEAN",
    "ts": "TIMESTAMP",
}
DUCK_NAMES = list(DUCK_DOMAIN)


STRIDES = {
    c: len(list(itertools.product(*(DUCK_DOMAIN[d] for d in DUCK_NAMES[k + 1 :]))))
    for k, c in enumerate(DUCK_NAMES)
}


@pytest.fixture(scope="module")
def duck() -> Any:
    con = duckdb.connect()
    for c in DUCK_NAMES:
        con.execute(f"CREATE TABLE d_{c} (k_{c} INTEGER, {c} {DUCK_TYPES[c]})")
        con.executemany(f"INSERT INTO d_{c} VALUES (?, ?)", list(enumerate(DUCK_DOMAIN[c])))
    rid = " + ".join(f"k_{c} * {STRIDES[c]}" for c in DUCK_NAMES)
    tables = ", ".join(f"d_{c}" for c in DUCK_NAMES)
    con.execute(f"CREATE TABLE t AS SELECT {rid} AS rid, * FROM {tables}")
    yield con
    con.close()


def rows_in(region: Region) -> set[int]:
    """Row ids inside the region, box by box and column by column (no DuckDB involved)."""
    out: set[int] = set()
    for box in region.boxes:
        allowed = [
            [k * STRIDES[c] for k, v in enumerate(DUCK_DOMAIN[c]) if box.get(c).contains(v)]
            for c in DUCK_NAMES
        ]
        out.update(sum(parts) for parts in itertools.product(*allowed))
    return out


@pytest.mark.slow
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(region=raw_regions(DUCK_NAMES))
def test_duckdb_reads_the_region(duck: Any, region: Region) -> None:
    sql = region_to_sql(region)
    got = {r for (r,) in duck.execute(f"SELECT rid FROM t WHERE {sql}").fetchall()}
    assert got == rows_in(region), sql


# -- round trip through the predicate analyser -------------------------------------------------------

RECORD = st.fixed_dictionaries({c: st.one_of(st.none(), VALUES[c]) for c in COLUMNS})


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(raw=raw_regions(list(COLUMNS)), records=st.lists(RECORD, max_size=40))
def test_round_trip(raw: Region, records: list[dict[str, Any]]) -> None:
    canonical = simplify_region(raw, COLUMNS)
    # Simplifying keeps the meaning ...
    for rec in records:
        assert canonical.contains(rec) == raw.contains(rec)
    # ... and the canonical region comes back exactly from its SQL.
    assert parse_back(region_to_sql(canonical)) == canonical
    # Any region comes back with the same meaning.
    back = parse_back(region_to_sql(raw))
    for rec in records:
        assert back.contains(rec) == raw.contains(rec)


def test_round_trip_examples() -> None:
    region = Region.of(
        [
            Box.of(
                {
                    "i": ColumnSet.of([Interval(None, 0), Interval(2, None)]),
                    "s": ColumnSet.points(["a"]),
                }
            ),
            Box.of({"d": ColumnSet.interval(D0, None), "b": ColumnSet.points([False], null=True)}),
        ]
    )
    assert parse_back(region_to_sql(region)) == region
    assert parse_back("TRUE") == Region.full() and parse_back("FALSE") == Region.empty()
