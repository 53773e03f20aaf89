"""Readable SQL for a region, for ``explain``.

The text is a DuckDB predicate whose TRUE-set is the region: parsing it and running
:func:`~privplan.analysis.predicates.truth_regions` gives the region back (exactly for regions
in canonical form whose float bounds REAL represents exactly; otherwise a superset). It is meant
for people; the analysis never re-reads it.

Privacy: the text is for people and never re-read; its TRUE-set is the region or contains it.

>>> from privplan.analysis.sets import ColumnSet
>>> region_to_sql(Region.box(age=ColumnSet.interval(18, 65, hi_closed=False)))
'age >= 18 AND age < 65'
>>> region_to_sql(Region.column("grp", ColumnSet.points(["a", "b"], null=True)))
"grp IN ('a', 'b') OR grp IS NULL"
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet, Interval, Value

_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_]*")
_KEYWORDS = frozenset(DuckDB.Tokenizer.KEYWORDS)


def region_to_sql(region: Region) -> str:
    """``TRUE`` for the whole domain, ``FALSE`` for the empty region, else an OR of boxes."""
    if region.is_empty():
        return "FALSE"
    if region.is_full():
        return "TRUE"
    parts = [_box_sql(b) for b in region.boxes]
    if len(parts) == 1:
        return parts[0][0]
    return " OR ".join(f"({text})" if kind == "and" else text for text, kind in parts)


def column_set_sql(column: str, values: ColumnSet) -> str:
    """SQL whose TRUE-set on ``column`` is ``values`` (other columns free)."""
    return _set_sql(quote_identifier(column), values)[0]


def quote_identifier(name: str) -> str:
    """The name as written in DuckDB SQL: bare when plain and not a keyword, else quoted."""
    plain = exp.to_identifier(name).sql(dialect="duckdb") == name
    if plain and _PLAIN_NAME.fullmatch(name) and name.upper() not in _KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def sql_literal(v: Value) -> str:
    """A DuckDB literal for a region value (strings quoted, dates as ``DATE '...'``)."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "CAST('NaN' AS DOUBLE)"
        if math.isinf(v):
            return "CAST('Infinity' AS DOUBLE)" if v > 0 else "CAST('-Infinity' AS DOUBLE)"
        text = repr(v)
        if "e" not in text and Fraction(text) == Fraction(v):
            return text
        exact = format(Decimal(v), "f")  # e.g. float32 values: exact DECIMAL literals
        return exact if sum(ch.isdigit() for ch in exact) <= 36 else text
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, Fraction):
        return _fraction_sql(v)
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, datetime):
        kind = "TIMESTAMPTZ" if v.tzinfo is not None else "TIMESTAMP"
        return f"{kind} '{v.isoformat(sep=' ')}'"
    if isinstance(v, date):
        return f"DATE '{v.isoformat()}'"
    return "'" + str(v).replace("'", "''") + "'"


def _fraction_sql(v: Fraction) -> str:
    d = v.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d == 1:  # a finite decimal
        return format(Decimal(v.numerator) / Decimal(v.denominator), "f")
    return f"({v.numerator} / {v.denominator})"


# -- boxes and sets -----------------------------------------------------------------------------


def _box_sql(box: Box) -> tuple[str, str]:
    """(text, kind) as in :func:`_set_sql`; an AND of several columns is 'and'."""
    parts = [_set_sql(quote_identifier(c), s) for c, s in box.constraints]
    if len(parts) == 1:
        return parts[0]
    return " AND ".join(f"({t})" if k == "or" else t for t, k in parts), "and"


def _set_sql(name: str, s: ColumnSet) -> tuple[str, str]:
    """(text, kind) with kind 'atom', 'and' (a conjunction) or 'or' (a disjunction)."""
    if s.is_empty():
        return "FALSE", "atom"
    if not s.intervals:
        return f"{name} IS NULL", "atom"
    if s.intervals == ColumnSet.not_null().intervals:
        return ("TRUE", "atom") if s.null else (f"{name} IS NOT NULL", "atom")
    values = s.finite_values()
    if values is not None and len(values) == 1 and isinstance(values[0], bool):
        if s.null:  # {v, NULL} is "IS NOT (not v)"
            return f"{name} IS NOT {sql_literal(not values[0])}", "atom"
        return f"{name} = {sql_literal(values[0])}", "atom"
    excluded = _excluded_points(s)
    if excluded is not None:
        return _not_in_sql(name, excluded, s.null)
    pieces: list[tuple[str, str]] = []
    if values is not None:  # single values only: one IN list (a public domain, say)
        pieces.append(_in_sql(name, list(values)))
    else:
        points = [iv.lo for iv in s.intervals if iv.is_point]
        for iv in s.intervals:
            if iv.is_point:
                if iv.lo == points[0]:
                    pieces.append(_in_sql(name, points))
            else:
                pieces.append(_interval_sql(name, iv))
    if s.null:
        pieces.append((f"{name} IS NULL", "atom"))
    if len(pieces) == 1:
        return pieces[0]
    return " OR ".join(f"({t})" if k == "and" else t for t, k in pieces), "or"


def _in_sql(name: str, points: list[Value]) -> tuple[str, str]:
    if len(points) == 1:
        return f"{name} = {sql_literal(points[0])}", "atom"
    return f"{name} IN ({_literal_list(points)})", "atom"


def _not_in_sql(name: str, points: list[Value], null: bool) -> tuple[str, str]:
    if len(points) == 1:
        op = "IS DISTINCT FROM" if null else "<>"
        return f"{name} {op} {sql_literal(points[0])}", "atom"
    text = f"{name} NOT IN ({_literal_list(points)})"
    return (f"{text} OR {name} IS NULL", "or") if null else (text, "atom")


def _literal_list(values: list[Value]) -> str:
    """``', '.join(sql_literal(v) for v in values)``, written in one pass when every value is
    a ``str`` (or every one an ``int``): the same text, for a long list of public keys."""
    if values and all(type(v) is str for v in values):
        return "'" + "', '".join(v.replace("'", "''") for v in values) + "'"
    if all(type(v) is int for v in values):
        return ", ".join(map(str, values))
    return ", ".join(sql_literal(v) for v in values)


def _interval_sql(name: str, iv: Interval) -> tuple[str, str]:
    if iv.lo is not None and iv.hi is not None and iv.lo_closed and iv.hi_closed:
        return f"{name} BETWEEN {sql_literal(iv.lo)} AND {sql_literal(iv.hi)}", "atom"
    ends = []
    if iv.lo is not None:
        ends.append(f"{name} {'>=' if iv.lo_closed else '>'} {sql_literal(iv.lo)}")
    if iv.hi is not None:
        ends.append(f"{name} {'<=' if iv.hi_closed else '<'} {sql_literal(iv.hi)}")
    return " AND ".join(ends), ("and" if len(ends) == 2 else "atom")


def _excluded_points(s: ColumnSet) -> list[Value] | None:
    """The non-NULL values missing from s when they are finitely many (else None).

    A gap between two integers (or days) that holds exactly one of them counts as a point, so
    the canonical int set ``(-inf, 4] ∪ [6, +inf)`` reads as ``<> 5``.
    """
    if len(s.intervals) < 2:
        return None
    if s.intervals[0].lo is not None or s.intervals[-1].hi is not None:
        return None  # a gap unbounded below or above is never a single value
    gaps = ColumnSet(s.intervals, False).complement().intervals
    out: list[Value] = []
    for gap in gaps:
        if gap.is_point:
            out.append(gap.lo)
        elif (single := _single_unit(gap)) is not None:
            out.append(single)
        else:
            return None
    return out


def _single_unit(gap: Interval) -> Value | None:
    lo, hi = gap.lo, gap.hi
    if gap.lo_closed or gap.hi_closed or lo is None or hi is None:
        return None
    if isinstance(lo, int) and not isinstance(lo, bool) and isinstance(hi, int) and hi - lo == 2:
        return lo + 1
    if type(lo) is date and type(hi) is date and hi.toordinal() - lo.toordinal() == 2:
        return lo + timedelta(days=1)
    return None
