"""Calibrated mechanisms: exact costs, calibration closed forms, and noising tables."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privplan.accounting.conversions import (
    gdp_to_approx,
    gdp_to_pure_epsilon,
    pure_to_gdp,
    zcdp_to_approx,
)
from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP
from privplan.errors import UnsupportedQueryError
from privplan.mechanisms.noise import (
    CALIBRATION_DENOMINATOR,
    DiscreteGaussian,
    DiscreteLaplace,
    RoundedGaussian,
    add_noise,
    calibrate,
    noise_columns,
)
from privplan.testing import noise_disabled, seeded_noise

# --------------------------------------------------------------------------- closed forms


def test_count_at_epsilon_half_is_discrete_laplace_with_parameter_e_minus_half() -> None:
    mech = calibrate(1, PureDP(0.5))
    assert mech == DiscreteLaplace(Fraction(2))
    # The geometric mechanism's parameter alpha = e^{-1/t} = e^{-0.5}.
    assert math.exp(-1 / float(mech.scale)) == pytest.approx(math.exp(-0.5), rel=1e-15)
    assert mech.cost(1, PureDP) == PureDP(0.5)


def test_rho_half_sensitivity_one_gives_sigma_one() -> None:
    mech = calibrate(1, ZCDP(0.5))
    assert mech == DiscreteGaussian(Fraction(1))
    assert mech.cost(1, ZCDP) == ZCDP(0.5)


@pytest.mark.invariant(4)
@pytest.mark.parametrize("scale", [Fraction(1, 10), Fraction(2), Fraction(7, 3), Fraction(10**6)])
@pytest.mark.parametrize("sensitivity", [1, 3, 1000])
def test_laplace_costs_are_exact(scale: Fraction, sensitivity: int) -> None:
    mech = DiscreteLaplace(scale)
    eps = Fraction(sensitivity) / scale
    assert mech.cost(sensitivity, PureDP) == PureDP(eps)
    assert mech.cost(sensitivity, PureDP).exact_epsilon == eps
    assert mech.cost(sensitivity, ApproxDP) == ApproxDP(eps, 0)
    assert mech.cost(sensitivity, ApproxDP, delta=1e-6) == ApproxDP(eps, 0)
    assert mech.cost(sensitivity, ZCDP) == ZCDP(eps * eps / 2)
    assert mech.cost(sensitivity, GDP) == pure_to_gdp(PureDP(eps))


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(1), Fraction(245), Fraction(10**12)])
@pytest.mark.parametrize("sensitivity", [1, 7])
def test_gaussian_costs(sigma2: Fraction, sensitivity: int) -> None:
    mech = DiscreteGaussian(sigma2)
    rho = Fraction(sensitivity**2) / (2 * sigma2)
    assert mech.cost(sensitivity, ZCDP) == ZCDP(rho)
    assert mech.cost(sensitivity, ApproxDP, delta=1e-6) == zcdp_to_approx(ZCDP(rho), 1e-6)
    with pytest.raises(UnsupportedQueryError, match="needs a delta"):
        mech.cost(sensitivity, ApproxDP)
    with pytest.raises(UnsupportedQueryError, match="Gaussian noise cannot give pure DP"):
        mech.cost(sensitivity, PureDP)
    with pytest.raises(UnsupportedQueryError, match="rounded Gaussian"):
        mech.cost(sensitivity, GDP)


def test_discrete_gaussian_is_not_sigma_over_delta_gdp() -> None:
    # Why GDP is refused for the discrete Gaussian: with sigma = Delta = 1, the test
    # "reject iff z >= 1" has type I and type II errors both a = P(Z >= 1), and mu-GDP needs
    # G_mu(a) = Phi(Phi^-1(1 - a) - mu) <= a, i.e. mu >= 2 Phi^-1(1 - a) > Delta/sigma = 1.
    z = np.arange(-60, 61, dtype=np.float64)
    w = np.exp(-(z * z) / 2)
    a = float(w[z >= 1].sum() / w.sum())
    g_1 = float(stats.norm.cdf(stats.norm.ppf(1 - a) - 1))
    assert g_1 > a + 0.01  # 1-GDP would be violated
    assert 2 * stats.norm.ppf(1 - a) == pytest.approx(1.04576, abs=1e-5)


def test_gdp_budget_uses_the_rounded_gaussian_at_exactly_its_mu() -> None:
    mech = calibrate(3, GDP(1))
    assert mech == RoundedGaussian(Fraction(3))
    assert mech.cost(3, GDP) == GDP(1)
    # the Laplace alternative at the largest fitting epsilon is 1.74x noisier
    eps = gdp_to_pure_epsilon(1).exact_epsilon
    laplace = DiscreteLaplace(3 / eps)
    assert laplace.cost(3, GDP) <= GDP(1)
    assert laplace.std() / mech.std() == pytest.approx(1.739, abs=1e-3)


@pytest.mark.parametrize("mu", ["0.01", "0.3", "1", "2.5", "6", "12"])
def test_gdp_calibration_picks_the_less_noisy_of_gaussian_and_laplace(mu: str) -> None:
    mech = calibrate(7, GDP(mu))
    gauss = RoundedGaussian(7 / Fraction(mu))
    eps = gdp_to_pure_epsilon(Fraction(mu)).exact_epsilon
    laplace = DiscreteLaplace(7 / eps)
    assert mech.std() <= min(gauss.std(), laplace.std()) * (1 + 1e-5)
    assert mech.cost(7, GDP) <= GDP(mu)


@pytest.mark.parametrize("sigma", [Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(40)])
@pytest.mark.parametrize("sensitivity", [1, 7])
def test_rounded_gaussian_costs(sigma: Fraction, sensitivity: int) -> None:
    mech = RoundedGaussian(sigma)
    mu = sensitivity / sigma
    assert mech.cost(sensitivity, GDP) == GDP(mu)
    assert mech.cost(sensitivity, ZCDP) == ZCDP(mu * mu / 2)
    assert mech.cost(sensitivity, ApproxDP, delta=1e-6) == gdp_to_approx(GDP(mu), 1e-6)
    with pytest.raises(UnsupportedQueryError, match="needs a delta"):
        mech.cost(sensitivity, ApproxDP)
    with pytest.raises(UnsupportedQueryError, match="cannot give pure DP"):
        mech.cost(sensitivity, PureDP)


@pytest.mark.parametrize("sigma", [Fraction(1, 5), Fraction(1, 2), Fraction(1), Fraction(3),
                                   Fraction(4), Fraction(17, 3)])
def test_rounded_gaussian_variance_matches_its_pmf(sigma: Fraction) -> None:
    s = float(sigma)
    n = np.arange(-200, 201, dtype=np.float64)
    pmf = stats.norm.cdf((n + 0.5) / s) - stats.norm.cdf((n - 0.5) / s)
    assert pmf.sum() == pytest.approx(1, abs=1e-12)
    assert RoundedGaussian(sigma).variance() == pytest.approx(float((n * n * pmf).sum()),
                                                             rel=1e-9, abs=1e-15)


@pytest.mark.invariant(4)
def test_rounded_gaussian_is_sigma_over_delta_gdp_by_post_processing() -> None:
    # The f-DP check of the claim on the released integers: for shift Delta = 1 and sigma = 1
    # every Neyman-Pearson test "reject iff z >= s" (the vertices of the trade-off curve) has
    # beta = P(Z <= s - 2) = Phi(s - 3/2) and alpha = P(Z >= s) = Phi(1/2 - s): on G_1 exactly
    # when s - 3/2 = Phi^-1(1 - alpha) - 1, i.e. never below it.
    for s in range(-8, 9):
        alpha = stats.norm.cdf(0.5 - s)
        beta = stats.norm.cdf(s - 1.5)
        g = stats.norm.cdf(stats.norm.ppf(1 - alpha) - 1)
        assert beta >= g - 1e-12


def test_approx_budget_uses_laplace_and_leaves_delta_unused() -> None:
    mech = calibrate(2, ApproxDP(0.5, 1e-6))
    assert mech == DiscreteLaplace(Fraction(4))
    assert mech.cost(2, ApproxDP) == ApproxDP(0.5, 0)


def test_calibration_rounds_large_parameters_up_to_integers() -> None:
    mech = calibrate(10**6, ZCDP(Fraction(1, 3)))  # sigma^2 = 1.5e12 exactly: kept
    assert mech == DiscreteGaussian(Fraction(15 * 10**11))
    mech = calibrate(10**6 + 1, ZCDP(Fraction(7, 10**7 + 3)))
    assert isinstance(mech, DiscreteGaussian) and mech.sigma2.denominator == 1
    exact = Fraction((10**6 + 1) ** 2 * (10**7 + 3), 14)
    assert exact <= mech.sigma2 < exact + 1
    assert mech.cost(10**6 + 1, ZCDP) <= ZCDP(Fraction(7, 10**7 + 3))


def test_calibration_rounds_long_fractions_up() -> None:
    eps = Fraction(10**30 + 1, 10**30)  # t = 10^30/(10^30+1): denominator far above 2^20
    mech = calibrate(1, PureDP(eps))
    assert isinstance(mech, DiscreteLaplace)
    assert mech.scale >= 1 / eps and mech.scale.denominator <= CALIBRATION_DENOMINATOR
    assert mech.cost(1, PureDP).exact_epsilon <= eps


@pytest.mark.invariant(4)
@pytest.mark.parametrize("budget", [PureDP(1e-300), GDP(1e-300), GDP(1e-160), ZCDP(1e-300)])
def test_a_vanishing_budget_is_refused_as_too_small(budget) -> None:
    # (the GDP calibration compares the Laplace alternative's std: its closed form must not
    # divide by an underflowed (1 - e^{-1/t})² at scale 1e300 — a fuzz find)
    with pytest.raises(UnsupportedQueryError, match="too small"):
        calibrate(1, budget)


def test_laplace_variance_far_beyond_float_precision() -> None:
    assert DiscreteLaplace(Fraction(10**100)).variance() == pytest.approx(2e200)
    assert DiscreteLaplace(Fraction(10**300)).variance() == math.inf
    assert DiscreteLaplace(Fraction(10**6)).variance() == pytest.approx(2e12, rel=1e-9)
    assert RoundedGaussian(Fraction(10**400)).variance() == math.inf


@pytest.mark.parametrize("budget", [PureDP(0), ApproxDP(0, 1e-5), ZCDP(0), GDP(0)])
def test_zero_budget_is_refused(budget) -> None:
    with pytest.raises(UnsupportedQueryError, match="zero privacy budget"):
        calibrate(1, budget)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_bad_sensitivity(bad) -> None:
    with pytest.raises((TypeError, ValueError)):
        calibrate(bad, PureDP(1))
    with pytest.raises((TypeError, ValueError)):
        DiscreteLaplace(Fraction(1)).cost(bad, PureDP)


def test_constructor_checks() -> None:
    with pytest.raises(TypeError):
        DiscreteLaplace(0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        DiscreteGaussian(Fraction(0))
    assert DiscreteLaplace(2).scale == Fraction(2)  # type: ignore[arg-type]
    assert DiscreteLaplace(2) == DiscreteLaplace(Fraction(2))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- property: fits budget

_amounts = st.one_of(
    st.fractions(min_value=Fraction(1, 10**6), max_value=100, max_denominator=10**9),
    st.floats(min_value=1e-6, max_value=100, allow_nan=False, allow_infinity=False),
)
_budgets = st.one_of(
    st.builds(PureDP, _amounts),
    st.builds(ApproxDP, _amounts, st.floats(min_value=0, max_value=0.5)),
    st.builds(ZCDP, _amounts),
    st.builds(GDP, _amounts),
)


@settings(max_examples=300, deadline=None)
@given(sensitivity=st.integers(min_value=1, max_value=10**9), budget=_budgets)
def test_calibrated_cost_fits_the_budget(sensitivity: int, budget) -> None:
    mech = calibrate(sensitivity, budget)
    assert mech.cost(sensitivity, type(budget)) <= budget
    if isinstance(budget, ZCDP):
        assert isinstance(mech, DiscreteGaussian)
    elif isinstance(budget, GDP):
        assert isinstance(mech, RoundedGaussian | DiscreteLaplace)
    else:
        assert isinstance(mech, DiscreteLaplace)


# --------------------------------------------------------------------------- std and describe


@pytest.mark.parametrize("scale", [Fraction(1, 10), Fraction(2), Fraction(10**6)])
def test_laplace_std_closed_form_matches_pmf(scale: Fraction) -> None:
    t = float(scale)
    q = math.exp(-1 / t)
    # 2q/(1-q)^2 = 1/(2 sinh^2(1/2t)), a form without cancellation for large t.
    assert DiscreteLaplace(scale).variance() == pytest.approx(
        0.5 / math.sinh(0.5 / t) ** 2, rel=1e-12
    )
    if t < 100:
        z = np.arange(-4000, 4001, dtype=np.float64)
        p = (1 - q) / (1 + q) * q ** np.abs(z)
        assert DiscreteLaplace(scale).variance() == pytest.approx(
            float((z * z * p).sum()), rel=1e-12
        )


@pytest.mark.parametrize(
    "sigma2", [Fraction(1, 10), Fraction(1), Fraction(3), Fraction(5), Fraction(400)]
)
def test_gaussian_variance_matches_pmf(sigma2: Fraction) -> None:
    s2 = float(sigma2)
    z = np.arange(-2000, 2001, dtype=np.float64)
    w = np.exp(-(z * z) / (2 * s2))
    exact = float((z * z * w).sum() / w.sum())
    assert DiscreteGaussian(sigma2).variance() == pytest.approx(exact, rel=1e-12)
    assert DiscreteGaussian(sigma2).std() <= math.sqrt(s2) * (1 + 1e-15)


def test_describe() -> None:
    assert DiscreteLaplace(Fraction(2)).describe() == "discrete Laplace, scale 2"
    assert DiscreteLaplace(Fraction(1, 10)).describe() == "discrete Laplace, scale 0.1"
    assert DiscreteGaussian(Fraction(4)).describe() == "discrete Gaussian, sigma^2 4 (sigma 2)"


# --------------------------------------------------------------------------- noising tables


def test_add_noise_int64_in_and_out() -> None:
    values = np.array([0, 5, -7, 2**40], dtype=np.int64)
    with noise_disabled():
        assert np.array_equal(add_noise(values, DiscreteLaplace(Fraction(3))), values)
    with seeded_noise(9):
        a = add_noise(values, DiscreteGaussian(Fraction(9)))
    with seeded_noise(9):
        noise = DiscreteGaussian(Fraction(9)).sample(4)
    assert a.dtype == np.int64
    assert np.array_equal(a - values, noise)  # one draw of the column's noise, added exactly
    assert (
        add_noise(np.array([1, 2], dtype=np.int32), DiscreteLaplace(Fraction(1))).dtype == np.int64
    )
    assert add_noise(np.array([], dtype=np.float64), DiscreteLaplace(Fraction(1))).shape == (0,)


@pytest.mark.invariant(4)
def test_add_noise_refuses_inexact_values() -> None:
    with pytest.raises(TypeError, match="int64"):
        add_noise(np.array([1.5, np.nan]), DiscreteLaplace(Fraction(1)))
    with pytest.raises(TypeError, match="int64"):
        add_noise(np.array([2**63], dtype=np.uint64), DiscreteLaplace(Fraction(1)))
    with pytest.raises(ValueError):
        add_noise(np.zeros((2, 2), dtype=np.int64), DiscreteLaplace(Fraction(1)))


@pytest.mark.invariant(4)
def test_add_noise_detects_overflow() -> None:
    top = np.full(1000, np.iinfo(np.int64).max, dtype=np.int64)
    with pytest.raises(UnsupportedQueryError, match="64-bit"):
        add_noise(top, DiscreteLaplace(Fraction(10)))
    bottom = np.full(1000, np.iinfo(np.int64).min, dtype=np.int64)
    with pytest.raises(UnsupportedQueryError, match="64-bit"):
        add_noise(bottom, DiscreteLaplace(Fraction(10)))


def test_noise_columns() -> None:
    cols = {"c": np.arange(5, dtype=np.int64), "s": np.arange(5, dtype=np.int64) * 10}
    mechs = {"c": DiscreteLaplace(Fraction(1)), "s": DiscreteGaussian(Fraction(4))}
    with noise_disabled():
        out = noise_columns(cols, mechs)
    assert set(out) == {"c", "s"} and all(np.array_equal(out[k], cols[k]) for k in cols)
    with pytest.raises(ValueError, match="no mechanism"):
        noise_columns(cols, {"c": mechs["c"]})
