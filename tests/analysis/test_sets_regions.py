"""ColumnSet / Interval / Box / Region: algebra checked by brute force, canonical forms by identity.

Sets are built from intervals with integer ends in [-5, 5]; membership is then decided by the
half-integers in [-7, 7] plus NULL, which separate every such set (each non-empty piece holds one).
"""

from __future__ import annotations

import itertools
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet, Interval

POINTS: list[object] = [k / 2 for k in range(-14, 15)] + [None]

ends = st.one_of(st.none(), st.integers(-5, 5))


@st.composite
def intervals(draw: st.DrawFn) -> Interval:
    lo, hi = draw(ends), draw(ends)
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    return Interval(lo, hi, draw(st.booleans()), draw(st.booleans()))


@st.composite
def column_sets(draw: st.DrawFn) -> ColumnSet:
    return ColumnSet.of(draw(st.lists(intervals(), max_size=4)), draw(st.booleans()))


def members(s: ColumnSet) -> frozenset[object]:
    return frozenset(p for p in POINTS if s.contains(p))


def assert_canonical(s: ColumnSet) -> None:
    for iv in s.intervals:
        assert not iv.is_empty()
    for a, b in itertools.pairwise(s.intervals):
        assert a.hi is not None and b.lo is not None
        assert a.hi < b.lo or (a.hi == b.lo and not a.hi_closed and not b.lo_closed)


# -- Interval ---------------------------------------------------------------------------------------


def test_interval_basics() -> None:
    assert Interval(None, None, True, True) == Interval(None, None, False, False)
    assert Interval(3, 3).is_point and not Interval(3, 3, hi_closed=False).is_point
    assert Interval(3, 3, lo_closed=False).is_empty() and Interval(4, 3).is_empty()
    assert not Interval(None, 3).is_empty() and not Interval(3, 3).is_empty()
    assert Interval(1, 3, lo_closed=False).contains(2) and not Interval(1, 3, False).contains(1)
    assert not Interval(None, None).contains(None)
    assert Interval(1, 3).intersect(Interval(3, 5)) == Interval(3, 3)
    assert Interval(1, 3, hi_closed=False).intersect(Interval(3, 5)) is None
    assert Interval(None, 2).intersect(Interval(0, None)) == Interval(0, 2)


@given(intervals(), intervals())
def test_interval_intersect_brute_force(a: Interval, b: Interval) -> None:
    c = a.intersect(b)
    for p in POINTS:
        assert (c is not None and c.contains(p)) == (a.contains(p) and b.contains(p))


# -- ColumnSet ----------------------------------------------------------------------------------------


@given(st.lists(intervals(), max_size=5), st.booleans())
def test_of_is_canonical_and_keeps_members(ivs: list[Interval], null: bool) -> None:
    s = ColumnSet.of(ivs, null)
    assert_canonical(s)
    expected = {p for p in POINTS if p is not None and any(iv.contains(p) for iv in ivs)}
    assert members(s) == frozenset(expected | ({None} if null else set()))
    assert ColumnSet.of(reversed(ivs), null) == s


@given(column_sets(), column_sets())
def test_union_intersect_brute_force(a: ColumnSet, b: ColumnSet) -> None:
    u, i = a.union(b), a.intersect(b)
    assert_canonical(u)
    assert_canonical(i)
    assert members(u) == members(a) | members(b)
    assert members(i) == members(a) & members(b)


@given(column_sets())
def test_complement_brute_force(a: ColumnSet) -> None:
    c = a.complement()
    assert_canonical(c)
    assert members(c) == frozenset(POINTS) - members(a)
    assert c.complement() == a


@given(column_sets(), column_sets(), column_sets())
def test_identities_hold_structurally(a: ColumnSet, b: ColumnSet, c: ColumnSet) -> None:
    # Canonical form: equal sets are equal objects, however they were built.
    assert a.union(b) == b.union(a) and a.intersect(b) == b.intersect(a)
    assert a.union(b).union(c) == a.union(b.union(c))
    assert a.intersect(b).intersect(c) == a.intersect(b.intersect(c))
    assert a.union(b).complement() == a.complement().intersect(b.complement())
    assert a.intersect(b.union(c)) == a.intersect(b).union(a.intersect(c))
    assert a.union(a.complement()) == ColumnSet.full()
    assert a.intersect(a.complement()).is_empty()
    if members(a) == members(b):
        assert a == b


@given(column_sets(), st.integers(-5, 5), st.booleans())
def test_split_pieces_merge_back(a: ColumnSet, cut: int, closed_left: bool) -> None:
    pieces = []
    for iv in a.intervals:
        if iv.contains(cut) and iv.lo != cut and iv.hi != cut:
            pieces.append(Interval(iv.lo, cut, iv.lo_closed, closed_left))
            pieces.append(Interval(cut, iv.hi, not closed_left, iv.hi_closed))
        else:
            pieces.append(iv)
    assert ColumnSet.of(pieces, a.null) == a


def test_constructors_and_queries() -> None:
    assert ColumnSet.full().is_full() and not ColumnSet.not_null().is_full()
    assert ColumnSet.empty().is_empty() and not ColumnSet.only_null().is_empty()
    assert ColumnSet.only_null().contains(None) and not ColumnSet.not_null().contains(None)
    assert ColumnSet.points([3, 1, 3, None]) == ColumnSet.of([Interval(1, 1), Interval(3, 3)])
    assert ColumnSet.points([3, 1]).finite_values() == (1, 3)
    assert ColumnSet.interval(1, 3).finite_values() is None
    assert ColumnSet.interval(0, 10, hi_closed=False).intersect(ColumnSet.points([3, 20])) == (
        ColumnSet.points([3])
    )
    assert ColumnSet.points([1, 2]).complement().contains(None)
    assert ColumnSet.interval(1, 2).union(ColumnSet.interval(2, 3, lo_closed=False)) == (
        ColumnSet.interval(1, 3)
    )
    # Touching at an excluded point does not merge.
    gap = ColumnSet.interval(None, 2, hi_closed=False).union(
        ColumnSet.interval(2, None, lo_closed=False)
    )
    assert len(gap.intervals) == 2 and not gap.contains(2)


def test_other_value_types() -> None:
    s = ColumnSet.points(["b", "a"]).union(ColumnSet.interval("x", None))
    assert s.contains("a") and s.contains("zz") and not s.contains("c")
    d = ColumnSet.interval(date(2020, 1, 1), date(2020, 12, 31))
    assert d.complement().contains(date(2021, 1, 1)) and not d.complement().contains(
        date(2020, 6, 1)
    )


# -- Box / Region ----------------------------------------------------------------------------------


@st.composite
def boxes(draw: st.DrawFn) -> Box:
    cols = draw(st.lists(st.sampled_from(["x", "y"]), unique=True, max_size=2))
    return Box.of({c: draw(column_sets()) for c in cols})


@st.composite
def regions(draw: st.DrawFn) -> Region:
    return Region.of(draw(st.lists(boxes(), max_size=3)), draw(st.lists(st.sampled_from("nm"))))


GRID = [{"x": x, "y": y} for x in POINTS for y in POINTS]


def region_members(r: Region) -> frozenset[int]:
    return frozenset(k for k, rec in enumerate(GRID) if r.contains(rec))


def test_box_basics() -> None:
    b = Box.of({"y": ColumnSet.points([1]), "x": ColumnSet.full(), "a": ColumnSet.only_null()})
    assert b.constraints == (("a", ColumnSet.only_null()), ("y", ColumnSet.points([1])))
    assert b.get("x") == ColumnSet.full() and b.columns == frozenset({"a", "y"})
    assert b.contains({"y": 1}) and not b.contains({"y": 1, "a": 0})  # missing columns are NULL
    assert Box.of({"x": ColumnSet.empty()}).is_empty()
    c = b.intersect(Box.of({"y": ColumnSet.interval(0, 5), "z": ColumnSet.points([2])}))
    assert c == Box.of(
        {"a": ColumnSet.only_null(), "y": ColumnSet.points([1]), "z": ColumnSet.points([2])}
    )


def test_region_constructors() -> None:
    a = Region.box(x=ColumnSet.points([1]))
    assert Region.of([a.boxes[0], a.boxes[0], Box.of({"x": ColumnSet.empty()})]) == a
    assert Region.of([a.boxes[0], Box()], ["n"]) == Region.full("n")
    assert Region.full().is_full() and Region.empty().is_empty() and not a.is_full()
    assert Region.column("x", ColumnSet.empty()).is_empty()
    assert a.with_notes("n", "n").notes == ("n",)
    assert a.union(Region.full("m")).notes == ("m",)
    assert a.union(Region.box(y=ColumnSet.points([2]))).columns == frozenset({"x", "y"})


@given(regions(), regions())
def test_region_algebra_brute_force(a: Region, b: Region) -> None:
    assert region_members(a.union(b)) == region_members(a) | region_members(b)
    assert region_members(a.intersect(b)) == region_members(a) & region_members(b)
    assert a.may_overlap(b) == bool(region_members(a) & region_members(b))
    assert a.is_empty() == (not region_members(a))
    assert set(a.union(b).notes) == set(a.notes) | set(b.notes)


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        (Region.box(grp=ColumnSet.points(["a"])), Region.box(grp=ColumnSet.points(["b"])), False),
        (Region.box(grp=ColumnSet.points(["a"])), Region.box(x=ColumnSet.points([1])), True),
        (Region.box(x=ColumnSet.only_null()), Region.box(x=ColumnSet.not_null()), False),
        (Region.full(), Region.empty(), False),
    ],
)
def test_may_overlap_examples(a: Region, b: Region, overlap: bool) -> None:
    assert a.may_overlap(b) is overlap
