"""The exponential mechanism for quantiles: utilities against their definition (also in Python
ints), the rank sensitivity by brute force over neighbours, the privacy loss of every output by
exact enumeration of neighbouring histograms (MIN/MAX's monotone factor included), histograms
read totally, the sampler against the exact pmf, and costs."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from privplan.accounting.conversions import pure_to_gdp
from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.mechanisms.exponential import (
    ExponentialMechanism,
    cell_counts,
    monotone_utility,
    quantile_utilities,
    rank_sensitivity,
)
from privplan.testing import noise_disabled, seeded_noise
from tests.mechanisms._stats import P_MIN, chi2_counts

QS = [Fraction(0), Fraction(1, 4), Fraction(1, 2), Fraction(9, 10), Fraction(1)]


def _utility_by_definition(rows: list[int], cells: int, q: Fraction) -> list[int]:
    """b·max(0, #{x < g} - q n, q n - #{x <= g}) with exact rationals."""
    n = len(rows)
    out = []
    for g in range(cells):
        below = sum(x < g for x in rows)
        at_most = sum(x <= g for x in rows)
        u = max(Fraction(0), below - q * n, q * n - at_most) * q.denominator
        assert u.denominator == 1
        out.append(int(u))
    return out


def _histogram(rows: list[int], cells: int) -> np.ndarray:
    return np.bincount(np.array(rows, dtype=np.int64), minlength=cells)


@pytest.mark.parametrize("q", QS)
def test_utilities_match_the_definition_and_vanish_at_the_quantile(q: Fraction) -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        cells = int(rng.integers(1, 7))
        rows = rng.integers(0, cells, int(rng.integers(0, 9))).tolist()
        u = quantile_utilities(_histogram(rows, cells), q)
        assert u.tolist() == _utility_by_definition(rows, cells, q)
        if rows:  # a cell holding a q-quantile of the rows has utility 0
            ordered = sorted(rows)
            rank = min(len(rows) - 1, max(0, math.ceil(q * len(rows)) - 1))
            assert u[ordered[rank]] == 0


@pytest.mark.invariant(1)
@pytest.mark.parametrize("q", QS)
@pytest.mark.parametrize("replace", [False, True])
def test_rank_sensitivity_is_the_largest_change_over_neighbours(q: Fraction,
                                                                 replace: bool) -> None:
    cells, worst = 4, 0
    for n in range(5):
        for rows in itertools.combinations_with_replacement(range(cells), n):
            base = np.array(_utility_by_definition(list(rows), cells, q))
            if replace:
                neighbours = [list(rows[:i] + (v,) + rows[i + 1:])
                              for i in range(n) for v in range(cells)]
            else:
                neighbours = [list(rows) + [v] for v in range(cells)]
            for other in neighbours:
                diff = np.abs(base - np.array(_utility_by_definition(other, cells, q)))
                worst = max(worst, int(diff.max()))
    assert worst == rank_sensitivity(q, replace=replace)  # an upper bound, and attained


def _pmf(rows: list[int], cells: int, q: Fraction, rate: Fraction) -> list[mpmath.mpf]:
    """The mechanism's exact pmf (50 digits) over the utilities privplan computes."""
    u = quantile_utilities(_histogram(rows, cells), q)
    w = [mpmath.exp(-mpmath.mpf(rate.numerator) * int(x) / rate.denominator) for x in u]
    total = mpmath.fsum(w)
    return [x / total for x in w]


def _largest_loss(q: Fraction, replace: bool, mech: ExponentialMechanism) -> mpmath.mpf:
    """max over neighbouring histograms (up to 4 cells, 5 rows) and outputs of |ln P/P'|."""
    rate = mech.rate(rank_sensitivity(q, replace=replace))
    worst = mpmath.mpf(0)
    for cells in range(1, 5):
        for n in range(6):
            for base in itertools.combinations_with_replacement(range(cells), n):
                rows = list(base)
                others = ([rows[:i] + [v] + rows[i + 1:] for i in range(n) for v in range(cells)]
                          if replace else [rows + [v] for v in range(cells)])
                p = _pmf(rows, cells, q, rate)
                for other in others:
                    for a, b in zip(p, _pmf(other, cells, q, rate)):
                        worst = max(worst, abs(mpmath.log(a / b)))
    return worst


@pytest.mark.parametrize("q", [Fraction(0), Fraction(1)])
def test_min_max_are_monotone_under_add_remove_and_the_factor_is_tight(q: Fraction) -> None:
    """q = 0, 1 under add/remove: exp(-ε·U/Δ) loses at most ε on every output of every
    neighbouring pair, and almost exactly ε on some (the factor cannot be smaller)."""
    assert monotone_utility(q, replace=False) and not monotone_utility(q, replace=True)
    eps = Fraction(1)
    mech = ExponentialMechanism(eps, monotone=True)
    with mpmath.workdps(50):
        worst = _largest_loss(q, False, mech)
    assert 0.99 * float(eps) < worst <= float(eps) * (1 + mpmath.mpf(10) ** -40)
    # under replace the 2 is kept: within ε with room
    with mpmath.workdps(50):
        assert _largest_loss(q, True, ExponentialMechanism(eps)) <= float(eps) / 2 + 0.01


def test_median_is_not_monotone_and_needs_the_factor_two() -> None:
    q, eps = Fraction(1, 2), Fraction(1)
    assert not monotone_utility(q, replace=False)
    with mpmath.workdps(50):
        assert _largest_loss(q, False, ExponentialMechanism(eps)) <= float(eps)
        assert _largest_loss(q, False, ExponentialMechanism(eps, monotone=True)) > 1.5


def test_a_replaced_unit_of_two_rows_moves_min_utilities_both_ways() -> None:
    """Why the factor 2 stays under replace: a unit's rows {0, 3} replaced by {1, 2} lower
    U(1) and raise U(3) (MIN's utility, q = 0)."""
    before = quantile_utilities(_histogram([0, 3], 4), Fraction(0))
    after = quantile_utilities(_histogram([1, 2], 4), Fraction(0))
    diff = after - before
    assert diff.min() < 0 < diff.max()


def test_monotone_mechanism_costs_the_same_and_halves_the_rank_error() -> None:
    plain, sharp = ExponentialMechanism(Fraction(1, 3)), ExponentialMechanism(Fraction(1, 3), True)
    for kind in (PureDP, ApproxDP, ZCDP, GDP):
        assert plain.cost(kind) == sharp.cost(kind)
    assert sharp.rate(1) == 2 * plain.rate(1) == Fraction(1, 3)
    assert sharp.rank_error(100, 1, Fraction(0)) == pytest.approx(
        plain.rank_error(100, 1, Fraction(0)) / 2)
    assert ExponentialMechanism.calibrate(PureDP(1), monotone=True).monotone
    assert "monotone" in sharp.describe()


def test_utilities_in_python_ints_when_int64_could_overflow() -> None:
    """b·n >= 2^62: the utilities are Python ints, equal to the definition's."""
    q = Fraction(123456789, 10**9)
    counts = np.array([2**40, 3, 0, 2**40 + 7], dtype=np.int64)
    u = quantile_utilities(counts, q)
    assert u.dtype == object
    n = int(counts.sum())
    for g in range(4):
        below, at_most = int(counts[:g].sum()), int(counts[:g + 1].sum())
        want = max(Fraction(0), below - q * n, q * n - at_most) * q.denominator
        assert u[g] == want
    small = quantile_utilities(np.array([1, 2, 3], dtype=np.int64), q)
    assert small.dtype == np.int64


def test_histograms_are_read_totally() -> None:
    """Cells outside [lo, hi] count at the nearer end (never an index error), a negative
    count as 0, huge keys and counts in Python ints, anything but a dict as no rows."""
    assert cell_counts({3: 2, 5: 1}, 3, 6).tolist() == [2, 0, 1, 0]
    assert cell_counts({-10: 2, 100: 1, 4: 5}, 3, 6).tolist() == [2, 5, 0, 1]
    assert cell_counts({4: -3}, 3, 6).tolist() == [0, 0, 0, 0]
    assert cell_counts(None, 3, 6).tolist() == [0, 0, 0, 0]
    assert cell_counts(float("nan"), 0, 1).tolist() == [0, 0]
    assert cell_counts({}, 0, 0).tolist() == [0]
    big = cell_counts({2**70: 1, -(2**70): 2**63, 1: 1}, 0, 2)
    assert big.tolist() == [2**63, 1, 1] and big.dtype == object
    huge_lo = cell_counts({2**80 + 1: 4}, 2**80, 2**80 + 2)
    assert huge_lo.tolist() == [0, 4, 0]
    assert cell_counts({2: 2**62, 0: 2**62}, 0, 2).tolist() == [2**62, 0, 2**62]
    odd = cell_counts({float("nan"): 1, float("-inf"): 2, float("inf"): 3, "x": 4, 1: None},
                      0, 2)
    assert odd.tolist() == [2, 0, 8]


@pytest.mark.invariant(4)
@pytest.mark.statistical
@pytest.mark.parametrize("eps", [Fraction(1, 2), Fraction(3)])
@pytest.mark.parametrize("monotone", [False, True])
def test_samples_follow_the_exact_exponential_mechanism(eps: Fraction, monotone: bool) -> None:
    utilities = np.array([7, 3, 0, 1, 12, 5, 2, 0], dtype=np.int64)
    sens = 2
    mech = ExponentialMechanism(eps, monotone)
    with seeded_noise(11):
        draws = mech.select([utilities] * 40_000, sens)
    with mpmath.workdps(30):
        factor = 1 if monotone else 2
        weights = np.array([float(mpmath.exp(-mpmath.mpf(eps.numerator) * int(u)
                                             / (eps.denominator * factor * sens)))
                            for u in utilities])
    assert chi2_counts(np.bincount(draws, minlength=utilities.size),
                       weights / weights.sum()) > P_MIN


def test_groups_of_different_sizes_and_noise_off() -> None:
    mech = ExponentialMechanism(Fraction(1000))  # so sharp that the best cell always wins
    groups = [np.array([5, 0, 9]), np.array([4, 4, 4, 4, 0, 4]), np.array([0])]
    with seeded_noise(3):
        assert mech.select(groups, 1).tolist() == [1, 4, 0]
    with noise_disabled():
        assert mech.select([np.array([3, 0, 0, 2])], 1).tolist() == [1]
    assert mech.select([], 1).tolist() == []


def test_costs_and_calibration_in_every_definition() -> None:
    mech = ExponentialMechanism(Fraction(1, 2))
    assert mech.cost(PureDP) == PureDP(Fraction(1, 2))
    assert mech.cost(ApproxDP) == ApproxDP(Fraction(1, 2), 0)
    assert mech.cost(ZCDP) == ZCDP(Fraction(1, 32))  # ε²/8 (bounded range)
    assert mech.cost(GDP) == pure_to_gdp(PureDP(Fraction(1, 2)))
    for budget in (PureDP(Fraction(3, 7)), ApproxDP(1, Fraction(1, 10**6)), ZCDP(Fraction(1, 3)),
                   GDP(Fraction(1, 2))):
        fitted = ExponentialMechanism.calibrate(budget)
        assert fitted.cost(type(budget)) <= budget
    assert ExponentialMechanism.calibrate(PureDP(Fraction(3, 7))).epsilon == Fraction(3, 7)
    rho_eps = ExponentialMechanism.calibrate(ZCDP(Fraction(1, 3))).epsilon
    assert math.sqrt(8 / 3) - 1e-5 < float(rho_eps) <= math.sqrt(8 / 3)


def test_rank_error_bound_holds_empirically() -> None:
    q, sens, cells = Fraction(1, 2), 1, 50
    mech = ExponentialMechanism(Fraction(1, 2))
    utilities = np.abs(np.arange(cells) - 20).astype(np.int64) * 2  # best cell 20
    bound = mech.rank_error(cells, sens, q)
    with seeded_noise(5):
        draws = mech.select([utilities] * 4000, sens)
    errors = utilities[draws] / q.denominator
    assert np.mean(errors <= bound) >= 0.95
