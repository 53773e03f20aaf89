"""(ε, δ)-differential privacy: ε and δ both add under composition (CSF'24 VI.4, VI.7).

The one definition here that spends a δ: partition selection, advanced composition and PLD
accounting are defined for its values only (:meth:`ApproxDP.delta_or_none`). It implies no
other definition's guarantee (a δ allows an unbounded loss with probability δ).

Privacy: only an (ε, δ) value spends δ; it converts to no other definition.
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar, Self

from privplan.accounting.definitions.value import Number, PrivacyValue, _nonnegative

__all__ = ["ApproxDP"]


class ApproxDP(PrivacyValue):
    """(ε, δ)-differential privacy. ε and δ both add under composition (CSF'24 VI.4, VI.7)."""

    __slots__ = ()
    _names = ("epsilon", "delta")
    _symbols = ("ε", "δ")
    _examples = ("0.5", "1e-6")
    _title = "(ε, δ)-DP"
    _no_conversion: ClassVar[str] = (
        "approximate DP implies no pure, zCDP or Gaussian DP guarantee")
    weight_power = 1  # (its releases use Laplace noise: ε grows linearly)

    def __init__(self, epsilon: Number, delta: Number) -> None:
        eps = _nonnegative(epsilon, "epsilon", "ApproxDP")
        dlt = _nonnegative(delta, "delta", "ApproxDP")
        if dlt >= 1:
            raise ValueError(
                f"ApproxDP: delta must be < 1 (delta >= 1 allows publishing the data), "
                f"got {delta!r}. Use a delta well below 1 / (number of people), e.g. 1e-6"
            )
        object.__setattr__(self, "_params", (eps, dlt))

    @property
    def epsilon(self) -> float:
        return float(self._params[0])

    @property
    def delta(self) -> float:
        return float(self._params[1])

    @property
    def exact_epsilon(self) -> Fraction:
        return self._params[0]

    @property
    def exact_delta(self) -> Fraction:
        return self._params[1]

    def calibration(self) -> tuple[tuple[str, Fraction], ...]:
        """Laplace noise at ε: it is (ε, 0)-DP, so δ is left unused (partition selection
        spends it)."""
        return (("epsilon", self.exact_epsilon),)

    def delta_or_none(self) -> Fraction | None:
        return self.exact_delta

    def without_delta(self) -> Self:
        return type(self)(self.exact_epsilon, 0)

    @classmethod
    def unit_cost(cls, *, spends_delta: bool = False, weight: Fraction = Fraction(1)) -> Self:
        """(w, 1/2) for a mechanism that spends δ, else (w, 0) (δ must stay below 1)."""
        return cls(weight, Fraction(1, 2) if spends_delta else 0)
