"""SUM / AVG / VAR / STDDEV over DISTINCT values of a bounded column (Qrlew's test queries).

Oracles: (1) noise off, the answer equals DuckDB's own answer to the same SQL, with negative
and positive values (g and -g must not merge in the sum of squares), NULLs, FILTER and GROUP BY;
(2) the stated sensitivities hold by brute force: over every table of up to three rows from a
small domain and every neighbour (a row added, removed, or replaced), the exact distinct
aggregates computed by DuckDB move by at most sensitivity x scale.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import duckdb
import pytest

import privplan as pp
from privplan.testing import noise_disabled

POLICY = {"tables": {"t": {"privacy_unit": "row", "columns": {
    "x": {"type": "int", "lower": -3, "upper": 3},
    "g": {"type": "str", "public_values": ["a", "b"]}}}}}

ROWS = [(-3, "a"), (3, "a"), (-3, "a"), (2, "a"), (None, "a"), (0, "b"), (1, "b"), (-1, "b"),
        (1, "b"), (3, "b")]


def _table(rows: list[tuple[int | None, str]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE t(x INTEGER, g VARCHAR)")
    if rows:
        con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    return con


@pytest.mark.parametrize("sql", [
    "SELECT g, COUNT(DISTINCT x) AS c, SUM(DISTINCT x) AS s, AVG(DISTINCT x) AS a, "
    "VAR_POP(DISTINCT x) AS v, STDDEV_SAMP(DISTINCT x) AS sd FROM t GROUP BY g ORDER BY g",
    "SELECT SUM(DISTINCT x) AS s, VARIANCE(DISTINCT x) AS v FROM t WHERE x <> 0",
    "SELECT SUM(DISTINCT x) FILTER (WHERE g = 'a') AS s, AVG(DISTINCT x) AS a, SUM(x) AS plain "
    "FROM t",
])
def test_noise_off_equals_duckdb(sql: str) -> None:
    con = _table(ROWS)
    expected = con.execute(sql).df()
    with pp.connect(con, policy=POLICY, budget=pp.PureDP(100)) as sess, noise_disabled():
        got = sess.sql(sql, epsilon=1).df
    assert list(got.columns) == list(expected.columns)
    for column in got.columns:
        for a, b in zip(got[column], expected[column]):
            if isinstance(b, str):
                assert a == b
            else:
                assert math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12), column


EXACT = {  # the measures' exact values, as DuckDB computes them (grid step 1 here)
    "sum_distinct": "SELECT COALESCE(SUM(DISTINCT x), 0) FROM t",
    "count_distinct_grid": "SELECT COUNT(DISTINCT x) FROM t",
    "sum_sq_distinct": "SELECT COALESCE(SUM(x * x), 0) FROM (SELECT DISTINCT x FROM t)",
}


@pytest.mark.invariant(1)
@pytest.mark.parametrize("neighbourhood", ["add_remove", "replace"])
def test_sensitivity_by_brute_force_over_neighbours(neighbourhood: str) -> None:
    policy = {"tables": {"t": {**POLICY["tables"]["t"], "neighbourhood": neighbourhood}}}
    with pp.connect(_table(ROWS), policy=policy, budget=pp.PureDP(100)) as sess:
        planned, _ = sess.plan("SELECT AVG(DISTINCT x) AS a, VAR_POP(DISTINCT x) AS v FROM t",
                               {"epsilon": 1})
    stated = {p.measure.kind: Fraction(p.measure.sensitivity) * p.measure.scale
              for p in planned.measures}
    assert set(stated) == set(EXACT)
    domain = [-3, -1, 0, 2, 3, None]
    worst = dict.fromkeys(EXACT, Fraction(0))
    for n in range(4):
        for rows in itertools.combinations_with_replacement(domain, n):
            base = _values(list(rows))
            neighbours = [list(rows[:i] + rows[i + 1:]) for i in range(n)]
            if neighbourhood == "add_remove":
                neighbours += [[*rows, v] for v in domain]
            else:  # replace: one row changed (a unit's row count stays)
                neighbours = [list(rows[:i] + (v,) + rows[i + 1:])
                              for i in range(n) for v in domain]
            for other in neighbours:
                moved = _values(other)
                for kind in EXACT:
                    worst[kind] = max(worst[kind], abs(moved[kind] - base[kind]))
    for kind in EXACT:
        assert worst[kind] <= stated[kind], (kind, worst[kind], stated[kind])
    assert worst["sum_distinct"] == 3 if neighbourhood == "add_remove" else 6
    assert worst["sum_sq_distinct"] == 9


def _values(xs: list[int | None]) -> dict[str, Fraction]:
    return _values_of(tuple(sorted(xs, key=lambda x: (x is None, x or 0))))


@functools.cache
def _values_of(xs: tuple[int | None, ...]) -> dict[str, Fraction]:
    con = _table([(x, "a") for x in xs])
    return {kind: Fraction(con.execute(sql).fetchone()[0]) for kind, sql in EXACT.items()}


def test_per_query_bounds_and_strings_are_refused() -> None:
    with pp.connect(_table(ROWS), policy=POLICY, budget=pp.PureDP(10)) as sess:
        with pytest.raises(pp.UnsupportedQueryError, match="only int and float"):
            sess.sql("SELECT SUM(DISTINCT g) FROM t", epsilon=1)
        with pytest.raises(pp.UnsupportedQueryError, match=r"DISTINCT \.\.\.\) refused"):
            sess.sql("SELECT SUM(DISTINCT x + 1) FROM t", epsilon=1)
        assert sess.spent() == pp.PureDP(0)
