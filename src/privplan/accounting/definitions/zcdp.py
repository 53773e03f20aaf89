"""ρ-zero-concentrated DP (Bun–Steinke 2016): ρ adds under composition (CSF'24 VI.13, VI.14).

It implies (ε, δ)-DP for every δ in (0, 1) (:func:`zcdp_to_approx`: the smaller of the
Bun–Steinke and Canonne–Kamath–Steinke bounds). Its budgets are spent by the discrete Gaussian,
whose ρ is exactly Δ²/(2σ²).

Privacy: ρ is charged exactly (Δ²/(2σ²)); its (ε, δ) conversion is rounded up.
"""

from __future__ import annotations

from fractions import Fraction

from privplan.accounting.definitions.approx import ApproxDP
from privplan.accounting.definitions.value import Conversion, Number, PrivacyValue, _nonnegative

__all__ = ["ZCDP", "zcdp_to_approx"]


def zcdp_to_approx(z: ZCDP, delta: Number) -> ApproxDP:
    """ρ-zCDP ⇒ (ε, δ)-DP, ε the smaller of the Bun–Steinke and CKS bounds, rounded up.

    Both bounds are valid for every δ in (0, 1), so their minimum is too. ρ = 0 gives ε = 0.
    """
    from privplan.accounting import curves  # (scipy: loaded when first needed)

    d = curves.check_delta(delta, "zcdp_to_approx")
    rho = z.exact_rho
    if rho == 0:
        return ApproxDP(0, d)
    return ApproxDP(curves.zcdp_epsilon(rho, d), d)


class ZCDP(PrivacyValue):
    """ρ-zero-concentrated DP (Bun–Steinke 2016). ρ adds under composition."""

    __slots__ = ()
    _names = ("rho",)
    _symbols = ("ρ",)
    _examples = ("0.1",)
    _title = "zCDP"
    _conversions = (Conversion(ApproxDP, zcdp_to_approx, "zcdp_to_approx", needs_delta=True),)
    weight_power = 2

    def __init__(self, rho: Number) -> None:
        object.__setattr__(self, "_params", (_nonnegative(rho, "rho", "ZCDP"),))

    @property
    def rho(self) -> float:
        return float(self._params[0])

    @property
    def exact_rho(self) -> Fraction:
        return self._params[0]

    def calibration(self) -> tuple[tuple[str, Fraction], ...]:
        """A ρ-zCDP mechanism at ρ (the discrete Gaussian: σ² = Δ²/(2ρ), CKS Thm 4)."""
        return (("rho", self.exact_rho),)
