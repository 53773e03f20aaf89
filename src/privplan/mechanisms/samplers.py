"""Exact, vectorised samplers for discrete Laplace and discrete Gaussian noise.

The algorithms are those of Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential
Privacy" (NeurIPS 2020), cited as CKS:

* Algorithm 1: Bernoulli(exp(-gamma)) for rational gamma, from Bernoulli(gamma/K) trials;
* Algorithm 2: discrete Laplace with scale T/S, from a uniform U in {0..T-1}, a Bernoulli(exp(-U/T))
  filter, a geometric count of Bernoulli(exp(-1)) successes and a random sign;
* Algorithm 3: discrete Gaussian by rejection from a discrete Laplace with scale t,
  accepting with Bernoulli(exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))) (see ``_GaussianPlan``
  for the choice of t).

Every accept/reject decision is an exact comparison of integers (numpy ``int64`` when the values
provably fit, Python integers otherwise); no floating point is ever involved. The randomness is
uniform integers from a :class:`RandomSource`; the default reads ``os.urandom``.

Vectorisation: each algorithm runs on many independent *lanes* at once. A loop iterates only
while some lane is still pending, and each iteration works on the pending lanes only, so the
number of Python-level iterations grows like log(size), never like size. Rejected candidates are
simply dropped: lanes are independent, so the accepted candidates are i.i.d. from the target law.

Test hooks: :mod:`privplan.testing` may replace the source (``seeded_noise``) or switch noise off
(``noise_disabled``) through the two private context variables below. Nothing else sets them.

Privacy: every accept/reject is an exact integer comparison on bits from the OS CSPRNG.

>>> from fractions import Fraction
>>> sample_discrete_laplace(Fraction(2), 3).dtype
dtype('int64')
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction
from math import gcd, isqrt
from typing import Final, Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "MAX_BOUND",
    "RandomSource",
    "SystemRandomSource",
    "bernoulli_exp",
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
]

Int64Array = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
# An array of non-negative integers: int64 when the values fit, dtype=object (Python ints) if not.
IntArray = NDArray[np.int64] | NDArray[np.object_]

#: Largest ``bound`` a :class:`RandomSource` must support (and the int64 "safe" ceiling used here).
MAX_BOUND: Final = 1 << 62
_CHUNK_BITS: Final = 62
_BATCH: Final = 1 << 18  # lanes per batch: keeps the working set in cache


class RandomSource(Protocol):
    """Where the samplers get their randomness: i.i.d. uniform integers."""

    def uniform_ints(self, n: int, bound: int) -> Int64Array:
        """``n`` independent integers uniform on ``{0, ..., bound - 1}``; 1 <= bound <= 2**62."""
        ...


class SystemRandomSource:
    """Uniform integers from the operating system's CSPRNG (``os.urandom``).

    Bytes are read in bulk and turned into words of 1, 2, 4 or 8 bytes, whichever is the smallest
    that keeps the rejection rate low; a word ``w`` is kept only if ``w < limit`` where ``limit``
    is the largest multiple of ``bound`` not above the word range, so ``w % bound`` is exactly
    uniform (no modulo bias).
    """

    def uniform_ints(self, n: int, bound: int) -> Int64Array:
        _check_request(n, bound)
        if bound == 1 or n == 0:
            return np.zeros(n, dtype=np.int64)
        if bound == 2:
            raw = np.frombuffer(os.urandom((n + 7) // 8), dtype=np.uint8)
            return np.unpackbits(raw, count=n).astype(np.int64)
        nbytes = 1 if bound <= 16 else 2 if bound <= 1 << 12 else 4 if bound <= 1 << 28 else 8
        dtype = np.dtype(f"<u{nbytes}")
        space = 1 << (8 * nbytes)
        limit = space - space % bound
        keep_rate = limit / space  # only sizes the reads; never decides a sample
        out = np.empty(n, dtype=np.int64)
        filled = 0
        while filled < n:
            need = n - filled
            count = int(need / keep_rate * 1.02) + 16
            words = np.frombuffer(os.urandom(count * nbytes), dtype=dtype)
            if limit < space:
                words = words[words < dtype.type(limit)]
            words = words[:need]
            out[filled : filled + words.size] = words % dtype.type(bound)
            filled += words.size
        return out


def _check_request(n: int, bound: int) -> None:
    if n < 0:
        raise ValueError(f"cannot draw a negative number ({n}) of integers")
    if not 1 <= bound <= MAX_BOUND:
        raise ValueError(f"bound must be in [1, 2**62], got {bound}")


_DEFAULT_SOURCE: Final = SystemRandomSource()

# Test-only hooks, set exclusively by privplan.testing (seeded_noise / noise_disabled).
_SOURCE_OVERRIDE: ContextVar[RandomSource | None] = ContextVar(
    "privplan_noise_source_override", default=None
)
_NOISE_DISABLED: ContextVar[bool] = ContextVar("privplan_noise_disabled", default=False)


def _source() -> RandomSource:
    override = _SOURCE_OVERRIDE.get()
    return _DEFAULT_SOURCE if override is None else override


@contextmanager
def own_draws() -> Iterator[None]:
    """Within the block, draws come from the OS CSPRNG even under ``seeded_noise``: the
    pre-charge gate runs the noise code over stand-in answers (:mod:`privplan.gate`), and
    those draws must not move a test's seeded stream (released noise would then depend on
    whether a plan was cached)."""
    token = _SOURCE_OVERRIDE.set(None)
    try:
        yield
    finally:
        _SOURCE_OVERRIDE.reset(token)


# --------------------------------------------------------------------------- uniform helpers


def _uniform_big(src: RandomSource, n: int, bound: int) -> IntArray:
    """``n`` uniform integers on ``{0..bound-1}`` for any ``bound >= 1`` (object array if large)."""
    if bound <= MAX_BOUND:
        return src.uniform_ints(n, bound)
    limbs = -(-bound.bit_length() // _CHUNK_BITS)
    space = 1 << (_CHUNK_BITS * limbs)
    limit = space - space % bound
    parts: list[NDArray[np.object_]] = [np.zeros(0, dtype=object)]
    have = 0
    while have < n:
        need = n - have
        value = np.zeros(need, dtype=object)
        for _ in range(limbs):  # numpy object arithmetic: exact Python ints, no Python loop
            value = value * (1 << _CHUNK_BITS) + src.uniform_ints(need, MAX_BOUND).astype(object)
        kept = value[np.asarray(value < limit, dtype=np.bool_)] % bound
        parts.append(kept)
        have += kept.size
    return np.concatenate(parts)[:n]


def _int_array(values: list[int]) -> IntArray:
    """Non-negative Python ints as int64 if they all fit below 2**62, else as an object array."""
    if not values or max(values) < MAX_BOUND:
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=object)


# --------------------------------------------------------------------------- Bernoulli(exp(-γ))


@dataclass(frozen=True, slots=True)
class _Fractions:
    """Per-lane rationals ``f_i = r_i / den`` in ``[0, 1)`` with one common denominator.

    If ``den <= 2**62`` the numerators are an int64 array. Otherwise ``top_i = floor(f_i * 2**62)``
    (int64) is precomputed and ``r`` keeps the exact Python-int numerators for the rare ties.
    """

    den: int
    r: IntArray
    top: Int64Array | None

    @staticmethod
    def of(r: IntArray, den: int) -> _Fractions:
        if den <= MAX_BOUND:
            return _Fractions(den, np.asarray(r, dtype=np.int64), None)
        big = np.asarray(r, dtype=object)
        top = ((big * (1 << _CHUNK_BITS)) // den).astype(np.int64)  # exact: r < den
        return _Fractions(den, big, top)

    def bernoulli_div(self, src: RandomSource, lanes: Int64Array, k: int) -> BoolArray:
        """Exact Bernoulli(f_i / k) for each lane in ``lanes``."""
        if self.top is None:
            if self.den * k <= MAX_BOUND:
                # P(u < r) = r / (den k) for u uniform on {0..den k - 1}.
                return src.uniform_ints(lanes.size, self.den * k) < self.r[lanes]
            # Bernoulli(pq) = Bernoulli(p) AND Bernoulli(q), independent.
            first = src.uniform_ints(lanes.size, self.den) < self.r[lanes]
            return first & (src.uniform_ints(lanes.size, k) == 0)
        # u = (w + u') / 2^62 with w uniform 62-bit, u' uniform [0, 1): u < f/k iff
        # w < floor(f 2^62 / k) = top // k, or w equals it and u' < frac(f 2^62 / k).
        threshold = self.top[lanes] // k
        w = src.uniform_ints(lanes.size, MAX_BOUND)
        out = w < threshold
        for j in np.flatnonzero(w == threshold).tolist():  # probability 2^-62 per lane
            d = self.den * k
            rem = (int(self.r[lanes[j]]) << _CHUNK_BITS) % d
            out[j] = int(_uniform_big(src, 1, d)[0]) < rem
        return out


def _bernoulli_exp_minus_one(src: RandomSource, m: int) -> BoolArray:
    """``m`` exact Bernoulli(exp(-1)) draws: CKS Algorithm 1 with gamma = 1.

    K counts trials of A ~ Bernoulli(1/K) until the first failure; the result is [K odd].
    P(K odd) = sum_k (-1)^(k-1)/(k-1)! = exp(-1). The K = 1 trial always succeeds, so start at 2.
    """
    out = np.empty(m, dtype=np.bool_)
    pending = np.arange(m)
    k = 2
    while pending.size:
        go_on = src.uniform_ints(pending.size, k) == 0
        out[pending[~go_on]] = k % 2 == 1
        pending = pending[go_on]
        k += 1
    return out


def _bernoulli_exp_fraction(src: RandomSource, frac: _Fractions, lanes: Int64Array) -> BoolArray:
    """Exact Bernoulli(exp(-f_i)) for f_i in [0, 1) (CKS Algorithm 1), one per lane in ``lanes``."""
    out = np.empty(lanes.size, dtype=np.bool_)
    pending = np.arange(lanes.size)
    k = 1
    while pending.size:
        go_on = frac.bernoulli_div(src, lanes[pending], k)
        out[pending[~go_on]] = k % 2 == 1
        pending = pending[go_on]
        k += 1
    return out


def _bernoulli_exp(src: RandomSource, whole: IntArray, frac: _Fractions) -> BoolArray:
    """Exact Bernoulli(exp(-gamma_i)) with gamma_i = whole_i + f_i (CKS Algorithm 1, gamma > 1).

    exp(-gamma) = exp(-1)^whole * exp(-f): ``whole`` independent Bernoulli(exp(-1)) trials must all
    succeed, then one Bernoulli(exp(-f)). Lanes leave the loop as soon as one trial fails.
    """
    m = len(whole)
    alive = np.ones(m, dtype=np.bool_)
    pending = np.flatnonzero(whole >= 1)
    k = 1
    while pending.size:
        ok = _bernoulli_exp_minus_one(src, pending.size)
        alive[pending[~ok]] = False
        pending = pending[ok]
        pending = pending[np.asarray(whole[pending] > k, dtype=np.bool_)]
        k += 1
    survivors = np.flatnonzero(alive)
    alive[survivors] = _bernoulli_exp_fraction(src, frac, survivors)
    return alive


def bernoulli_exp(gamma: Fraction, size: int) -> BoolArray:
    """``size`` exact Bernoulli(exp(-gamma)) draws for a rational ``gamma >= 0`` (CKS Alg. 1).

    >>> bernoulli_exp(Fraction(0), 4).tolist()
    [True, True, True, True]
    """
    gamma = _fraction(gamma, "gamma", allow_zero=True)
    size = _check_size(size)
    whole, rest = divmod(gamma.numerator, gamma.denominator)
    src = _source()
    wholes = np.full(size, whole, dtype=np.int64 if whole < MAX_BOUND else object)
    frac = _Fractions.of(
        _int_array([rest] * size) if size else np.zeros(0, np.int64), gamma.denominator
    )
    return _bernoulli_exp(src, wholes, frac)


# --------------------------------------------------------------------------- discrete Laplace


def _geometric_exp_minus_one(src: RandomSource, m: int) -> Int64Array:
    """Number of Bernoulli(exp(-1)) successes before the first failure: P(V >= v) = exp(-v)."""
    count = np.zeros(m, dtype=np.int64)
    pending = np.arange(m)
    while pending.size:
        ok = _bernoulli_exp_minus_one(src, pending.size)
        pending = pending[ok]
        count[pending] += 1
    return count


def _laplace_batch(src: RandomSource, num: int, den: int, m: int) -> Int64Array:
    """Run ``m`` lanes of CKS Algorithm 2 (scale num/den) once; return the accepted samples.

    With T = num, S = den: U ~ Uniform{0..T-1} kept with probability exp(-U/T), V geometric with
    P(V >= v) = exp(-v), so X = U + T V is geometric with parameter 1 - exp(-1/T) and
    Y = floor(X / S) is geometric with parameter 1 - exp(-S/T); a fair sign B, rejecting
    (B = 1, Y = 0), gives P(z) proportional to exp(-|z| S / T).
    """
    if num == 1:
        u: IntArray = np.zeros(m, dtype=np.int64)
    else:
        u = _uniform_big(src, m, num)
        keep = _bernoulli_exp_fraction(src, _Fractions.of(u, num), np.arange(m))
        u = u[keep]
    v = _geometric_exp_minus_one(src, u.size)
    if u.dtype != object and num * (int(v.max(initial=0)) + 1) <= MAX_BOUND and den <= MAX_BOUND:
        y: IntArray = (u + num * v) // den
    else:  # exact Python-int arithmetic when an int64 product could overflow
        big = u.astype(object) + num * v.astype(object)
        y = _to_int64(big // den)
    negative = src.uniform_ints(y.size, 2) == 1
    accept = ~(negative & (y == 0))
    return np.where(negative, -y, y)[accept].astype(np.int64, copy=False)


def _to_int64(values: IntArray) -> Int64Array:
    if values.dtype != object:
        return values.astype(np.int64, copy=False)
    if values.size and int(np.abs(values).max()) >= MAX_BOUND:
        # Data-independent: only the noise parameter decides this (probability ~ exp(-2^62/scale)).
        raise OverflowError("discrete noise sample does not fit in int64; the scale is too large")
    return values.astype(np.int64)


def _fill(size: int, batch: Callable[[int], Int64Array], accept_rate: float) -> Int64Array:
    """Collect ``size`` accepted samples from repeated batches (accept_rate only sizes batches)."""
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        lanes = min(_BATCH, int(need / accept_rate * 1.05) + 16)
        got = batch(lanes)[:need]
        out[filled : filled + got.size] = got
        filled += got.size
    return out


def _laplace_accept_rate(scale: Fraction) -> float:
    """Rough probability that one lane of Algorithm 2 yields a sample (batch sizing only)."""
    t, s = scale.numerator, scale.denominator
    inv_t = 1.0 / t
    keep = 1.0 if t == 1 else (1 - np.exp(-1.0)) / (t * -np.expm1(-inv_t))
    p_zero = -np.expm1(-s / t) if s / t < 700 else 1.0
    return float(max(keep * (1 - p_zero / 2), 1e-3))


def sample_discrete_laplace(scale: Fraction, size: int) -> Int64Array:
    """``size`` i.i.d. draws with P(x) proportional to exp(-|x| / scale), exact (CKS Alg. 2).

    ``scale`` is a positive rational (int or Fraction). Returns int64.

    >>> sample_discrete_laplace(Fraction(1, 10**9), 5).tolist()
    [0, 0, 0, 0, 0]
    """
    scale = _fraction(scale, "scale")
    size = _check_size(size)
    if _NOISE_DISABLED.get():
        return np.zeros(size, dtype=np.int64)
    src = _source()
    num, den = scale.numerator, scale.denominator
    return _fill(size, lambda m: _laplace_batch(src, num, den, m), _laplace_accept_rate(scale))


# --------------------------------------------------------------------------- discrete Gaussian


@dataclass(frozen=True, slots=True)
class _GaussianPlan:
    """Parameters of CKS Algorithm 3 for sigma^2 = a/b, with proposal scale t and centre c.

    The proposal is discrete Laplace with scale t, accepted with probability
    exp(-(|y| - c)^2 / (2 sigma^2)) where c = sigma^2 / t. For every y,
    exp(-|y|/t) * exp(-(|y| - c)^2/(2 sigma^2)) = exp(-y^2/(2 sigma^2)) * exp(-sigma^2/(2 t^2)),
    so the accepted y follow the discrete Gaussian for ANY t > 0 (the computation behind CKS
    Algorithm 3, which does not use that t is an integer).
    CKS take t = m := floor(sigma) + 1. For sigma >= 2 we take t = sigma^2/m instead, so that
    c = m is an integer: then gamma = b (|y| - m)^2 / (2a) has a denominator 2a instead of
    2 a b m^2 and stays in int64 for much larger sigma; the acceptance rate is about the same.
    """

    a: int
    b: int
    scale: Fraction  # proposal scale t
    centre: Fraction  # c = sigma^2 / t

    @staticmethod
    def of(sigma2: Fraction) -> _GaussianPlan:
        a, b = sigma2.numerator, sigma2.denominator
        m = isqrt(a // b) + 1  # floor(sigma) + 1, since floor(sqrt(x)) = isqrt(floor(x))
        if sigma2 >= 4:
            return _GaussianPlan(a, b, sigma2 / m, Fraction(m))
        return _GaussianPlan(a, b, Fraction(m), sigma2 / m)

    def exponent(self, abs_y: Int64Array) -> tuple[IntArray, _Fractions]:
        """gamma = (|y| - c)^2 / (2 sigma^2) exactly, as whole part + fraction in [0, 1).

        With c = p/q: gamma = b (|y| q - p)^2 / (2 a q^2). Vectorised in int64 when every
        intermediate provably stays below 2^62, otherwise once per distinct |y| in Python ints.
        """
        p, q = self.centre.numerator, self.centre.denominator
        den = 2 * self.a * q * q
        g = gcd(self.b, den)
        factor, den = self.b // g, den // g
        top = int(abs_y.max(initial=0)) * q + p
        if factor * top * top <= MAX_BOUND and den <= MAX_BOUND:
            diff = abs_y * q - p
            num = diff * diff * factor
            whole = num // den
            return whole, _Fractions(den, num - whole * den, None)
        values, inverse = np.unique(abs_y, return_inverse=True)
        wholes: list[int] = []
        rests: list[int] = []
        for y in values.tolist():
            w, r = divmod(factor * (y * q - p) ** 2, den)
            wholes.append(w)
            rests.append(r)
        frac = _Fractions.of(_int_array(rests), den)
        whole_arr = _int_array(wholes)[inverse]
        sub = _Fractions(den, frac.r[inverse], None if frac.top is None else frac.top[inverse])
        return whole_arr, sub


def _gaussian_batch(src: RandomSource, plan: _GaussianPlan, m: int) -> Int64Array:
    """One round of CKS Algorithm 3 on ``m`` lanes; returns the accepted samples."""
    num, den = plan.scale.numerator, plan.scale.denominator
    y = _fill(m, lambda k: _laplace_batch(src, num, den, k), _laplace_accept_rate(plan.scale))
    whole, frac = plan.exponent(np.abs(y))
    return y[_bernoulli_exp(src, whole, frac)]


def sample_discrete_gaussian(sigma2: Fraction, size: int) -> Int64Array:
    """``size`` i.i.d. draws with P(x) proportional to exp(-x^2 / (2 sigma2)), exact (CKS Alg. 3).

    ``sigma2`` (the variance parameter sigma^2) is a positive rational. Returns int64.

    >>> sample_discrete_gaussian(Fraction(1, 10**6), 4).tolist()
    [0, 0, 0, 0]
    """
    sigma2 = _fraction(sigma2, "sigma2")
    size = _check_size(size)
    if _NOISE_DISABLED.get():
        return np.zeros(size, dtype=np.int64)
    src = _source()
    plan = _GaussianPlan.of(sigma2)
    # Acceptance of Algorithm 3 is at least about 0.5 (CKS Sec. 5.3); sizes batches only.
    return _fill(size, lambda m: _gaussian_batch(src, plan, m), 0.6)


# --------------------------------------------------------------------------- argument checks


def _fraction(value: object, name: str, *, allow_zero: bool = False) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | Fraction):
        raise TypeError(
            f"{name} must be an int or fractions.Fraction (exact), got {type(value).__name__}"
        )
    value = Fraction(value)
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(
            f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value}"
        )
    return value


def _check_size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
        raise ValueError(f"size must be a non-negative integer, got {size!r}")
    return int(size)
