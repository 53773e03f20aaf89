"""Quantile aggregates in SQL: which calls are quantiles, their q, and the grid of candidates.

``MEDIAN(x)``, ``QUANTILE_CONT/_DISC(x, q)``, ``PERCENTILE_CONT/_DISC(q) WITHIN GROUP (ORDER BY
x)``, ``APPROX_QUANTILE(x, q)``, ``MIN(x)`` (q = 0) and ``MAX(x)`` (q = 1) of a bounded numeric
column become one exponential-mechanism measure each (:mod:`privplan.mechanisms.exponential`;
the builder makes the measure). The candidates are a grid fixed by the policy's bounds alone, so
the cell a row falls in is a function of that row: the engine's histogram per group is all the
mechanism reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

from sqlglot import exp

from privplan.mechanisms import grid as gridlib
from privplan.sql.validate import refuse

__all__ = ["QUANTILE_CELLS", "QUANTILE_FUNCTIONS", "QuantileCall", "quantile_call",
           "quantile_resolution", "within_group_as_arguments"]

QUANTILE_FUNCTIONS: tuple[type[exp.Expression], ...] = (
    exp.Median, exp.PercentileCont, exp.PercentileDisc, exp.ApproxQuantile, exp.Min, exp.Max)
QUANTILE_CELLS = 1000
"""Most grid cells a quantile chooses among: the engine's histogram per group has at most
this many entries, and the answer's granularity is the range over about this many."""
_FIXED = {"MEDIAN": Fraction(1, 2), "MIN": Fraction(0), "MAX": Fraction(1)}


@dataclass(frozen=True)
class QuantileCall:
    """A checked quantile call: its column, q, declared bounds and grid (cells lo..hi of width
    ``resolution``), and the label explain shows."""

    column: str
    q: Fraction
    lower: Any
    upper: Any
    resolution: Fraction
    lo: int
    hi: int
    label: str


def quantile_call(sql: str, agg: exp.Expression, table: Any,
                  clamps: Any = None) -> QuantileCall:
    """Read and check one quantile call over ``table`` (a TablePolicy); refuses, with the
    fix, anything but one literal q in [0, 1] of one bounded numeric column. ``clamps``:
    this query's narrower bounds per column (BigQuery's ``contribution_bounds_per_row``),
    which replace the policy's as the candidates' range — rows are clamped into it, as the
    policy's bounds clamp them otherwise (the rank utility's sensitivity does not depend on
    the range)."""
    name = agg.sql(dialect="duckdb").split("(", 1)[0].upper()  # as written (or DuckDB's)
    for sub in agg.find_all(exp.AggFunc):
        if sub is not agg:
            refuse(sql, cast(exp.Expression, sub), "nested aggregate refused",
                   "aggregates cannot nest.",
                   "Compute the inner aggregate in its own query.")
    q = _FIXED.get(name)
    if q is None:
        q = _literal_q(agg.args.get("quantile") or agg.args.get("expression"))
        if q is None:
            refuse(sql, agg, f"{name} refused",
                   "its quantile must be one number between 0 and 1 written in the query "
                   "(a list of quantiles or a computed one is not answered).",
                   f"Write e.g. {name}(x, 0.9) or PERCENTILE_CONT(0.9) WITHIN GROUP "
                   "(ORDER BY x), one quantile per aggregate.")
    assert q is not None
    arg = agg.this
    if isinstance(arg, exp.Distinct) or not isinstance(arg, exp.Column) or (
            arg.name.startswith("__pub")):
        refuse(sql, agg, f"{name} of this argument refused",
               "a quantile is answered over one numeric column of the private table with "
               "declared bounds (its candidates are a grid over those bounds).",
               f"Write {name} of a bounded numeric column.")
    column = arg.name.lower()
    col = table.columns.get(column)
    if col is None or col.type not in ("int", "float"):
        refuse(sql, agg, f"{name} over {getattr(col, 'type', 'this')} column refused",
               "quantiles are answered for int and float columns with declared bounds.",
               "Aggregate a numeric column.")
    lower, upper = col.require_bounds(f"{name}({column})", table.name)
    narrower = (clamps or {}).get(column)
    if narrower is not None:
        lo_q, hi_q = (Fraction(str(v)) for v in narrower)
        if not Fraction(str(lower)) <= lo_q <= hi_q <= Fraction(str(upper)):
            from privplan.errors import PolicyError

            raise PolicyError(
                f"clamping bounds [{lo_q}, {hi_q}] for '{column}' are not inside the policy's "
                f"[{lower}, {upper}]: a query may only narrow them.")
        lower, upper = ((int(lo_q), int(hi_q)) if col.type == "int" and lo_q.denominator == 1
                        and hi_q.denominator == 1 else (float(lo_q), float(hi_q)))
    res = quantile_resolution(col.type, Fraction(str(lower)), Fraction(str(upper)))
    lo, hi = gridlib.Grid(res).to_grid_bounds(lower, upper)
    label = f"{name}({column})" + ("" if name in _FIXED else f" q={q}")
    return QuantileCall(column, q, lower, upper, res, lo, hi, label)


def _literal_q(node: exp.Expression | None) -> Fraction | None:
    """q from a numeric literal in [0, 1] (its decimal text read exactly), else None."""
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    try:
        q = Fraction(str(node.this))
    except (ValueError, ZeroDivisionError):
        return None
    return q if 0 <= q <= 1 else None


def quantile_resolution(column_type: str, lower: Fraction, upper: Fraction) -> Fraction:
    """The width of a quantile's grid cells: 1 for an int column whose range has at most
    :data:`QUANTILE_CELLS` values; else the smallest 1, 2 or 5 times a power of ten that covers
    the range in at most that many cells (a round step, so answers are round numbers)."""
    span = upper - lower
    if column_type == "int" and span + 1 <= QUANTILE_CELLS:
        return Fraction(1)
    if span <= 0:
        return Fraction(1)
    power = Fraction(10) ** (math.floor(math.log10(float(span / QUANTILE_CELLS))) - 1)
    while True:
        for step in (1, 2, 5):
            res = power * step
            if span / res + 1 <= QUANTILE_CELLS and (column_type != "int" or res >= 1):
                return res
        power *= 10


def within_group_as_arguments(select: exp.Select) -> None:
    """``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x)`` as ``PERCENTILE_CONT(x, q)`` (DuckDB's
    ``QUANTILE_CONT(x, q)`` form), so one code path reads both spellings. A descending order
    (which flips the quantile) is left as it is, and refused."""
    for node in list(select.find_all(exp.WithinGroup)):
        func, order = node.this, node.expression
        keys = order.expressions if isinstance(order, exp.Order) else []
        if isinstance(func, (exp.PercentileCont, exp.PercentileDisc)) and len(keys) == 1:
            key = keys[0].this if isinstance(keys[0], exp.Ordered) else keys[0]
            if isinstance(keys[0], exp.Ordered) and keys[0].args.get("desc"):
                continue
            node.replace(type(func)(this=key.copy(), expression=func.this.copy()))
