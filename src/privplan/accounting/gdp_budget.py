"""(ε, δ) budgets held as Gaussian DP: the exact privacy-loss distribution of Gaussian releases.

A Gaussian release of sensitivity Δ and standard deviation σ has the privacy-loss distribution
N(μ²/2, μ²) with μ = Δ/σ, and composing such releases gives N(μ_tot²/2, μ_tot²) with
μ_tot² = Σ μ_i²: Gaussian PLDs are closed under composition, and their (ε, δ) curve is the μ-GDP
curve δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) (Dong–Roth–Su 2022, Cor. 2.13). So for Gaussian
noise, *PLD accounting is GDP accounting*, exactly, with no discretisation.

Why a session may use it although its queries are chosen after seeing earlier answers: the
composition of adaptively chosen μ_i-GDP mechanisms, stopped as soon as Σ μ_i² would exceed μ²,
is μ-GDP (Smith & Thakurta 2022, "Fully adaptive composition for Gaussian differential
privacy"; a valid *privacy filter*). That is not true of PLDs in general: composing arbitrary
privacy-loss distributions and stopping when the target curve is crossed is not a valid filter
(see "f-Differential Privacy Filters: Validity and Approximate Solutions", 2026). An (ε, δ)
session with PLD accounting therefore holds its budget as the largest μ whose curve passes
through (ε, δ) — :func:`approx_to_gdp` — and admits while the composed μ stays within it; every
mechanism enters with a μ that is exact (the rounded Gaussian, Δ/σ) or a proven upper bound
(discrete Laplace through ``pure_to_gdp``).

Privacy: the μ held for an (ε, δ) budget is rounded down and checked to imply (ε, δ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from privplan.accounting.conversions import gdp_delta, gdp_to_approx
from privplan.accounting.definitions import GDP, ApproxDP, Number, as_fraction
from privplan.errors import InternalError

__all__ = ["approx_to_gdp", "sequential_approx"]

_GRID = 2**40  # μ is rounded *down* to a multiple of 2^-40 (a smaller μ: more noise, never less)


def approx_to_gdp(epsilon: Number, delta: Number) -> GDP:
    """The largest μ (rounded down) such that μ-GDP implies (ε, δ)-DP.

    δ(ε) of μ-GDP grows with μ, so the set of such μ is an interval [0, μ*]; μ* is found by
    bisection on floats and then checked with the same conversion the accountant reports
    (``gdp_to_approx``): the result's ε at ``delta`` is never above ``epsilon``. Raises
    ``ValueError`` for δ = 0 (μ-GDP is never (ε, 0)-DP) or ε < 0.
    """
    eps, d = as_fraction(epsilon, "epsilon"), as_fraction(delta, "delta")
    if eps < 0 or not 0 < d < 1:
        raise ValueError(f"approx_to_gdp needs ε >= 0 and 0 < δ < 1, got ({epsilon}, {delta})")
    e, target = float(eps), float(d) * (1 - 1e-7)  # (margin for the check below)
    lo, hi = 0.0, 1.0
    while gdp_delta(hi, e) <= target:
        hi *= 2
        if hi > 1e6:
            raise ValueError(f"(ε, δ) = ({epsilon}, {delta}) allows an unbounded μ")
    for _ in range(200):
        mid = (lo + hi) / 2
        if gdp_delta(mid, e) <= target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= lo * 1e-13:
            break
    mu = Fraction(math.floor(lo * _GRID), _GRID)
    while mu > 0 and not gdp_to_approx(GDP(mu), d).exact_epsilon <= eps:
        mu = mu * Fraction(10**9 - 1, 10**9)  # (float slack; rarely needed)
    if mu <= 0:
        raise InternalError(f"approx_to_gdp: no μ found for ({epsilon}, {delta})")
    return GDP(mu)


def sequential_approx(mus: Sequence[Fraction], delta: Number) -> ApproxDP:
    """What *additive* (ε, δ) accounting would charge for releases of these μ_i, with the total
    δ split evenly: Σ_i ε_i where μ_i-GDP is (ε_i, δ/n)-DP. For comparison only (``explain``
    shows it next to the PLD total); it is never below the PLD total's ε at the same δ."""
    d = as_fraction(delta, "delta")
    live = [m for m in mus if m > 0]
    if not live:
        return ApproxDP(0, 0)
    share = d / len(live)
    total = sum((gdp_to_approx(GDP(m), share).exact_epsilon for m in live), Fraction(0))
    return ApproxDP(total, d)
