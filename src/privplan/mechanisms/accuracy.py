"""Accuracy of noisy answers, from the noise parameters only (data-independent).

Nothing here looks at the data, so ``explain`` can show it before any budget is spent, and
showing it costs no privacy. A noisy value v = x + Z has the interval [v - a, v + a], which
contains the true x with probability P(|Z| <= a) >= confidence, computed under the exact
discrete distribution of Z.

Derived values (AVG = S/C, VARIANCE, STDDEV) combine the intervals of their parts by interval
arithmetic. If each of k parts has confidence 1 - (1 - c)/k, all k intervals hold at once with
probability >= c (union bound), and then the derived interval holds too.

Privacy: accuracy comes from noise parameters and released values only, never from exact data.

>>> from fractions import Fraction
>>> from privplan.mechanisms.noise import DiscreteLaplace
>>> interval_halfwidth(DiscreteLaplace(Fraction(2)))
6
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from privplan.mechanisms.noise import (
    DiscreteGaussian,
    DiscreteLaplace,
    NoiseMechanism,
    RoundedGaussian,
)

__all__ = [
    "Accuracy",
    "accuracy",
    "interval_halfwidth",
    "joint_halfwidths",
    "per_component_confidence",
    "ratio_interval",
    "std",
    "stddev_interval",
    "tail_probability",
    "variance_interval",
]


def _special() -> Any:
    """scipy.special, imported when a Gaussian interval or probability is first asked for: a
    pure-DP answer never loads scipy (~0.25 s of a one-query process such as the CLI)."""
    from scipy import special

    return special


#: Above this sigma the discrete Gaussian tail is taken from the midpoint rule (relative error
#: about 1/sigma^2 < 1e-8) instead of summing ~80 sigma terms of the pmf.
_DIRECT_SUM_MAX_SIGMA: Final = 1e4


@dataclass(frozen=True)
class Accuracy:
    """How accurate one released value is: noise std and a confidence interval half-width."""

    std: float
    halfwidth: float
    confidence: float
    method: str

    def interval(self, value: float) -> tuple[float, float]:
        """[value - halfwidth, value + halfwidth]."""
        return value - self.halfwidth, value + self.halfwidth


def _check_confidence(confidence: float) -> float:
    c = float(confidence)
    if not 0 < c < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return c


def std(noise: NoiseMechanism) -> float:
    """Standard deviation of the noise: discrete Laplace sqrt(2e^{-1/t})/(1 - e^{-1/t})."""
    return noise.std()


def per_component_confidence(confidence: float, parts: int) -> float:
    """1 - (1 - confidence)/parts: with each of ``parts`` intervals at this level, all hold
    together with probability >= ``confidence`` (union bound)."""
    c = _check_confidence(confidence)
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    return 1 - (1 - c) / parts


# --------------------------------------------------------------------------- single values


def _laplace_log_tail(scale: float, a: int) -> float:
    """ln P(|Z| > a) = ln 2 - (a + 1)/t - ln(1 + e^{-1/t}) for the discrete Laplace."""
    return math.log(2) - (a + 1) / scale - math.log1p(math.exp(-1 / scale))


def _gauss_tails(sigma2: float) -> np.ndarray:
    """P(|Z| > a) for a = 0, 1, ..., N by summing the pmf (sigma <= 1e4)."""
    n = int(40 * math.sqrt(sigma2)) + 3  # e^{-z^2/2sigma^2} < e^{-800} beyond: underflows
    z = np.arange(n + 1, dtype=np.float64)
    w = np.exp(-(z * z) / (2 * sigma2))
    norm = 1 + 2 * w[1:].sum()
    above = np.cumsum(w[::-1])[::-1]  # above[j] = sum_{z >= j} w_z, small terms added first
    return 2 * np.append(above[1:], 0.0) / norm  # index a: P(|Z| > a) = 2 sum_{z > a} w / norm


def tail_probability(noise: NoiseMechanism, a: int) -> float:
    """P(|Z| > a) under the exact discrete noise distribution (float accuracy)."""
    if a < 0:
        return 1.0
    if isinstance(noise, DiscreteLaplace):
        return min(1.0, math.exp(_laplace_log_tail(float(noise.scale), a)))
    if isinstance(noise, RoundedGaussian):  # |round(σZ)| > a iff |σZ| >= a + 1/2
        return float(_special().erfc((a + 0.5) / (math.sqrt(2) * float(noise.sigma))))
    s2 = float(noise.sigma2)
    if math.sqrt(s2) <= _DIRECT_SUM_MAX_SIGMA:
        tails = _gauss_tails(s2)
        return float(tails[a]) if a < tails.size else 0.0
    # Midpoint rule: sum_{z > a} e^{-z^2/2s^2} ~ integral from a + 1/2; normaliser ~ s sqrt(2 pi).
    return float(_special().erfc((a + 0.5) / math.sqrt(2 * s2)))


def interval_halfwidth(noise: NoiseMechanism, confidence: float = 0.95) -> int:
    """The smallest integer a >= 0 with P(|Z| <= a) >= confidence for the noise Z.

    Discrete Laplace: P(|Z| <= a) = 1 - 2e^{-(a+1)/t}/(1 + e^{-1/t}), solved in closed form
    and checked against its neighbours. Discrete Gaussian: the pmf is summed with its exact
    normaliser (sigma <= 1e4; beyond, the midpoint rule, relative error < 1e-8). Rounded
    Gaussian: P(|Z| > a) = erfc((a + 1/2)/(σ√2)) exactly (float accuracy).
    """
    alpha = 1 - _check_confidence(confidence)
    if isinstance(noise, DiscreteLaplace):
        t = float(noise.scale)
        target = math.log(alpha)
        guess = t * (math.log(2 / alpha) - math.log1p(math.exp(-1 / t))) - 1
        a = max(0, math.ceil(guess))
        while _laplace_log_tail(t, a) > target:
            a += 1
        while a > 0 and _laplace_log_tail(t, a - 1) <= target:
            a -= 1
        return a
    if isinstance(noise, RoundedGaussian):
        a = max(0, math.ceil(math.sqrt(2) * float(noise.sigma) * float(_special().erfcinv(alpha))
                             - 0.5))
        while tail_probability(noise, a) > alpha:
            a += 1
        while a > 0 and tail_probability(noise, a - 1) <= alpha:
            a -= 1
        return a
    if isinstance(noise, DiscreteGaussian):
        s2 = float(noise.sigma2)
        if math.sqrt(s2) <= _DIRECT_SUM_MAX_SIGMA:
            tails = _gauss_tails(s2)
            return int(np.argmax(tails <= alpha))
        a = max(0, math.ceil(math.sqrt(2 * s2) * float(_special().erfcinv(alpha)) - 0.5))
        while tail_probability(noise, a) > alpha:
            a += 1
        while a > 0 and tail_probability(noise, a - 1) <= alpha:
            a -= 1
        return a
    raise TypeError(f"unknown noise mechanism {noise!r}")


def accuracy(noise: NoiseMechanism, confidence: float = 0.95, resolution: float = 1.0) -> Accuracy:
    """The :class:`Accuracy` of a value noised by ``noise``, in units of ``resolution``."""
    r = float(resolution)
    return Accuracy(
        std=noise.std() * r,
        halfwidth=interval_halfwidth(noise, confidence) * r,
        confidence=confidence,
        method=f"exact tail of {noise.describe()}",
    )


def joint_halfwidths(noises: Sequence[NoiseMechanism], confidence: float = 0.95) -> list[int]:
    """Half-widths for several noisy parts such that all intervals hold together with
    probability >= ``confidence``: each at :func:`per_component_confidence` (union bound).
    E.g. AVG = S/C uses two parts at 97.5% each, then :func:`ratio_interval`."""
    level = per_component_confidence(confidence, len(noises))
    return [interval_halfwidth(noise, level) for noise in noises]


# --------------------------------------------------------------------------- derived values


def ratio_interval(
    s: float,
    s_half: float,
    c: float,
    c_half: float,
    *,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float]:
    """An interval for S/C (e.g. AVG = SUM/COUNT) from S in [s ± s_half] and C in [c ± c_half].

    If both intervals hold (e.g. each at 97.5% for a joint 95%), the true ratio is inside the
    result. The true count of a group with an average is an integer >= 1, so C's lower end is
    raised to 1 (this also handles C's interval touching or crossing 0); then S/C is monotone in
    each argument and its extremes are at the corners. If C's interval lies below 1 the ratio is
    unbounded. ``bounds`` = (lower, upper), the clamping range of the values, always contains
    an average and is intersected in (and returned when the rest is empty or unbounded).
    """
    if not all(math.isfinite(float(x)) for x in (s, s_half, c, c_half)):
        # a sum beyond the float range (bounds near 1e308): nothing but the bounds is known
        return _intersect(-math.inf, math.inf, bounds)
    s_lo, s_hi = s - abs(s_half), s + abs(s_half)
    c_lo, c_hi = max(c - abs(c_half), 1.0), c + abs(c_half)
    if c_hi < 1:
        lo, hi = -math.inf, math.inf
    else:
        corners = (s_lo / c_lo, s_lo / c_hi, s_hi / c_lo, s_hi / c_hi)
        lo, hi = min(corners), max(corners)
    return _intersect(lo, hi, bounds)


def _intersect(lo: float, hi: float, bounds: tuple[float, float] | None) -> tuple[float, float]:
    if bounds is None:
        return lo, hi
    b_lo, b_hi = float(bounds[0]), float(bounds[1])
    new_lo, new_hi = max(lo, b_lo), min(hi, b_hi)
    return (new_lo, new_hi) if new_lo <= new_hi else (b_lo, b_hi)


def variance_interval(
    s2: float,
    s2_half: float,
    s: float,
    s_half: float,
    c: float,
    c_half: float,
    *,
    bounds: tuple[float, float] | None = None,
    ddof: int = 0,
) -> tuple[float, float]:
    """An interval for VARIANCE from intervals of S2 = Σx², S = Σx and C = COUNT.

    Population variance (ddof=0) is S2/C - (S/C)²: S2/C and S/C come from :func:`ratio_interval`
    (S2 >= 0), the square of an interval is taken exactly, and the difference by interval
    arithmetic; variance >= 0. Sample variance (ddof=1) multiplies by C/(C-1), which decreases
    in C, so its range is [c_hi/(c_hi-1), c_lo/(c_lo-1)] (unbounded if C may be < 2). With
    ``bounds`` = (lower, upper), Popoviciu's inequality caps the population variance at
    (upper - lower)²/4, and the sample variance at twice that (n/(n-1) <= 2).
    Use each input interval at confidence 1 - (1 - c)/3 for joint confidence c.
    """
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 or 1, got {ddof}")
    m2_lo, m2_hi = ratio_interval(max(s2, 0.0), s2_half, c, c_half)
    m2_lo = max(m2_lo, 0.0)
    m_lo, m_hi = ratio_interval(s, s_half, c, c_half, bounds=bounds)
    sq_hi = max(m_lo * m_lo, m_hi * m_hi)
    sq_lo = 0.0 if m_lo <= 0 <= m_hi else min(m_lo * m_lo, m_hi * m_hi)
    lo, hi = max(0.0, m2_lo - sq_hi), m2_hi - sq_lo
    cap = math.inf
    if bounds is not None:
        cap = (float(bounds[1]) - float(bounds[0])) ** 2 / 4
    if ddof == 1:
        c_lo, c_hi = c - abs(c_half), c + abs(c_half)
        factor_hi = c_lo / (c_lo - 1) if c_lo >= 2 else math.inf
        factor_lo = c_hi / (c_hi - 1) if c_hi >= 2 else 1.0
        # (a zero bound stays zero: 0 · inf would be NaN)
        lo, hi = lo * factor_lo, (hi * factor_hi if hi > 0 else 0.0)
        cap *= 2
    hi = min(hi, cap)
    return (lo, hi) if lo <= hi else (0.0, cap)


def stddev_interval(
    s2: float,
    s2_half: float,
    s: float,
    s_half: float,
    c: float,
    c_half: float,
    *,
    bounds: tuple[float, float] | None = None,
    ddof: int = 0,
) -> tuple[float, float]:
    """sqrt of :func:`variance_interval` (sqrt is increasing, so the interval maps exactly)."""
    lo, hi = variance_interval(s2, s2_half, s, s_half, c, c_half, bounds=bounds, ddof=ddof)
    return math.sqrt(lo), math.sqrt(hi)
