"""Fast paths for sets of many single values (long IN lists, large public domains) against the
general code they stand in for: same sets, same atoms, same SQL text, same meaning in DuckDB."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from fractions import Fraction
from typing import Any

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from privplan.accounting.solver.atoms import Axis, sorted_atom_values
from privplan.analysis import region_sql
from privplan.analysis.region_sql import column_set_sql, sql_literal
from privplan.analysis.sets import ColumnSet, Interval

TEXT = st.text(alphabet="ab'é\"_ %\\", max_size=4)
INTS = st.integers(-(2**64), 2**64)
MIXED = st.one_of(st.integers(-5, 5), st.booleans(), st.sampled_from([1.0, 2.5, -0.0]),
                  st.sampled_from([Decimal(1), Decimal("2.50"), Fraction(1, 2)]))


def _general_points(values: list[Any], null: bool = False) -> ColumnSet:
    """ColumnSet.points as it was: every value an interval, normalised."""
    return ColumnSet.of((Interval(v, v, True, True) for v in values if v is not None), null)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.lists(TEXT, max_size=40), st.lists(INTS, max_size=40),
                 st.lists(MIXED, max_size=40)), st.booleans(), st.booleans())
def test_points_are_the_normalised_intervals(values: list[Any], null: bool,
                                             with_none: bool) -> None:
    given_values = [*values, None] if with_none else values
    fast = ColumnSet.points(given_values, null)
    general = _general_points(given_values, null)
    assert fast == general
    # the very representatives (1 and 1.0 are equal; the first given is kept either way)
    assert [type(iv.lo) for iv in fast.intervals] == [type(iv.lo) for iv in general.intervals]


def _old_finite_values(s: ColumnSet) -> tuple[Any, ...] | None:
    if all(iv.is_point for iv in s.intervals):
        return tuple(iv.lo for iv in s.intervals)
    return None


INTERVALS = st.builds(
    lambda lo, width, lc, hc: Interval(lo, None if width is None else lo + width, lc, hc)
    if lo is not None else Interval(None, width, lc, hc),
    st.one_of(st.none(), st.integers(-20, 20)), st.one_of(st.none(), st.integers(0, 3)),
    st.booleans(), st.booleans())


@settings(max_examples=150, deadline=None)
@given(st.lists(INTERVALS, max_size=12), st.booleans())
def test_finite_values_as_before(intervals: list[Interval], null: bool) -> None:
    s = ColumnSet.of(intervals, null)
    assert s.finite_values() == _old_finite_values(s)
    nan = ColumnSet((Interval(float("nan"), float("nan")),))  # (not canonical: never a point)
    assert nan.finite_values() is None


def _old_excluded_points(s: ColumnSet) -> list[Any] | None:
    """_excluded_points without its early exit (a gap unbounded on one side)."""
    if len(s.intervals) < 2:
        return None
    out: list[Any] = []
    for gap in ColumnSet(s.intervals, False).complement().intervals:
        if gap.is_point:
            out.append(gap.lo)
        elif (single := region_sql._single_unit(gap)) is not None:
            out.append(single)
        else:
            return None
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(INTERVALS, max_size=12), st.booleans())
def test_excluded_points_as_before(intervals: list[Interval], null: bool) -> None:
    s = ColumnSet.of(intervals, null)
    assert region_sql._excluded_points(s) == _old_excluded_points(s)
    assert region_sql._excluded_points(s.complement()) == _old_excluded_points(s.complement())


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.lists(TEXT, max_size=30), st.lists(INTS, max_size=30),
                 st.lists(MIXED, max_size=30),
                 st.lists(st.sampled_from([date(2020, 1, 1), date(1, 1, 1)]), max_size=3)))
def test_literal_lists_as_one_by_one(values: list[Any]) -> None:
    assert region_sql._literal_list(values) == ", ".join(sql_literal(v) for v in values)


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT, min_size=2, max_size=30, unique=True), st.booleans())
def test_a_point_set_reads_as_one_in_list(values: list[str], null: bool) -> None:
    s = ColumnSet.points(values, null)
    text = "k IN (" + ", ".join(sql_literal(v) for v in sorted(values)) + ")"
    assert column_set_sql("k", s) == (f"{text} OR k IS NULL" if null else text)


def test_many_points_render_and_mean_the_set_in_duckdb() -> None:
    """A few thousand values (strings with quotes, integers): DuckDB's TRUE-set of the text
    is the set, NULL included or not, and its complement reads back as NOT IN."""
    con = duckdb.connect()
    strings = [f"k'{i:05d}" for i in range(0, 3000, 3)]
    ints = list(range(-4000, 4000, 7))
    for values, probe in ((strings, [f"k'{i:05d}" for i in range(3000)] + ["", "z"]),
                          (ints, list(range(-4010, 4010)))):
        for null in (False, True):
            s = ColumnSet.points(values, null)
            for candidate in (s, s.complement()):
                sql = column_set_sql("k", candidate)
                rows = con.execute(f"SELECT k FROM unnest($1) AS u(k) WHERE {sql}",
                                   [[*probe, None]]).fetchall()
                assert {r[0] for r in rows} == {v for v in [*probe, None]
                                                 if candidate.contains(v)}


def _general_ranges(axis: Axis, cs: ColumnSet, monkeypatch: Any) -> list[tuple[int, int]]:
    monkeypatch.setattr(Axis, "_point_ranges", lambda self, cs: None)
    out = axis.ranges(cs)
    monkeypatch.undo()
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-300, 300), min_size=64, max_size=200, unique=True),
       st.lists(st.integers(-300, 300), max_size=40), st.booleans(), st.booleans())
def test_point_ranges_are_the_general_ranges(points: list[int], extra: list[int], null: bool,
                                             as_float: bool) -> None:
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        axis = Axis(sorted_atom_values(points + extra))
        # equal values of another type are found by bisection (1.0 against the axis's 1)
        cs = ColumnSet.of([Interval(float(v) if as_float else v, float(v) if as_float else v)
                           for v in points], null)
        assert axis.ranges(cs) == _general_ranges(axis, cs, mp)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.lists(MIXED, max_size=40), st.lists(TEXT, max_size=40)))
def test_sorted_atom_values_as_before(values: list[Any]) -> None:
    got = sorted_atom_values(values)
    old = sorted(set(values))
    assert got == old
    assert [type(v) for v in got] == [type(v) for v in old]


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.tuples(st.just("int"), st.lists(st.integers(-50, 50), max_size=40)),
                 st.tuples(st.just("str"), st.lists(TEXT, max_size=40))),
       st.sampled_from(["int", "str", "float"]))
def test_list_sets_are_the_point_sets(listed: tuple[str, list[Any]], ctype: str) -> None:
    """A list read as a whole gives the sets its items as constants give."""
    from privplan.analysis.predicates.literals import _Const
    from privplan.analysis.predicates.point_lists import exact_list_sets, exact_point_sets

    kind, values = listed
    got = exact_list_sets(ctype, kind, values)
    want = exact_point_sets(ctype, [_Const(kind, v) for v in values])  # type: ignore[arg-type]
    assert got == want or (got is None and kind != ctype)
