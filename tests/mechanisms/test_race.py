"""The exponential race (privplan.mechanisms.race): samples against the exact pmf (mpmath),
the refinement path forced and checked the same way, refinement decided by scripted bits, the
float pass's rounding assumption checked against decimal, and Python-int gaps."""

from __future__ import annotations

from decimal import Context, Decimal
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from privplan.mechanisms import race as racelib
from privplan.mechanisms.race import race
from privplan.mechanisms.samplers import Int64Array
from privplan.testing import SeededRandomSource
from tests.mechanisms._stats import P_MIN, chi2_counts

pytestmark = pytest.mark.invariant(4)


def _pmf(gaps: list[int], rate: Fraction) -> np.ndarray:
    """exp(-rate·gap) / Σ, at 50 digits from the exact rationals."""
    with mpmath.workdps(50):
        weights = [mpmath.exp(-mpmath.mpf(rate.numerator) * g / rate.denominator) for g in gaps]
        total = mpmath.fsum(weights)
        return np.array([float(w / total) for w in weights])


def _draws(gaps: list[int], rate: Fraction, n: int, seed: int, dtype: object = np.int64
           ) -> np.ndarray:
    src = SeededRandomSource(seed)
    picks = race([np.array(gaps, dtype=dtype)] * n, rate, src)
    return np.bincount(picks, minlength=len(gaps))


@pytest.mark.statistical
@pytest.mark.parametrize("gaps, rate", [
    ([7, 3, 0, 1, 12, 5, 2, 0], Fraction(1, 4)),
    ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], Fraction(3, 2)),
    ([40, 0, 40, 1, 2], Fraction(1, 10)),
    ([0] * 6, Fraction(5)),  # all equal: uniform
])
def test_samples_follow_the_exact_pmf(gaps: list[int], rate: Fraction) -> None:
    counts = _draws(gaps, rate, 60_000, seed=sum(gaps) + rate.denominator)
    assert chi2_counts(counts, _pmf(gaps, rate)) > P_MIN


@pytest.mark.statistical
def test_forced_refinement_follows_the_exact_pmf(monkeypatch: pytest.MonkeyPatch) -> None:
    """A float margin of 10^6 leaves every cell undecided and one more bit per round keeps
    them so for many rounds: the decimal path alone picks, with the same law."""
    monkeypatch.setattr(racelib, "_SLACK", 1e6)
    monkeypatch.setattr(racelib, "_MORE_BITS", 1)
    gaps, rate = [3, 0, 1, 6, 2], Fraction(1, 2)
    counts = _draws(gaps, rate, 3_000, seed=5)
    assert chi2_counts(counts, _pmf(gaps, rate)) > P_MIN


class _Scripted:
    """A RandomSource that returns the given arrays in turn (and fails if asked for more)."""

    def __init__(self, *calls: list[int]) -> None:
        self.calls = [np.array(c, dtype=np.int64) for c in calls]
        self.bounds: list[int] = []

    def uniform_ints(self, n: int, bound: int) -> Int64Array:
        out = self.calls.pop(0)
        assert out.size == n and (out < bound).all()
        self.bounds.append(bound)
        return out


def test_tied_cells_are_refined_with_more_bits_until_decided() -> None:
    """Two cells with equal γ and equal first 52 bits cannot be told apart by the float pass;
    the next bits decide: the larger uniform V has the smaller key ln(-ln V). A second tie
    (equal next bits) takes one more round."""
    k = 1 << 51
    src = _Scripted([k, k], [5, 9])
    assert race([np.array([0, 0])], Fraction(1), src).tolist() == [1]
    assert src.bounds == [1 << 52, 1 << 62]
    # cell 2 (V near 0) is out at once; (uniforms that differ by one in their last bits are
    # adjacent intervals, which touch: a gap of 3 decides)
    src = _Scripted([k, k, 7], [5, 5], [4, 1])
    assert race([np.array([0, 0, 0])], Fraction(1), src).tolist() == [0]
    assert src.bounds == [1 << 52, 1 << 62, 1 << 62]


def test_extreme_uniforms_are_decided_by_the_float_pass() -> None:
    """k = 2^52 - 1 (V up to 1: key down to -inf) wins against a cell of key about -0.37, and
    k = 0 (V down to 0: key up to +inf) loses, without asking for more bits."""
    src = _Scripted([(1 << 52) - 1, 1 << 51, 0])
    assert race([np.array([0, 0, 0])], Fraction(1), src).tolist() == [0]
    src = _Scripted([0, 1 << 51])
    assert race([np.array([0, 0])], Fraction(1), src).tolist() == [1]


def test_float_bounds_contain_the_key() -> None:
    """The float pass's interval holds ln(-ln V) + γ at both ends of V's range (f is
    monotone, so everywhere in it), for uniforms at the extremes and across the range, gaps
    from 0 to beyond 2^62 and rates from tiny to huge (mpmath at 40 digits)."""
    rng = np.random.default_rng(8)
    ks = [0, 1, 2, 3, (1 << 51), (1 << 52) - 3, (1 << 52) - 2, (1 << 52) - 1]
    ks += rng.integers(0, 1 << 52, 200).tolist()
    gaps = [0, 1, 7, 10**6, (1 << 53) + 1, (1 << 62) - 1, 1 << 62, (1 << 63) - 1]
    for rate in (Fraction(1, 2), Fraction(1, 10**12), Fraction(3, 7), Fraction(10**6)):
        bits = np.array([ks] * len(gaps), dtype=np.int64)
        table = np.array([[g] * len(ks) for g in gaps], dtype=np.int64)
        gap_f, unbounded, _ = racelib._float_gaps(list(table), len(ks))
        low, high = racelib._float_bounds(bits, gap_f, rate)
        high[unbounded] = np.inf
        with mpmath.workdps(40):
            for i, g in enumerate(gaps):
                gamma = mpmath.mpf(rate.numerator) * g / rate.denominator
                for j, k in enumerate(ks):
                    if k + 1 < 1 << 52:  # the key's least value, at V = (k + 1) / 2^52
                        least = mpmath.log(-mpmath.log(mpmath.mpf(k + 1) / 2**52)) + gamma
                        assert low[i, j] <= least, (k, g, rate)
                    if k > 0:  # its greatest, at V = k / 2^52
                        most = mpmath.log(-mpmath.log(mpmath.mpf(k) / 2**52)) + gamma
                        assert most <= high[i, j], (k, g, rate)


def test_decimal_bounds_contain_the_key() -> None:
    """Each round's interval holds ln(-ln V) + γ for V anywhere in its range (checked at the
    ends and the middle with mpmath at 50 more digits), and is about as narrow as the bits."""
    rng = np.random.default_rng(3)
    cases = [(1, 62), ((1 << 62) - 2, 62), (1, 300), ((1 << 300) - 2, 300)]
    for _ in range(200):
        bits = int(rng.integers(62, 300))
        cases.append((int(rng.integers(1, 1 << 62)) << (bits - 62), bits))
    for i, (k, bits) in enumerate(cases):
        gamma = Fraction(int(rng.integers(0, 10**6)), int(rng.integers(1, 10**3)))
        ctx = Context(prec=bits * 3 // 10 + 30, Emin=-999999, Emax=999999)
        low, high = racelib._decimal_bounds(k, bits, gamma, ctx)
        with mpmath.workdps(bits * 3 // 10 + 80):
            for v in (mpmath.mpf(k) / 2**bits, (mpmath.mpf(k) + 0.5) / 2**bits,
                      (mpmath.mpf(k) + 1) / 2**bits):
                key = (mpmath.log(-mpmath.log(v))
                       + mpmath.mpf(gamma.numerator) / gamma.denominator)
                assert low <= Decimal(mpmath.nstr(key, mpmath.mp.dps - 10)) <= high, i
        if i >= 4:  # (not at the extremes, where ln(-ln V) is steep)
            assert high - low < Decimal(2) ** (12 - bits)


def test_numpy_log_is_within_the_assumed_error() -> None:
    """The float pass assumes numpy's log is correct to 2^-46 relative (module docstring);
    checked against correctly rounded decimal logs on the inputs it meets (k/2^52 for k across
    the range, and -ln of those)."""
    ctx = Context(prec=40)
    ks = np.unique(np.concatenate([
        np.arange(1, 2000), (1 << 52) - np.arange(1, 2000),
        np.random.default_rng(1).integers(1, 1 << 52, 20_000)]))
    u = ks.astype(np.float64) * 2.0**-52
    e = -np.log(u)
    for inputs in (u, e):
        for x, got in zip(inputs.tolist(), np.log(inputs).tolist()):
            exact = Decimal(x).ln(ctx)  # (Decimal(float) is the double's exact value)
            assert abs(Decimal(got) - exact) <= abs(exact) * Decimal(2) ** -46, (x, got)


@pytest.mark.statistical
def test_python_int_gaps_and_gaps_beyond_2_62() -> None:
    """Gaps held as Python ints, two of them above 2^62 (clipped in the float pass, upper
    bound +inf), with a rate that makes their γ 1 and 2: the law is still exact."""
    gaps, rate = [0, 1 << 63, 1 << 64, 1 << 62], Fraction(1, 1 << 63)
    counts = _draws(gaps, rate, 20_000, seed=9, dtype=object)
    assert chi2_counts(counts, _pmf(gaps, rate)) > P_MIN


@pytest.mark.statistical
def test_groups_of_different_sizes() -> None:
    src = SeededRandomSource(4)
    a, b = [2, 0, 1], [0, 3, 0, 1, 5]
    picks = race([np.array(a), np.array(b)] * 20_000, Fraction(1, 2), src)
    counts_a = np.bincount(picks[0::2], minlength=3)
    counts_b = np.bincount(picks[1::2], minlength=5)
    assert picks[0::2].max() < 3
    assert chi2_counts(counts_a, _pmf(a, Fraction(1, 2))) > P_MIN
    assert chi2_counts(counts_b, _pmf(b, Fraction(1, 2))) > P_MIN


def test_no_groups_and_empty_groups() -> None:
    assert race([], Fraction(1), SeededRandomSource(0)).tolist() == []
    with pytest.raises(ValueError, match="at least one cell"):
        race([np.array([], dtype=np.int64)], Fraction(1), SeededRandomSource(0))


def test_huge_rate_is_exact_too() -> None:
    """A rate beyond 2^900 (clipped in the float pass): every cell but the best is out."""
    rate = Fraction(2) ** 1000
    picks = race([np.array([1, 0, 1])] * 50, rate, SeededRandomSource(2))
    assert set(picks.tolist()) == {1}
