"""Real values on an integer grid (Casacuberta, Shoemate, Vadhan, Wagaman, CCS 2022).

Floating-point sums have data-dependent rounding that breaks the sensitivity argument of DP.
privplan therefore never noises a real number: a value x becomes the integer k = round(x / r)
for a public resolution r, clamped to grid bounds [lo, hi]; sums of such integers are exact, get
integer noise, and the answer is k_noisy * r.

The engine writes the SQL (e.g. ``LEAST(GREATEST(ROUND(x / r), lo), hi)``); this module only
gives the numbers. The sensitivities below assume the *grid integers* are clamped to
[lo, hi] after rounding (clamping the real value first is not enough: rounding may step out).

Privacy: grid integers are clamped to [lo, hi] after rounding: sensitivities hold, sums fit int64.

>>> g = Grid(Fraction(1, 10))
>>> g.to_grid_bounds(Fraction(-1, 20), 3)
(0, 30)
>>> sum_sensitivity(0, 30, 2)
60
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Final

from privplan.errors import UnsupportedQueryError

__all__ = [
    "MAX_EXACT_AGGREGATE",
    "MAX_GRID_MAGNITUDE",
    "Grid",
    "check_double_grid",
    "check_no_overflow",
    "check_real_range",
    "count_sensitivity",
    "default_resolution",
    "double_spacing",
    "square_bounds",
    "sum_grid",
    "sum_sensitivity",
]

#: Largest magnitude an exact aggregate may have before noise. Keeping |sum| <= 2^62 leaves room
#: in int64 for the noise. An engine may also clamp an exact aggregate to this range in SQL:
#: clamping is 1-Lipschitz, so it never increases the sensitivity.
MAX_EXACT_AGGREGATE: Final = 1 << 62

#: Largest grid magnitude |k| a default grid gives: with at most 2^40 rows (the assumption of
#: :func:`check_no_overflow`), a SUM of such values stays within :data:`MAX_EXACT_AGGREGATE`.
MAX_GRID_MAGNITUDE: Final = 1 << 22

#: Largest grid integer magnitude a grid computed in double arithmetic may reach: every integer
#: up to 2^53 is a double (see :func:`check_double_grid`).
MAX_DOUBLE_GRID: Final = 1 << 53

#: The smallest positive normal double, 2^-1022. Below it (subnormals) doubles lose precision.
SMALLEST_NORMAL: Final = Fraction(1, 1 << 1022)

_INT_TYPES: Final = frozenset(
    {
        "int",
        "integer",
        "bigint",
        "smallint",
        "tinyint",
        "hugeint",
        "int8",
        "int4",
        "int2",
        "long",
        "bool",
        "boolean",
    }
)
_REAL_TYPES: Final = frozenset(
    {"float", "double", "real", "decimal", "numeric", "float4", "float8", "double precision"}
)

Number = int | float | str | Decimal | Fraction


def _exact(x: Number, name: str) -> Fraction:
    """x as an exact Fraction; floats through their shortest repr (0.1 -> 1/10)."""
    if isinstance(x, bool):
        raise TypeError(f"{name} must be a number, got {x!r}")
    if isinstance(x, Fraction | int):
        return Fraction(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"{name} must be finite, got {x!r}")
        return Fraction(repr(x))
    if isinstance(x, Decimal | str):
        return Fraction(x)
    raise TypeError(f"{name} must be a number, got {type(x).__name__}")


@dataclass(frozen=True)
class Grid:
    """A public resolution r > 0: the grid integer k stands for the real value k * r."""

    resolution: Fraction

    def __post_init__(self) -> None:
        r = _exact(self.resolution, "resolution")
        if r <= 0:
            raise ValueError(f"grid resolution must be positive, got {self.resolution!r}")
        object.__setattr__(self, "resolution", r)

    def to_grid_bounds(self, lower: Number, upper: Number) -> tuple[int, int]:
        """(ceil(lower / r), floor(upper / r)): the grid points inside [lower, upper].

        Rounding inwards keeps every clamped grid value k * r within the declared bounds, so
        the public bounds (and the sensitivity derived from them) are never exceeded.
        """
        lo, hi = _exact(lower, "lower"), _exact(upper, "upper")
        if lo > hi:
            raise ValueError(f"lower bound {lower} is above upper bound {upper}")
        lo_int = math.ceil(lo / self.resolution)
        hi_int = math.floor(hi / self.resolution)
        if lo_int > hi_int:
            raise UnsupportedQueryError(
                f"no grid point of resolution {self.resolution} lies in [{lower}, {upper}]: "
                "use a finer resolution"
            )
        return lo_int, hi_int

    def enclosing_bounds(self, lower: Number, upper: Number) -> tuple[int, int]:
        """:meth:`to_grid_bounds`, or, for bounds too narrow to hold a grid point, the two
        grid points around them (each within one step of the bounds).

        Used for default grids only (a resolution the policy chose that misses the bounds is
        refused instead). The sensitivity is derived from the grid bounds returned, so it
        covers every clamped value; answers may be off by at most one step per row.
        """
        lo, hi = _exact(lower, "lower"), _exact(upper, "upper")
        if lo > hi:
            raise ValueError(f"lower bound {lower} is above upper bound {upper}")
        lo_int, hi_int = math.ceil(lo / self.resolution), math.floor(hi / self.resolution)
        if lo_int > hi_int:
            return math.floor(lo / self.resolution), math.ceil(hi / self.resolution)
        return lo_int, hi_int

    def to_real(self, k: int) -> Fraction:
        """The real value k * r of grid integer k (exact)."""
        return k * self.resolution


def sum_sensitivity(lo_int: int, hi_int: int, max_rows_per_unit: int, *,
                    replace: bool = True) -> int:
    """How much one unit of m rows can move a SUM of grid values clamped to [lo, hi].

    Adding or removing it moves the sum by at most m * max(|lo|, |hi|) (``replace=False``).
    Replacing it (bounded DP) moves the sum by (new rows' sum) - (old rows' sum), which lies in
    [m * min(lo, 0) - m * max(hi, 0), m * max(hi, 0) - m * min(lo, 0)]; its magnitude
    m * (max(hi, 0) - min(lo, 0)) equals m * max(|lo|, |hi|, hi - lo) in every sign case, even
    when the unit's row count changes (``replace=True``, the default: it covers both). With
    m = 1 and r rows of a unit replaced by r' rows the sum moves by at most max(r, r') times
    the replace bound, which is what lets the accountant charge a replaced unit as one removed
    plus one added. (Floored at m, so the result is a valid positive sensitivity even for the
    range [0, 0].)
    """
    m = _positive_int(max_rows_per_unit, "max_rows_per_unit")
    if lo_int > hi_int:
        raise ValueError(f"empty grid range [{lo_int}, {hi_int}]")
    spread = hi_int - lo_int if replace else 0
    return m * max(abs(lo_int), abs(hi_int), spread, 1)


def count_sensitivity(max_rows: int) -> int:
    """m: a unit has 0..m rows, so adding, removing or replacing it moves COUNT by <= m."""
    return _positive_int(max_rows, "max_rows")


def square_bounds(lo_int: int, hi_int: int) -> tuple[int, int]:
    """Bounds of k² for k in [lo, hi] (for the sum of squares behind VARIANCE / STDDEV)."""
    if lo_int > hi_int:
        raise ValueError(f"empty grid range [{lo_int}, {hi_int}]")
    top = max(lo_int * lo_int, hi_int * hi_int)
    bottom = 0 if lo_int <= 0 <= hi_int else min(lo_int * lo_int, hi_int * hi_int)
    return bottom, top


def check_no_overflow(lo_int: int, hi_int: int, max_rows: int, rows_bound: int = 2**40) -> None:
    """Refuse grid bounds for which an exact SUM could leave int64 (with room for noise).

    Assumes a table has at most ``rows_bound`` rows (default 2^40, about 10^12), so
    |SUM| <= rows_bound * max(|lo|, |hi|); this and the sensitivity must stay <= 2^62
    (:data:`MAX_EXACT_AGGREGATE`), leaving int64 room for the noise.
    """
    m = _positive_int(max_rows, "max_rows")
    worst = _positive_int(rows_bound, "rows_bound") * max(abs(lo_int), abs(hi_int))
    if worst > MAX_EXACT_AGGREGATE or sum_sensitivity(lo_int, hi_int, m) > MAX_EXACT_AGGREGATE:
        raise UnsupportedQueryError(
            f"a SUM over grid values in [{lo_int}, {hi_int}] could exceed 2^62 "
            f"(up to {rows_bound} rows): use a coarser resolution or tighter column bounds"
        )


def check_real_range(lo_int: int, hi_int: int, step: Fraction) -> None:
    """Refuse a grid whose values are not finite doubles in real units.

    Released values, sensitivities and noise scales leave the exact integer domain as ``grid
    value x step`` doubles, so one row's largest value must be a finite double: VAR of a
    column scaled by 1e300 squares its step to 1e600, which crashed explaining it. Sums of many
    such rows may still overflow to infinity, as the plain SQL sum does.
    """
    worst = abs(step) * max(abs(lo_int), abs(hi_int), 1)
    if worst > _DOUBLE_MAX:
        raise UnsupportedQueryError(
            f"values up to {float(worst) if worst < _DOUBLE_MAX * 2 else 'beyond 1e308'} "
            f"(on a grid of step {_short_number(step)}) exceed the range of a double (about "
            "1.8e308): use tighter column bounds or a smaller expression"
        )


def double_spacing(magnitude: Fraction) -> Fraction:
    """The gap between consecutive doubles at ``magnitude`` >= 0: 2^(e - 52) for 2^e <=
    magnitude < 2^(e + 1), and 2^-1074 among the subnormals (and at 0). A grid step at least
    this wide keeps magnitude / step below 2^53 (for a normal magnitude): the grid's integers
    are doubles, and no cell is narrower than the doubles it sorts."""
    magnitude = abs(Fraction(magnitude))
    if magnitude < SMALLEST_NORMAL:
        return Fraction(1, 1 << 1074)
    e = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    while Fraction(2) ** e > magnitude:  # (e is floor(log2) or one above it)
        e -= 1
    return Fraction(2) ** (e - 52)


def check_double_grid(res: Fraction, lo: int, hi: int) -> None:
    """Refuse a grid the engine cannot compute in double arithmetic with every value landing
    in [lo, hi] (see :func:`privplan.rewrite.engine_sql.grid_expression`).

    The engine computes ``CAST(CASE WHEN s < lo THEN lo WHEN s > hi THEN hi ELSE s END AS
    BIGINT)`` with s = x·d, x / n or x·d / n in double (res = n / d). The literals d and n must
    be finite doubles (DuckDB fails at run time, after the charge, converting a larger one);
    and lo, hi must be doubles exactly (|lo|, |hi| <= 2^53): then the comparisons are exact,
    the clamped value lies in [lo, hi], and the CAST rounds it to an integer between them (NaN
    clamps to hi). Every grid an engine computes through doubles must pass this."""
    worst = max(abs(lo), abs(hi))
    if worst > MAX_DOUBLE_GRID:
        raise UnsupportedQueryError(
            f"its grid values reach {worst} steps of {_short_number(res)}, beyond 2^53, where "
            "double arithmetic (in which the engine computes them) is no longer exact")
    for literal in (res.numerator, res.denominator):
        if literal > _DOUBLE_MAX:
            raise UnsupportedQueryError(
                f"its grid step {_short_number(res)} makes the engine scale values by about "
                f"1e{len(str(literal)) - 1}, beyond the range of a double (about 1.8e308)")


def _short_number(value: Fraction) -> str:
    """A number of any size for a message: 3 significant digits, or its power of ten."""
    if value < 0:
        return "-" + _short_number(-value)
    if value > _DOUBLE_MAX:
        return f"about 1e{len(str(int(value))) - 1}"
    if 0 < value < SMALLEST_NORMAL:
        return format(Decimal(value.numerator) / Decimal(value.denominator), ".3g")
    return f"{float(value):.3g}"


_DOUBLE_MAX: Final = Fraction(sys.float_info.max)


def default_resolution(lower: Number, upper: Number, column_type: str) -> Fraction:
    """The grid resolution used when the policy gives none.

    Integer columns: 1 (values are already on the grid, sums are exact) while their bounds are
    below 2^22 in magnitude; beyond, the rule for real columns (a SUM of integers up to 10^9
    rounds each to a multiple of 1,000 rather than being refused). Real columns: the
    smallest power of ten r with max(|lower|, |upper|) / r <= 2^22 (:data:`MAX_GRID_MAGNITUDE`),
    so every finite pair of bounds gets a grid whose SUM fits int64 (:func:`check_no_overflow`),
    and the larger bound spans between 2^22 / 10 (about 419,000) and 2^22 steps: rounding error
    at most r/2 per row, below 1.2e-6 of the larger bound. For bounds [0, u] with u's leading
    digits up to 4.19 this is the grid of 10^6 to 4.19 * 10^6 steps across the range used before;
    above that the step is ten times coarser instead of a refused SUM. (Precision is relative to
    the bounds' magnitude, not their width: narrow bounds far from zero get fewer steps across
    the range.) Bounds [0, 0] use 1.
    """
    kind = column_type.strip().lower()
    integer = kind in _INT_TYPES or kind.startswith(("int", "uint"))
    if not integer and kind not in _REAL_TYPES and not kind.startswith(("decimal", "numeric")):
        raise UnsupportedQueryError(
            f"cannot put a column of type {column_type!r} on a numeric grid: "
            "only integer and real columns can be summed"
        )
    lo, hi = _exact(lower, "lower"), _exact(upper, "upper")
    if lo > hi:
        raise ValueError(f"lower bound {lower} is above upper bound {upper}")
    magnitude = max(abs(lo), abs(hi))
    if not magnitude or (integer and magnitude < MAX_GRID_MAGNITUDE):
        return Fraction(1)
    # the step may not be finer than this (one step of room for :meth:`Grid.enclosing_bounds`)
    target = magnitude / (MAX_GRID_MAGNITUDE - 1)
    k = math.ceil(_log10(target))
    # Fix float error in the log: want 10^(k-1) < target <= 10^k exactly.
    while Fraction(10) ** k < target:
        k += 1
    while Fraction(10) ** (k - 1) >= target:
        k -= 1
    return Fraction(10) ** k


def _log10(x: Fraction) -> float:
    """log10 of a positive Fraction of any size (numerator and denominator taken apart, as a
    float of either could overflow)."""
    return math.log10(x.numerator) - math.log10(x.denominator)


def _positive_int(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def sum_grid(column: Any) -> tuple[Fraction, int, int]:
    """(resolution, lo, hi) of the grid a SUM over the policy ``column`` uses: the policy's
    ``resolution`` or :func:`default_resolution`, and the bounds in grid steps."""
    lower, upper = column.lower, column.upper
    if column.resolution is not None:
        res = Fraction(column.resolution)
        lo, hi = Grid(res).to_grid_bounds(lower, upper)
    else:
        res = default_resolution(lower, upper, column.type)
        lo, hi = Grid(res).enclosing_bounds(lower, upper)
    if res != 1 or column.type != "int":  # (an int column on step 1 is clamped as integers)
        try:
            check_double_grid(res, lo, hi)
        except UnsupportedQueryError as err:
            bounds = ", ".join(_short_number(Fraction(str(v))) for v in (lower, upper))
            raise UnsupportedQueryError(
                f"SUM, AVG, VAR or STDDEV over column '{column.name}' (bounds [{bounds}]) is "
                f"refused: {err}. Declare the column in other units (bounds further from 0), "
                "or a coarser `resolution`.") from None
    return res, lo, hi
