"""Column types and values typed per column.

The column types a policy may declare, and the coercion of a raw setting (a bound or a public
value, as YAML or a dict gives it) into a value of its column's type — with a
:class:`PolicyError` that says why the value does not fit. Also the ``resolution`` of float sums:
its reading, its check against the bounds (the SUM must fit 64-bit integers), and its output form.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Literal, NoReturn, get_args

from privplan.policy.checks import _fail, _Loc

ColumnType = Literal["int", "float", "str", "bool", "date", "timestamp"]
COLUMN_TYPES: tuple[str, ...] = get_args(ColumnType)

_ORDERED_TYPES = ("int", "float", "date", "timestamp")

_EXAMPLE_BOUNDS: dict[str, tuple[str, str]] = {
    "int": ("0", "100"),
    "float": ("0", "10000"),
    "date": ("2020-01-01", "2024-12-31"),
    "timestamp": ("2020-01-01 00:00:00", "2024-12-31 23:59:59"),
}


# --------------------------------------------------------------------------------------------
# Values typed per column
# --------------------------------------------------------------------------------------------


def _to_utc_naive(t: dt.datetime) -> dt.datetime:
    if t.tzinfo is None:
        return t
    return t.astimezone(dt.UTC).replace(tzinfo=None)


def _coerce(v: object, ctype: str, loc: _Loc, what: str, why: str) -> Any:
    """``v`` as a value of a ``ctype`` column, or a PolicyError explaining the mismatch.

    Numbers also accept numeric strings (PyYAML reads ``1e6`` as a string); dates and
    timestamps accept ``datetime.date``/``datetime`` (PyYAML's reading of unquoted dates) and ISO
    strings. Time-zone aware timestamps are converted to naive UTC.
    """

    def bad(hint: str) -> NoReturn:
        shown = repr(v) if isinstance(v, str) else str(v)
        _fail(loc, f"{what} {shown} ({type(v).__name__}) is not a valid {ctype} value", why, hint)

    if v is None:
        bad(f"give a {ctype} value; NULLs are governed by `nullable`, not by {what}.")
    if ctype in ("int", "float"):
        return _coerce_number(v, ctype, bad)
    if ctype == "str":
        if not isinstance(v, str):
            bad(
                f"quote it in the YAML: `'{v}'` (unquoted yes/no/on/off, numbers and dates are "
                "read as other types)."
            )
        return v
    if ctype == "bool":
        if not isinstance(v, bool):
            bad("write true or false.")
        return v
    if ctype == "date":
        return _coerce_date(v, bad)
    if ctype == "timestamp":
        return _coerce_timestamp(v, bad)
    raise AssertionError(ctype)  # pragma: no cover - ctype is validated before


def _coerce_number(v: object, ctype: str, bad: Callable[[str], NoReturn]) -> int | float:
    """``v`` as an ``int`` or ``float`` column value (``bad`` refuses it with a hint)."""
    if isinstance(v, bool):
        bad(f"write a number, e.g. {_EXAMPLE_BOUNDS[ctype][1]}.")
    num: Fraction | float
    if isinstance(v, int):
        num = Fraction(v)
    elif isinstance(v, float):
        if not math.isfinite(v):
            bad("bounds and values must be finite numbers.")
        num = v
    elif isinstance(v, str):
        try:
            num = Fraction(v.strip())
        except (ValueError, ZeroDivisionError):
            bad(f"write a number, e.g. {_EXAMPLE_BOUNDS[ctype][1]}.")
    else:
        bad(f"write a number, e.g. {_EXAMPLE_BOUNDS[ctype][1]}.")
    if ctype == "float":
        try:
            return float(num)
        except OverflowError:
            bad("bounds and values must be finite numbers.")
    if isinstance(num, float):
        if not num.is_integer():
            bad("an int column takes whole numbers; use `type: float` for fractions.")
        return int(num)
    if num.denominator != 1:
        bad("an int column takes whole numbers; use `type: float` for fractions.")
    return int(num)


def _coerce_date(v: object, bad: Callable[[str], NoReturn]) -> dt.date:
    """``v`` as a ``date`` column value (``bad`` refuses it with a hint)."""
    if isinstance(v, dt.datetime):
        if v.time() != dt.time(0) or v.tzinfo is not None:
            bad(
                "a date column takes dates such as 2020-01-01; use `type: timestamp` for times."
            )
        return v.date()
    if isinstance(v, dt.date):
        return v
    if isinstance(v, str):
        try:
            return dt.date.fromisoformat(v.strip())
        except ValueError:
            pass
    bad("write an ISO date such as 2020-01-01.")


def _coerce_timestamp(v: object, bad: Callable[[str], NoReturn]) -> dt.datetime:
    """``v`` as a ``timestamp`` column value, naive UTC (``bad`` refuses it with a hint)."""
    if isinstance(v, dt.datetime):
        return _to_utc_naive(v)
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day)
    if isinstance(v, str):
        try:
            return _to_utc_naive(dt.datetime.fromisoformat(v.strip()))
        except ValueError:
            pass
    bad("write an ISO timestamp such as 2020-01-01 00:00:00.")


def _check_grid(resolution: Fraction, lower: Any, upper: Any, loc: _Loc) -> None:
    """A resolution the policy sets must put the bounds on a grid whose SUM fits int64 and
    that holds at least one point (checked when the policy is loaded, not at the first SUM)."""
    from privplan.errors import UnsupportedQueryError
    from privplan.mechanisms import grid as gridlib

    suggested = gridlib.default_resolution(lower, upper, "float")
    fix = (f"use `resolution: {_fraction_out(suggested)}` (the default for these bounds), or "
           "remove `resolution` to get it.")
    why = ("float sums are computed exactly on the integer grid value / resolution, which must "
           "fit 64-bit integers over up to 2^40 rows (|value| / resolution <= 2^22) and hold "
           "at least one point between the bounds; the engine computes it in double "
           "arithmetic, so 1 / resolution must be a finite double.")
    try:
        lo, hi = gridlib.Grid(resolution).to_grid_bounds(lower, upper)
        gridlib.check_no_overflow(lo, hi, 1)
        gridlib.check_double_grid(resolution, lo, hi)
    except UnsupportedQueryError:
        _fail(loc, f"resolution {_fraction_out(resolution)} does not fit the bounds "
                   f"[{lower}, {upper}]", why, fix)


def _resolution(v: object, loc: _Loc) -> Fraction:
    why = "the resolution is the grid float sums are computed on; noise is calibrated to it."
    fix = "write a positive step such as `resolution: 0.01`."
    r: Fraction | None = None
    if isinstance(v, bool):
        r = None
    elif isinstance(v, int):
        r = Fraction(v)
    elif isinstance(v, float) and math.isfinite(v):
        r = Fraction(repr(v))  # the decimal the user wrote, not the binary approximation
    elif isinstance(v, str):
        try:
            r = Fraction(v.strip())
        except (ValueError, ZeroDivisionError):
            r = None
    if r is None or r <= 0:
        _fail(loc, f"resolution {v!r} is not a positive number", why, fix)
    return r


def _fraction_out(r: Fraction) -> float | str:
    """A Fraction as the float the user would write, or as ``"p/q"`` if no float is exact."""
    f = float(r)
    return f if Fraction(repr(f)) == r else str(r)
