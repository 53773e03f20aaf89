"""Exact samplers: randomness source, Bernoulli(exp(-γ)), discrete Laplace, discrete Gaussian."""

from __future__ import annotations

import math
import threading
from fractions import Fraction

import numpy as np
import pytest

from privplan.mechanisms import samplers
from privplan.mechanisms.samplers import (
    MAX_BOUND,
    SystemRandomSource,
    bernoulli_exp,
    sample_discrete_gaussian,
    sample_discrete_laplace,
)
from privplan.testing import SeededRandomSource, noise_disabled, seeded_noise

from ._stats import (
    P_MIN,
    chi2_counts,
    chi2_from_cdf,
    chi2_pmf,
    gaussian_cdf_large,
    gaussian_pmf,
    laplace_cdf,
    laplace_pmf,
)

pytestmark = pytest.mark.invariant(4)

# --------------------------------------------------------------------------- randomness source


@pytest.mark.parametrize(
    "bound", [1, 2, 3, 16, 17, 4096, 4097, 2**28, 2**28 + 3, 2**40 + 1, MAX_BOUND]
)
def test_uniform_ints_range_and_dtype(bound: int) -> None:
    out = SystemRandomSource().uniform_ints(5000, bound)
    assert out.dtype == np.int64 and out.shape == (5000,)
    assert out.min() >= 0 and out.max() < bound


@pytest.mark.parametrize("bound", [0, -1, MAX_BOUND + 1])
def test_uniform_ints_rejects_bad_bounds(bound: int) -> None:
    with pytest.raises(ValueError):
        SystemRandomSource().uniform_ints(3, bound)
    with pytest.raises(ValueError):
        SeededRandomSource(1).uniform_ints(3, bound)


@pytest.mark.statistical
@pytest.mark.parametrize("bound", [2, 3, 13, 1000])
def test_uniform_ints_is_uniform(bound: int) -> None:
    # bound 13 on bytes: plain "byte % 13" would give values < 9 a 20/256 vs 19/256 chance.
    counts = np.bincount(SystemRandomSource().uniform_ints(2_000_000, bound), minlength=bound)
    assert chi2_counts(counts, np.full(bound, 1 / bound)) > P_MIN


@pytest.mark.statistical
def test_uniform_ints_no_modulo_bias_on_64_bit_words() -> None:
    # bound = 3 * 2^60: 2^64 mod bound = 2^60, so plain "word % bound" would put 6/16 (not 1/3)
    # of the mass in the first third.
    bound = 3 << 60
    thirds = SystemRandomSource().uniform_ints(300_000, bound) // (1 << 60)
    assert chi2_counts(np.bincount(thirds, minlength=3), np.full(3, 1 / 3)) > P_MIN


def test_uniform_big_bounds_above_int64() -> None:
    src = SeededRandomSource(3)
    bound = 3 * 2**70 + 5
    out = samplers._uniform_big(src, 2000, bound)
    assert out.dtype == object and all(0 <= int(x) < bound for x in out)
    assert len({int(x) >> 69 for x in out}) == 6  # all of the six 2^69-wide slices hit


# --------------------------------------------------------------------------- Bernoulli(exp(-γ))


def test_bernoulli_exp_of_zero_is_always_true() -> None:
    assert bernoulli_exp(Fraction(0), 1000).all()


@pytest.mark.statistical
@pytest.mark.parametrize(
    "gamma", [Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(7), Fraction(2**70 + 1, 2**69)]
)
def test_bernoulli_exp_frequency(gamma: Fraction) -> None:
    n = 400_000
    hits = int(bernoulli_exp(gamma, n).sum())
    p = math.exp(-float(gamma))
    z = (hits - n * p) / math.sqrt(n * p * (1 - p))
    assert abs(z) < 5.3  # two-sided p ~ 1e-7


class _TieSource(SeededRandomSource):
    """Returns ``value`` for the first 62-bit draw (a batch), to force the 2^-62 tie branch."""

    def __init__(self, seed: int, value: int) -> None:
        super().__init__(seed)
        self.value: int | None = value

    def uniform_ints(self, n: int, bound: int) -> np.ndarray:
        if bound == MAX_BOUND and self.value is not None:
            value, self.value = self.value, None
            return np.full(n, value, dtype=np.int64)
        return super().uniform_ints(n, bound)


@pytest.mark.statistical
def test_tie_branch_of_big_denominator_bernoulli() -> None:
    # f = r/den with den > 2^62: a draw equal to floor(f 2^62 / k) must resolve to 1 with
    # probability frac(f 2^62 / k) = ((r 2^62) mod (den k)) / (den k), exactly.
    den, r, k = 3 * 2**63 + 7, 2**63 + 12345, 3
    frac = samplers._Fractions.of(np.array([r] * 20_000, dtype=object), den)
    assert frac.top is not None
    threshold = int(frac.top[0]) // k
    src = _TieSource(11, threshold)
    out = frac.bernoulli_div(src, np.arange(20_000), k)
    p = ((r << 62) % (den * k)) / (den * k)
    z = (out.sum() - 20_000 * p) / math.sqrt(20_000 * p * (1 - p))
    assert abs(z) < 5.3
    # And a draw just below / above the threshold is decided without the tie branch.
    assert frac.bernoulli_div(_TieSource(1, threshold - 1), np.arange(5), k).all()
    assert not frac.bernoulli_div(_TieSource(1, threshold + 1), np.arange(5), k).any()


# --------------------------------------------------------------------------- argument checks


@pytest.mark.parametrize("sampler", [sample_discrete_laplace, sample_discrete_gaussian])
def test_sampler_argument_checks(sampler) -> None:
    assert sampler(Fraction(2), 0).shape == (0,)
    assert sampler(3, 4).dtype == np.int64
    with pytest.raises(TypeError):
        sampler(2.0, 3)  # floats are not exact: refused
    with pytest.raises(ValueError):
        sampler(Fraction(0), 3)
    with pytest.raises(ValueError):
        sampler(Fraction(-1), 3)
    with pytest.raises(ValueError):
        sampler(Fraction(1), -1)


# --------------------------------------------------------------------------- discrete Laplace


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("scale", "n"),
    [
        (Fraction(1, 10), 1_000_000),
        (Fraction(2), 1_000_000),
        (Fraction(7, 3), 500_000),
        (Fraction(2**70 + 1, 2**69), 100_000),  # numerator > 2^62: the Python-int path
        (Fraction(2**61 + 1, 2**59), 100_000),  # U + T V may pass 2^62: Python ints there
    ],
)
def test_discrete_laplace_matches_pmf(scale: Fraction, n: int) -> None:
    x = sample_discrete_laplace(scale, n)
    t = float(scale)
    hi = max(2, int(12 * t))
    assert chi2_pmf(x, lambda z: laplace_pmf(t, z), -hi, hi) > P_MIN


@pytest.mark.statistical
def test_discrete_laplace_tiny_scale_has_rare_nonzeros() -> None:
    # t = 1/10: P(Z != 0) = 2q/(1+q), q = e^-10, about 9.1e-5.
    n = 2_000_000
    nonzero = int(np.count_nonzero(sample_discrete_laplace(Fraction(1, 10), n)))
    q = math.exp(-10)
    mean = n * 2 * q / (1 + q)
    assert abs(nonzero - mean) < 5.3 * math.sqrt(mean)


@pytest.mark.statistical
def test_discrete_laplace_huge_scale_matches_cdf() -> None:
    t = 10**6
    x = sample_discrete_laplace(Fraction(t), 400_000)
    edges = np.round(np.linspace(-8 * t, 8 * t, 81)).astype(np.int64)
    assert chi2_from_cdf(x, lambda k: laplace_cdf(t, k), edges) > P_MIN


@pytest.mark.statistical
@pytest.mark.parametrize("scale", [Fraction(2), Fraction(10**6)])
def test_discrete_laplace_mean_and_variance(scale: Fraction) -> None:
    n = 1_000_000
    x = sample_discrete_laplace(scale, n).astype(np.float64)
    q = math.exp(-1 / float(scale))
    var = 2 * q / (1 - q) ** 2
    # E[Z^4] of the discrete Laplace: 2 q (1 + 11q + 11q^2 + q^3) / ((1 - q)^4 (1 + q)).
    m4 = 2 * q * (1 + 11 * q + 11 * q * q + q**3) / ((1 - q) ** 4 * (1 + q))
    assert abs(x.mean()) < 5.3 * math.sqrt(var / n)
    assert abs((x * x).mean() - var) < 5.3 * math.sqrt((m4 - var * var) / n)


# --------------------------------------------------------------------------- discrete Gaussian


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("sigma2", "n"),
    [
        (Fraction(1, 10), 500_000),
        (Fraction(1), 1_000_000),
        (Fraction(5, 3), 500_000),
        (Fraction(100), 500_000),
        (Fraction(2**70 + 1, 2**70), 100_000),  # 2 a b t^2 > 2^62: per-value Python-int path
    ],
)
def test_discrete_gaussian_matches_pmf(sigma2: Fraction, n: int) -> None:
    x = sample_discrete_gaussian(sigma2, n)
    s2 = float(sigma2)
    hi = max(2, int(6 * math.sqrt(s2)))
    assert chi2_pmf(x, lambda z: gaussian_pmf(s2, z), -hi, hi) > P_MIN


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("sigma2", "n"),
    [
        (Fraction(10**12), 400_000),  # sigma = 10^6
        # sigma ~ 2^30 with numerator > 2^62: big uniforms and 62-bit-chunk Bernoullis.
        (Fraction(2**80 + 1, 2**20), 20_000),
    ],
)
def test_discrete_gaussian_huge_scale_matches_cdf(sigma2: Fraction, n: int) -> None:
    s2 = float(sigma2)
    x = sample_discrete_gaussian(sigma2, n)
    sigma = math.sqrt(s2)
    edges = np.round(np.linspace(-4.5 * sigma, 4.5 * sigma, 61)).astype(np.int64)
    assert chi2_from_cdf(x, lambda k: gaussian_cdf_large(s2, k), edges) > P_MIN


@pytest.mark.statistical
def test_discrete_gaussian_mean_and_variance() -> None:
    n = 1_000_000
    s2 = 4.0
    x = sample_discrete_gaussian(Fraction(4), n).astype(np.float64)
    z = np.arange(-60, 61, dtype=np.float64)
    p = gaussian_pmf(s2, z)
    var, m4 = float((z * z * p).sum()), float((z**4 * p).sum())
    assert abs(x.mean()) < 5.3 * math.sqrt(var / n)
    assert abs((x * x).mean() - var) < 5.3 * math.sqrt((m4 - var * var) / n)


# --------------------------------------------------------------------------- independence


@pytest.mark.statistical
@pytest.mark.parametrize(
    "draw",
    [
        lambda n: sample_discrete_laplace(Fraction(2), n),
        lambda n: sample_discrete_gaussian(Fraction(3), n),
    ],
    ids=["laplace", "gaussian"],
)
def test_consecutive_draws_uncorrelated(draw) -> None:
    n = 1_000_000
    x = draw(n).astype(np.float64)
    for lag in (1, 2, 7):
        r = np.corrcoef(x[:-lag], x[lag:])[0, 1]
        assert abs(r) * math.sqrt(n) < 5.3  # r is ~ N(0, 1/n) under independence
    # The signs of consecutive values are independent too (a 2x2 contingency table).
    s = np.sign(x)
    table = np.histogram2d(s[:-1], s[1:], bins=[[-1.5, -0.5, 0.5, 1.5]] * 2)[0]
    expected = np.outer(table.sum(1), table.sum(0)) / table.sum()
    stat = ((table - expected) ** 2 / expected).sum()
    from scipy import stats

    assert stats.chi2.sf(stat, 4) > P_MIN


# --------------------------------------------------------------------------- test hooks


def test_seeded_noise_reproduces() -> None:
    with seeded_noise(123):
        a = sample_discrete_laplace(Fraction(2), 1000)
        b = sample_discrete_gaussian(Fraction(7, 2), 1000)
    with seeded_noise(123):
        a2 = sample_discrete_laplace(Fraction(2), 1000)
        b2 = sample_discrete_gaussian(Fraction(7, 2), 1000)
    with seeded_noise(124):
        a3 = sample_discrete_laplace(Fraction(2), 1000)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)
    assert not np.array_equal(a, a3)


def test_default_noise_is_not_reproducible() -> None:
    a = sample_discrete_laplace(Fraction(2), 1000)
    b = sample_discrete_laplace(Fraction(2), 1000)
    assert not np.array_equal(a, b)


def test_noise_disabled_gives_zeros_and_is_restored() -> None:
    with noise_disabled():
        assert not sample_discrete_laplace(Fraction(10**6), 500).any()
        assert not sample_discrete_gaussian(Fraction(10**6), 500).any()
    assert sample_discrete_laplace(Fraction(10**6), 500).any()


def test_hooks_are_restored_after_an_exception() -> None:
    with pytest.raises(RuntimeError), seeded_noise(5):
        raise RuntimeError("boom")
    assert samplers._SOURCE_OVERRIDE.get() is None
    with pytest.raises(RuntimeError), noise_disabled():
        raise RuntimeError("boom")
    assert samplers._NOISE_DISABLED.get() is False


def test_new_thread_gets_secure_noise() -> None:
    seen: list[object] = []
    with noise_disabled(), seeded_noise(1):
        worker = threading.Thread(
            target=lambda: seen.append((samplers._source(), samplers._NOISE_DISABLED.get()))
        )
        worker.start()
        worker.join()
    source, disabled = seen[0]
    assert isinstance(source, SystemRandomSource) and disabled is False


def test_seeded_noise_rejects_bad_seeds() -> None:
    with pytest.raises(ValueError), seeded_noise(-1):
        pass
