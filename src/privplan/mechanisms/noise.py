"""Calibrated integer noise: discrete Laplace and discrete Gaussian, their costs, and calibration.

A released value is an integer (an aggregate on an integer grid, see :mod:`.grid`) whose
*sensitivity* Δ is a positive integer: one privacy unit changes it by at most Δ. Noise is added
by exact samplers (:mod:`.samplers`). Every cost below says which theorem bounds it.

Privacy: noise is calibrated to a proven cost within its share; a budget too small is refused.

>>> from privplan.accounting.definitions import PureDP
>>> calibrate(1, PureDP("0.5"))
DiscreteLaplace(scale=Fraction(2, 1))
>>> calibrate(1, PureDP("0.5")).cost(1, PureDP) == PureDP("0.5")
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Final

import numpy as np
from numpy.typing import ArrayLike

from privplan.accounting.definitions import GDP, KINDS, ZCDP, PrivacyValue, PureDP
from privplan.accounting.definitions.value import DeltaNeeded, cost_in, route
from privplan.errors import InternalError, UnsupportedQueryError
from privplan.mechanisms.rounded_gaussian import sample_rounded_gaussian
from privplan.mechanisms.samplers import (
    Int64Array,
    sample_discrete_gaussian,
    sample_discrete_laplace,
)

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "NoiseMechanism",
    "RoundedGaussian",
    "add_noise",
    "calibrate",
    "noise_columns",
]


def _special() -> Any:
    """scipy.special, imported when a Gaussian interval or probability is first asked for: a
    pure-DP answer never loads scipy (~0.25 s of a one-query process such as the CLI)."""
    from scipy import special

    return special


#: Calibrated parameters are rounded *up* (more noise, never less) to this denominator, so that
#: budgets with long exact fractions still give small integers in the samplers' fast path.
CALIBRATION_DENOMINATOR: Final = 1 << 20

_GAUSSIAN_PURE_DP: Final = (
    "Gaussian noise cannot give pure DP; use Laplace noise with an epsilon budget, "
    "or switch to a ZCDP budget"
)
_GAUSSIAN_GDP: Final = (
    "the discrete Gaussian's Gaussian-DP (mu) cost is not implemented: privplan has no proven "
    "mu bound for it (its mu is above sensitivity/sigma). With a GDP budget, calibrate() uses "
    "the rounded Gaussian, whose mu is exactly sensitivity/sigma"
)


def _sensitivity(sensitivity: int) -> int:
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, int | np.integer):
        raise TypeError(f"sensitivity must be a positive int, got {type(sensitivity).__name__}")
    if sensitivity < 1:
        raise ValueError(f"sensitivity must be a positive integer, got {sensitivity}")
    return int(sensitivity)


def _positive_fraction(value: object, name: str, owner: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | Fraction):
        raise TypeError(f"{owner}: {name} must be an int or Fraction, got {type(value).__name__}")
    value = Fraction(value)
    if value <= 0:
        raise ValueError(f"{owner}: {name} must be positive, got {value}")
    return value


def _fmt(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else format(float(x), ".6g")


_NEEDS_DELTA: Final = ("the (epsilon, delta) cost of Gaussian noise needs a delta: pass delta=, "
                       "e.g. 1e-6")


def _charged(guarantees: Sequence[PrivacyValue], kind: type[PrivacyValue], delta: object,
             refusal: str) -> PrivacyValue:
    """A release's cost in ``kind``: the noise's guarantee of that kind, else the first that
    converts there (at ``delta`` where it reads a δ); ``refusal`` when none does."""
    if kind not in KINDS:
        names = [k.__name__ for k in KINDS]
        raise TypeError(f"unknown privacy definition {kind!r}: use {', '.join(names[:-1])} or "
                        f"{names[-1]}")
    try:
        cost = cost_in(kind, guarantees, delta)
    except DeltaNeeded:
        raise UnsupportedQueryError(_NEEDS_DELTA) from None
    if cost is None:
        raise UnsupportedQueryError(refusal)
    return cost


@dataclass(frozen=True)
class DiscreteLaplace:
    """Discrete Laplace noise with scale t: P(z) ∝ exp(-|z|/t) on the integers.

    Its ratio P(z)/P(z+Δ) is at most exp(Δ/t) for every z, so with sensitivity Δ it is
    (Δ/t)-DP (the geometric mechanism, Ghosh–Roughgarden–Sundararajan 2009).
    """

    scale: Fraction
    calibrated_by: ClassVar[str] = "epsilon"  # (a budget's ε: see PrivacyValue.calibration)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "scale", _positive_fraction(self.scale, "scale", "DiscreteLaplace")
        )

    @classmethod
    def calibrated(cls, sensitivity: int, epsilon: Fraction) -> DiscreteLaplace:
        """t = Δ/ε, rounded up: ε-DP (or less)."""
        return cls(_round_up(sensitivity / epsilon))

    def sample(self, size: int) -> Int64Array:
        """``size`` exact, independent noise values (int64)."""
        return sample_discrete_laplace(self.scale, size)

    def epsilon(self, sensitivity: int) -> Fraction:
        """Δ/t exactly: the pure-DP loss for sensitivity Δ."""
        return Fraction(_sensitivity(sensitivity)) / self.scale

    def cost(
        self, sensitivity: int, kind: type[PrivacyValue], *, delta: object = None
    ) -> PrivacyValue:
        """The privacy cost of one release with sensitivity Δ, in the definition ``kind``.

        PureDP(ε = Δ/t) exactly; ApproxDP(ε, 0) (pure DP is (ε, 0)-DP, ``delta`` is ignored);
        ZCDP(ε²/2) (Bun–Steinke 2016 Prop. 1.4); GDP through ``pure_to_gdp`` (Dong–Roth–Su,
        the ε-DP tradeoff function dominates G_μ), rounded up there: the conversions of ε-DP
        (its definition's, :mod:`privplan.accounting.definitions.pure`).
        """
        guarantee = PureDP(self.epsilon(sensitivity))
        return _charged((guarantee,), kind, delta, "no bound for Laplace noise")

    def variance(self) -> float:
        """2 e^{-1/t} / (1 - e^{-1/t})², the variance of the discrete Laplace (2t² - 1/6 +
        O(1/t²) for large t, which is what is returned once (1 - e^{-1/t})² underflows)."""
        inv = 1 / self.scale
        if inv > 745:  # e^{-1/t} underflows: the noise is 0 with probability ~1
            return 0.0
        q = math.exp(-float(inv))
        gap = math.expm1(-float(inv)) ** 2
        if gap == 0.0:  # t above ~1e154: the closed form's denominator underflows
            return 2 * float(self.scale) ** 2 if self.scale < 1e154 else math.inf
        return 2 * q / gap

    def std(self) -> float:
        """Standard deviation of the noise."""
        return math.sqrt(self.variance())

    def describe(self) -> str:
        return f"discrete Laplace, scale {_fmt(self.scale)}"


@dataclass(frozen=True)
class DiscreteGaussian:
    """Discrete Gaussian noise with variance parameter σ²: P(z) ∝ exp(-z²/(2σ²)) on the integers.

    With sensitivity Δ it is (Δ²/(2σ²))-zCDP (Canonne–Kamath–Steinke 2020, Theorem 4). It is
    never pure DP: the privacy loss (Δ² - 2Δz)/(2σ²) is unbounded in z. It is NOT (Δ/σ)-GDP
    either: for σ = Δ = 1 the test "reject iff z >= 1" has α = β = a = P(Z >= 1) = 0.3005, and
    G_μ(a) <= a needs μ >= 2Φ^{-1}(1 - a) = 1.0458 > 1. Its GDP cost is therefore refused.
    """

    sigma2: Fraction
    calibrated_by: ClassVar[str] = "rho"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sigma2", _positive_fraction(self.sigma2, "sigma2", "DiscreteGaussian")
        )

    @classmethod
    def calibrated(cls, sensitivity: int, rho: Fraction) -> DiscreteGaussian:
        """σ² = Δ²/(2ρ), rounded up: ρ-zCDP (or less)."""
        return cls(_round_up(Fraction(sensitivity * sensitivity) / (2 * rho)))

    def sample(self, size: int) -> Int64Array:
        """``size`` exact, independent noise values (int64)."""
        return sample_discrete_gaussian(self.sigma2, size)

    def rho(self, sensitivity: int) -> Fraction:
        """Δ²/(2σ²) exactly (CKS 2020, Theorem 4)."""
        d = _sensitivity(sensitivity)
        return Fraction(d * d) / (2 * self.sigma2)

    def cost(
        self, sensitivity: int, kind: type[PrivacyValue], *, delta: object = None
    ) -> PrivacyValue:
        """The privacy cost of one release with sensitivity Δ, in the definition ``kind``.

        ZCDP(Δ²/(2σ²)) (CKS Thm 4); ApproxDP via ``zcdp_to_approx`` at the given ``delta``
        (required); PureDP and GDP raise :class:`UnsupportedQueryError` (no pure bound exists;
        no proven μ bound is implemented).
        """
        guarantee = ZCDP(self.rho(sensitivity))
        # where the rounded Gaussian can be charged, what is missing is the discrete Gaussian's
        # own μ bound; where it cannot (pure DP), no Gaussian noise fits
        gaussian = route(kind, RoundedGaussian(Fraction(1)).guarantees(1))
        return _charged((guarantee,), kind, delta,
                        _GAUSSIAN_GDP if gaussian is not None else _GAUSSIAN_PURE_DP)

    def variance(self) -> float:
        """Var = Σ z² e^{-z²/2σ²} / Σ e^{-z²/2σ²}: below σ², and within 1e-30 of it for σ >= 2."""
        s2 = float(self.sigma2)
        if s2 >= 4:  # Poisson summation: the relative gap is ~ 4π²σ² e^{-2π²σ²} < 1e-30
            return s2
        z = np.arange(1, 64, dtype=np.float64)  # e^{-z²/2σ²} < 1e-200 beyond |z| = 64 here
        w = np.exp(-(z * z) / (2 * s2))
        return float(2 * (z * z * w).sum() / (1 + 2 * w.sum()))

    def std(self) -> float:
        """Standard deviation of the noise (at most σ)."""
        return math.sqrt(self.variance())

    def describe(self) -> str:
        return (
            f"discrete Gaussian, sigma^2 {_fmt(self.sigma2)} "
            f"(sigma {format(math.sqrt(float(self.sigma2)), '.4g')})"
        )


@dataclass(frozen=True)
class RoundedGaussian:
    """Gaussian noise rounded to the nearest integer: round(σZ), Z standard normal.

    P(n) = Φ((n + 1/2)/σ) − Φ((n − 1/2)/σ). Added to an integer f(D) it releases
    round(f(D) + σZ): the Gaussian mechanism, then rounding (post-processing). With sensitivity
    Δ it is therefore exactly (Δ/σ)-GDP (Dong–Roth–Su 2022, Thm 2.7 and Prop. 2.8) and
    (Δ²/(2σ²))-zCDP (Bun–Steinke 2016, Prop. 1.6 and Lemma 1.8): the bounds are tight for the
    unrounded mechanism, so nothing is lost in the accounting — only the rounding's 1/12 of
    variance. It is what μ-GDP budgets get: the discrete Gaussian's μ is above Δ/σ (1.0458 at
    σ = Δ = 1, see :class:`DiscreteGaussian`) and has no proven bound here. Sampled exactly
    (Karney 2016, :mod:`.rounded_gaussian`).
    """

    sigma: Fraction
    calibrated_by: ClassVar[str] = "mu"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sigma", _positive_fraction(self.sigma, "sigma", "RoundedGaussian")
        )

    @classmethod
    def calibrated(cls, sensitivity: int, mu: Fraction) -> RoundedGaussian:
        """σ = Δ/μ, rounded up: μ-GDP (or less)."""
        return cls(_round_up(sensitivity / mu))

    def guarantees(self, sensitivity: int) -> tuple[GDP, ZCDP]:
        """(Δ/σ)-GDP and (Δ²/(2σ²))-zCDP, both exact for the Gaussian mechanism."""
        mu = self.mu(sensitivity)
        return GDP(mu), ZCDP(mu * mu / 2)

    def sample(self, size: int) -> Int64Array:
        """``size`` exact, independent noise values (int64)."""
        return sample_rounded_gaussian(self.sigma, size)

    def mu(self, sensitivity: int) -> Fraction:
        """Δ/σ exactly: the Gaussian mechanism's μ (Dong–Roth–Su Thm 2.7)."""
        return Fraction(_sensitivity(sensitivity)) / self.sigma

    def cost(
        self, sensitivity: int, kind: type[PrivacyValue], *, delta: object = None
    ) -> PrivacyValue:
        """The privacy cost of one release with sensitivity Δ, in the definition ``kind``.

        GDP(Δ/σ) and ZCDP(Δ²/(2σ²)) exactly; ApproxDP through ``gdp_to_approx`` at ``delta``
        (required; the exact Gaussian (ε, δ) curve, Dong–Roth–Su Cor. 2.13, rounded up);
        PureDP raises :class:`UnsupportedQueryError` (the privacy loss is unbounded).
        """
        return _charged(self.guarantees(sensitivity), kind, delta, _GAUSSIAN_PURE_DP)

    def variance(self) -> float:
        """Σ n² P(n): σ² + 1/12 for σ >= 4 (Sheppard's correction; by Poisson summation the
        error is ~ e^{-2π²σ²} < 1e-130), else summed over |n| <= 40σ + 2."""
        if self.sigma > 10**154:  # σ² is no float (and no such noise is ever calibrated)
            return math.inf
        s = float(self.sigma)
        if s >= 4:
            return s * s + 1 / 12
        n = np.arange(1, int(40 * s) + 3, dtype=np.float64)
        # P(n) + P(-n) = erfc((n - 1/2)/(σ√2)) - erfc((n + 1/2)/(σ√2)), both tails at once
        both = _special().erfc((n - 0.5) / (s * math.sqrt(2))) - _special().erfc(
            (n + 0.5) / (s * math.sqrt(2)))
        return float((n * n * both).sum())

    def std(self) -> float:
        """Standard deviation of the noise."""
        return math.sqrt(self.variance())

    def describe(self) -> str:
        return f"rounded Gaussian, sigma {_fmt(self.sigma)}"


NoiseMechanism = DiscreteLaplace | DiscreteGaussian | RoundedGaussian


def _round_up(x: Fraction) -> Fraction:
    """x rounded *up* to a simple rational: an integer if x >= 2^20, else a multiple of 2^-20.

    The relative increase is below 2^-20 (more noise, never less), and small numerators and
    denominators keep the exact samplers on their fast int64 path.
    """
    if x >= CALIBRATION_DENOMINATOR:
        return Fraction(-(-x.numerator // x.denominator))
    if x.denominator <= CALIBRATION_DENOMINATOR:
        return x
    return Fraction(
        -(-x.numerator * CALIBRATION_DENOMINATOR // x.denominator), CALIBRATION_DENOMINATOR
    )


MAX_NOISE_STD = float(2**56)
"""Largest noise standard deviation calibrated: answers are 64-bit integers on the grid (exact
values below 2^62, see :mod:`privplan.mechanisms.grid`), and noise of 2^6 such standard
deviations (probability below e^-60) still fits beside them."""


_NOISES: Final[dict[str, type[DiscreteLaplace | DiscreteGaussian | RoundedGaussian]]] = {
    n.calibrated_by: n for n in (DiscreteLaplace, DiscreteGaussian, RoundedGaussian)}
"""The noise calibrated to each parameter a budget names (:meth:`PrivacyValue.calibration`)."""


def calibrate(sensitivity: int, budget: PrivacyValue) -> NoiseMechanism:
    """The noise that releases a value of sensitivity Δ within ``budget``.

    * PureDP(ε) → discrete Laplace, t = Δ/ε (cost exactly ε when t needs no rounding).
    * ApproxDP(ε, δ) → discrete Laplace, t = Δ/ε: it is (ε, 0)-DP, so δ is left unused.
    * ZCDP(ρ) → discrete Gaussian, σ² = Δ²/(2ρ) (CKS Thm 4: cost exactly ρ).
    * GDP(μ) → the rounded Gaussian with σ = Δ/μ (cost exactly μ), or discrete Laplace with
      ε = gdp_to_pure_epsilon(μ) (the largest ε whose μ fits) when its standard deviation is
      smaller (both are tried; in a sweep of μ from 0.5 to 12 the rounded Gaussian always won,
      by 1.7x at μ = 1, the two converging where both are almost always 0).

    Which parameters a budget names is its definition's (:meth:`PrivacyValue.calibration`);
    which noise each parameter calibrates is this module's (``calibrated_by``).

    Parameters are rounded *up* (only adding noise, by a relative 2^-20 at most): to an integer
    when >= 2^20, else to a multiple of 2^-20 when their exact denominator is larger. The
    result is checked: ``cost(Δ, type(budget))`` is within ``budget``, else
    :class:`InternalError`.
    """
    d = _sensitivity(sensitivity)
    if not isinstance(budget, KINDS):
        raise TypeError(
            f"budget must be PureDP, ApproxDP, ZCDP or GDP, got {type(budget).__name__}"
        )
    (first, value), *others = budget.calibration()
    mech: NoiseMechanism = _NOISES[first].calibrated(d, _positive_budget(value, budget))
    for parameter, other in others:  # (e.g. Laplace noise for a GDP budget: the less noisy)
        if other > 0:
            alternative = _NOISES[parameter].calibrated(d, other)
            if alternative.std() < mech.std():
                mech = alternative
    # the std of the discrete Laplace is about sqrt(2)·t and of the discrete Gaussian about σ
    # (compared exactly: such parameters overflow a float)
    too_noisy = (mech.scale > Fraction(MAX_NOISE_STD) / 2 if isinstance(mech, DiscreteLaplace)
                 else mech.sigma > Fraction(MAX_NOISE_STD) if isinstance(mech, RoundedGaussian)
                 else mech.sigma2 > Fraction(MAX_NOISE_STD) ** 2)
    if too_noisy:
        raise UnsupportedQueryError(
            f"the budget {budget.describe()} is too small for a value of sensitivity {d}: its "
            f"noise would have a standard deviation above {MAX_NOISE_STD:.3g}, more than "
            "64-bit answers can carry (and far beyond any useful answer). Give the query a "
            "larger budget.")
    spent = mech.cost(d, type(budget))
    if not spent <= budget:
        raise InternalError(f"calibrate: {mech.describe()} costs {spent!r} > budget {budget!r}")
    return mech


def _positive_budget(value: Fraction, budget: PrivacyValue) -> Fraction:
    if value <= 0:
        raise UnsupportedQueryError(
            f"cannot release a value with the budget {budget!r}: a zero privacy budget allows no "
            "noisy answer; give a positive epsilon, rho or mu"
        )
    return value


# --------------------------------------------------------------------------- noising tables


def add_noise(values: ArrayLike, noise: NoiseMechanism) -> Int64Array:
    """``values + noise`` for an int64 (or narrower integer) 1-D array, one vectorised draw.

    Overflow-checked: if an exact noisy value does not fit in int64 an
    :class:`UnsupportedQueryError` is raised. That decision is a function of the noisy values
    alone (post-processing), so it reveals nothing beyond them; :func:`.grid.check_no_overflow`
    keeps it from happening for bounded sums.
    """
    exact = np.asarray(values)
    if exact.ndim != 1:
        raise ValueError(f"add_noise expects a 1-D array, got shape {exact.shape}")
    if exact.size == 0:
        return np.zeros(0, dtype=np.int64)
    if exact.dtype.kind not in "iu" or (exact.dtype.kind == "u" and int(exact.max()) >= 1 << 63):
        raise TypeError(
            f"add_noise needs exact int64 values, got dtype {exact.dtype}: aggregate on the "
            "integer grid and replace NULL sums by 0 before noising"
        )
    exact = exact.astype(np.int64, copy=False)
    drawn = noise.sample(exact.size)
    noisy = exact + drawn  # wraps on overflow; detected below
    overflow = ((exact ^ noisy) & (drawn ^ noisy)) < 0
    if overflow.any():
        raise UnsupportedQueryError(
            "a noisy aggregate does not fit in a 64-bit integer: use a coarser grid resolution "
            "or tighter column bounds"
        )
    return noisy


def noise_columns(
    columns: Mapping[str, ArrayLike], noise: Mapping[str, NoiseMechanism]
) -> dict[str, Int64Array]:
    """Noise each column of an aggregate table: one vectorised draw per column.

    ``noise`` maps every column name of ``columns`` to its mechanism (a missing or extra name is
    an error, so no column is released un-noised by accident).
    """
    if set(columns) != set(noise):
        missing = sorted(set(columns) - set(noise))
        extra = sorted(set(noise) - set(columns))
        raise ValueError(f"noise_columns: no mechanism for {missing}; no column for {extra}")
    return {name: add_noise(values, noise[name]) for name, values in columns.items()}
