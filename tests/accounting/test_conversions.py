"""Conversions between privacy definitions, checked against closed forms and brute force."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special

from privplan.accounting.conversions import (
    advanced_composition,
    convert,
    gdp_delta,
    gdp_to_approx,
    gdp_to_pure_epsilon,
    pure_to_approx,
    pure_to_gdp,
    pure_to_zcdp,
    zcdp_to_approx,
)
from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PureDP

# -- pure --------------------------------------------------------------------------------------


def test_pure_to_zcdp_closed_form() -> None:
    assert pure_to_zcdp(PureDP(1)) == ZCDP(Fraction(1, 2))
    assert pure_to_zcdp(PureDP(0.1)) == ZCDP(Fraction(1, 200))
    assert pure_to_approx(PureDP(0.3)) == ApproxDP(0.3, 0)


# -- zCDP → (ε, δ) -------------------------------------------------------------------------------


def bun_steinke(rho: float, delta: float) -> float:
    return rho + 2 * math.sqrt(rho * math.log(1 / delta))


def cks_brute_force(rho: float, delta: float) -> float:
    """inf over a dense grid of α (10^6 points of ln(α−1) on [−30, 46]) of the CKS bound."""
    t = np.linspace(-30.0, 46.0, 1_000_001)
    am1 = np.exp(t)
    alpha = 1 + am1
    log_alpha = np.logaddexp(0.0, t)
    vals = alpha * rho + (math.log(1 / delta) - log_alpha) / am1 + t - log_alpha
    return max(0.0, float(vals.min()))


GRID = [(r, d) for r in (1e-5, 1e-3, 0.05, 0.5, 2.0, 20.0) for d in (1e-12, 1e-6, 1e-3, 0.2)]


@pytest.mark.parametrize(("rho", "delta"), GRID)
def test_zcdp_to_approx_matches_brute_force_and_beats_bun_steinke(rho: float, delta: float) -> None:
    got = zcdp_to_approx(ZCDP(rho), delta)
    assert got.exact_delta == Fraction(repr(delta))
    brute = cks_brute_force(rho, delta)
    bs = bun_steinke(rho, delta)
    assert got.epsilon <= bs * (1 + 1e-15)
    assert got.epsilon <= brute + 1e-9 * (1 + brute)  # the optimiser is as good as the grid
    assert got.epsilon >= brute - 1e-9 * (1 + brute)  # and no better than the true infimum


def test_zcdp_to_approx_known_value_and_edges() -> None:
    # ρ = 1/2 (a sensitivity-1 Gaussian with σ = 1), δ = 1e-6: Bun–Steinke gives 0.5 + 2·sqrt(
    # 0.5·ln 1e6) = 5.756...; CKS is tighter.
    eps = zcdp_to_approx(ZCDP(0.5), 1e-6).epsilon
    assert eps < bun_steinke(0.5, 1e-6) - 0.3
    assert zcdp_to_approx(ZCDP(0), 1e-6) == ApproxDP(0, 1e-6)
    for bad in (0, 1, -1e-3, 2):
        with pytest.raises(ValueError, match="delta"):
            zcdp_to_approx(ZCDP(1), bad)


@settings(max_examples=60, deadline=None)
@given(
    st.floats(min_value=1e-8, max_value=50),
    st.floats(min_value=1e-15, max_value=0.5),
)
def test_zcdp_to_approx_properties(rho: float, delta: float) -> None:
    a = zcdp_to_approx(ZCDP(rho), delta)
    assert a.epsilon <= bun_steinke(rho, delta) * (1 + 1e-15)
    assert zcdp_to_approx(ZCDP(rho * 2), delta).exact_epsilon >= a.exact_epsilon * (1 - 1e-9)


# -- Gaussian DP -------------------------------------------------------------------------------


def delta_by_integration(mu: float, eps: float) -> float:
    """Hockey-stick divergence of N(μ,1) from N(0,1): ∫ (p(x) − e^ε q(x))_+ dx, x > ε/μ + μ/2."""
    x0 = eps / mu + mu / 2

    def integrand(x: float) -> float:
        return max(0.0, math.exp(-((x - mu) ** 2) / 2) - math.exp(eps - x * x / 2))

    value, _ = integrate.quad(integrand, x0, x0 + 40, epsabs=1e-300, epsrel=1e-12, limit=400)
    return value / math.sqrt(2 * math.pi)


def test_gdp_delta_closed_form_at_zero() -> None:
    assert gdp_delta(1, 0) == pytest.approx(2 * special.ndtr(0.5) - 1, rel=1e-14)
    assert gdp_delta(0, 1) == 0.0
    with pytest.raises(ValueError):
        gdp_delta(-1, 1)


@pytest.mark.parametrize(
    ("mu", "eps"),
    [(0.1, 0.05), (0.5, 1.0), (1.0, 0.5), (1.0, 3.0), (2.0, 4.0), (3.0, 10.0), (0.3, 1.2)],
)
def test_gdp_delta_matches_integration(mu: float, eps: float) -> None:
    assert gdp_delta(mu, eps) == pytest.approx(delta_by_integration(mu, eps), rel=1e-8)


def test_gdp_delta_is_stable_and_monotone() -> None:
    eps = np.linspace(0, 200, 2001)
    for mu in (0.01, 0.5, 1.0, 5.0, 30.0):
        ds = [gdp_delta(mu, float(e)) for e in eps]
        assert all(0.0 <= d <= 1.0 for d in ds)
        assert all(b <= a for a, b in itertools.pairwise(ds))
    assert 0 < gdp_delta(1, 50) < 1e-300 or gdp_delta(1, 50) == 0.0
    # far tail in log space: δ(ε) ≈ Φ(−ε/μ + μ/2) up to a factor < 1
    assert 0 < gdp_delta(1, 30) <= special.ndtr(-30 + 0.5)


@pytest.mark.parametrize("mu", [1e-3, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-2])
def test_gdp_to_approx_round_trips(mu: float, delta: float) -> None:
    a = gdp_to_approx(GDP(mu), delta)
    assert a.exact_delta == Fraction(repr(delta))
    assert gdp_delta(mu, a.epsilon) <= delta
    if a.epsilon > 0:
        assert gdp_delta(mu, a.epsilon * (1 - 1e-6)) > delta  # tight
    # the Gaussian mechanism is μ-GDP and (μ²/2)-zCDP; the GDP conversion is exact, so tighter
    assert a.epsilon <= zcdp_to_approx(ZCDP(mu * mu / 2), delta).epsilon


def test_gdp_to_approx_edges() -> None:
    assert gdp_to_approx(GDP(0), 1e-6) == ApproxDP(0, 1e-6)
    assert gdp_to_approx(GDP(1e-9), 1e-6).exact_epsilon == 0  # δ(0) = 2Φ(μ/2)−1 < 1e-6
    with pytest.raises(ValueError):
        gdp_to_approx(GDP(1), 0)


def tradeoff_gdp(mu: float, alpha: np.ndarray) -> np.ndarray:
    return special.ndtr(special.ndtri(1 - alpha) - mu)


def tradeoff_pure(eps: float, alpha: np.ndarray) -> np.ndarray:
    return np.maximum.reduce(
        [np.zeros_like(alpha), 1 - math.exp(eps) * alpha, math.exp(-eps) * (1 - alpha)]
    )


def test_pure_to_gdp_known_value() -> None:
    mu = pure_to_gdp(PureDP(1)).mu
    closed = -2 * special.ndtri(1 / (1 + math.e))
    assert mu >= closed
    assert mu == pytest.approx(closed, rel=1e-8)
    assert mu == pytest.approx(1.23204, abs=1e-5)
    # small ε: μ ≈ ε·sqrt(2π)/2, no cancellation
    assert pure_to_gdp(PureDP(1e-9)).mu == pytest.approx(
        1e-9 * math.sqrt(2 * math.pi) / 2, rel=1e-8
    )
    assert pure_to_gdp(PureDP(0)) == GDP(0)


@pytest.mark.parametrize("eps", [1e-4, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0])
def test_pure_to_gdp_dominates_tradeoff(eps: float) -> None:
    alpha = np.linspace(0, 1, 200_001)
    alpha_star = 1 / (1 + math.exp(eps))
    alpha = np.sort(np.append(alpha, alpha_star))
    mu = pure_to_gdp(PureDP(eps)).mu
    assert np.all(tradeoff_gdp(mu, alpha) <= tradeoff_pure(eps, alpha) + 1e-15)
    # and tight: a slightly smaller μ violates the bound at the kink
    star = np.array([alpha_star])
    assert tradeoff_gdp(mu * (1 - 1e-6), star)[0] > tradeoff_pure(eps, star)[0]


@pytest.mark.parametrize("mu", [1e-8, 1e-3, 0.3, 1.0, 1.2320353865769, 3.0, 10.0, 60.0])
def test_gdp_to_pure_epsilon_inverts(mu: float) -> None:
    p = gdp_to_pure_epsilon(mu)
    assert pure_to_gdp(p).exact_mu <= Fraction(repr(mu))
    assert pure_to_gdp(PureDP(p.epsilon * (1 + 1e-6))).mu > mu  # largest, up to the margin
    closed = math.log(special.ndtr(mu / 2) / special.ndtr(-mu / 2))
    assert p.epsilon == pytest.approx(closed, rel=1e-7)
    assert gdp_to_pure_epsilon(0) == PureDP(0)


# -- advanced composition ----------------------------------------------------------------------


def test_advanced_composition_picks_advanced_branch() -> None:
    a = advanced_composition([0.01] * 100, [0] * 100, 1e-6)
    expected = 0.5 * 0.01 + math.sqrt(2 * math.log(1e6) * 0.01)
    assert a.epsilon >= expected
    assert a.epsilon == pytest.approx(expected, rel=1e-15)
    assert a.epsilon < 1.0  # better than the sum
    assert a.exact_delta == Fraction(1, 10**6)


def test_advanced_composition_picks_sum_for_few() -> None:
    a = advanced_composition([0.5, 0.25], [1e-7, 0], 1e-6)
    assert a == ApproxDP(0.75, 1e-7)  # exact sum, δ' not added
    assert advanced_composition([], [], 1e-6) == ApproxDP(0, 0)


def test_advanced_composition_heterogeneous() -> None:
    eps = [0.01] * 50 + [0.02] * 50
    a = advanced_composition(eps, [1e-9] * 100, 1e-5)
    sq = 50 * 0.01**2 + 50 * 0.02**2
    assert a.epsilon == pytest.approx(sq / 2 + math.sqrt(2 * math.log(1e5) * sq), rel=1e-14)
    assert a.exact_delta == 100 * Fraction(1, 10**9) + Fraction(1, 10**5)


def test_advanced_composition_validation() -> None:
    with pytest.raises(ValueError, match="epsilons"):
        advanced_composition([1, 2], [0], 1e-6)
    with pytest.raises(ValueError, match="delta"):
        advanced_composition([1], [0], 0)
    with pytest.raises(ValueError, match="epsilon"):
        advanced_composition([-1], [0], 1e-6)


# -- dispatcher --------------------------------------------------------------------------------


def test_convert_dispatches() -> None:
    assert convert(PureDP(1), ZCDP) == pure_to_zcdp(PureDP(1))
    assert convert(PureDP(1), ApproxDP) == ApproxDP(1, 0)
    assert convert(PureDP(1), GDP) == pure_to_gdp(PureDP(1))
    assert convert(ZCDP(0.5), ApproxDP, delta=1e-6) == zcdp_to_approx(ZCDP(0.5), 1e-6)
    assert convert(GDP(1), ApproxDP, delta=1e-6) == gdp_to_approx(GDP(1), 1e-6)
    assert convert(ZCDP(0.5), ZCDP) == ZCDP(0.5)


@pytest.mark.parametrize(
    ("cost", "target"),
    [
        (ApproxDP(1, 1e-6), ZCDP),
        (ApproxDP(1, 1e-6), PureDP),
        (GDP(1), PureDP),
        (ZCDP(1), PureDP),
        (ZCDP(1), GDP),
    ],
)
def test_convert_rejects_invalid_implications(cost: object, target: type) -> None:
    with pytest.raises(
        TypeError,
        match=f"no conversion from {type(cost).__name__} to {target.__name__}: .* converts to",
    ):
        convert(cost, target)  # type: ignore[arg-type]


def test_convert_needs_delta() -> None:
    with pytest.raises(TypeError, match="needs delta"):
        convert(ZCDP(1), ApproxDP)
    with pytest.raises(TypeError, match="privacy value"):
        convert(1.0, ZCDP)  # type: ignore[arg-type]


# -- rigorous rounding against 60-digit arithmetic (mpmath) -------------------------------------


def test_closed_forms_round_up_against_high_precision() -> None:
    import mpmath as mp  # (a test dependency: the high-precision oracle)

    from privplan.accounting import curves as c  # (the closed forms behind the conversions)

    def big(x: Fraction) -> object:
        return mp.mpf(x.numerator) / x.denominator

    with mp.workdps(60):
        rng = np.random.default_rng(7)
        for _ in range(100):
            rho = Fraction(float(rng.uniform(1e-6, 30)))
            delta = Fraction(float(10 ** rng.uniform(-15, -0.5)))
            alpha = c._cks_alpha(rho, delta)
            got = c._upper(c._cks_terms(rho, -c._ln(delta), alpha))
            r, d, a = big(rho), big(delta), big(alpha)
            exact = a * r + (mp.log(1 / d) + (a - 1) * mp.log(1 - 1 / a) - mp.log(a)) / (a - 1)
            assert big(got) >= exact
            assert big(got) <= exact * (1 + mp.mpf("1e-18")) + mp.mpf("1e-19")
            bs = c._bun_steinke(rho, delta)
            assert big(bs) >= r + 2 * mp.sqrt(r * mp.log(1 / d))
        eps = [Fraction(1, 100)] * 100
        adv = advanced_composition(eps, [0] * 100, Fraction(1, 10**6)).exact_epsilon
        assert big(adv) >= mp.mpf("0.005") + mp.sqrt(2 * mp.log(10**6) * mp.mpf("0.01"))
