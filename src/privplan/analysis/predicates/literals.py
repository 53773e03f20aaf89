"""DuckDB literal semantics: how a constant in a predicate is typed, cast and compared.

A comparison ``column op constant`` is analysed exactly only if we know which value the engine
compares the column with. DuckDB types a numeric literal as INTEGER/BIGINT/HUGEINT, DECIMAL(p, s)
or DOUBLE, casts constants with its own rules, and compares a DOUBLE, REAL or DECIMAL column
with a rounded literal; the functions here follow those rules (checked against DuckDB in the
tests) and, where an engine may round, give the hull of every value the literal may become.
Privacy: a region built from a wrong constant could leave out records the predicate reads, so
every case not known exactly is widened or raises :class:`_NotAnalysed` (a conservative region
with a note), never guessed.
"""

from __future__ import annotations

import math
import re
import struct
import sys
from dataclasses import dataclass
from datetime import date, datetime, time
from fractions import Fraction
from typing import Literal

from sqlglot import exp

from privplan.analysis.predicates.truth import _describe


class _NotAnalysed(Exception):
    """Raised inside the analyser; becomes a conservative (full, full) answer with a note."""


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


def _exact(c: _Const) -> Fraction:
    """The exact value of a numeric constant (kind int, decimal or double)."""
    if isinstance(c.value, (int, float, Fraction)):
        return Fraction(c.value)
    raise TypeError(f"a {c.kind} constant has no numeric value")


def _date_value(c: _Const) -> date:
    """The value of a date constant."""
    if isinstance(c.value, date):
        return c.value
    raise TypeError(f"a {c.kind} constant has no date value")


def _timestamp_value(c: _Const) -> datetime:
    """The value of a timestamp constant."""
    if isinstance(c.value, datetime):
        return c.value
    raise TypeError(f"a {c.kind} constant has no timestamp value")


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


def _const(e: exp.Expr) -> _Const:
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
        if inner.kind in ("int", "decimal", "double") and isinstance(
            inner.value, (int, float, Fraction)
        ):
            return _Const(inner.kind, -inner.value, inner.scale)
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
            q = _exact(c)
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
            ok = not single or _to_f32_or_none(float(_exact(n))) == n.value
            if ok:
                return n
        elif n is not None and _represents(n, single):
            return _Const("double", float(_exact(n)))
        raise fail
    if t == _T.DECIMAL:
        scale = _decimal_scale(to)
        n = c if c.kind != "str" else _decimal_string(str(v))
        if n is None or n.kind not in ("int", "decimal", "double"):
            raise fail
        unscaled = _exact(n) * 10**scale
        if unscaled.denominator != 1 or (n.kind == "double" and abs(unscaled) >= 2**53):
            raise fail
        return _Const("decimal", _exact(n), scale)
    if t in _TEXT_TYPES and c.kind == "str":
        return c
    if t == _T.DATE:
        if c.kind == "date":
            return c
        if c.kind == "timestamp":
            return _Const("date", _timestamp_value(c).date())
        if c.kind == "str" and (ts := _parse_timestamp(str(v))) is not None:
            return _Const("date", ts.date())
        raise fail
    if t in _TIMESTAMP_TYPES:
        if c.kind == "timestamp":
            return c
        if c.kind == "date":
            return _Const("timestamp", datetime.combine(_date_value(c), time()))
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
    unscaled = _exact(c) * 10**c.scale
    return c.scale <= max_scale and abs(unscaled) < 2**bits


def _represents(c: _Const, single: bool) -> bool:
    """Whether the number converts exactly (to float32 if ``single``, else float64)."""
    if not _simple(c, single):
        return False
    q = _exact(c)
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
    q = _exact(c)
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
    q = _exact(c)
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
