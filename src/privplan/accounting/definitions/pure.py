"""ε-differential privacy: ε adds under composition.

Pure DP implies every other definition here: (ε, 0)-DP, (ε²/2)-zCDP and μ-GDP with
μ = −2Φ^{-1}(1/(1+e^ε)). So an ε-DP mechanism (Laplace noise) is charged in any of them
through these conversions. No mechanism with an unbounded privacy loss (Gaussian noise) fits it.

Privacy: a Gaussian mechanism is never charged in pure DP; its conversions are upper bounds.
"""

from __future__ import annotations

from fractions import Fraction

from privplan.accounting.definitions.approx import ApproxDP
from privplan.accounting.definitions.gdp import GDP
from privplan.accounting.definitions.value import Conversion, Number, PrivacyValue, _nonnegative
from privplan.accounting.definitions.zcdp import ZCDP

__all__ = ["PureDP", "pure_to_approx", "pure_to_gdp", "pure_to_zcdp"]


def pure_to_zcdp(p: PureDP) -> ZCDP:
    """ε-DP implies (ε²/2)-zCDP (Bun–Steinke 2016, Prop. 1.4). Exact."""
    return ZCDP(p.exact_epsilon**2 / 2)


def pure_to_approx(p: PureDP) -> ApproxDP:
    """ε-DP is (ε, 0)-DP by definition. Exact."""
    return ApproxDP(p.exact_epsilon, 0)


def pure_to_gdp(p: PureDP) -> GDP:
    """ε-DP ⇒ μ-GDP with μ = −2·Φ^{-1}(1/(1+e^ε)), rounded up.

    Why: the tradeoff function f_ε of ε-DP is piecewise linear with its kink on the diagonal
    at α* = 1/(1+e^ε). G_μ(α) = Φ(Φ^{-1}(1−α) − μ) is convex, symmetric and G_μ(0) = 1, so
    G_μ <= f_ε iff G_μ(α*) <= α*, iff μ >= −2Φ^{-1}(α*) (Dong–Roth–Su 2022). Float evaluation,
    raised by a 1e-9 relative margin.
    """
    eps = p.exact_epsilon
    if eps == 0:
        return GDP(0)
    from privplan.accounting import curves  # (scipy: loaded when first needed)

    return GDP(curves.mu_of_epsilon(eps))


class PureDP(PrivacyValue):
    """ε-differential privacy. ε adds under composition."""

    __slots__ = ()
    _names = ("epsilon",)
    _symbols = ("ε",)
    _examples = ("0.5",)
    _title = "pure DP"
    _conversions = (Conversion(ZCDP, pure_to_zcdp, "pure_to_zcdp"),
                    Conversion(ApproxDP, pure_to_approx, "pure_to_approx"),
                    Conversion(GDP, pure_to_gdp, "pure_to_gdp"))
    weight_power = 1

    def __init__(self, epsilon: Number) -> None:
        object.__setattr__(self, "_params", (_nonnegative(epsilon, "epsilon", "PureDP"),))

    @property
    def epsilon(self) -> float:
        return float(self._params[0])

    @property
    def exact_epsilon(self) -> Fraction:
        return self._params[0]

    def calibration(self) -> tuple[tuple[str, Fraction], ...]:
        """An ε-DP mechanism at ε (Laplace noise: t = Δ/ε)."""
        return (("epsilon", self.exact_epsilon),)
