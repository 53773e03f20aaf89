"""μ-GDP ⇒ (μ²/2)-zCDP (``convert(GDP(μ), ZCDP)``), against exact oracles.

* The closed form, exactly: μ = 3/2 gives ρ = 9/8.
* Tight: the Gaussian mechanism N(0, 1) vs N(μ, 1) is exactly μ-GDP, and its Rényi divergence,
  integrated numerically at 50 digits, is α·μ²/2 at every order α: no smaller ρ is valid.
* Valid beyond the Gaussian: randomised response at ε has the tradeoff function of ε-DP exactly,
  so it is μ-GDP for μ = pure_to_gdp(ε); its Rényi divergences, computed in closed form at 50
  digits over a grid of orders (and the KL divergence at α → 1), are all within α·ρ.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath as mp
import pytest

from privplan.accounting.conversions import convert, pure_to_gdp
from privplan.accounting.definitions import GDP, ZCDP, PureDP


def test_the_closed_form_is_exact() -> None:
    assert convert(GDP(Fraction(3, 2)), ZCDP) == ZCDP(Fraction(9, 8))
    assert convert(GDP(0), ZCDP) == ZCDP(0)
    assert GDP(1).stated_as(ZCDP) == ZCDP(Fraction(1, 2))  # (no δ is needed to read it)


def test_it_composes_like_zcdp() -> None:
    """Converting a composed μ gives the sum of the converted ρ: (Σμ_i²)/2 = Σ(μ_i²/2)."""
    a, b = GDP(Fraction(3, 5)), GDP(Fraction(4, 5))  # (μ composes to exactly 1)
    assert convert(a + b, ZCDP) == convert(a, ZCDP) + convert(b, ZCDP) == ZCDP(Fraction(1, 2))


@pytest.mark.parametrize("mu", ["0.3", "1", "2.5"])
@pytest.mark.parametrize("alpha", ["1.5", "2", "7"])
def test_it_is_tight_for_the_gaussian_mechanism(mu: str, alpha: str) -> None:
    rho = convert(GDP(mu), ZCDP).exact_rho
    with mp.workdps(50):
        m, a = mp.mpf(mu), mp.mpf(alpha)

        def ratio_power(x: mp.mpf) -> mp.mpf:  # p(x)^α q(x)^(1-α), p = N(0,1), q = N(μ,1)
            return mp.npdf(x) ** a * mp.npdf(x, m) ** (1 - a)

        divergence = mp.log(mp.quad(ratio_power, [-mp.inf, 0, m, mp.inf])) / (a - 1)
        bound = a * mp.mpf(rho.numerator) / rho.denominator
        assert divergence <= bound * (1 + mp.mpf("1e-30"))
        assert divergence >= bound * (1 - mp.mpf("1e-30"))  # (a smaller ρ would not hold)


@pytest.mark.parametrize("eps", ["0.05", "0.5", "1", "3"])
def test_it_holds_for_randomised_response(eps: str) -> None:
    rho = convert(pure_to_gdp(PureDP(eps)), ZCDP).exact_rho
    with mp.workdps(50):
        e = mp.mpf(eps)
        p = mp.e**e / (1 + mp.e**e)  # P(truth); the pair is (p, 1 - p) vs (1 - p, p)
        q = 1 - p
        bound = mp.mpf(rho.numerator) / rho.denominator
        kl = (p - q) * mp.log(p / q)  # the limit α → 1
        assert kl <= bound
        for alpha in [mp.mpf(1) + mp.mpf(k) / 100 for k in range(1, 100)] + [
                mp.mpf(k) for k in range(2, 200)]:
            divergence = mp.log(p**alpha * q ** (1 - alpha) + q**alpha * p ** (1 - alpha)) / (
                alpha - 1)
            assert divergence <= alpha * bound, (eps, alpha)
