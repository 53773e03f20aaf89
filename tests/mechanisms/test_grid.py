"""The integer grid: inward bounds, sensitivities (brute force), overflow refusal, resolutions."""

from __future__ import annotations

import itertools
import math
import sys
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privplan.errors import UnsupportedQueryError
from privplan.mechanisms.grid import (
    MAX_EXACT_AGGREGATE,
    Grid,
    check_no_overflow,
    check_real_range,
    count_sensitivity,
    default_resolution,
    square_bounds,
    sum_sensitivity,
)


def test_to_grid_bounds_examples() -> None:
    assert Grid(Fraction(1)).to_grid_bounds(0, 120) == (0, 120)
    assert Grid(Fraction(1, 100)).to_grid_bounds(0.005, 1.999) == (1, 199)
    assert Grid(Fraction(1, 10)).to_grid_bounds(-0.25, 0.25) == (-2, 2)
    assert Grid(Fraction(5)).to_grid_bounds(-12, 12) == (-2, 2)
    assert Grid(0.1).resolution == Fraction(1, 10)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedQueryError, match="finer resolution"):
        Grid(Fraction(1)).to_grid_bounds(0.2, 0.8)
    with pytest.raises(ValueError):
        Grid(Fraction(1)).to_grid_bounds(3, 2)
    with pytest.raises(ValueError):
        Grid(Fraction(0))


_fracs = st.fractions(min_value=-1000, max_value=1000, max_denominator=1000)


@settings(max_examples=300, deadline=None)
@given(
    a=_fracs,
    b=_fracs,
    res=st.fractions(min_value=Fraction(1, 1000), max_value=10, max_denominator=1000),
)
def test_grid_bounds_are_the_inner_grid_points(a: Fraction, b: Fraction, res: Fraction) -> None:
    lower, upper = min(a, b), max(a, b)
    grid = Grid(res)
    try:
        lo, hi = grid.to_grid_bounds(lower, upper)
    except UnsupportedQueryError:
        assert math.ceil(lower / res) > math.floor(upper / res)
        return
    assert lower <= grid.to_real(lo) and grid.to_real(hi) <= upper  # inside the bounds
    assert grid.to_real(lo - 1) < lower and upper < grid.to_real(hi + 1)  # and all of them


@settings(max_examples=200, deadline=None)
@given(
    lo=st.integers(min_value=-4, max_value=4),
    width=st.integers(min_value=0, max_value=5),
    m=st.integers(min_value=1, max_value=3),
)
def test_sum_sensitivity_is_the_brute_force_maximum(lo: int, width: int, m: int) -> None:
    hi = lo + width
    # Every contribution of one unit: 0..m rows with values in [lo, hi].
    sums = {
        sum(rows) for k in range(m + 1) for rows in itertools.product(range(lo, hi + 1), repeat=k)
    }
    add_remove = max(abs(x) for x in sums)  # unit present vs absent
    replace = max(x - y for x in sums for y in sums)  # unit's rows swapped for others
    assert sum_sensitivity(lo, hi, m) == max(add_remove, replace, m)


def test_sum_sensitivity_examples() -> None:
    assert sum_sensitivity(0, 120, 10) == 1200
    assert sum_sensitivity(-5, 3, 2) == 16  # replace: 2*3 - 2*(-5)
    assert sum_sensitivity(-7, -2, 1) == 7
    assert sum_sensitivity(3, 7, 1) == 7
    with pytest.raises(ValueError):
        sum_sensitivity(0, 1, 0)


def test_count_sensitivity() -> None:
    assert count_sensitivity(1) == 1 and count_sensitivity(10) == 10
    with pytest.raises(ValueError):
        count_sensitivity(0)


def test_square_bounds() -> None:
    assert square_bounds(-3, 2) == (0, 9)
    assert square_bounds(2, 5) == (4, 25)
    assert square_bounds(-5, -2) == (4, 25)


def test_check_no_overflow() -> None:
    check_no_overflow(0, 10**6, 10)  # 2^40 rows * 1e6 ~ 1.1e18 < 2^62
    with pytest.raises(UnsupportedQueryError, match="coarser resolution or tighter column bounds"):
        check_no_overflow(0, 10**7, 10)  # 2^40 * 1e7 > 2^62
    with pytest.raises(UnsupportedQueryError):
        check_no_overflow(-(2**30), 0, 1, rows_bound=2**33)
    check_no_overflow(0, MAX_EXACT_AGGREGATE, 1, rows_bound=1)


def test_check_real_range_keeps_one_row_a_finite_double() -> None:
    """One row's largest value in real units (grid value x step) must be a finite double:
    checked on both sides of float's maximum, and for the squared step of VAR."""
    limit = Fraction(sys.float_info.max)
    check_real_range(0, 10**6, Fraction(10) ** 300)  # 1e306: finite
    check_real_range(-1, 1, limit)  # exactly the largest double
    with pytest.raises(UnsupportedQueryError, match="range of a double"):
        check_real_range(-1, 1, limit + 1)
    with pytest.raises(UnsupportedQueryError, match="range of a double"):
        check_real_range(0, 10**6, Fraction(10) ** 303)  # 1e309
    step = Fraction(10) ** 298  # the squares' step of a column bounded near 1e304
    with pytest.raises(UnsupportedQueryError):
        check_real_range(0, 4, step * step)


def test_default_resolution() -> None:
    # (the grid was once chosen for 10^6-10^7 steps across the *width*, which overflowed the
    # SUM check for bounds like [0, 99999] or [0.5, 0.7]; it is now bounded by the magnitude)
    assert default_resolution(0, 10**9, "int") == 1000  # beyond 2^22: a power-of-ten grid
    assert default_resolution(0, 4_194_303, "int") == 1
    assert default_resolution(0, 120, "INTEGER") == 1
    assert default_resolution(0, 10000, "float") == Fraction(1, 100)  # 1e6 steps
    assert default_resolution(0, 99999, "double") == Fraction(1, 10)  # 999,990 steps
    assert default_resolution(0.5, 0.7, "double") == Fraction(1, 10**6)  # 700,000 to 0.7
    assert default_resolution(-1e9, 1e9, "float") == 1000
    assert default_resolution(3.0, 3.0, "float") == Fraction(1, 10**6)
    with pytest.raises(UnsupportedQueryError):
        default_resolution(0, 1, "varchar")


@settings(max_examples=200, deadline=None)
@given(a=st.floats(-1e12, 1e12), width=st.floats(1e-9, 1e12))
def test_default_resolution_spans_the_magnitude_in_at_most_2_22_steps(a: float,
                                                                      width: float) -> None:
    b = a + width
    if b <= a:
        return
    res = default_resolution(a, b, "float")
    steps = max(abs(Fraction(repr(a))), abs(Fraction(repr(b)))) / res
    assert Fraction(2**22 - 1, 10) < steps <= 2**22 - 1
    assert res.numerator == 1 or res.denominator == 1  # a power of ten
    k = round(math.log10(res))
    assert res == Fraction(10) ** k
