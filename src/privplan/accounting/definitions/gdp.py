"""μ-Gaussian DP (Dong–Roth–Su): μ composes as sqrt(Σ μ_i²) (CSF'24 VI.21, VI.22).

The weight is μ², so a value built from weights takes a square root (rounded up for a cost,
down for a budget). μ-GDP implies (ε, δ(ε))-DP on the exact Gaussian curve
(:func:`gdp_to_approx`) and (μ²/2)-zCDP (``convert(..., ZCDP)``). Its budgets are spent by the
rounded Gaussian (μ = Δ/σ exactly), or by Laplace noise at the largest ε whose μ fits when that
is less noisy.

Privacy: μ's square root is rounded up for a cost and down for a budget; conversions are proven bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, Self

from privplan.accounting.definitions.approx import ApproxDP
from privplan.accounting.definitions.value import (
    Conversion,
    Number,
    PrivacyValue,
    _nonnegative,
    sqrt_fraction,
)
from privplan.accounting.definitions.zcdp import ZCDP

__all__ = ["GDP", "gdp_to_approx"]


def gdp_to_approx(g: GDP, delta: Number) -> ApproxDP:
    """μ-GDP ⇒ (ε, δ)-DP for the smallest ε with δ(ε) <= δ (Dong–Roth–Su Cor. 2.13).

    δ(ε) is decreasing, so any larger ε is also valid: the root (found for the target
    δ·(1 − 1e-9), absorbing float error) is rounded up, and δ(ε) <= δ is checked.
    """
    from privplan.accounting import curves  # (scipy: loaded when first needed)

    d = curves.check_delta(delta, "gdp_to_approx")
    return ApproxDP(curves.gdp_epsilon(g.exact_mu, d), d)


def _gdp_to_zcdp(g: GDP) -> ZCDP:
    """μ-GDP ⇒ (μ²/2)-zCDP. Exact, and tight (the Gaussian mechanism attains it).

    Why: a pair of output distributions (P, Q) of a μ-GDP mechanism has T(P, Q) >= G_μ =
    T(N(0, 1), N(μ, 1)), so by Blackwell's theorem (Dong–Roth–Su 2022, Thm 2.10) P and Q are
    one randomised post-processing of N(0, 1) and N(μ, 1), and the Rényi divergence does not
    grow under post-processing: D_α(P‖Q) <= D_α(N(0, 1)‖N(μ, 1)) = α·μ²/2 for every α > 1
    (Bun–Steinke 2016, Lemma 2.4), which is (μ²/2)-zCDP.
    """
    return ZCDP(g.exact_mu**2 / 2)


class GDP(PrivacyValue):
    """μ-Gaussian DP (Dong–Roth–Su). μ composes as sqrt(Σ μ_i²); the weight is μ²."""

    __slots__ = ()
    _names = ("mu",)
    _symbols = ("μ",)
    _examples = ("0.5",)
    _title = "Gaussian DP"
    _conversions = (Conversion(ApproxDP, gdp_to_approx, "gdp_to_approx", needs_delta=True),
                    Conversion(ZCDP, _gdp_to_zcdp))
    weight_power = 2

    def __init__(self, mu: Number) -> None:
        object.__setattr__(self, "_params", (_nonnegative(mu, "mu", "GDP"),))

    @classmethod
    def weight_symbols(cls) -> tuple[str, ...]:
        return ("μ²",)

    def weights(self) -> tuple[Fraction, ...]:
        return (self._params[0] ** 2,)

    @classmethod
    def _from_weights(cls, weights: tuple[Any, ...], *, round_up: bool) -> Self:
        if len(weights) != 1:
            raise ValueError(f"GDP has 1 weight (mu squared), got {len(weights)}")
        w = _nonnegative(weights[0], "weight 0 (mu squared)", "GDP")
        return cls._create((sqrt_fraction(w, round_up=round_up),))

    def rounded_roots(self, fn: Callable[[Fraction], Fraction]) -> Self:
        return self._from_parameters((fn(self.exact_mu),))

    @property
    def mu(self) -> float:
        return float(self._params[0])

    @property
    def exact_mu(self) -> Fraction:
        return self._params[0]

    def calibration(self) -> tuple[tuple[str, Fraction], ...]:
        """The Gaussian mechanism at μ (σ = Δ/μ, cost exactly μ), then an ε-DP mechanism at
        the largest ε whose μ (``pure_to_gdp``) fits: the less noisy of the two is used."""
        from privplan.accounting import curves  # (scipy: loaded when first needed)

        return (("mu", self.exact_mu), ("epsilon", curves.epsilon_within_mu(self.exact_mu)))
