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

Sampling is exact: candidates are proposed uniformly and accepted with probability
exp(-ε·(U(g) - U*)/(2Δ)) (U* the smallest utility, so the best candidate is always accepted),
an exact Bernoulli(exp(-γ)) of a rational γ (Canonne–Kamath–Steinke Alg. 1). The accepted
candidate has exactly the exponential mechanism's law; no floating point decides anything.
The number of proposals depends on the utilities (a timing side channel shared by every
rejection sampler; it is bounded by the number of candidates in expectation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from math import isqrt

import numpy as np

from privplan.accounting.conversions import gdp_to_pure_epsilon, pure_to_gdp
from privplan.accounting.definitions import GDP, ZCDP, ApproxDP, PrivacyValue, PureDP
from privplan.errors import InternalError, UnsupportedQueryError
from privplan.mechanisms import samplers
from privplan.mechanisms.samplers import Int64Array, _bernoulli_exp, _Fractions

__all__ = ["ExponentialMechanism", "quantile_utilities", "rank_sensitivity"]

_PROPOSALS = 64  # candidates proposed per pending group per round
_DENOMINATOR = 1 << 20  # ε from ρ or μ is rounded down to a multiple of 2^-20


def rank_sensitivity(q: Fraction, *, replace: bool) -> int:
    """Δ of the scaled utility for one row (see the module docstring)."""
    a, b = q.numerator, q.denominator
    return b if replace else max(a, b - a)


def quantile_utilities(counts: np.ndarray, q: Fraction) -> np.ndarray:
    """U(g) for every cell of one group's histogram (``counts[g]`` rows in cell g), scaled by
    the denominator of q: integers, 0 where g holds a q-quantile."""
    a, b = q.numerator, q.denominator
    counts = np.asarray(counts, dtype=np.int64)
    below_or_at = np.cumsum(counts)
    below = below_or_at - counts
    target = a * int(below_or_at[-1]) if counts.size else 0
    return np.maximum(0, np.maximum(b * below - target, target - b * below_or_at))


@dataclass(frozen=True)
class ExponentialMechanism:
    """Pick a grid cell with probability ∝ exp(-ε·U/(2Δ)); ``epsilon`` is ε (a Fraction)."""

    epsilon: Fraction

    def cost(self, kind: type[PrivacyValue]) -> PrivacyValue:
        """The cost of one release in the definition ``kind`` (see the module docstring)."""
        eps = self.epsilon
        if kind is PureDP:
            return PureDP(eps)
        if kind is ApproxDP:
            return ApproxDP(eps, 0)
        if kind is ZCDP:
            return ZCDP(eps * eps / 8)
        if kind is GDP:
            return pure_to_gdp(PureDP(eps))
        raise TypeError(f"unknown privacy definition {kind!r}")

    @classmethod
    def calibrate(cls, budget: PrivacyValue) -> ExponentialMechanism:
        """The largest ε (rounded down to a simple rational) whose cost fits ``budget``."""
        if isinstance(budget, PureDP | ApproxDP):
            eps = budget.exact_epsilon
        elif isinstance(budget, ZCDP):  # ε = sqrt(8ρ), rounded down
            eps = Fraction(isqrt(int(8 * budget.exact_rho * _DENOMINATOR**2)), _DENOMINATOR)
        elif isinstance(budget, GDP):
            eps = gdp_to_pure_epsilon(budget.exact_mu).exact_epsilon
        else:
            raise TypeError(f"budget must be PureDP, ApproxDP, ZCDP or GDP, got {budget!r}")
        if eps.denominator > _DENOMINATOR:
            eps = Fraction(eps.numerator * _DENOMINATOR // eps.denominator, _DENOMINATOR)
        if eps <= 0:
            raise UnsupportedQueryError(
                f"the budget {budget.describe()} is too small for a quantile: give the query a "
                "larger budget.")
        mech = cls(eps)
        if not mech.cost(type(budget)) <= budget:
            raise InternalError(f"exponential mechanism ε={eps} costs more than {budget!r}")
        return mech

    def describe(self) -> str:
        return f"exponential mechanism, ε {float(self.epsilon):.4g}"

    def rank_error(self, candidates: int, sensitivity: int, q: Fraction,
                   confidence: float = 0.95) -> float:
        """With probability ``confidence`` the released cell's rank is within this many rows
        of the q-quantile's: P(U >= U* + t) <= candidates·exp(-ε t/(2Δ)) (the standard
        exponential-mechanism bound), solved for t and unscaled."""
        t = 2 * sensitivity / float(self.epsilon) * math.log(candidates / (1 - confidence))
        return max(0.0, t / q.denominator)

    def select(self, utilities: list[np.ndarray], sensitivity: int) -> Int64Array:
        """One cell index per group, each drawn exactly from the exponential mechanism over
        that group's ``utilities`` (scaled integers; see :func:`quantile_utilities`)."""
        groups = len(utilities)
        out = np.zeros(groups, dtype=np.int64)
        if groups == 0:
            return out
        if samplers._NOISE_DISABLED.get():  # tests only: the best cell (lowest index on ties)
            return np.array([int(np.argmin(u)) for u in utilities], dtype=np.int64)
        src = samplers._source()
        width = max(u.size for u in utilities)
        table = np.full((groups, width), -1, dtype=np.int64)  # -1: no such candidate
        for i, u in enumerate(utilities):
            table[i, : u.size] = u - u.min()  # (every U - U* is >= 0; the best is accepted)
        sizes = np.array([u.size for u in utilities], dtype=np.int64)
        # γ = ε (U - U*) / (2Δ) = num (U - U*) / den
        num, den = self.epsilon.numerator, 2 * sensitivity * self.epsilon.denominator
        pending = np.arange(groups)
        while pending.size:
            lanes = np.repeat(pending, _PROPOSALS)
            picks = np.empty(lanes.size, dtype=np.int64)
            for size in np.unique(sizes[pending]).tolist():
                on = sizes[lanes] == size
                picks[on] = src.uniform_ints(int(on.sum()), int(size))
            gaps = table[lanes, picks]
            whole: samplers.IntArray
            if int(gaps.max()) * num < samplers.MAX_BOUND:  # int64 arithmetic is exact here
                scaled = gaps * num
                whole, frac = scaled // den, _Fractions.of(scaled % den, den)
            else:  # Python integers
                big = [int(g) * num for g in gaps.tolist()]
                whole = samplers._int_array([b // den for b in big])
                frac = _Fractions.of(samplers._int_array([b % den for b in big]), den)
            accepted = _bernoulli_exp(src, whole, frac)
            done = []
            for j, group in enumerate(pending.tolist()):
                hits = np.flatnonzero(accepted[j * _PROPOSALS:(j + 1) * _PROPOSALS])
                if hits.size:  # the first accepted proposal, in proposal order
                    out[group] = picks[j * _PROPOSALS + int(hits[0])]
                    done.append(j)
            pending = np.delete(pending, done)
        return out
