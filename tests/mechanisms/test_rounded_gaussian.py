"""The exact rounded-Gaussian sampler (Karney's algorithm N with lazy uniforms).

Oracles: the exact pmf P(n) = Φ((n + 1/2)/σ) − Φ((n − 1/2)/σ) (chi-square), and the tie paths
forced by shrinking the lazy uniforms' words to a bit or two (the algorithm is exact for any word
size, so the pmf must still match), and scripted randomness for the rounding step.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privplan.mechanisms import rounded_gaussian as rg
from privplan.mechanisms.rounded_gaussian import sample_rounded_gaussian
from privplan.testing import noise_disabled, seeded_noise

from ._stats import P_MIN, chi2_from_cdf, chi2_pmf

pytestmark = pytest.mark.invariant(4)


def _pmf(sigma: float):
    return lambda n: stats.norm.cdf((n + 0.5) / sigma) - stats.norm.cdf((n - 0.5) / sigma)


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("sigma", "n"),
    [
        (Fraction(1, 3), 300_000),
        (Fraction(1), 500_000),
        (Fraction(3, 2), 300_000),
        (Fraction(7), 300_000),
        (Fraction(2**40 + 1, 2**40), 100_000),  # a long exact fraction
    ],
)
def test_matches_the_exact_pmf(sigma: Fraction, n: int) -> None:
    s = float(sigma)
    x = sample_rounded_gaussian(sigma, n)
    hi = max(2, int(6 * s))
    assert chi2_pmf(x, _pmf(s), -hi, hi) > P_MIN


@pytest.mark.statistical
def test_huge_sigma_matches_the_cdf() -> None:
    sigma = 10**9 + 7
    x = sample_rounded_gaussian(Fraction(sigma), 200_000)
    edges = np.round(np.linspace(-4.5 * sigma, 4.5 * sigma, 61)).astype(np.int64)
    assert chi2_from_cdf(x, lambda k: stats.norm.cdf((k + 0.5) / sigma), edges) > P_MIN


@pytest.mark.statistical
@pytest.mark.parametrize("word", [1, 2, 5])
@pytest.mark.parametrize("sigma", [Fraction(1), Fraction(5, 2)])
def test_tie_paths_keep_the_pmf_exact(monkeypatch, word: int, sigma: Fraction) -> None:
    """Words of 1-5 bits make equal leading words common: the Python tie paths (extra words,
    kept per value for its later comparisons) then decide most comparisons."""
    extended = []
    original = rg._extend

    def counting(src, tail, upto):
        extended.append(upto)
        original(src, tail, upto)

    monkeypatch.setattr(rg, "_WORD", word)
    monkeypatch.setattr(rg, "_extend", counting)
    s = float(sigma)
    x = sample_rounded_gaussian(sigma, 100_000)
    assert len(extended) > 10_000  # the tie paths really ran
    assert max(extended) >= 1  # values needed several extra words
    assert chi2_pmf(x, _pmf(s), -int(6 * s) - 2, int(6 * s) + 2) > P_MIN


class _Script:
    """A RandomSource that returns scripted integers (for the rounding step)."""

    def __init__(self, values: list[int]) -> None:
        self.values = values

    def uniform_ints(self, n: int, bound: int) -> np.ndarray:
        out = [self.values.pop(0) for _ in range(n)]
        assert all(0 <= v < bound for v in out)
        return np.array(out, dtype=np.int64)


def test_rounding_draws_words_until_the_integer_is_decided() -> None:
    # sigma = 3: n = floor(3(k + x) + 1/2) changes at x = 1/6, whose binary digits never end.
    sixth = (1 << 62) // 6  # first word of 1/6: undecided between 0 and 1
    more = (1 << 63) // 3  # every later word of 1/6 (2^62/6 = sixth + 2/3)
    assert rg._round_scaled(_Script([]), Fraction(3), 0, sixth - 1, []) == 0
    tail: list[int] = []
    src = _Script([more, more + 1])  # equal to 1/6 for two words, then above it
    assert rg._round_scaled(src, Fraction(3), 0, sixth, tail) == 1
    assert tail == [more, more + 1] and not src.values
    assert rg._round_scaled(_Script([more - 1]), Fraction(3), 0, sixth, []) == 0
    # the extra words are reused: x's digits were fixed by an earlier comparison
    assert rg._round_scaled(_Script([]), Fraction(3), 0, sixth, [more - 1]) == 0
    # k shifts by sigma*k: 3*2 + 3x + 1/2 at x just below 1/2 -> 7
    assert rg._round_scaled(_Script([]), Fraction(3), 2, (1 << 61) - 1, []) == 7


def test_lazy_comparison_extends_both_values_and_remembers_them() -> None:
    a: list[int] = []
    b = [5]
    src = _Script([5, 7, 9])  # a's first extra word ties with b's, then a gets 7, b gets 9
    assert rg._less_tails(src, a, b) is True
    assert a == [5, 7] and b == [5, 9]
    assert rg._less_tails(_Script([]), b, a) is False  # decided by the stored words


def test_seeded_reproducible_and_noise_off() -> None:
    with seeded_noise(11):
        first = sample_rounded_gaussian(Fraction(4), 1000)
    with seeded_noise(11):
        assert np.array_equal(first, sample_rounded_gaussian(Fraction(4), 1000))
    with noise_disabled():
        assert not sample_rounded_gaussian(Fraction(4), 10).any()
    assert sample_rounded_gaussian(Fraction(4), 0).size == 0


@pytest.mark.parametrize("bad", [Fraction(0), Fraction(-1), 0.5])
def test_bad_sigma_is_refused(bad) -> None:
    with pytest.raises((TypeError, ValueError)):
        sample_rounded_gaussian(bad, 3)


@pytest.mark.statistical
def test_mean_and_variance() -> None:
    n = 400_000
    x = sample_rounded_gaussian(Fraction(2), n).astype(np.float64)
    var = 4 + 1 / 12
    assert abs(x.mean()) < 5.3 * math.sqrt(var / n)
    assert abs(x.var() - var) < 5.3 * math.sqrt(2 * var * var / n)
