"""Sets of values of one column: a union of disjoint intervals, plus possibly NULL.

A column's domain is its (totally ordered) non-NULL values together with NULL. Every set a
predicate can describe on one column — an interval with open or closed ends, a finite set of
values, the complement of one, ``IS NULL`` / ``IS NOT NULL`` — is a finite union of intervals
plus a NULL flag, so one representation serves all of them. Values of one column must be mutually
comparable with ``<`` (ints with floats, str with str, date with date, ...).

Unbounded ends are ``None``. Sets are immutable and kept canonical (sorted, disjoint, merged),
so equal sets compare equal.

Privacy: union, intersection and complement are exact, NULL included: regions on them stay sound.

>>> a = ColumnSet.interval(0, 10, hi_closed=False)
>>> b = ColumnSet.points([3, 20])
>>> a.intersect(b) == ColumnSet.points([3])
True
>>> ColumnSet.points([1, 2]).complement() .contains(None)
True
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

Value = Any  # int | float | Decimal | str | date | datetime | bool — comparable within a column

_LO, _HI = operator.attrgetter("lo"), operator.attrgetter("hi")
_LO_CLOSED, _HI_CLOSED = operator.attrgetter("lo_closed"), operator.attrgetter("hi_closed")


@dataclass(frozen=True, slots=True)
class Interval:
    """Non-empty interval of non-NULL values; ``None`` ends are unbounded (and then open)."""

    lo: Value | None
    hi: Value | None
    lo_closed: bool = True
    hi_closed: bool = True

    def __post_init__(self) -> None:
        if self.lo is None and self.lo_closed:
            object.__setattr__(self, "lo_closed", False)
        if self.hi is None and self.hi_closed:
            object.__setattr__(self, "hi_closed", False)

    @property
    def is_point(self) -> bool:
        return self.lo is not None and self.lo == self.hi and self.lo_closed and self.hi_closed

    def is_empty(self) -> bool:
        if self.lo is None or self.hi is None:
            return False
        if self.lo < self.hi:
            return False
        if self.lo == self.hi:
            return not (self.lo_closed and self.hi_closed)
        return True

    def contains(self, v: Value) -> bool:
        if v is None:
            return False
        if self.lo is not None and (v < self.lo or (v == self.lo and not self.lo_closed)):
            return False
        return not (self.hi is not None
                    and (v > self.hi or (v == self.hi and not self.hi_closed)))

    def intersect(self, other: Interval) -> Interval | None:
        lo, lo_closed = _max_lo(self, other)
        hi, hi_closed = _min_hi(self, other)
        out = Interval(lo, hi, lo_closed, hi_closed)
        return None if out.is_empty() else out


def _max_lo(a: Interval, b: Interval) -> tuple[Value | None, bool]:
    if a.lo is None:
        return b.lo, b.lo_closed
    if b.lo is None:
        return a.lo, a.lo_closed
    if a.lo > b.lo:
        return a.lo, a.lo_closed
    if b.lo > a.lo:
        return b.lo, b.lo_closed
    return a.lo, a.lo_closed and b.lo_closed


def _min_hi(a: Interval, b: Interval) -> tuple[Value | None, bool]:
    if a.hi is None:
        return b.hi, b.hi_closed
    if b.hi is None:
        return a.hi, a.hi_closed
    if a.hi < b.hi:
        return a.hi, a.hi_closed
    if b.hi < a.hi:
        return b.hi, b.hi_closed
    return a.hi, a.hi_closed and b.hi_closed


def _lo_key(iv: Interval) -> tuple[int, Value, int]:
    # Sort by lower end: -inf first; at equal values a closed end comes first.
    if iv.lo is None:
        return (0, 0, 0)
    return (1, iv.lo, 0 if iv.lo_closed else 1)


def _touches(a: Interval, b: Interval) -> bool:
    """True when a (which starts no later than b) overlaps or abuts b, so they merge."""
    if a.hi is None or b.lo is None:
        return True
    if a.hi > b.lo:
        return True
    if a.hi == b.lo:
        return a.hi_closed or b.lo_closed
    return False


def _normalise(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    items = sorted((iv for iv in intervals if not iv.is_empty()), key=_lo_key)
    out: list[Interval] = []
    for iv in items:
        if out and _touches(out[-1], iv):
            last = out[-1]
            hi, hi_closed = _max_hi(last, iv)
            out[-1] = Interval(last.lo, hi, last.lo_closed, hi_closed)
        else:
            out.append(iv)
    return tuple(out)


def _max_hi(a: Interval, b: Interval) -> tuple[Value | None, bool]:
    if a.hi is None or b.hi is None:
        return None, False
    if a.hi > b.hi:
        return a.hi, a.hi_closed
    if b.hi > a.hi:
        return b.hi, b.hi_closed
    return a.hi, a.hi_closed or b.hi_closed


def _sorted_distinct(values: list[Value]) -> list[Value] | None:
    """The distinct values in order when every one is a ``str`` or every one an ``int``: then
    equal values are identical in kind, no two distinct points touch (points merge only when
    equal), so these are exactly the intervals :func:`_normalise` would keep. Else None."""
    if all(type(v) is str for v in values) or all(type(v) is int for v in values):
        return sorted(set(values))
    return None


@dataclass(frozen=True, slots=True)
class ColumnSet:
    """A set of values of one column: canonical disjoint intervals plus a NULL flag."""

    intervals: tuple[Interval, ...] = ()
    null: bool = False

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    def of(cls, intervals: Iterable[Interval], null: bool = False) -> ColumnSet:
        return cls(_normalise(intervals), null)

    @classmethod
    def full(cls) -> ColumnSet:
        return cls((Interval(None, None, False, False),), True)

    @classmethod
    def empty(cls) -> ColumnSet:
        return cls((), False)

    @classmethod
    def not_null(cls) -> ColumnSet:
        return cls((Interval(None, None, False, False),), False)

    @classmethod
    def only_null(cls) -> ColumnSet:
        return cls((), True)

    @classmethod
    def points(cls, values: Iterable[Value], null: bool = False) -> ColumnSet:
        present = [v for v in values if v is not None]
        distinct = _sorted_distinct(present)
        if distinct is not None:  # (the canonical form, without sorting Interval objects)
            return cls(tuple(Interval(v, v, True, True) for v in distinct), null)
        return cls.of((Interval(v, v, True, True) for v in present), null)

    @classmethod
    def interval(
        cls,
        lo: Value | None,
        hi: Value | None,
        *,
        lo_closed: bool = True,
        hi_closed: bool = True,
    ) -> ColumnSet:
        return cls.of([Interval(lo, hi, lo_closed, hi_closed)])

    # -- algebra -----------------------------------------------------------------------------
    def union(self, other: ColumnSet) -> ColumnSet:
        return ColumnSet.of(self.intervals + other.intervals, self.null or other.null)

    def intersect(self, other: ColumnSet) -> ColumnSet:
        out: list[Interval] = []
        for a in self.intervals:
            for b in other.intervals:
                c = a.intersect(b)
                if c is not None:
                    out.append(c)
        return ColumnSet.of(out, self.null and other.null)

    def complement(self) -> ColumnSet:
        """Complement within the column's domain (NULL included)."""
        gaps: list[Interval] = []
        gap_lo: Value | None = None  # None: the gap starts at -inf
        gap_lo_closed = False
        for iv in self.intervals:
            if iv.lo is not None:
                gaps.append(Interval(gap_lo, iv.lo, gap_lo_closed, not iv.lo_closed))
            if iv.hi is None:
                return ColumnSet.of(gaps, not self.null)
            gap_lo, gap_lo_closed = iv.hi, not iv.hi_closed
        gaps.append(Interval(gap_lo, None, gap_lo_closed, False))
        return ColumnSet.of(gaps, not self.null)

    # -- queries -----------------------------------------------------------------------------
    def is_empty(self) -> bool:
        return not self.intervals and not self.null

    def is_full(self) -> bool:
        return self.null and self == ColumnSet.full()

    def contains(self, v: Value | None) -> bool:
        if v is None:
            return self.null
        return any(iv.contains(v) for iv in self.intervals)

    def finite_values(self) -> tuple[Value, ...] | None:
        """The non-NULL values when the set is a finite set of points, else None.

        (Every interval :attr:`Interval.is_point`, tested a field at a time over all of them:
        a public domain may hold 100,000 points.)"""
        ivs = self.intervals
        los = tuple(map(_LO, ivs))
        if (None in los or not all(map(_LO_CLOSED, ivs)) or not all(map(_HI_CLOSED, ivs))
                or not all(map(operator.eq, los, map(_HI, ivs)))):
            return None
        return los

    def __repr__(self) -> str:
        parts = []
        for iv in self.intervals:
            if iv.is_point:
                parts.append(repr(iv.lo))
            else:
                lo = "-inf" if iv.lo is None else repr(iv.lo)
                hi = "+inf" if iv.hi is None else repr(iv.hi)
                parts.append(f"{'[' if iv.lo_closed else '('}{lo}, {hi}{']' if iv.hi_closed else ')'}")
        if self.null:
            parts.append("NULL")
        return "{" + ", ".join(parts) + "}"
