"""The exponential mechanism for quantiles: utilities against their definition, the rank
sensitivity by brute force over neighbours, the sampler against the exact pmf, and costs."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from privplan.accounting.conversions import pure_to_gdp
from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.mechanisms.exponential import (
    ExponentialMechanism,
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


@pytest.mark.parametrize("q", QS)
@pytest.mark.parametrize("replace", [False, True])
def test_rank_sensitivity_is_the_largest_change_over_neighbours(q: Fraction,
                                                                 replace: bool) -> None:
    cells, worst = 4, 0
    for n in range(0, 5):
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


@pytest.mark.statistical
@pytest.mark.parametrize("eps", [Fraction(1, 2), Fraction(3)])
def test_samples_follow_the_exact_exponential_mechanism(eps: Fraction) -> None:
    utilities = np.array([7, 3, 0, 1, 12, 5, 2, 0], dtype=np.int64)
    sens = 2
    mech = ExponentialMechanism(eps)
    with seeded_noise(11):
        draws = mech.select([utilities] * 40_000, sens)
    weights = np.exp(-float(eps) * utilities / (2 * sens))
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
