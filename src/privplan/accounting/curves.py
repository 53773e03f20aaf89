"""The numbers behind the conversions between privacy definitions, on exact Fractions.

The definitions (:mod:`privplan.accounting.definitions`) say which conversion holds; this
module computes it, rounded in the conservative direction: a converted *cost* is rounded up, a
derived *budget* (:func:`epsilon_within_mu`) is rounded down. It loads numpy and scipy, so the
definitions import it when a conversion is first computed.

How rounding is made safe:

* Closed forms in logs and roots (Bun–Steinke, Canonne–Kamath–Steinke, advanced composition)
  are evaluated in :mod:`decimal` at 80 digits (``ln`` and ``sqrt`` there are correctly
  rounded), a margin of 1e-60 times the sum of the terms' magnitudes is added, and the result
  is rounded up (``ROUND_CEILING``) to 20 significant digits. That is a rigorous upper bound.
* Gaussian-DP quantities need Φ, which :mod:`decimal` lacks; they are computed in floats
  (scipy's ``log_ndtr``/``ndtri_exp``/``erfinv``, accurate to ~1e-14 relative) and then moved
  by a relative safety margin of 1e-9 in the conservative direction, and checked.

Privacy: a converted cost is rounded up and a derived budget down, with a proven margin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

import numpy as np
from scipy import optimize, special

from privplan.accounting.definitions.value import Number, as_fraction
from privplan.errors import InternalError

__all__ = ["advanced_epsilon", "check_delta", "epsilon_within_mu", "gdp_delta", "gdp_epsilon",
           "mu_of_epsilon", "zcdp_epsilon"]

_PREC = 80
_MARGIN = Decimal("1e-60")
_FLOAT_SAFETY = 1e-9


# -- rigorous decimal helpers ------------------------------------------------------------------


def _dec(x: Fraction) -> Decimal:
    with localcontext(prec=_PREC):
        return Decimal(x.numerator) / Decimal(x.denominator)


def _ln(x: Fraction) -> Decimal:
    with localcontext(prec=_PREC):
        return _dec(x).ln()


def _sqrt(x: Decimal) -> Decimal:
    with localcontext(prec=_PREC):
        return x.sqrt()


def _upper(terms: Sequence[Decimal]) -> Fraction:
    """A Fraction >= Σ terms (and >= 0), given terms each within 1e-78 relative of the truth."""
    with localcontext(prec=_PREC):
        total = sum(terms, Decimal(0))
        bound = total + _MARGIN * (1 + sum((abs(t) for t in terms), Decimal(0)))
    with localcontext(prec=20, rounding=ROUND_CEILING):
        return Fraction(max(Decimal(0), +bound))


def _float_up(x: float) -> Fraction:
    """Round a float estimate up by the relative safety margin, to 20 significant digits."""
    with localcontext(prec=20, rounding=ROUND_CEILING):
        return Fraction(+(Decimal(repr(x)) * (1 + Decimal(_FLOAT_SAFETY))))


def _float_down(x: float) -> Fraction:
    with localcontext(prec=20, rounding=ROUND_FLOOR):
        return Fraction(max(Decimal(0), +(Decimal(repr(x)) * (1 - Decimal(_FLOAT_SAFETY)))))


def _float_at_least(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _float_at_most(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def check_delta(delta: Number, what: str) -> Fraction:
    """δ as an exact Fraction in (0, 1), else ``ValueError`` naming ``what``."""
    d = as_fraction(delta, f"{what}: delta")
    if not 0 < d < 1:
        raise ValueError(f"{what}: delta must be in (0, 1), got {delta!r}")
    return d


# -- zCDP --------------------------------------------------------------------------------------


def _bun_steinke(rho: Fraction, delta: Fraction) -> Fraction:
    """ρ-zCDP ⇒ (ρ + 2·sqrt(ρ·ln(1/δ)), δ)-DP (Bun–Steinke 2016, Prop. 1.3); rounded up."""
    log_inv = -_ln(delta)
    with localcontext(prec=_PREC):
        root = 2 * _sqrt(_dec(rho) * log_inv)
    return _upper([_dec(rho), root])


def _cks_terms(rho: Fraction, log_inv_delta: Decimal, alpha: Fraction) -> list[Decimal]:
    """Terms of the CKS bound at α, rewritten as αρ + ln(1/δ)/(α−1) + ln(1−1/α) − ln(α)/(α−1).

    (The (α−1)·ln(1−1/α)/(α−1) of the stated form simplifies to ln(1−1/α).)
    """
    a1 = alpha - 1
    with localcontext(prec=_PREC):
        return [
            _dec(alpha * rho),
            log_inv_delta / _dec(a1),
            _ln(a1 / alpha),
            -_ln(alpha) / _dec(a1),
        ]


def _cks_objective(t: float, rho: float, log_inv_delta: float) -> float:
    # The CKS bound at α = 1 + e^t, in floats (only used to find a good α).
    log_alpha = float(np.logaddexp(0.0, t))
    return (1 + math.exp(t)) * rho + (log_inv_delta - log_alpha) * math.exp(-t) + t - log_alpha


def _cks_alpha(rho: Fraction, delta: Fraction) -> Fraction:
    """A near-optimal Rényi order α > 1 for the CKS bound (grid over ln(α−1), then Brent)."""
    r, li = float(rho), -math.log(float(delta))
    ts = np.linspace(-30.0, 46.0, 305)
    vals = [_cks_objective(float(t), r, li) for t in ts]
    i = int(np.argmin(vals))
    lo, hi = float(ts[max(i - 1, 0)]), float(ts[min(i + 1, len(ts) - 1)])
    res = optimize.minimize_scalar(
        _cks_objective,
        bounds=(lo, hi),
        args=(r, li),
        method="bounded",
        options={"xatol": 1e-12},
    )
    t_best = float(res.x) if res.fun <= vals[i] else float(ts[i])
    return 1 + Fraction(math.exp(t_best))


def _canonne_kamath_steinke(rho: Fraction, delta: Fraction) -> Fraction:
    """ρ-zCDP ⇒ (ε, δ)-DP with ε = inf_{α>1} αρ + (ln(1/δ) + (α−1)ln(1−1/α) − ln α)/(α−1).

    Canonne–Kamath–Steinke 2020, Cor. 13. Every α > 1 gives a valid ε, so the bound is
    evaluated rigorously (in decimal) at the α the float optimiser found and rounded up. A
    negative value is clipped to 0: the implied δ_α(ε) decreases in ε, so (0, δ) holds too.
    """
    alpha = _cks_alpha(rho, delta)
    return _upper(_cks_terms(rho, -_ln(delta), alpha))


def zcdp_epsilon(rho: Fraction, delta: Fraction) -> Fraction:
    """The ε of ρ-zCDP at δ (ρ > 0, δ in (0, 1)): the smaller of the Bun–Steinke and CKS
    bounds, each rounded up (both are valid for every δ, so their minimum is too)."""
    return min(_bun_steinke(rho, delta), _canonne_kamath_steinke(rho, delta))


def advanced_epsilon(square_sum: Fraction, delta_prime: Fraction) -> Fraction:
    """½Σε_j² + sqrt(2·ln(1/δ')·Σε_j²) for Σε_j² = ``square_sum`` > 0, rounded up (the second
    branch of ``advanced_composition``)."""
    with localcontext(prec=_PREC):
        root = _sqrt(2 * -_ln(delta_prime) * _dec(square_sum))
    return _upper([_dec(square_sum / 2), root])


# -- Gaussian DP -------------------------------------------------------------------------------


def gdp_delta(mu: Number, epsilon: Number) -> float:
    """δ(ε) of μ-GDP: Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) (Dong–Roth–Su 2022, Cor. 2.13).

    μ-GDP is (ε, δ(ε))-DP for every ε >= 0. Computed in log space (``log_ndtr``), as
    e^a·(−expm1(b − a)), so large ε neither overflows nor cancels. A float (≈1e-14 relative).
    """
    m, e = float(as_fraction(mu, "mu")), float(as_fraction(epsilon, "epsilon"))
    if m < 0 or e < 0:
        raise ValueError(f"gdp_delta: mu and epsilon must be non-negative, got {mu!r}, {epsilon!r}")
    if m == 0:
        return 0.0
    a = float(special.log_ndtr(-e / m + m / 2))
    b = e + float(special.log_ndtr(-e / m - m / 2))
    if b >= a:
        return 0.0
    return max(0.0, math.exp(a) * -math.expm1(b - a))


def gdp_epsilon(mu_exact: Fraction, d: Fraction) -> Fraction:
    """The smallest ε (rounded up) with δ(ε) <= d for μ-GDP (see ``gdp_to_approx``)."""
    mu = _float_at_least(mu_exact)
    if mu == 0:
        return Fraction(0)
    target = float(d) * (1 - _FLOAT_SAFETY)

    def excess(e: float) -> float:
        return gdp_delta(mu, e) - target

    if excess(0.0) <= 0:
        return Fraction(0)
    hi = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / target)) + 1.0
    while excess(hi) > 0:
        hi *= 2
    root = optimize.brentq(excess, 0.0, hi, xtol=1e-15, rtol=1e-15)
    eps = _float_up(root)
    for _ in range(60):
        if gdp_delta(mu, eps) <= target:
            return eps
        eps = _float_up(float(eps) * (1 + _FLOAT_SAFETY))
    raise InternalError(f"gdp_to_approx: no ε found for mu={mu}, delta={d}")


def _pure_to_mu_float(eps: float) -> float:
    # μ = −2Φ^{-1}(1/(1+e^ε)). For small ε, 1/(1+e^ε) = 1/2 − tanh(ε/2)/2 and
    # Φ^{-1}(1/2 − x/2) = −sqrt(2)·erfinv(x): no cancellation near 1/2.
    if eps <= 1.0:
        return 2 * math.sqrt(2) * float(special.erfinv(math.tanh(eps / 2)))
    return -2 * float(special.ndtri_exp(-float(np.logaddexp(0.0, eps))))


def mu_of_epsilon(eps: Fraction) -> Fraction:
    """The μ of ε-DP (ε > 0), rounded up: see ``pure_to_gdp``."""
    mu = _pure_to_mu_float(_float_at_least(eps))
    if not math.isfinite(mu):
        raise ValueError(f"pure_to_gdp: epsilon={float(eps)} is too large to convert")
    return _float_up(mu)


def _mu_to_pure_float(mu: float) -> float:
    # ε = ln(Φ(μ/2)/Φ(−μ/2)) = ln(1 + 2·erf(u)/erfc(u)), u = μ/(2√2); log_ndtr for large μ.
    if mu <= 2.0:
        u = mu / (2 * math.sqrt(2))
        return math.log1p(2 * float(special.erf(u)) / float(special.erfc(u)))
    return float(special.log_ndtr(mu / 2)) - float(special.log_ndtr(-mu / 2))


_MU_CAP = Fraction(1000)
"""Beyond μ = 1000, μ(ε) overflows a double; any ε that fits μ = 1000 fits a larger μ too, so the
conversion uses the cap (smaller ε: sound, and such budgets mean no privacy anyway)."""


def epsilon_within_mu(mu: Number) -> Fraction:
    """The largest ε (rounded down) whose μ (:func:`mu_of_epsilon`) fits within μ.

    Inverse of μ(ε): ε = ln(Φ(μ/2)/Φ(−μ/2)). This is a *budget* statement (an ε-DP mechanism
    with this ε fits in a μ-GDP budget), not a conversion: μ-GDP implies no pure ε.
    """
    m = as_fraction(mu, "mu")
    if m < 0:
        raise ValueError(f"gdp_to_pure_epsilon: mu must be non-negative, got {mu!r}")
    if m == 0:
        return Fraction(0)
    raw = _mu_to_pure_float(_float_at_most(min(m, _MU_CAP)))
    eps = _float_down(raw)
    for _ in range(60):
        if eps == 0 or mu_of_epsilon(eps) <= m:
            return eps
        eps = _float_down(float(eps) * (1 - 4 * _FLOAT_SAFETY))
    raise InternalError(f"gdp_to_pure_epsilon: no ε found for mu={mu}")
