"""Canonical column sets per column type, so equal sets compare equal.

``int`` and ``date`` columns are discrete: their sets become closed whole-unit intervals with
adjacent ones merged, which makes emptiness exact (``x > 2 AND x < 3`` is empty). ``bool`` sets
become points, and ``''`` (the least string) closes the ends of string intervals. Canonical
forms describe exactly the same values, so they change no region -- they let merging and
containment see that two boxes agree.

Privacy: a canonical set holds exactly the values of the set it replaces: it changes no region.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date, datetime

from privplan.analysis.predicates.positions import _timestamp_position
from privplan.analysis.sets import ColumnSet, Interval, Value


def _floor(v: Value) -> int:
    return math.floor(v)


def _ceil(v: Value) -> int:
    return math.ceil(v)


_MAX_ORDINAL = date.max.toordinal()


def _int_interval(lo: int | None, hi: int | None) -> Interval:
    return Interval(lo, hi)


def _date_interval(lo: int | None, hi: int | None) -> Interval:
    """Day ordinals to a date interval; ends beyond Python's date range widen (soundly).

    DuckDB dates extend beyond years 1..9999, so an end just outside becomes an open end at the
    range's edge (``> 9999-12-31``) or an unbounded one, never a narrower set.
    """
    lo_v: date | None = None
    lo_closed = True
    if lo is not None and lo > _MAX_ORDINAL:
        lo_v, lo_closed = date.max, False
    elif lo is not None and lo >= 1:
        lo_v = date.fromordinal(lo)
    hi_v: date | None = None
    hi_closed = True
    if hi is not None and hi < 1:
        hi_v, hi_closed = date.min, False
    elif hi is not None and hi <= _MAX_ORDINAL:
        hi_v = date.fromordinal(hi)
    return Interval(lo_v, hi_v, lo_closed, hi_closed)


def _int_index(v: Value) -> Value:
    return v


def _date_index(v: Value) -> Value:
    if isinstance(v, datetime):
        return _timestamp_position(v)
    return v.toordinal() if isinstance(v, date) else v


def _canon_discrete(
    s: ColumnSet,
    index: Callable[[Value], Value],
    make: Callable[[int | None, int | None], Interval],
) -> ColumnSet:
    """Closed whole-unit intervals, adjacent ones merged: the canonical form of a discrete set."""
    spans: list[tuple[int | None, int | None]] = []
    for iv in s.intervals:
        lo = None if iv.lo is None else index(iv.lo)
        hi = None if iv.hi is None else index(iv.hi)
        lo_i = None if lo is None else (_ceil(lo) if iv.lo_closed else _floor(lo) + 1)
        hi_i = None if hi is None else (_floor(hi) if iv.hi_closed else _ceil(hi) - 1)
        if lo_i is not None and hi_i is not None and lo_i > hi_i:
            continue
        spans.append((lo_i, hi_i))
    spans.sort(key=lambda sp: (sp[0] is not None, sp[0] or 0))
    merged: list[tuple[int | None, int | None]] = []
    for lo_i, hi_i in spans:
        if merged:
            plo, phi = merged[-1]
            if phi is None or lo_i is None or lo_i <= phi + 1:
                new_hi = None if phi is None or hi_i is None else max(phi, hi_i)
                merged[-1] = (plo, new_hi)
                continue
        merged.append((lo_i, hi_i))
    return ColumnSet.of([make(lo_i, hi_i) for lo_i, hi_i in merged], s.null)


def _canon_bool(s: ColumnSet) -> ColumnSet:
    values = [v for v in (False, True) if s.contains(v)]
    if len(values) == 2:
        return ColumnSet(ColumnSet.not_null().intervals, s.null)
    return ColumnSet.points(values, s.null)


def _canon_set(s: ColumnSet, ctype: str | None) -> ColumnSet:
    """The canonical form of a set for its column type, so equal sets compare equal."""
    if ctype == "int":
        return _canon_discrete(s, _int_index, _int_interval)
    if ctype == "date":
        return _canon_discrete(s, _date_index, _date_interval)
    if ctype == "bool":
        return _canon_bool(s)
    if ctype == "str":
        return ColumnSet.of((iv for iv in map(_str_ends, s.intervals) if iv is not None), s.null)
    return s


def _str_ends(iv: Interval) -> Interval | None:
    """'' is the least string: ``< ''`` is empty, ``<= ''`` is ``= ''``, ``>= ''`` is unbounded."""
    if iv.lo is None and iv.hi == "":
        return Interval("", "") if iv.hi_closed else None
    if iv.lo == "" and iv.lo_closed and iv.hi != "":
        return Interval(None, iv.hi, False, iv.hi_closed)
    return iv
