"""Where a constant sits in a column's order, and the TRUE- and FALSE-sets of
``column op constant``.

A constant becomes a hull [lo, hi] of the values a column is compared against (a single point
when the comparison is exact; exact positions of dates and timestamps among day ordinals), and
each comparison operator becomes the pair of non-NULL sets where it is TRUE and where it is
FALSE -- unions over the hull, so sound when the engine may round the constant.

Privacy: a comparison's sets are unions over the constant's hull: sound when the engine rounds it.
"""

from __future__ import annotations

from datetime import date, datetime, time
from fractions import Fraction
from typing import Literal

from sqlglot import exp

from privplan.analysis.predicates.literals import (
    _Const,
    _date_value,
    _float_bounds,
    _int_position,
    _NotAnalysed,
    _parse_date,
    _parse_timestamp,
    _timestamp_value,
)
from privplan.analysis.sets import ColumnSet, Interval, Value

_DAY_MICROS = 86_400 * 10**6


def _date_position(d: date) -> Fraction:
    return Fraction(d.toordinal())


def _timestamp_position(ts: datetime) -> Fraction:
    """Day ordinal plus the elapsed fraction of the day: where a timestamp falls among dates."""
    since_midnight = ts - datetime.combine(ts.date(), time())
    return _date_position(ts.date()) + Fraction(since_midnight // _ONE_MICRO, _DAY_MICROS)


def _bounds(c: _Const, ctype: str, column: str) -> tuple[Value, Value]:
    """The hull [lo, hi] of values the column is compared against (lo == hi when exact).

    int and date columns use exact positions (a Fraction: value, or day ordinal plus the
    fraction of the day of a timestamp) that :func:`_canon_set` rounds to whole units.
    """
    kind, v = c.kind, c.value
    if ctype == "int":
        if kind in ("int", "decimal", "double"):
            return _int_position(c)
    elif ctype == "float":
        if kind in ("int", "decimal", "double"):
            return _float_bounds(c)
    elif ctype == "str":
        if kind == "str":
            return v, v
    elif ctype == "bool":
        if kind == "bool":
            return v, v
    elif ctype == "date":
        if kind == "str" and (d := _parse_date(str(v))) is not None:
            return _date_position(d), _date_position(d)
        if kind == "date":
            return _date_position(_date_value(c)), _date_position(_date_value(c))
        if kind == "timestamp":
            pos = _timestamp_position(_timestamp_value(c))
            return pos, pos
    elif ctype == "timestamp":
        if kind == "timestamp":
            return v, v
        if kind == "date":
            ts = datetime.combine(_date_value(c), time())
            return ts, ts
        if kind == "str" and (ts2 := _parse_timestamp(str(v))) is not None:
            return ts2, ts2
    raise _NotAnalysed(f"a {kind} constant does not fit {ctype} column {column}; not analysed")


_ONE_MICRO = datetime(2000, 1, 1, 0, 0, 0, 1) - datetime(2000, 1, 1)


# --------------------------------------------------------------------------------------------
# Comparison sets
# --------------------------------------------------------------------------------------------

_Op = Literal["eq", "ne", "lt", "le", "gt", "ge"]
_FLIP: dict[str, _Op] = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
_COMPARISONS: dict[type[exp.Expr], _Op] = {
    exp.EQ: "eq",
    exp.NEQ: "ne",
    exp.LT: "lt",
    exp.LTE: "le",
    exp.GT: "gt",
    exp.GTE: "ge",
}


def _op_sets(op: str, lo: Value, hi: Value) -> tuple[ColumnSet, ColumnSet]:
    """Non-NULL TRUE- and FALSE-sets of ``x op c`` for every c in the hull [lo, hi].

    Exact when lo == hi. Otherwise each set is the union over the possible c, e.g.
    ``x < c`` is TRUE somewhere in (-inf, hi) and FALSE somewhere in [lo, +inf).
    """
    if op in ("eq", "ne"):
        eq = ColumnSet.interval(lo, hi)
        if lo == hi:
            neq = ColumnSet.of([Interval(None, lo, False, False), Interval(hi, None, False, False)])
        else:
            neq = ColumnSet.not_null()
        return (eq, neq) if op == "eq" else (neq, eq)
    below_hi = ColumnSet.interval(None, hi, hi_closed=op == "le")  # lt / le TRUE
    above_lo = ColumnSet.interval(lo, None, lo_closed=op == "lt")  # lt / le FALSE
    if op in ("lt", "le"):
        return below_hi, above_lo
    above = ColumnSet.interval(lo, None, lo_closed=op == "ge")  # gt / ge TRUE
    below = ColumnSet.interval(None, hi, hi_closed=op == "gt")  # gt / ge FALSE
    return above, below

