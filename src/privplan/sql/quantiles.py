"""Quantile aggregates in SQL: which calls are quantiles, their q, and the grid of candidates.

``MEDIAN(x)``, ``QUANTILE_CONT/_DISC(x, q)``, ``PERCENTILE_CONT/_DISC(q) WITHIN GROUP (ORDER BY
x)``, ``APPROX_QUANTILE(x, q)``, ``MIN(x)`` (q = 0) and ``MAX(x)`` (q = 1) of a bounded numeric
column become one exponential-mechanism measure each (:mod:`privplan.mechanisms.exponential`;
the builder makes the measure). The candidates are a grid fixed by the policy's bounds alone, so
the cell a row falls in is a function of that row: the engine's histogram per group is all the
mechanism reads.

Everything that could fail after the charge is refused here, before it, on the query text and
the policy alone:

* **q** must be a number in [0, 1] with at most :data:`~privplan.mechanisms.exponential.
  Q_DECIMALS` decimal places (its denominator b divides 10^9): utilities are b times row counts,
  exact in int64 for groups below 4.6·10^9 rows, and the sampler's float pass then decides
  every pick (``0.999999999999999999`` or ``1e-300`` are refused, free);
* **the grid** is computed by the engine in double arithmetic (unless it is an int column on
  step 1): its step is never narrower than the doubles at the bounds (so its integers stay
  within 2^53, exact doubles, and a cell holds at least one double) and its scale must be a
  finite double (:func:`privplan.mechanisms.grid.check_double_grid`); a float bound between 0
  and 2^-1022 (a subnormal double, which loses precision when scaled) is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

from sqlglot import exp

from privplan.errors import PolicyError, UnsupportedQueryError
from privplan.mechanisms import grid as gridlib
from privplan.mechanisms.exponential import Q_DECIMALS
from privplan.sql.validate import NESTED_FIX, NESTED_WHY, refuse

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
            refuse(sql, cast(exp.Expression, sub), "nested aggregate refused", NESTED_WHY,
                   NESTED_FIX)
    q = _FIXED.get(name)
    if q is None:
        node = agg.args.get("quantile") or agg.args.get("expression")
        q = _literal_q(node)
        if q is None:
            refuse(sql, agg, f"{name} refused",
                   "its quantile must be one number between 0 and 1 written in the query "
                   "(a list of quantiles or a computed one is not answered): privplan plans "
                   "and charges one noisy rank search per quantile before reading any row.",
                   f"Write e.g. {name}(x, 0.9) or PERCENTILE_CONT(0.9) WITHIN GROUP "
                   "(ORDER BY x), one quantile per aggregate.")
        assert q is not None and node is not None
        if (10**Q_DECIMALS) % q.denominator:
            refuse(sql, node, f"{name} with quantile {node.sql()} refused",
                   f"a quantile may have at most {Q_DECIMALS} decimal places: privplan ranks "
                   "rows with exact integer arithmetic on q, which holds q as a multiple of "
                   f"10^-{Q_DECIMALS} (a finer q moves the target rank by less than one row "
                   f"in groups below 10^{Q_DECIMALS} rows).",
                   f"Round the quantile to {Q_DECIMALS} decimal places, e.g. "
                   f"{_rounded(q)}.")
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
               "MIN, MAX, MEDIAN and quantiles are answered by a noisy search over a grid "
               "between the column's declared bounds, which only int and float columns have.",
               "Aggregate a numeric column, or GROUP BY this one and COUNT(*) per value.")
    lower, upper = col.require_bounds(f"{name}({column})", table.name)
    narrower = (clamps or {}).get(column)
    if narrower is not None:
        lo_q, hi_q = (Fraction(str(v)) for v in narrower)
        if not Fraction(str(lower)) <= lo_q <= hi_q <= Fraction(str(upper)):
            raise PolicyError(
                f"clamping bounds [{lo_q}, {hi_q}] for '{column}' are not inside the policy's "
                f"[{lower}, {upper}]: a query may only narrow them.")
        lower, upper = ((int(lo_q), int(hi_q)) if col.type == "int" and lo_q.denominator == 1
                        and hi_q.denominator == 1 else (float(lo_q), float(hi_q)))
    lo_f, hi_f = Fraction(str(lower)), Fraction(str(upper))
    if col.type == "float" and any(0 < abs(v) < gridlib.SMALLEST_NORMAL for v in (lo_f, hi_f)):
        refuse(sql, agg, f"{name}({column}) refused",
               f"its bounds [{lower}, {upper}] hold a subnormal double (nonzero, below "
               "2.2e-308 in magnitude), which the engine cannot put on a grid exactly.",
               f"Declare '{column}' in other units (bounds of 0 or at least 2.2e-308 in "
               "magnitude).")
    res = quantile_resolution(col.type, lo_f, hi_f)
    lo, hi = gridlib.Grid(res).to_grid_bounds(lower, upper)
    if col.type != "int" or res != 1:  # (an int column on step 1 is clamped as integers)
        try:
            gridlib.check_double_grid(res, lo, hi)
        except UnsupportedQueryError as err:
            refuse(sql, agg, f"{name}({column}) refused",
                   f"over the bounds [{lower}, {upper}], {err}.",
                   f"Declare '{column}' in other units, or with bounds further apart.")
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


def _rounded(q: Fraction) -> str:
    """q rounded to :data:`Q_DECIMALS` places, as a decimal (for the refusal's fix)."""
    scaled = min(max(round(q * 10**Q_DECIMALS), 1), 10**Q_DECIMALS - 1)  # (q is not 0 or 1)
    whole, part = divmod(scaled, 10**Q_DECIMALS)
    return f"{whole}.{part:0{Q_DECIMALS}d}".rstrip("0").rstrip(".")


def quantile_resolution(column_type: str, lower: Fraction, upper: Fraction) -> Fraction:
    """The width of a quantile's grid cells: 1 for an int column whose range has at most
    :data:`QUANTILE_CELLS` values; else the smallest 1, 2 or 5 times a power of ten that covers
    the range in at most that many cells (a round step, so answers are round numbers) and is
    not narrower than the doubles at the bounds (:func:`privplan.mechanisms.grid.
    double_spacing`: the engine computes the cell in double arithmetic, so a finer grid would
    only have cells no double falls in, and grid integers beyond 2^53), nor than 1 for an int
    column. Exact rational arithmetic throughout (bounds may be 1e-300 or 1e300 apart)."""
    span = upper - lower
    if column_type == "int" and span + 1 <= QUANTILE_CELLS:
        return Fraction(1)
    if span == 0 and lower == 0:
        return Fraction(1)
    least = max(span / (QUANTILE_CELLS - 1),  # span / res + 1 <= cells
                gridlib.double_spacing(max(abs(lower), abs(upper))))
    if column_type == "int":
        least = max(least, Fraction(1))
    return _round_step(least)


def _round_step(least: Fraction) -> Fraction:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``least`` > 0."""
    k = math.floor(math.log10(least.numerator) - math.log10(least.denominator))
    while Fraction(10) ** k > least:  # (the float estimate may be one off either way)
        k -= 1
    while Fraction(10) ** (k + 1) <= least:
        k += 1
    power = Fraction(10) ** k  # power <= least < 10 power
    return next(power * step for step in (1, 2, 5, 10) if power * step >= least)


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
