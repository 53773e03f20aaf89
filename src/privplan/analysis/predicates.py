"""Regions from SQL predicates, under SQL's three-valued logic.

``WHERE p`` makes a mechanism depend on the table only through ``{x : p(x) is TRUE}`` (CSF'24
Definition IV.8), so that set is the mechanism's region. A predicate is TRUE, FALSE or UNKNOWN
(NULL) on each record, and ``NOT`` maps UNKNOWN to UNKNOWN, so the TRUE-set of ``NOT p`` is the
FALSE-set of ``p`` -- never the complement of its TRUE-set (DESIGN.md invariant 6). We therefore
carry both sets, each an over-approximation (invariant 1):

* ``AND``: T = T1 ∩ T2, F = F1 ∪ F2;  ``OR``: T = T1 ∪ T2, F = F1 ∩ F2;  ``NOT`` swaps T and F.
  These are exact on exact inputs and monotone, so over-approximated inputs give
  over-approximated outputs.
* A comparison ``column op constant`` is exact: NULL is in neither set; a NULL operand puts
  every record in neither set. ``column BETWEEN c1 AND c2`` is ``>= AND <=``;
  ``column IN (c1, ...)`` is an ``OR`` of ``=`` (so a NULL item makes it never FALSE). DuckDB
  types IN / BETWEEN operands together, so numbers there are widened when a DOUBLE may round them.
* Anything else (LIKE, function calls, arithmetic, two-column comparisons, subqueries, CASE,
  unknown columns, constants that do not fit the column's type) gets ``(full, full)`` and a note.
* Regions are capped at :data:`MAX_BOXES` boxes; above, the per-column hull (sound, noted).

Literal semantics follow DuckDB (checked against it in the tests). ``int`` and ``date`` columns
are discrete, so their sets are normalised to closed integer / day intervals and emptiness is
exact (``x > 2 AND x < 3`` is empty). ``float`` columns hold binary floating point values
(DOUBLE or REAL) or exact decimals; a literal that one of these would round is widened to the
interval of every value it may round to, so the sets stay sound for all three storage types
(exact for literals that REAL represents exactly, such as ``2.5``). String comparison assumes
the engine's default binary (code point) collation. ``timestamp`` means a timestamp without time
zone. A float NaN, which DuckDB orders above every number, belongs exactly to the sets with an
unbounded upper end (``x > c``, ``x <> c``), so regions stay consistent for it.

>>> import sqlglot
>>> cols = {"age": "int", "grp": "str"}
>>> p = sqlglot.parse_one("NOT (age < 18) AND grp IN ('a', 'b')", dialect="duckdb")
>>> region_of(p, cols)
Region(boxes=(Box(constraints=(('age', {[18, +inf)}), ('grp', {'a', 'b'}))),), notes=())
"""

from __future__ import annotations

import math
import re
import struct
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from fractions import Fraction
from typing import Literal, get_args

from sqlglot import exp

from privplan.analysis.regions import Box, Region
from privplan.analysis.sets import ColumnSet, Interval, Value
from privplan.sql.locate import snippet

ColumnType = Literal["int", "float", "str", "bool", "date", "timestamp"]
COLUMN_TYPES: frozenset[str] = frozenset(get_args(ColumnType))

MAX_BOXES = 256
"""Above this many boxes a region is replaced by its per-column hull (sound, with a note)."""

_MAX_PRODUCT = 4096  # largest box product an intersection may enumerate before hulling


@dataclass(frozen=True)
class TruthRegions:
    """Over-approximations of where a predicate is TRUE and where it is FALSE.

    Records where the predicate is UNKNOWN (NULL) belong to neither set unless an
    over-approximation put them there.
    """

    true: Region
    false: Region

    def negate(self) -> TruthRegions:
        """``NOT p``: UNKNOWN stays UNKNOWN, so the sets swap (never complement)."""
        return TruthRegions(self.false, self.true)


def region_of(predicate: exp.Expression | None, columns: Mapping[str, ColumnType]) -> Region:
    """The region of ``WHERE predicate``: an over-approximation of its TRUE-set.

    ``None`` (no WHERE clause) reads every record, so its region is the whole domain.
    """
    if predicate is None:
        return Region.full()
    return _region(predicate, columns, positive=True)


def truth_regions(predicate: exp.Expression, columns: Mapping[str, ColumnType]) -> TruthRegions:
    """TRUE- and FALSE-regions of a predicate over one table's ``columns`` (name -> type).

    Column references match by name, case-insensitively; any table qualifier is ignored (the
    caller passes a predicate over this one table). The input tree is not modified.
    """
    return TruthRegions(
        _region(predicate, columns, positive=True), _region(predicate, columns, positive=False)
    )


def _region(predicate: exp.Expression, columns: Mapping[str, str], *, positive: bool) -> Region:
    analyser = _Analyser({name.lower(): kind for name, kind in columns.items()})
    try:
        return analyser.visit(predicate, positive)
    except RecursionError:
        note = "predicate is nested too deeply to analyse; assuming the whole domain (conservative)"
        return Region.full(note)


def simplify_region(region: Region, columns: Mapping[str, ColumnType]) -> Region:
    """Canonical per-column sets, merged and absorbed boxes, capped at :data:`MAX_BOXES`.

    The result describes the same set of records (or, above the cap, a superset with a note).
    """
    return _Analyser({name.lower(): kind for name, kind in columns.items()}).finish(region)


# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

ConstKind = Literal["null", "int", "decimal", "double", "str", "bool", "date", "timestamp"]


@dataclass(frozen=True, slots=True)
class _Const:
    """A constant as DuckDB types it: int (exact), decimal (exact Fraction), double (float).

    ``scale`` is a decimal's number of fractional digits (DuckDB converts DECIMAL(p, s) to
    DOUBLE as ``unscaled / 10**s``). ``widen`` marks a number that shares an IN list or BETWEEN
    with a DOUBLE, so the engine may compare it as a (rounded) double.
    """

    kind: ConstKind
    value: object
    scale: int = 0
    widen: bool = False


class _NotAnalysed(Exception):
    """Raised inside the analyser; becomes a conservative (full, full) answer with a note."""


_NULL = _Const("null", None)
_DECIMAL_MAX_DIGITS = 38  # DuckDB types a longer decimal literal as DOUBLE
_DOUBLE_EXACT_INT = 2**52  # below this, int-vs-double comparisons agree with exact ones
_F32_MAX = float.fromhex("0x1.fffffep+127")
_DATE_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_TS_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?")
_INT_RE = re.compile(r"[+-]?\d+")
_DEC_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")

_T = exp.DataType.Type
_INT_TYPES = frozenset(exp.DataType.INTEGER_TYPES) - {_T.BIT}
_TEXT_TYPES = frozenset({_T.TEXT, _T.VARCHAR})
_TIMESTAMP_TYPES = frozenset({_T.TIMESTAMP, _T.TIMESTAMPNTZ, _T.DATETIME})


def _const(e: exp.Expression) -> _Const:
    """Evaluate a constant expression (literals, NULL, TRUE/FALSE, unary minus, casts)."""
    if isinstance(e, exp.Paren):
        return _const(e.this)
    if isinstance(e, exp.Null):
        return _NULL
    if isinstance(e, exp.Boolean):
        return _Const("bool", bool(e.this))
    if isinstance(e, exp.Literal):
        return _Const("str", e.this) if e.is_string else _number(str(e.this))
    if isinstance(e, exp.Neg):
        inner = _const(e.this)
        if inner.kind in ("int", "decimal", "double"):
            return _Const(inner.kind, -inner.value, inner.scale)  # type: ignore[operator]
        raise _NotAnalysed(f"unary minus on a {inner.kind} constant is not analysed")
    if isinstance(e, exp.Cast):
        try:
            inner = _const(e.this)
        except _NotAnalysed:
            raise _NotAnalysed(f"CAST of {_describe(e.this)} is not analysed") from None
        return _cast(inner, e.to)
    raise _NotAnalysed(f"{_describe(e)} is not analysed")


def _number(text: str) -> _Const:
    """Type a numeric literal as DuckDB does: INTEGER/BIGINT/HUGEINT, DECIMAL(p,s) or DOUBLE."""
    if "e" in text.lower():  # before Fraction(), which would compute 10**exponent exactly
        try:
            return _double(float(text), text)
        except ValueError:
            raise _NotAnalysed(f"numeric literal {text} is not analysed") from None
    try:
        q = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise _NotAnalysed(f"numeric literal {text} is not analysed") from None
    if "." in text:
        if sum(ch.isdigit() for ch in text) < _DECIMAL_MAX_DIGITS - 1:
            return _Const("decimal", q, len(text.partition(".")[2]))
        # Near DuckDB's DECIMAL width limit the literal may be DOUBLE: only exact doubles agree.
        try:
            as_double = float(q)
        except OverflowError:  # beyond every double: no column value can equal it exactly
            raise _NotAnalysed(f"numeric literal {text} is too large to compare exactly") from None
        if Fraction(as_double) == q:
            return _double(as_double, text)
        raise _NotAnalysed(f"numeric literal {text} has too many digits to compare exactly")
    if abs(q) >= 2**127:
        raise _NotAnalysed(f"integer literal {text} is too large")
    return _Const("int", int(q))


def _double(v: float, text: str) -> _Const:
    if not math.isfinite(v):
        raise _NotAnalysed(f"literal {text} is not a finite number")
    return _Const("double", v)


def _decimal_scale(to: exp.DataType) -> int:
    params = [p.this for p in to.expressions if isinstance(p, exp.DataTypeParam)]
    if len(params) >= 2 and isinstance(params[1], exp.Literal) and not params[1].is_string:
        return int(str(params[1].this))
    if len(params) == 1:
        return 0
    return 3  # DuckDB's DECIMAL is DECIMAL(18, 3)


def _cast(c: _Const, to: exp.DataType) -> _Const:
    """``CAST(constant AS type)`` where DuckDB's result is unambiguous, else not analysed."""
    t = to.this
    v = c.value
    if c.kind == "null":
        return _NULL
    target = to.sql(dialect="duckdb")
    fail = _NotAnalysed(f"CAST of a {c.kind} constant to {target} is not analysed")
    if t in _INT_TYPES:
        if c.kind == "int":
            return c
        if c.kind == "bool":
            return _Const("int", int(bool(v)))
        if c.kind in ("decimal", "double"):
            q = Fraction(v)  # type: ignore[arg-type]
            if q.denominator == 1:  # DuckDB rounds non-integers; we only accept exact ones
                return _Const("int", int(q))
        if c.kind == "str" and _INT_RE.fullmatch(str(v)):
            return _Const("int", int(str(v)))
        raise fail
    if t in (_T.DOUBLE, _T.FLOAT):
        # Rounding casts are engine-specific: only casts that every IEEE path computes exactly.
        n = c if c.kind != "str" else _decimal_string(str(v))
        single = t == _T.FLOAT
        if n is not None and n.kind == "double":
            ok = not single or _to_f32_or_none(float(n.value)) == n.value  # type: ignore[arg-type]
            if ok:
                return n
        elif n is not None and _represents(n, single):
            return _Const("double", float(Fraction(n.value)))  # type: ignore[arg-type]
        raise fail
    if t == _T.DECIMAL:
        scale = _decimal_scale(to)
        n = c if c.kind != "str" else _decimal_string(str(v))
        if n is None or n.kind not in ("int", "decimal", "double"):
            raise fail
        unscaled = Fraction(n.value) * 10**scale  # type: ignore[arg-type]
        if unscaled.denominator != 1 or (n.kind == "double" and abs(unscaled) >= 2**53):
            raise fail
        return _Const("decimal", Fraction(n.value), scale)  # type: ignore[arg-type]
    if t in _TEXT_TYPES and c.kind == "str":
        return c
    if t == _T.DATE:
        if c.kind == "date":
            return c
        if c.kind == "timestamp":
            return _Const("date", v.date())  # type: ignore[attr-defined]
        if c.kind == "str" and (ts := _parse_timestamp(str(v))) is not None:
            return _Const("date", ts.date())
        raise fail
    if t in _TIMESTAMP_TYPES:
        if c.kind == "timestamp":
            return c
        if c.kind == "date":
            return _Const("timestamp", datetime.combine(v, time()))  # type: ignore[arg-type]
        if c.kind == "str" and (ts := _parse_timestamp(str(v))) is not None:
            return _Const("timestamp", ts)
        raise fail
    if t == _T.BOOLEAN and c.kind == "bool":
        return c
    raise fail


def _decimal_string(text: str) -> _Const | None:
    """A plain decimal string as a decimal constant (for casts); None for anything else."""
    if not _DEC_RE.fullmatch(text):
        return None
    return _Const("decimal", Fraction(text), len(text.partition(".")[2]))


def _simple(c: _Const, single: bool) -> bool:
    """Whether ``unscaled / 10**scale`` is one correctly rounded IEEE division in every engine.

    True when the unscaled integer and the power of ten are both exact in the format
    (float32 if ``single``, else float64); then the literal converts to the nearest value.
    """
    if c.kind not in ("int", "decimal"):
        return False
    bits, max_scale = (24, 10) if single else (53, 22)
    unscaled = Fraction(c.value) * 10**c.scale  # type: ignore[arg-type]
    return c.scale <= max_scale and abs(unscaled) < 2**bits


def _represents(c: _Const, single: bool) -> bool:
    """Whether the number converts exactly (to float32 if ``single``, else float64)."""
    if not _simple(c, single):
        return False
    q = Fraction(c.value)  # type: ignore[arg-type]
    f = float(q)
    return Fraction(_to_f32(f) if single else f) == q


def _parse_date(text: str) -> date | None:
    m = _DATE_RE.fullmatch(text)
    if m is None:
        return None
    try:
        return date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None


def _parse_timestamp(text: str) -> datetime | None:
    m = _TS_RE.fullmatch(text)
    if m is None:
        return None
    micros = int((m[7] or "").ljust(6, "0"))
    try:
        return datetime(
            int(m[1]), int(m[2]), int(m[3]), int(m[4] or 0), int(m[5] or 0), int(m[6] or 0), micros
        )
    except ValueError:
        return None


# -- float32 helpers ---------------------------------------------------------------------------


def _to_f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def _to_f32_or_none(x: float) -> float | None:
    try:
        return _to_f32(x)
    except OverflowError:
        return None


def _f32_step(x: float, up: bool) -> float:
    """The float32 neighbour of the float32 value x, upwards or downwards."""
    if x == 0.0:
        tiny = float(struct.unpack("<f", struct.pack("<I", 1))[0])
        return tiny if up else -tiny
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    bits += 1 if (x > 0) == up else -1
    return float(struct.unpack("<f", struct.pack("<I", bits))[0])


# Relative error bounds (with an absolute floor for tiny values) of any engine's conversion of a
# non-simple number: float32 results lie within 2**-20 (8 ulps), float64 within 2**-48.
_REL32, _ABS32 = Fraction(1, 2**20), Fraction(1, 2**126)
_REL64, _ABS64 = Fraction(1, 2**48), Fraction(1, 2**1022)


def _margin(q: Fraction, rel: Fraction, floor: Fraction) -> tuple[Fraction, Fraction]:
    m = abs(q) * rel + floor
    return q - m, q + m


_DBL_MAX = Fraction(sys.float_info.max)


def _down(q: Fraction) -> float:
    """The largest double <= q (-inf below the double range): a margin around the largest
    doubles goes past them, and ``float()`` of such a Fraction overflows."""
    if q > _DBL_MAX:
        return sys.float_info.max
    if q < -_DBL_MAX:
        return -math.inf
    f = float(q)
    return math.nextafter(f, -math.inf) if Fraction(f) > q else f


def _up(q: Fraction) -> float:
    """The smallest double >= q (+inf above the double range)."""
    if q < -_DBL_MAX:
        return -sys.float_info.max
    if q > _DBL_MAX:
        return math.inf
    f = float(q)
    return math.nextafter(f, math.inf) if Fraction(f) < q else f


def _float_bounds(c: _Const) -> tuple[float, float]:
    """Every value a float column may compare a numeric literal as, as a hull [lo, hi].

    Why: DuckDB compares a DOUBLE column with a DECIMAL/INTEGER literal q as double(q), a REAL
    column as float32(q) and a DECIMAL column exactly (checked in the tests). For a *simple* q
    (see :func:`_simple`) these are the correctly rounded neighbours, all inside
    [float32_floor(q), float32_ceil(q)] (just q when float32 holds it). A DOUBLE literal v is
    compared as v, but a DECIMAL column is first rounded to double, so any x within a few ulps
    qualifies; the same holds for numbers in an IN / BETWEEN with a DOUBLE (``widen``).
    Non-simple numbers get relative error margins. The comparison sets are built as unions
    over the hull, so they are sound for every storage type.
    """
    q = Fraction(c.value)  # type: ignore[arg-type]
    if abs(q) > _F32_MAX and c.kind != "double":
        raise _NotAnalysed(f"literal {float(q)!r} is outside the REAL range; not analysed")
    if c.kind == "double":
        lo, hi = _margin(q, _REL64, _ABS64)
    elif _simple(c, single=True):
        f = _to_f32(float(q))
        if Fraction(f) == q:
            lo = hi = Fraction(f)
        elif Fraction(f) > q:
            lo, hi = Fraction(_f32_step(f, up=False)), Fraction(f)
        else:
            lo, hi = Fraction(f), Fraction(_f32_step(f, up=True))
    else:
        lo, hi = _margin(q, _REL32, _ABS32)
    if c.widen:
        wlo, whi = _margin(q, _REL64, _ABS64)
        lo, hi = min(lo, wlo), max(hi, whi)
    return _down(lo), _up(hi)


def _int_position(c: _Const) -> tuple[Fraction, Fraction]:
    """Where an int column meets a number: exact, except a ``widen`` number DuckDB may round.

    Why: DuckDB compares integers with INTEGER/DECIMAL literals exactly (also BIGINT/HUGEINT
    columns; checked in the tests) and with a DOUBLE v by casting the column to double, which
    is exact below 2**52. A widened number that does not convert exactly may become any double
    within the float64 margin, so it gets that hull.
    """
    q = Fraction(c.value)  # type: ignore[arg-type]
    if c.kind == "double" or c.widen:
        if abs(q) >= _DOUBLE_EXACT_INT:
            raise _NotAnalysed(
                f"literal {float(q)!r} is too large to compare exactly; not analysed"
            )
        if c.kind != "double" and c.widen and not _represents(c, single=False):
            return _margin(q, _REL64, _ABS64)
    return q, q


def _widen_group(consts: list[_Const], ctype: str) -> list[_Const]:
    """Mark the numbers of an IN list / BETWEEN that DuckDB may compare as doubles.

    Why: DuckDB casts all operands of IN and BETWEEN to one type (a plain comparison is typed
    pairwise). With a DOUBLE among them that type is DOUBLE; on an int column, DECIMALs of
    different widths may also end up as DOUBLE. Only numbers that convert exactly are safe.
    """
    numeric = [c for c in consts if c.kind in ("int", "decimal", "double")]
    has_double = any(c.kind == "double" for c in numeric)
    has_decimal = any(c.kind == "decimal" for c in numeric)
    if not (has_double or (ctype == "int" and has_decimal)):
        return consts
    return [
        _Const(c.kind, c.value, c.scale, True) if c.kind in ("int", "decimal") else c
        for c in consts
    ]


# --------------------------------------------------------------------------------------------
# Positions: where a constant sits in a column's order
# --------------------------------------------------------------------------------------------

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
            return _date_position(v), _date_position(v)  # type: ignore[arg-type]
        if kind == "timestamp":
            pos = _timestamp_position(v)  # type: ignore[arg-type]
            return pos, pos
    elif ctype == "timestamp":
        if kind == "timestamp":
            return v, v
        if kind == "date":
            ts = datetime.combine(v, time())  # type: ignore[arg-type]
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
_COMPARISONS: dict[type[exp.Expression], _Op] = {
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


# --------------------------------------------------------------------------------------------
# Canonical sets per column type
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Notes
# --------------------------------------------------------------------------------------------


def _snippet(e: exp.Expression) -> str:
    return snippet(e, 80)


def _describe(e: exp.Expression) -> str:
    """What kind of expression this is, for a note."""
    if isinstance(e, exp.Column):
        return f"column {e.name}"
    if isinstance(e, (exp.Subquery, exp.Select, exp.Exists)):
        return "a subquery"
    if isinstance(e, exp.Case):
        return "a CASE expression"
    if isinstance(e, exp.Cast):
        return "a cast of a non-constant"
    if isinstance(e, exp.Func):
        name = e.sql_name() if not isinstance(e, exp.Anonymous) else str(e.this)
        return f"function call {name.upper()}()"
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.DPipe)):
        return "arithmetic"
    return f"expression {e.key.upper()}"


def _unsupported(reason: str, e: exp.Expression) -> TruthRegions:
    note = f"{reason} (`{_snippet(e)}`); assuming the whole domain (conservative)"
    return TruthRegions(Region.full(note), Region.full(note))


_TRUE = TruthRegions(Region.full(), Region.empty())
_FALSE = TruthRegions(Region.empty(), Region.full())
_NEITHER = TruthRegions(Region.empty(), Region.empty())


# --------------------------------------------------------------------------------------------
# The analyser
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ColumnRef:
    name: str
    ctype: str


class _Analyser:
    """Walks a predicate and builds its truth regions; holds the column types."""

    def __init__(self, columns: Mapping[str, str]) -> None:
        self.columns = dict(columns)

    # -- dispatch --------------------------------------------------------------------------
    def visit(self, e: exp.Expression, positive: bool) -> Region:
        """The TRUE-region of e (positive) or its FALSE-region, built only as far as needed.

        T(a AND b) = T(a) ∩ T(b), F(a AND b) = F(a) ∪ F(b); dually for OR; NOT flips.
        """
        while isinstance(e, (exp.Paren, exp.Where, exp.Not)):
            if isinstance(e, exp.Not):
                positive = not positive
            e = e.this
        if isinstance(e, (exp.And, exp.Or)):
            parts = [self.visit(part, positive) for part in e.flatten()]
            meet = isinstance(e, exp.And) == positive
            return self.fold(parts, self.intersect if meet else self.union)
        tr = self.atom(e)
        return tr.true if positive else tr.false

    @staticmethod
    def fold(parts: list[Region], combine: Callable[[Region, Region], Region]) -> Region:
        """Combine n regions pairwise in a balanced tree, so long chains stay near n log n."""
        while len(parts) > 1:
            paired = [combine(a, b) for a, b in zip(parts[::2], parts[1::2], strict=False)]
            parts = paired + ([parts[-1]] if len(parts) % 2 else [])
        return parts[0]

    def atom(self, e: exp.Expression) -> TruthRegions:
        """Truth regions of a predicate that is not AND / OR / NOT."""
        if isinstance(e, exp.Boolean):
            return _TRUE if e.this else _FALSE
        if isinstance(e, exp.Null):
            return _NEITHER
        if isinstance(e, exp.Column):
            return self.bare_column(e)
        op = _COMPARISONS.get(type(e))
        if op is not None:
            return self.compare(op, e.this, e.expression, e)
        if isinstance(e, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            tr = self.null_safe_eq(e.this, e.expression, e)
            return tr if isinstance(e, exp.NullSafeEQ) else tr.negate()
        if isinstance(e, exp.Between):
            return self.between(e)
        if isinstance(e, exp.In):
            return self.in_list(e)
        if isinstance(e, exp.Is):
            return self.is_(e)
        if isinstance(e, (exp.Like, exp.ILike, exp.SimilarTo, exp.RegexpLike, exp.Glob)):
            on = f" on {e.this.name}" if isinstance(e.this, exp.Column) else ""
            kind = e.key.upper()
            return _unsupported(f"{kind}{on}: pattern predicates are not analysed", e)
        return _unsupported(f"{_describe(e)} is not analysed", e)

    # -- operands --------------------------------------------------------------------------
    def operand(self, e: exp.Expression) -> _ColumnRef | _Const | str:
        """A declared column, a constant, or the reason the operand is not analysed."""
        while isinstance(e, exp.Paren):
            e = e.this
        if isinstance(e, exp.Column):
            name = e.name.lower()
            ctype = self.columns.get(name)
            if ctype is None:
                return f"column {name} is not declared for this table"
            if ctype not in COLUMN_TYPES:
                return f"column {name} has unsupported type {ctype!r}"
            return _ColumnRef(name, ctype)
        try:
            return _const(e)
        except _NotAnalysed as err:
            return str(err)

    def compare(
        self, op: _Op, left: exp.Expression, right: exp.Expression, e: exp.Expression
    ) -> TruthRegions:
        """``left op right``: exact for a column against a constant; NULL operand -> neither."""
        a, b = self.operand(left), self.operand(right)
        if a == _NULL or b == _NULL:
            return _NEITHER  # a comparison with NULL is UNKNOWN whatever the other side is
        if isinstance(b, _ColumnRef) and isinstance(a, _Const):
            a, b, op = b, a, _FLIP[op]
        if isinstance(a, _ColumnRef) and isinstance(b, _Const):
            return self.compare_const(op, a, b, e)
        if isinstance(a, _ColumnRef) and isinstance(b, _ColumnRef):
            reason = "comparison between two columns is not analysed"
        elif isinstance(a, _Const) and isinstance(b, _Const):
            reason = "comparison between two constants is not analysed"
        else:
            reason = a if isinstance(a, str) else str(b)
        return _unsupported(reason, e)

    def compare_const(self, op: _Op, col: _ColumnRef, c: _Const, e: exp.Expression) -> TruthRegions:
        """``column op constant``: exact sets (or sound hulls, see :func:`_bounds`)."""
        if c == _NULL:
            return _NEITHER
        try:
            t, f = self.comparison_sets(op, col, c)
        except _NotAnalysed as err:
            return _unsupported(str(err), e)
        return TruthRegions(self.column_region(col, t), self.column_region(col, f))

    def comparison_sets(self, op: _Op, col: _ColumnRef, c: _Const) -> tuple[ColumnSet, ColumnSet]:
        lo, hi = _bounds(c, col.ctype, col.name)
        return _op_sets(op, lo, hi)

    def column_region(self, col: _ColumnRef, s: ColumnSet) -> Region:
        return Region.column(col.name, _canon_set(s, col.ctype))

    def null_safe_eq(
        self, left: exp.Expression, right: exp.Expression, e: exp.Expression
    ) -> TruthRegions:
        """``IS NOT DISTINCT FROM``: ``=`` where NULL equals NULL; never UNKNOWN."""
        a, b = self.operand(left), self.operand(right)
        if isinstance(b, _ColumnRef) and isinstance(a, _Const):
            a, b = b, a
        if a == _NULL and b == _NULL:
            return _TRUE
        if isinstance(a, _ColumnRef) and b == _NULL:
            return self.null_test(a)
        if isinstance(a, _ColumnRef) and isinstance(b, _Const):
            try:
                t, f = self.comparison_sets("eq", a, b)
            except _NotAnalysed as err:
                return _unsupported(str(err), e)
            with_null = f.union(ColumnSet.only_null())
            return TruthRegions(self.column_region(a, t), self.column_region(a, with_null))
        return _unsupported("IS [NOT] DISTINCT FROM on a non-column is not analysed", e)

    def null_test(self, col: _ColumnRef) -> TruthRegions:
        return TruthRegions(
            Region.column(col.name, ColumnSet.only_null()),
            Region.column(col.name, _canon_set(ColumnSet.not_null(), col.ctype)),
        )

    # -- forms -----------------------------------------------------------------------------
    def bare_column(self, e: exp.Column) -> TruthRegions:
        ref = self.operand(e)
        if isinstance(ref, _ColumnRef) and ref.ctype == "bool":
            return TruthRegions(
                Region.column(ref.name, ColumnSet.points([True])),
                Region.column(ref.name, ColumnSet.points([False])),
            )
        if isinstance(ref, str):
            reason = ref
        elif isinstance(ref, _ColumnRef):
            reason = f"{ref.ctype} column {ref.name} used as a condition is not analysed"
        else:
            reason = "a constant used as a condition is not analysed"
        return _unsupported(reason, e)

    def between(self, e: exp.Between) -> TruthRegions:
        """``x BETWEEN a AND b`` is ``x >= a AND x <= b`` (also under three-valued logic).

        Only ``column BETWEEN constant AND constant``: DuckDB types the three operands together.
        """
        if e.args.get("symmetric"):
            return _unsupported("BETWEEN SYMMETRIC is not analysed", e)
        col = self.operand(e.this)
        bounds = [self.operand(e.args["low"]), self.operand(e.args["high"])]
        if not isinstance(col, _ColumnRef) or not all(isinstance(b, _Const) for b in bounds):
            reasons = [x for x in (col, *bounds) if isinstance(x, str)]
            why = reasons[0] if reasons else "BETWEEN other than column BETWEEN constants"
            return _unsupported(f"{why} is not analysed" if not reasons else why, e)
        low, high = _widen_group(bounds, col.ctype)  # type: ignore[arg-type]
        return self.conj(
            self.compare_const("ge", col, low, e), self.compare_const("le", col, high, e)
        )

    def in_list(self, e: exp.In) -> TruthRegions:
        """``x IN (a, b, ...)`` is ``x = a OR x = b OR ...``: a NULL item makes it never FALSE."""
        items = e.expressions
        if not items or any(e.args.get(k) for k in ("query", "unnest", "field")):
            return _unsupported("IN with a subquery or a non-list is not analysed", e)
        col = self.operand(e.this)
        operands = [self.operand(item) for item in items]
        consts = [c for c in operands if isinstance(c, _Const)]
        if not isinstance(col, _ColumnRef) or len(consts) < len(operands):
            reasons = [x for x in (col, *operands) if isinstance(x, str)]
            why = reasons[0] if reasons else "IN other than column IN (constants) is not analysed"
            return _unsupported(why, e)  # DuckDB types the whole list together
        try:
            return self.in_constants(col, _widen_group(consts, col.ctype))
        except _NotAnalysed as err:
            return _unsupported(str(err), e)

    def in_constants(self, col: _ColumnRef, consts: list[_Const]) -> TruthRegions:
        """``column IN (constants)`` in one step, so long lists stay fast.

        Same sets as the OR of ``=``: T is the union of the items' TRUE-sets; F is the
        intersection of their FALSE-sets, i.e. every non-NULL value except the exactly known
        items (a widened item's FALSE-set is all non-NULL values), and empty with a NULL item.
        """
        hulls = [_bounds(c, col.ctype, col.name) for c in consts if c != _NULL]
        true = ColumnSet.of(Interval(lo, hi) for lo, hi in hulls)
        if _NULL in consts:
            false = ColumnSet.empty()
        else:
            exact = ColumnSet.of(Interval(lo, hi) for lo, hi in hulls if lo == hi)
            false = ColumnSet(exact.intervals, True).complement()
        return TruthRegions(self.column_region(col, true), self.column_region(col, false))

    def is_(self, e: exp.Is) -> TruthRegions:
        """``IS NULL`` and ``IS TRUE / FALSE``: never UNKNOWN."""
        target = e.expression
        subject = self.operand(e.this)
        if isinstance(target, exp.Null):
            if isinstance(subject, _ColumnRef):
                return self.null_test(subject)
            if isinstance(subject, _Const):
                return _TRUE if subject.kind == "null" else _FALSE
        elif isinstance(target, exp.Boolean):
            want = bool(target.this)
            if isinstance(subject, _ColumnRef) and subject.ctype == "bool":
                return TruthRegions(
                    Region.column(subject.name, ColumnSet.points([want])),
                    Region.column(subject.name, ColumnSet.points([not want], null=True)),
                )
            if isinstance(subject, _Const) and subject.kind in ("null", "bool"):
                return _TRUE if subject.value is want else _FALSE
        return _unsupported("this IS test is not analysed", e)

    # -- region algebra ----------------------------------------------------------------------
    def conj(self, a: TruthRegions, b: TruthRegions) -> TruthRegions:
        return TruthRegions(self.intersect(a.true, b.true), self.union(a.false, b.false))

    def disj(self, a: TruthRegions, b: TruthRegions) -> TruthRegions:
        return TruthRegions(self.union(a.true, b.true), self.intersect(a.false, b.false))

    def union(self, a: Region, b: Region) -> Region:
        return self.finish_boxes(a.boxes + b.boxes, a.notes + b.notes)

    def intersect(self, a: Region, b: Region) -> Region:
        while len(a.boxes) * len(b.boxes) > _MAX_PRODUCT:  # sound: hulls only grow a region
            if len(a.boxes) >= len(b.boxes):
                a = self.hull(list(a.boxes), a.notes)
            else:
                b = self.hull(list(b.boxes), b.notes)
        boxes = tuple(_intersect_boxes(x, y) for x in a.boxes for y in b.boxes)
        return self.finish_boxes(boxes, a.notes + b.notes)

    def finish(self, region: Region) -> Region:
        boxes = tuple(self.canon_box(b) for b in region.boxes)
        return self.finish_boxes(boxes, region.notes)

    def finish_boxes(self, boxes: tuple[Box, ...], notes: tuple[str, ...]) -> Region:
        """Boxes merged/absorbed, and the size cap (hull above it).

        The boxes' sets must be canonical. Leaves are built canonical, and unions and
        intersections of canonical sets stay canonical (two result intervals of an intersection
        cannot be adjacent: their meeting units would lie in one interval of each operand).
        """
        kept = list(dict.fromkeys(b for b in boxes if not b.is_empty()))
        if any(not b.constraints for b in kept):
            return Region.full(*notes)
        kept = self.simplify(kept)
        if len(kept) > MAX_BOXES:
            return self.hull(kept, notes)
        # kept is already what Region.of would make (non-empty, distinct, no free box); building
        # directly skips its quadratic duplicate check.
        return Region(tuple(kept), tuple(dict.fromkeys(notes)))

    def canon_box(self, b: Box) -> Box:
        return Box.of({c: _canon_set(s, self.columns.get(c)) for c, s in b.constraints})

    def hull(self, boxes: list[Box], notes: tuple[str, ...]) -> Region:
        """One box containing all boxes: per column, the union of its sets (free if any is)."""
        note = (
            f"region had more than {MAX_BOXES} boxes; over-approximated by its per-column hull "
            "(conservative)"
        )
        if not boxes:
            return Region.of((), notes)
        cols = set.intersection(*(set(b.columns) for b in boxes))
        sets: dict[str, ColumnSet] = {}
        for c in sorted(cols):
            acc = ColumnSet.of(
                (iv for b in boxes for iv in b.get(c).intervals), any(b.get(c).null for b in boxes)
            )
            sets[c] = _canon_set(acc, self.columns.get(c))
        return Region.of([Box.of(sets)], notes + (note,))

    def simplify(self, boxes: list[Box]) -> list[Box]:
        """Merge boxes that agree outside one column, drop boxes inside others (both exact).

        Box order is kept (a merged box takes its first member's place), so a region with
        nothing to merge comes back unchanged.
        """
        out = list(dict.fromkeys(b for b in boxes if not b.is_empty()))
        while True:
            merged = self.merge_pass(out)
            absorbed = self.absorb_pass(merged) if len(merged) <= _MAX_ABSORB else merged
            if absorbed == out:
                return out
            out = absorbed

    def merge_pass(self, boxes: list[Box]) -> list[Box]:
        """For each column c, boxes with equal constraints off c become one (union on c)."""
        cols = sorted({c for b in boxes for c in b.columns})
        for c in cols:
            groups: dict[tuple[tuple[str, ColumnSet], ...], list[Box]] = {}
            for b in boxes:
                groups.setdefault(tuple(x for x in b.constraints if x[0] != c), []).append(b)
            if len(groups) == len(boxes):
                continue
            out: list[Box] = []
            for rest, members in groups.items():
                if len(members) == 1:
                    out.append(members[0])
                    continue
                union = ColumnSet.of(
                    (iv for m in members for iv in m.get(c).intervals),
                    any(m.get(c).null for m in members),
                )
                out.append(Box.of({**dict(rest), c: _canon_set(union, self.columns.get(c))}))
            boxes = out
        return boxes

    def absorb_pass(self, boxes: list[Box]) -> list[Box]:
        """Drop each box contained in another (boxes are distinct, so no two contain each other)."""
        keep = []
        cols = [b.columns for b in boxes]
        for i, a in enumerate(boxes):
            inside = any(
                j != i and cols[j] <= cols[i] and _box_subset(a, b) for j, b in enumerate(boxes)
            )
            if not inside:
                keep.append(a)
        return keep


def _intersect_boxes(a: Box, b: Box) -> Box:
    """``Box.intersect`` with a linear sweep per column (long IN / <> chains stay fast)."""
    merged = dict(a.constraints)
    for c, s in b.constraints:
        merged[c] = _intersect_sets(merged[c], s) if c in merged else s
    return Box.of(merged)


def _intersect_sets(x: ColumnSet, y: ColumnSet) -> ColumnSet:
    """``ColumnSet.intersect`` for sorted disjoint interval lists, in one sweep."""
    xs, ys = x.intervals, y.intervals
    out: list[Interval] = []
    i = j = 0
    while i < len(xs) and j < len(ys):
        c = xs[i].intersect(ys[j])
        if c is not None:
            out.append(c)
        if _ends_first(xs[i], ys[j]):
            i += 1
        else:
            j += 1
    return ColumnSet.of(out, x.null and y.null)


def _ends_first(a: Interval, b: Interval) -> bool:
    """a's upper end is at or below b's (so a cannot meet anything after b)."""
    if a.hi is None:
        return b.hi is None
    if b.hi is None or a.hi < b.hi:
        return True
    return a.hi == b.hi and (not a.hi_closed or b.hi_closed)


_MAX_ABSORB = 32  # the containment pass is quadratic; larger regions skip it (still exact)


def _box_subset(a: Box, b: Box) -> bool:
    """a ⊆ b for boxes of canonical sets: each set b constrains holds a's set on that column."""
    return all(_set_subset(a.get(c), s) for c, s in b.constraints)


def _set_subset(x: ColumnSet, y: ColumnSet) -> bool:
    """x ⊆ y for canonical sets, in one sorted sweep.

    Canonical intervals are disjoint and not mergeable, so an interval of x inside y lies inside
    a single interval of y: the first one that does not end before it.
    """
    if x.null and not y.null:
        return False
    ys = y.intervals
    j = 0
    for iv in x.intervals:
        while j < len(ys) and _ends_before(ys[j], iv):
            j += 1
        if j == len(ys) or not _within(iv, ys[j]):
            return False
    return True


def _ends_before(a: Interval, b: Interval) -> bool:
    """Every value of a is below every value of b."""
    if a.hi is None or b.lo is None:
        return False
    return a.hi < b.lo or (a.hi == b.lo and not (a.hi_closed and b.lo_closed))


def _within(a: Interval, b: Interval) -> bool:
    """a ⊆ b."""
    lo_ok = b.lo is None or (
        a.lo is not None and (a.lo > b.lo or (a.lo == b.lo and (b.lo_closed or not a.lo_closed)))
    )
    hi_ok = b.hi is None or (
        a.hi is not None and (a.hi < b.hi or (a.hi == b.hi and (b.hi_closed or not a.hi_closed)))
    )
    return lo_ok and hi_ok
