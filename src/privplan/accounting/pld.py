"""Pessimistic privacy-loss distributions (PLDs): optimal (ε, δ) composition, as upper bounds.

The privacy loss of a pair (P, Q) is L(o) = ln(P(o)/Q(o)) with o ~ P; its distribution (the PLD)
determines the whole privacy profile δ(ε) = E[(1 − e^{ε−L})_+] (the hockey-stick divergence, with
L = +∞ contributing 1). The loss of a composition is the sum of independent losses, so composing
is convolving (Meiser–Mohammadi 2018; Koskela–Jälkö–Honkela 2020; Zhu–Dong–Wang 2022).

A :class:`PrivacyLossDistribution` here holds masses on the grid {k·h} (h = ``interval``) plus
a mass at +∞, and is *pessimistic*: it is obtained from the true loss by moving mass only *up*
(rounding a loss up to the grid, moving a tail to +∞) or by adding mass. Why that is an upper
bound: (1 − e^{ε−x})_+ is non-decreasing in x and non-negative, so moving mass up or adding mass
only raises δ(ε); and both operations commute with convolution of non-negative measures, so a
composition of pessimistic PLDs is pessimistic for the composition (couple each L_i with its
rounded-up L_i' >= L_i: Σ L_i' >= Σ L_i). Every constructor describes a *dominating pair*
(Zhu–Dong–Wang 2022, Def. 7): a pair whose profile bounds the mechanism's for every neighbouring
pair, and dominating pairs compose, adaptively too (ibid., Thm 10). Each pair used here is
symmetric (the add and the remove direction have the same PLD), so one PLD serves both.

Floating point: sums of non-negative terms carry a relative error below 1e-9 for the array sizes
kept here; :meth:`epsilon_for_delta` and :meth:`delta_for_epsilon` add that margin. FFT rounding
errors are bounded and the bound is added at +∞ (:func:`_convolve`).

Privacy: every PLD is pessimistic (mass only moved up or added): δ(ε) is never below the true one.

>>> p = from_epsilon_delta(0.1, 0.0).self_compose(100)
>>> round(p.epsilon_for_delta(1e-6), 3)   # basic sum Σε = 10; advanced composition 5.757
4.782
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import signal, special, stats

DEFAULT_INTERVAL = 1e-4
"""The grid step h of the losses (the value discretisation interval)."""

TAIL_MASS = 1e-15
"""Mass a truncation may move (upper tail to +∞, lower tail up to the lowest kept point)."""

_FLOAT_MARGIN = 1e-9  # relative margin for float sums of non-negative terms
_DIRECT_LIMIT = 2_000_000  # n·m below which convolution is direct (np.convolve)


@dataclass(frozen=True, eq=False)
class PrivacyLossDistribution:
    """Masses ``probs[j]`` at losses (``offset`` + j)·``interval``, and ``infinity`` at +∞.

    The total may exceed 1 (pessimistic additions); it is never below the true mass anywhere
    above a loss. Build with :func:`from_epsilon_delta`, :func:`from_discrete_laplace`,
    :func:`from_gaussian`; compose with :meth:`compose` / :func:`compose`.
    """

    probs: np.ndarray
    offset: int
    infinity: float
    interval: float = DEFAULT_INTERVAL

    # -- composition ------------------------------------------------------------------------------
    def compose(self, other: PrivacyLossDistribution) -> PrivacyLossDistribution:
        """The PLD of both mechanisms run on the same data (losses add: a convolution)."""
        if other.interval != self.interval:
            raise ValueError("compose: the PLDs have different discretisation intervals")
        fin, err = _convolve(self.probs, other.probs)
        fa, fb = float(self.probs.sum()), float(other.probs.sum())
        inf = self.infinity * (fb + other.infinity) + other.infinity * fa + err
        return _truncated(fin, self.offset + other.offset, inf, self.interval)

    def self_compose(self, k: int) -> PrivacyLossDistribution:
        """k copies composed: a binomial for a two-point PLD, else repeated squaring."""
        if k < 0:
            raise ValueError("self_compose: k must be >= 0")
        if k == 0:
            return _identity(self.interval)
        nz = np.flatnonzero(self.probs)
        if len(nz) <= 2:
            return _two_point_power(self, nz, k)
        result: PrivacyLossDistribution | None = None
        base: PrivacyLossDistribution = self
        while True:
            if k & 1:
                result = base if result is None else result.compose(base)
            k >>= 1
            if not k:
                break
            base = base.compose(base)
        assert result is not None
        return result

    # -- the privacy profile ----------------------------------------------------------------------
    def losses(self) -> np.ndarray:
        return (self.offset + np.arange(len(self.probs))) * self.interval

    def delta_for_epsilon(self, epsilon: float) -> float:
        """An upper bound on δ(ε) = p_∞ + Σ_{l>ε} p_l (1 − e^{ε−l})."""
        if epsilon < 0:
            raise ValueError("delta_for_epsilon: epsilon must be >= 0")
        return min(1.0, self._delta(epsilon) * (1 + _FLOAT_MARGIN))

    def _delta(self, epsilon: float) -> float:
        start = max(0, math.floor(epsilon / self.interval) - self.offset)
        p = self.probs[start:]
        lv = (self.offset + start + np.arange(len(p))) * self.interval
        keep = lv > epsilon
        return self.infinity + float(np.sum(p[keep] * -np.expm1(epsilon - lv[keep])))

    def epsilon_for_delta(self, delta: float) -> float:
        """The smallest ε >= 0 with δ(ε) <= δ, rounded up (inf if even ε = ∞ does not reach δ).

        δ(ε) is continuous and non-increasing; the grid interval holding the root is found from
        suffix sums, then bisection returns its upper end, checked with the margin.
        """
        if not 0 <= delta <= 1:
            raise ValueError("epsilon_for_delta: delta must be in [0, 1]")
        target = delta / (1 + _FLOAT_MARGIN)
        if self.infinity > target:
            return math.inf
        if self._delta(0.0) <= target:
            return 0.0
        lv = self.losses()
        pos = lv > 0
        lpos, ppos = lv[pos], self.probs[pos]
        # δ at each positive grid point l_j: Σ_{i>j} p_i (1 − e^{l_j − l_i}), from suffix sums
        # (scaled by e^{l_max}); only a hint for where the root is, checked by direct sums
        top = float(lpos[-1])
        tail_p = np.concatenate((np.cumsum(ppos[::-1])[::-1][1:], [0.0]))
        w = ppos * np.exp(np.minimum(top - lpos, 700.0))
        tail_w = np.concatenate((np.cumsum(w[::-1])[::-1][1:], [0.0]))
        at = self.infinity + tail_p - np.exp(np.maximum(lpos - top, -700.0)) * tail_w
        j = int(np.argmax(at <= target))
        hi = float(lpos[j])
        if self._delta(hi) > target:
            hi = top  # δ(l_max) = p_∞ <= target
        lo = float(lpos[j - 1]) if j > 0 else 0.0
        if lo >= hi or self._delta(lo) <= target:
            lo = 0.0  # δ(0) > target (checked above)
        # invariant: δ(lo) > target >= δ(hi)
        for _ in range(200):
            mid = (lo + hi) / 2
            if self._delta(mid) <= target:
                hi = mid
            else:
                lo = mid
            if hi - lo <= 1e-12 * max(1.0, hi):
                break
        return hi


# -- constructors -------------------------------------------------------------------------------
def from_epsilon_delta(epsilon: float | Fraction, delta: float | Fraction,
                       interval: float = DEFAULT_INTERVAL) -> PrivacyLossDistribution:
    """The canonical dominating pair of (ε, δ)-DP: δ at +∞, (1−δ)e^ε/(1+e^ε) at +ε and
    (1−δ)/(1+e^ε) at −ε (Kairouz–Oh–Viswanath 2015; Zhu–Dong–Wang 2022, Prop. 8).

    Every (ε, δ)-DP mechanism's profile is below this pair's for every neighbouring pair, and it
    is symmetric (swap P and Q: the same PLD). For the discrete Laplace at sensitivity 1 it is the
    exact PLD. The losses ±ε are rounded up onto the grid, in exact arithmetic.
    """
    e, d = Fraction(epsilon), Fraction(delta)
    if e < 0 or not 0 <= d <= 1:
        raise ValueError(f"from_epsilon_delta: need ε >= 0 and δ in [0, 1], got {epsilon}, {delta}")
    h = _exact_step(interval)
    up, down = _ceil(e / h), _ceil(-e / h)
    fe = float(e)
    q = float(special.expit(fe))  # e^ε / (1 + e^ε)
    masses = {up: (1 - float(d)) * q}
    masses[down] = masses.get(down, 0.0) + (1 - float(d)) * (1 - q)
    return _from_points(masses, float(d), interval)


def from_discrete_laplace(scale: float, sensitivity: int = 1,
                          interval: float = DEFAULT_INTERVAL) -> PrivacyLossDistribution:
    """Discrete Laplace noise (pmf ∝ e^{−|x|/t}, t = ``scale``) at integer shift Δ.

    With a = e^{−1/t}, x ~ P = noise at 0, Q = noise at Δ: the loss (|x−Δ| − |x|)/t is Δ/t with
    mass 1/(1+a) (x <= 0), −Δ/t with mass a^Δ/(1+a) (x >= Δ), and (Δ−2x)/t with mass
    (1−a)/(1+a)·a^x for 0 < x < Δ: exact masses, losses rounded up. Symmetric (x -> Δ − x).
    """
    if scale <= 0 or sensitivity < 0 or int(sensitivity) != sensitivity:
        raise ValueError("from_discrete_laplace: need scale > 0 and an integer sensitivity >= 0")
    dl = int(sensitivity)
    if dl == 0:
        return _identity(interval)
    t = Fraction(scale)
    h = _exact_step(interval)
    a = math.exp(-1 / float(scale))
    masses: dict[int, float] = {}

    def add(loss_num: int, mass: float) -> None:  # loss = loss_num / t
        k = _ceil(Fraction(loss_num) / t / h)
        masses[k] = masses.get(k, 0.0) + mass

    add(dl, 1 / (1 + a))
    add(-dl, a ** dl / (1 + a))
    for x in range(1, dl):
        add(dl - 2 * x, (1 - a) / (1 + a) * a ** x)
    return _from_points(masses, 0.0, interval)


def from_gaussian(sigma: float, sensitivity: float = 1.0, interval: float = DEFAULT_INTERVAL,
                  tail_sigmas: float = 9.0) -> PrivacyLossDistribution:
    """Gaussian noise N(0, σ²) at shift Δ: the loss is N(μ²/2, μ²), μ = Δ/σ (symmetric).

    Grid point k·h gets the mass of (( k−1)h, kh] (losses rounded up); the mass above
    m + ``tail_sigmas``·μ goes to +∞; the mass below m − ``tail_sigmas``·μ joins the lowest kept
    point (moved up). The exact profile is :func:`~privplan.accounting.conversions.gdp_delta`.
    """
    if sigma <= 0 or sensitivity < 0:
        raise ValueError("from_gaussian: need sigma > 0 and sensitivity >= 0")
    mu = float(sensitivity) / float(sigma)
    if mu == 0:
        return _identity(interval)
    m = mu * mu / 2
    lo_k = math.floor((m - tail_sigmas * mu) / interval)
    hi_k = math.ceil((m + tail_sigmas * mu) / interval)
    edges = (np.arange(lo_k, hi_k + 1) * interval - m) / mu  # standardised grid points
    sf = stats.norm.sf(edges)  # P(L > k·h), accurate in the upper tail
    cdf = stats.norm.cdf(edges)
    mid = edges < 0
    # mass of (k−1, k]: via the cdf below the mean and the survival function above it
    diff = np.where(mid[1:], cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
    probs = np.concatenate(([cdf[0]], np.maximum(diff, 0.0)))  # below lo_k: joins lo_k
    return _truncated(probs, lo_k, float(sf[-1]), interval)


def compose(*plds: PrivacyLossDistribution) -> PrivacyLossDistribution:
    """All of ``plds`` composed, smallest first (keeps the convolutions small)."""
    if not plds:
        return _identity(DEFAULT_INTERVAL)
    items = sorted(plds, key=lambda p: len(p.probs))
    while len(items) > 1:
        a, b = items.pop(0), items.pop(0)
        c = a.compose(b)
        items.append(c)
        items.sort(key=lambda p: len(p.probs))
    return items[0]


def compose_counts(pairs: dict[tuple[Fraction, Fraction], int],
                   interval: float = DEFAULT_INTERVAL) -> PrivacyLossDistribution:
    """Canonical (ε, δ) pairs with multiplicities, grouped (identical ones by self_compose)."""
    parts = [from_epsilon_delta(e, d, interval).self_compose(k)
             for (e, d), k in pairs.items() if k > 0]
    return compose(*parts) if parts else _identity(interval)


# -- helpers --------------------------------------------------------------------------------------
def _exact_step(interval: float) -> Fraction:
    """The grid step as the decimal it was written as (1e-4 is 1/10000 exactly): grid points
    are the reals k·h; their float images differ by ~1e-16 relatively (in the float margin)."""
    return Fraction(repr(float(interval)))


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def _identity(interval: float) -> PrivacyLossDistribution:
    return PrivacyLossDistribution(np.ones(1), 0, 0.0, interval)


def _from_points(masses: dict[int, float], infinity: float,
                 interval: float) -> PrivacyLossDistribution:
    lo, hi = min(masses), max(masses)
    probs = np.zeros(hi - lo + 1)
    for k, p in masses.items():
        probs[k - lo] += p
    return _truncated(probs, lo, infinity, interval)


def _two_point_power(p: PrivacyLossDistribution, nz: np.ndarray,
                     k: int) -> PrivacyLossDistribution:
    """k-fold composition of a PLD with at most two finite points: binomial masses, exactly
    on the grid (j·a + (k−j)·b), computed in log space; +∞ gets 1 − (1 − p_∞)^k bounded up."""
    fin = float(p.probs.sum())
    tot = fin + p.infinity
    # mass of sequences with at least one ∞: tot^k − fin^k, without cancellation
    inf = tot ** k * -math.expm1(k * math.log1p(-p.infinity / tot)) if p.infinity else 0.0
    if len(nz) == 0:
        return PrivacyLossDistribution(np.zeros(1), 0, max(inf, 0.0), p.interval)
    a = int(nz[-1]) + p.offset
    b = int(nz[0]) + p.offset
    pa, pb = float(p.probs[nz[-1]]), float(p.probs[nz[0]])
    if a == b:
        return PrivacyLossDistribution(np.array([pa ** k]), a * k, max(inf, 0.0), p.interval)
    j = np.arange(k + 1)
    logpmf = stats.binom.logpmf(j, k, pa / (pa + pb)) + k * math.log(pa + pb)
    pos = j * (a - b) + k * b  # grid index of j draws of a and k − j of b
    probs = np.zeros(k * (a - b) + 1)
    probs[pos - k * b] = np.exp(logpmf)
    return _truncated(probs, k * b, max(inf, 0.0), p.interval)


def _convolve(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """x * y, and mass to add at +∞ for the rounding of an FFT (0 when direct).

    Both arrays start at a non-zero entry; when all their non-zeros lie on a lattice of step g
    (canonical pairs, discrete Laplace) the convolution is done on the compressed lattice, which
    is exact and often small. Direct convolution sums non-negative terms (relative error only).
    FFT convolution errs by ‖err‖₂ <= c·u·log2(N)·‖x‖₂‖y‖₂ (u = 2^-53, Schatzman 1996; c = 8
    here), so ‖err‖₁ <= sqrt(N) times that: negatives are clipped (raising masses), and that
    bound plus any mass lost against Σx·Σy is added at +∞.
    """
    g = math.gcd(_lattice(x), _lattice(y))
    if g > 1:
        out_c, err = _convolve(x[::g], y[::g])
        out = np.zeros((len(out_c) - 1) * g + 1)
        out[::g] = out_c
        return out, err
    if len(x) * len(y) <= _DIRECT_LIMIT:
        return np.convolve(x, y), 0.0
    out = np.maximum(signal.fftconvolve(x, y), 0.0)
    n = len(out)
    bound = math.sqrt(n) * 8 * 2.0 ** -53 * math.log2(n) * float(np.linalg.norm(x) *
                                                               np.linalg.norm(y))
    lost = max(0.0, float(x.sum()) * float(y.sum()) - float(out.sum()))
    return out, bound + lost


def _lattice(x: np.ndarray) -> int:
    """The gcd of the positions of x's non-zeros (x[0] != 0): 0 for a single point."""
    nz = np.flatnonzero(x)
    if len(nz) > 4096:  # a dense array: not worth the search
        return 1
    return int(np.gcd.reduce(nz)) if len(nz) > 1 else 0


def _truncated(probs: np.ndarray, offset: int, infinity: float,
               interval: float) -> PrivacyLossDistribution:
    """Drop negligible tails pessimistically: at most TAIL_MASS/2 of the upper tail goes to +∞,
    at most TAIL_MASS/2 of the lower tail joins the lowest kept point; zeros at the ends go."""
    probs = np.asarray(probs, dtype=float)
    nz = np.flatnonzero(probs > 0)
    if len(nz) == 0:
        return PrivacyLossDistribution(np.zeros(1), 0, infinity, interval)
    probs = probs[nz[0]:nz[-1] + 1]
    offset += int(nz[0])
    up = np.cumsum(probs[::-1])
    cut_hi = int(np.searchsorted(up, TAIL_MASS / 2, side="right"))  # top cut_hi points go
    if cut_hi:
        infinity += float(up[cut_hi - 1])
        probs = probs[:len(probs) - cut_hi]
    if len(probs) > 1:
        low = np.cumsum(probs)
        cut_lo = min(int(np.searchsorted(low, TAIL_MASS / 2, side="right")), len(probs) - 1)
        if cut_lo:
            moved = float(low[cut_lo - 1])
            probs = probs[cut_lo:].copy()
            probs[0] += moved
            offset += cut_lo
    return PrivacyLossDistribution(probs, offset, infinity, interval)
