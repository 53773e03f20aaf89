"""Exact samples of Gaussian noise rounded to the nearest integer: round(σ·N(0, 1)).

Why this distribution: adding ``round(σZ)`` (Z standard normal) to an integer f(D) releases
``round(f(D) + σZ)`` — the Gaussian mechanism followed by rounding, a post-processing. So with
sensitivity Δ it is *exactly* (Δ/σ)-GDP (Dong, Roth and Su 2022, Theorem 2.7, and their
post-processing Proposition 2.8) and (Δ²/(2σ²))-zCDP (Bun and Steinke 2016, Proposition 1.6 and
Lemma 1.8), with no approximation — unlike the discrete Gaussian, whose μ is above Δ/σ.

How it is exact: Karney's algorithm N ("Sampling exactly from the normal distribution", ACM
TOMS 42(1), 2016) draws k ≥ 0 and a uniform x ∈ [0, 1) whose binary digits are produced only
as far as a comparison needs them, and accepts (k, x) with probability proportional to
exp(-(k + x)²/2):

1. k with P(k) ∝ exp(-k/2): successes of Bernoulli(exp(-1/2)) before the first failure;
2. accept k with probability exp(-k(k-1)/2) (so far P(k) ∝ exp(-k²/2));
3. draw x and accept with probability exp(-x(2k + x)/2), as k + 1 runs of Karney's algorithm B
   that must all succeed. One run returns true with probability exp(-x·g), g = (2k+x)/(2k+2):
   with u₀ = x it draws u₁, u₂, … and continues while u_j < u_{j-1} and a coin of probability
   g succeeds; it stops after n continuations with P(n ≥ j) = (x g)^j / j!, so
   P(n even) = Σ_j (-1)^j (x g)^j / j! = exp(-x g). The coin "r < (2k+x)/(2k+2)" is an
   integer f uniform on {0..2k+1} (true if f < 2k, false if f = 2k+1) and, when f = 2k, one
   more uniform compared with x.
4. a fair sign s; the output is round(σ·s(k + x)) = s·floor(σ(k + x) + 1/2) (ties have
   probability 0), computed exactly with σ rational.

Every decision compares integers: a lazy uniform is a first 62-bit word (vectorised in numpy)
and further words drawn, in Python, only when two words are equal (probability 2^-62 per
comparison); a value's extra words are kept for its later comparisons. Randomness comes from
the same :class:`~privplan.mechanisms.samplers.RandomSource` as the other samplers (the
operating system's CSPRNG unless a test seeds it), so the running time depends on random draws
only, never on the data.

Privacy: samples are exactly round(σZ), so a release is exactly (Δ/σ)-GDP.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Final

import numpy as np

from privplan.mechanisms.samplers import (
    _NOISE_DISABLED,
    MAX_BOUND,
    BoolArray,
    Int64Array,
    RandomSource,
    _bernoulli_exp,
    _bernoulli_exp_fraction,
    _check_size,
    _fill,
    _fraction,
    _Fractions,
    _source,
)

__all__ = ["sample_rounded_gaussian"]

#: Bits per word of a lazy uniform (RandomSource bounds go up to 2^62). Tests shrink it to make
#: equal words, and so the exact tie paths, frequent: correctness holds for any word size.
_WORD = 62
_ACCEPT_RATE: Final = 0.4  # rough share of lanes that yield a sample (sizes batches only)

#: Extra words of lazy uniforms, by lane id; almost always empty.
Tails = dict[int, list[int]]


def _word(src: RandomSource) -> int:
    return int(src.uniform_ints(1, 1 << _WORD)[0])


def _extend(src: RandomSource, tail: list[int], upto: int) -> None:
    while len(tail) <= upto:
        tail.append(_word(src))


def _less_tails(src: RandomSource, a: list[int], b: list[int]) -> bool:
    """a < b for two uniforms whose known leading words are equal: compare further words.

    The words beyond those already compared are independent and uniform whatever was decided
    before (earlier decisions only looked at leading words), so drawing them now is exact. Both
    lists grow in place, so later comparisons of the same values see the same digits.
    """
    i = 0
    while True:
        _extend(src, a, i)
        _extend(src, b, i)
        if a[i] != b[i]:
            return a[i] < b[i]
        i += 1


def _less(src: RandomSource, a: Int64Array, b: Int64Array, ids: Int64Array,
          a_tails: Tails, b_tails: Tails) -> BoolArray:
    """Lane-wise a < b for lazy uniforms: first words in numpy, ties word by word."""
    out = a < b
    for j in np.flatnonzero(a == b).tolist():
        lane = int(ids[j])
        out[j] = _less_tails(src, a_tails.setdefault(lane, []), b_tails.setdefault(lane, []))
    return out


def _geometric_half(src: RandomSource, m: int) -> Int64Array:
    """Successes of Bernoulli(exp(-1/2)) before the first failure: P(k >= j) = exp(-j/2)."""
    half = _Fractions.of(np.ones(m, dtype=np.int64), 2)
    count = np.zeros(m, dtype=np.int64)
    pending = np.arange(m)
    while pending.size:
        ok = _bernoulli_exp_fraction(src, half, pending)
        pending = pending[ok]
        count[pending] += 1
    return count


def _run_b(src: RandomSource, k: Int64Array, x: Int64Array, ids: Int64Array,
           x_tails: Tails) -> BoolArray:
    """One run of Karney's algorithm B per lane: true with probability exp(-x(2k+x)/(2k+2))."""
    m = k.size
    n = np.zeros(m, dtype=np.int64)
    y = x.copy()
    y_is_x = np.ones(m, dtype=np.bool_)
    y_tails: Tails = {}
    active = np.arange(m)
    while active.size:
        lanes = ids[active]
        z = src.uniform_ints(active.size, 1 << _WORD)
        z_tails: Tails = {}
        # the tails of y: x's own list while y is still x, else those of the z it came from
        y_view: Tails = {}
        for j in np.flatnonzero(z == y[active]).tolist():
            lane = int(lanes[j])
            pos = int(active[j])
            y_view[lane] = (x_tails.setdefault(lane, []) if y_is_x[pos]
                            else y_tails.setdefault(lane, []))
        go = _less(src, z, y[active], lanes, z_tails, y_view)
        two_k = 2 * k[active]
        f = _uniform_per_lane(src, two_k + 2)
        coin = f < two_k
        edge = np.flatnonzero(go & (f == two_k))
        if edge.size:
            r = src.uniform_ints(edge.size, 1 << _WORD)
            coin[edge] = _less(src, r, x[active[edge]], lanes[edge], {}, x_tails)
        go &= coin
        moving = active[go]
        n[moving] += 1
        y[moving] = z[go]
        y_is_x[moving] = False
        for lane in ids[moving].tolist():
            tail = z_tails.pop(lane, None)
            if tail is None:
                y_tails.pop(lane, None)
            else:
                y_tails[lane] = tail
        active = moving
    return n % 2 == 0


def _uniform_per_lane(src: RandomSource, bounds: Int64Array) -> Int64Array:
    """One integer uniform on {0..bounds_i - 1} per lane (grouped by bound: few distinct k)."""
    out = np.empty(bounds.size, dtype=np.int64)
    for b in np.unique(bounds).tolist():
        where = np.flatnonzero(bounds == b)
        out[where] = src.uniform_ints(where.size, int(b))
    return out


def _round_scaled(src: RandomSource, sigma: Fraction, k: int, x0: int, tail: list[int]) -> int:
    """floor(σ(k + x) + 1/2) for the lazy uniform x with first word x0, words drawn as needed.

    With σ = p/q and the known words giving x ∈ [X/2^b, (X+1)/2^b), the value
    (2p(k + x) + q) / (2q) lies in [A/D, (A + 2p)/D) with A = 2p(k·2^b + X) + q·2^b and
    D = 2q·2^b; its floor is decided once no integer lies inside, i.e. A // D == (A+2p-1) // D.
    """
    p, q = sigma.numerator, sigma.denominator
    words = 1
    big_x = x0
    while True:
        scale = 1 << (_WORD * words)
        a = 2 * p * (k * scale + big_x) + q * scale
        d = 2 * q * scale
        lo = a // d
        if lo == (a + 2 * p - 1) // d:
            return lo
        _extend(src, tail, words - 1)
        big_x = (big_x << _WORD) | tail[words - 1]
        words += 1


def _batch(src: RandomSource, sigma: Fraction, m: int) -> Int64Array:
    """Run ``m`` lanes of algorithm N once; return the samples of the lanes that accepted."""
    k = _geometric_half(src, m)
    keep = _bernoulli_exp(src, k * (k - 1) // 2, _Fractions(1, np.zeros(m, dtype=np.int64), None))
    k = k[keep]
    ids = np.arange(k.size)
    x = src.uniform_ints(k.size, 1 << _WORD)
    x_tails: Tails = {}
    alive = np.ones(k.size, dtype=np.bool_)
    runs_left = k + 1
    pending = np.arange(k.size)
    while pending.size:
        ok = _run_b(src, k[pending], x[pending], ids[pending], x_tails)
        alive[pending[~ok]] = False
        runs_left[pending] -= 1
        pending = pending[ok & (runs_left[pending] > 0)]
    kept = np.flatnonzero(alive)
    negative = src.uniform_ints(kept.size, 2) == 1
    out = np.empty(kept.size, dtype=np.int64)
    for j, lane in enumerate(kept.tolist()):
        value = _round_scaled(src, sigma, int(k[lane]), int(x[lane]), x_tails.get(lane, []))
        if value >= MAX_BOUND:  # only σ decides this (σ is capped far below 2^62 by calibration)
            raise OverflowError("rounded Gaussian sample does not fit in int64; sigma is too large")
        out[j] = -value if negative[j] else value
    return out


def sample_rounded_gaussian(sigma: Fraction, size: int) -> Int64Array:
    """``size`` i.i.d. exact draws of round(σ·Z), Z standard normal; σ a positive rational.

    P(n) = Φ((n + 1/2)/σ) − Φ((n − 1/2)/σ) exactly (see the module docstring). Returns int64.

    >>> sample_rounded_gaussian(Fraction(1, 10**6), 3).tolist()
    [0, 0, 0]
    """
    sigma = _fraction(sigma, "sigma")
    size = _check_size(size)
    if _NOISE_DISABLED.get():
        return np.zeros(size, dtype=np.int64)
    src = _source()
    return _fill(size, lambda m: _batch(src, sigma, m), _ACCEPT_RATE)
