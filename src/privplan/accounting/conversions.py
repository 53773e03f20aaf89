r"""Conversions between privacy definitions, and advanced composition for (ε, δ).

Which conversion holds is said by the source definition (its module in
:mod:`privplan.accounting.definitions` declares its ``Conversion``\ s); the numbers are
computed in :mod:`privplan.accounting.curves`, rounded in the conservative direction (a
converted *cost* up, a derived *budget* such as :func:`gdp_to_pure_epsilon` down). This module
gathers them under their public names, with :func:`convert` to pick one.

Privacy: a converted cost is rounded up and a derived budget down, with a proven margin.

>>> from privplan.accounting.definitions import ZCDP
>>> pure_to_zcdp(PureDP(1))
ZCDP(rho=0.5)
>>> zcdp_to_approx(ZCDP(0.5), 1e-6).epsilon < 0.5 + 2 * (0.5 * 13.8156) ** 0.5  # CKS < BS
True
>>> convert(ApproxDP(1, 1e-6), ZCDP)
Traceback (most recent call last):
    ...
TypeError: no conversion from ApproxDP to ZCDP: ApproxDP converts to none (approximate DP implies no pure, zCDP or Gaussian DP guarantee)
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from privplan.accounting import curves
from privplan.accounting.curves import gdp_delta
from privplan.accounting.definitions import ApproxDP, Number, PrivacyValue, PureDP, as_fraction
from privplan.accounting.definitions.gdp import gdp_to_approx
from privplan.accounting.definitions.pure import pure_to_approx, pure_to_gdp, pure_to_zcdp
from privplan.accounting.definitions.value import DeltaNeeded
from privplan.accounting.definitions.zcdp import zcdp_to_approx

__all__ = [
    "advanced_composition",
    "convert",
    "gdp_delta",
    "gdp_to_approx",
    "gdp_to_pure_epsilon",
    "pure_to_approx",
    "pure_to_gdp",
    "pure_to_zcdp",
    "zcdp_to_approx",
]


def gdp_to_pure_epsilon(mu: Number) -> PureDP:
    """The largest ε (rounded down) whose :func:`pure_to_gdp` fits within μ.

    Inverse of μ(ε): ε = ln(Φ(μ/2)/Φ(−μ/2)). This is a *budget* statement (an ε-DP mechanism
    with this ε fits in a μ-GDP budget), not a conversion: μ-GDP implies no pure ε.
    """
    return PureDP(curves.epsilon_within_mu(mu))


# -- advanced composition ----------------------------------------------------------------------


def advanced_composition(
    epsilons: Sequence[Number], deltas: Sequence[Number], delta_prime: Number
) -> ApproxDP:
    """(ε_j, δ_j)-DP mechanisms with parameters fixed in advance compose to (ε', δ)-DP with

        ε' = min{ Σε_j, ½Σε_j² + sqrt(2·ln(1/δ')·Σε_j²) },  δ = Σδ_j (+ δ' if the 2nd is used).

    Heterogeneous advanced composition (Kairouz–Oh–Viswanath 2015 Thm 3.5; Dwork–Rothblum–
    Vadhan 2010): its term Σε_j(e^ε_j−1)/(e^ε_j+1) is <= ½Σε_j², and its δ
    1 − (1−δ')Π(1−δ_j) is <= δ' + Σδ_j. The first branch is basic composition. Parameters
    must not depend on earlier answers (e.g. a planned report); adaptive sessions use plain
    sums, which are valid as a privacy filter. Rounded up.
    """
    if len(epsilons) != len(deltas):
        raise ValueError(f"advanced_composition: {len(epsilons)} epsilons but {len(deltas)} deltas")
    dp = curves.check_delta(delta_prime, "advanced_composition")
    eps = [as_fraction(e, "advanced_composition: epsilon") for e in epsilons]
    dls = [as_fraction(d, "advanced_composition: delta") for d in deltas]
    if any(e < 0 for e in eps):
        raise ValueError("advanced_composition: every epsilon must be non-negative")
    if any(not 0 <= d < 1 for d in dls):
        raise ValueError("advanced_composition: every delta must be in [0, 1)")
    basic_eps, basic_delta = sum(eps, Fraction(0)), sum(dls, Fraction(0))
    sq = sum((e * e for e in eps), Fraction(0))
    if sq > 0:
        adv = curves.advanced_epsilon(sq, dp)
        if adv < basic_eps:
            return ApproxDP.from_weights((adv, basic_delta + dp))
    return ApproxDP.from_weights((basic_eps, basic_delta))


# -- dispatcher --------------------------------------------------------------------------------


def convert(
    cost: PrivacyValue, target_kind: type[PrivacyValue], *, delta: Number | None = None
) -> PrivacyValue:
    """Convert ``cost`` to ``target_kind`` by the conversion its definition declares (identity
    if same kind).

    Raises ``TypeError`` for implications that do not hold (e.g. ApproxDP → ZCDP,
    GDP → PureDP) or when a conversion that reads a δ (ZCDP or GDP to ApproxDP) lacks ``delta``.
    """
    if not isinstance(cost, PrivacyValue):
        raise TypeError(f"convert: expected a privacy value, got {type(cost).__name__}")
    src = type(cost)
    if target_kind is src:
        return cost
    conversion = cost.conversion_to(target_kind)
    if conversion is None:
        target = getattr(target_kind, "__name__", repr(target_kind))
        raise TypeError(f"no conversion from {src.__name__} to {target}: "
                        f"{src.__name__} converts to {src.implications()}")
    try:
        return conversion(cost, delta)
    except DeltaNeeded as err:
        raise TypeError(str(err)) from None
