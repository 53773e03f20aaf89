"""The exponential mechanism for quantiles (MEDIAN, PERCENTILE_CONT, MIN, MAX), sampled exactly.

A quantile is released as one *candidate* of a fixed grid over the column's declared bounds: the
engine computes, per group, only a histogram of the rows' grid cells (never a value), and the
mechanism picks cell g with probability ∝ exp(-ε·U(g) / (2Δ)) (McSherry–Talwar 2007), where

    U(g) = max(0, C<(g) - q·n, q·n - C≤(g))

is how many rows the q-quantile's rank is away from g (C<(g): rows below cell g, C≤(g): rows
in cells up to g, n: all rows; U(g) = 0 exactly when g holds a q-quantile). Everything is
scaled by the denominator b of q = a/b, so utilities are integers.

Sensitivity Δ of U (per row, in the scaled units): adding or removing a row moves C<, C≤ by at
most 1 each and q·n by q, so each term moves by at most max(q, 1-q): Δ = max(a, b - a). Under
*replace* a row moves between cells with n fixed: C<, C≤ move by at most 1: Δ = b. A unit with r
rows in the group moves U by at most r·Δ, so its loss is r·ε (linear growth, as for counts).

Cost of one release with parameter ε: ε-DP (McSherry–Talwar); ApproxDP(ε, 0); ε²/8-zCDP, since
the exponential mechanism is ε-bounded-range and ε-BR implies ε²/8-zCDP (Cesar–Rogers 2021,
Lemma 3.2); μ-GDP through ``pure_to_gdp`` (ε-DP ⇒ μ-GDP, Dong–Roth–Su). r rows: (r·ε)²/8 is
r² times; μ(r·ε) <= r·μ(ε) by the concavity of pure_to_gdp (the accountant's square growth).

For q = 0 (MIN) and q = 1 (MAX) under *add/remove* the utilities are monotone: U = C<(g)
(rows below g) for q = 0 and U = n - C≤(g) (rows above g) for q = 1, so adding a row raises
every U(g) by 0 or 1 and removing one lowers every U(g) by 0 or 1. Then exp(-ε·U/Δ), without
the 2, is ε-DP (McSherry–Talwar 2007): adding a row multiplies cell g's weight by e^(-ε·d_g),
d_g in [0, 1], so the normaliser Z only shrinks, by at most e^(-ε); P(g) changes by
e^(-ε·d_g)·Z/Z', within [e^(-ε), e^ε]. Its log-ratio over g spans at most ε, so it is also
ε-bounded-range: the same costs as above for the same ε, with utilities counted at twice the
rate (``monotone=True``; half the rank error). Under *replace* one row moved from cell a to
cell b also moves every U(g) one way (for q = 0, -1 for a < g <= b or +1 for b < g <= a), but a
unit of several rows replaced by others does not (its old rows lower some utilities, its new
rows raise others), so the 2 stays under replace. No other q is monotone (the median's
utility falls on one side of a new row and rises on the other). (Checked by enumerating
neighbouring histograms in ``tests/mechanisms/test_exponential.py``: every probability ratio
within e^ε, and e^ε approached.)

Utilities are exact integers: int64 when b·n < 2^62 (then every term fits), Python ints
otherwise. q is read from its decimal text, so b divides a power of ten; the planner refuses a
q with more than :data:`Q_DECIMALS` decimal places (b <= 10^9), so int64 holds every group of
fewer than 4.6·10^9 rows and the sampler's float pass decides every pick (see
:mod:`privplan.mechanisms.race`).

Sampling is exact and its work does not depend on the data: the winner is the first arrival of
an exponential race among all cells, decided by rigorous float bounds and, with probability
about 1e-13, refined in exact decimal arithmetic (:mod:`privplan.mechanisms.race`). (It
replaced a rejection sampler whose number of proposals followed the utilities: a timing
channel.)

Privacy: the engine gives only cell counts on a policy-fixed grid; Δ is proven per neighbourhood.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from math import isqrt
from typing import Any, Final

import numpy as np

from privplan.accounting.definitions import KINDS, ZCDP, PrivacyValue, PureDP
from privplan.accounting.definitions.value import cost_in
from privplan.errors import InternalError, UnsupportedQueryError
from privplan.mechanisms import samplers
from privplan.mechanisms.race import race
from privplan.mechanisms.samplers import Int64Array

__all__ = ["Q_DECIMALS", "ExponentialMechanism", "cell_counts", "monotone_utility",
           "quantile_utilities", "rank_sensitivity"]

Q_DECIMALS: Final = 9
"""Most decimal places of a quantile's q (its denominator b divides 10^9; see the module
docstring for why; a q that differs by less than 10^-9 moves the target rank by less than one
row in groups of fewer than 10^9 rows)."""
_DENOMINATOR = 1 << 20  # ε from ρ or μ is rounded down to a multiple of 2^-20
_INT64_SAFE: Final = 1 << 62  # int64 arithmetic on values below this cannot overflow


def rank_sensitivity(q: Fraction, *, replace: bool) -> int:
    """Δ of the scaled utility for one row (see the module docstring)."""
    a, b = q.numerator, q.denominator
    return b if replace else max(a, b - a)


def monotone_utility(q: Fraction, *, replace: bool) -> bool:
    """Whether every utility moves the same way when a row is added or removed: q = 0 or 1
    under add/remove (see the module docstring)."""
    return not replace and q in (0, 1)


def cell_counts(histogram: Any, lo: int, hi: int) -> np.ndarray:
    """Rows per cell lo..hi (index 0 is cell lo) from one group's histogram, a dict {cell:
    rows} (anything else, e.g. NULL for a group without rows: no rows).

    Total on any input: the engine's cells lie in [lo, hi] (the grid is exact in its double
    arithmetic, :func:`privplan.mechanisms.grid.check_double_grid`), and a cell outside would
    count at the nearer end, as the clamp would have put it, never index out of the array; a
    negative count counts as 0. int64 when the total provably fits, else Python ints."""
    cells = hi - lo + 1
    if not isinstance(histogram, dict) or not histogram:
        return np.zeros(cells, dtype=np.int64)
    size = len(histogram)
    try:
        keys = np.fromiter(histogram.keys(), dtype=np.int64, count=size)
        rows = np.fromiter(histogram.values(), dtype=np.int64, count=size)
        if -_INT64_SAFE < lo <= hi < _INT64_SAFE and int(rows.max()) < _INT64_SAFE // size:
            counts = np.zeros(cells, dtype=np.int64)
            np.add.at(counts, np.clip(keys, lo, hi) - lo, np.maximum(rows, 0))
            return counts
    except (OverflowError, TypeError, ValueError):
        pass
    exact = [0] * cells  # Python ints: anything an engine could return
    for key, rows_ in histogram.items():
        exact[min(max(_integer(key, hi), lo), hi) - lo] += max(_integer(rows_, 0), 0)
    return np.array(exact, dtype=np.int64 if sum(exact) < _INT64_SAFE else object)


def _integer(value: Any, otherwise: int) -> int:
    """``value`` as an int; an infinity as ±2^64 (clamped by the caller); anything else that is
    no number (NaN: the engine's clamp puts it at the top) as ``otherwise``."""
    try:
        return int(value)
    except OverflowError:
        return -(1 << 64) if value < 0 else 1 << 64
    except (TypeError, ValueError):
        return otherwise


def quantile_utilities(counts: np.ndarray, q: Fraction) -> np.ndarray:
    """U(g) for every cell of one group's histogram (``counts[g]`` >= 0 rows in cell g), scaled
    by the denominator of q: exact integers, 0 where g holds a q-quantile. int64 when b·n <
    2^62 (every term is at most b·n), else an object array of Python ints."""
    a, b = q.numerator, q.denominator
    counts = np.asarray(counts)
    if counts.dtype != object and counts.size and int(counts.max()) < _INT64_SAFE // counts.size:
        n = int(counts.sum())  # (below 2^62: no overflow)
    else:
        n = sum(int(c) for c in counts.tolist())
    if counts.dtype != object and b * n < _INT64_SAFE:
        counts = counts.astype(np.int64, copy=False)
    else:
        counts = np.array([int(c) for c in counts.tolist()], dtype=object)
    below_or_at = np.cumsum(counts)
    below = below_or_at - counts
    target = a * n
    return np.maximum(0, np.maximum(b * below - target, target - b * below_or_at))


_EPSILON_OF: dict[str, Callable[[Fraction], Fraction]] = {
    "epsilon": lambda eps: eps,  # (its ε-DP guarantee)
    "rho": lambda rho: Fraction(isqrt(int(8 * rho * _DENOMINATOR**2)), _DENOMINATOR),  # ε²/8 <= ρ
}
"""ε from a parameter a budget names, by inverting :meth:`ExponentialMechanism.guarantees`."""


@dataclass(frozen=True)
class ExponentialMechanism:
    """Pick a grid cell with probability ∝ exp(-ε·U/(2Δ)) (``monotone``: ∝ exp(-ε·U/Δ), for
    utilities that move one way between neighbours); ``epsilon`` is ε (a Fraction)."""

    epsilon: Fraction
    monotone: bool = False

    def guarantees(self) -> tuple[PureDP, ZCDP]:
        """ε-DP (McSherry–Talwar) and, being ε-bounded-range, (ε²/8)-zCDP (Cesar–Rogers 2021);
        in other definitions the ε-DP guarantee's conversions (see the module docstring)."""
        return PureDP(self.epsilon), ZCDP(self.epsilon * self.epsilon / 8)

    def cost(self, kind: type[PrivacyValue]) -> PrivacyValue:
        """The cost of one release in the definition ``kind`` (see the module docstring)."""
        cost = cost_in(kind, self.guarantees()) if kind in KINDS else None
        if cost is None:
            raise TypeError(f"unknown privacy definition {kind!r}")
        return cost

    @classmethod
    def calibrate(cls, budget: PrivacyValue, *, monotone: bool = False) -> ExponentialMechanism:
        """The largest ε (rounded down to a simple rational) whose cost fits ``budget``;
        ``monotone``: the utilities are monotone (:func:`monotone_utility`). The budget names
        the parameters it buys (:meth:`PrivacyValue.calibration`); ε is read from the first
        one a guarantee of the mechanism inverts (ε itself, or ε = sqrt(8ρ) rounded down)."""
        if not isinstance(budget, KINDS):
            raise TypeError(f"budget must be PureDP, ApproxDP, ZCDP or GDP, got {budget!r}")
        eps = next((_EPSILON_OF[name](value) for name, value in budget.calibration()
                    if name in _EPSILON_OF), Fraction(0))
        if eps.denominator > _DENOMINATOR:
            eps = Fraction(eps.numerator * _DENOMINATOR // eps.denominator, _DENOMINATOR)
        if eps <= 0:
            raise UnsupportedQueryError(
                f"the budget {budget.describe()} is too small for a quantile: give the query a "
                "larger budget.")
        mech = cls(eps, monotone)
        if not mech.cost(type(budget)) <= budget:
            raise InternalError(f"exponential mechanism ε={eps} costs more than {budget!r}")
        return mech

    def describe(self) -> str:
        how = " (monotone utility)" if self.monotone else ""
        return f"exponential mechanism{how}, ε {float(self.epsilon):.4g}"

    def rate(self, sensitivity: int) -> Fraction:
        """The exact exponent per unit of utility: cell g's weight is exp(-rate·U(g)), rate =
        ε/(2Δ), or ε/Δ for monotone utilities (see the module docstring)."""
        return self.epsilon / ((1 if self.monotone else 2) * sensitivity)

    def rank_error(self, candidates: int, sensitivity: int, q: Fraction,
                   confidence: float = 0.95) -> float:
        """With probability ``confidence`` the released cell's rank is within this many rows
        of the q-quantile's: P(U >= U* + t) <= candidates·exp(-rate·t) (the standard
        exponential-mechanism bound; rate = ε/(2Δ), ε/Δ when monotone), solved for t and
        unscaled."""
        t = math.log(candidates / (1 - confidence)) / float(self.rate(sensitivity))
        return max(0.0, t / q.denominator)

    def select(self, utilities: list[np.ndarray], sensitivity: int) -> Int64Array:
        """One cell index per group, each drawn exactly from the exponential mechanism over
        that group's ``utilities`` (exact integers; see :func:`quantile_utilities`), by an
        exponential race whose work does not depend on them (:mod:`privplan.mechanisms.race`).
        With seeded noise (tests) the picks are a function of the seed and the utilities, so
        every engine that computes the same histograms releases the same cells."""
        if not utilities:
            return np.zeros(0, dtype=np.int64)
        if samplers._NOISE_DISABLED.get():  # tests only: the best cell (lowest index on ties)
            return np.array([int(np.argmin(u)) for u in utilities], dtype=np.int64)
        gaps = [u - u.min() for u in utilities]  # U - U* >= 0: the same law, γ >= 0
        return race(gaps, self.rate(sensitivity), samplers._source())
