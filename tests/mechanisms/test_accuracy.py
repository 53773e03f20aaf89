"""Accuracy: exact interval half-widths, empirical coverage, and derived-value intervals."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from privplan.mechanisms.accuracy import (
    Accuracy,
    accuracy,
    interval_halfwidth,
    joint_halfwidths,
    per_component_confidence,
    ratio_interval,
    stddev_interval,
    tail_probability,
    variance_interval,
)
from privplan.mechanisms.noise import DiscreteGaussian, DiscreteLaplace

from ._stats import gaussian_pmf, laplace_pmf


def _brute_halfwidth(pmf, confidence: float, limit: int) -> int:
    """Smallest a with sum_{|z| <= a} pmf(z) >= confidence, accumulating the pmf term by term."""
    p = pmf(np.arange(limit))
    mass = p[0] + 2 * np.concatenate([[0.0], np.cumsum(p[1:])])
    assert mass[-1] >= confidence
    return int(np.argmax(mass >= confidence))


@pytest.mark.parametrize(
    "scale",
    [Fraction(1, 10), Fraction(1, 2), Fraction(1), Fraction(2), Fraction(7, 3), Fraction(50)],
)
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99, 0.999])
def test_laplace_halfwidth_matches_brute_force(scale: Fraction, confidence: float) -> None:
    t = float(scale)
    expected = _brute_halfwidth(lambda z: laplace_pmf(t, z), confidence, 10**5)
    assert interval_halfwidth(DiscreteLaplace(scale), confidence) == expected


def test_laplace_closed_form_tail() -> None:
    # P(|Z| <= a) = 1 - 2 e^{-(a+1)/t}/(1 + e^{-1/t}) against the summed pmf.
    for t in (0.5, 2.0, 9.0):
        z = np.arange(-3000, 3001)
        p = laplace_pmf(t, z)
        for a in (0, 1, 5, 20):
            inside = float(p[np.abs(z) <= a].sum())
            closed = 1 - 2 * math.exp(-(a + 1) / t) / (1 + math.exp(-1 / t))
            assert inside == pytest.approx(closed, abs=1e-14)
            assert 1 - tail_probability(DiscreteLaplace(Fraction(t)), a) == pytest.approx(
                closed, abs=1e-14
            )


def test_count_at_epsilon_half() -> None:
    # t = 2: P(|Z| > 6) = 2 q^7/(1+q) = 0.0376 <= 0.05 < P(|Z| > 5) = 0.0620.
    assert interval_halfwidth(DiscreteLaplace(Fraction(2)), 0.95) == 6


@pytest.mark.parametrize(
    "sigma2",
    [Fraction(1, 10), Fraction(1, 2), Fraction(1), Fraction(5, 3), Fraction(100), Fraction(10**6)],
)
@pytest.mark.parametrize("confidence", [0.5, 0.95, 0.999])
def test_gaussian_halfwidth_matches_brute_force(sigma2: Fraction, confidence: float) -> None:
    s2 = float(sigma2)
    expected = _brute_halfwidth(lambda z: gaussian_pmf(s2, z), confidence, 10**5)
    assert interval_halfwidth(DiscreteGaussian(sigma2), confidence) == expected


@pytest.mark.parametrize("sigma2", [Fraction(10**9), Fraction(4 * 10**10)])
def test_gaussian_halfwidth_large_sigma_midpoint_rule(sigma2: Fraction) -> None:
    # Beyond sigma = 1e4 the tail uses the midpoint rule; check the answer against direct sums.
    s2 = float(sigma2)
    a = interval_halfwidth(DiscreteGaussian(sigma2), 0.95)
    n = int(12 * math.sqrt(s2))
    z = np.arange(0, n, dtype=np.float64)
    w = np.exp(-(z * z) / (2 * s2))
    norm = math.sqrt(2 * math.pi * s2)  # Poisson summation: exact to ~e^{-2 pi^2 sigma^2}
    tail = lambda k: 2 * float(w[k + 1 :].sum()) / norm
    assert tail(a) <= 0.05 < tail(a - 1)


def test_halfwidth_rejects_bad_confidence() -> None:
    for bad in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError):
            interval_halfwidth(DiscreteLaplace(Fraction(1)), bad)


def test_accuracy_dataclass_in_real_units() -> None:
    acc = accuracy(DiscreteLaplace(Fraction(2)), 0.95, resolution=0.01)
    assert isinstance(acc, Accuracy)
    assert acc.halfwidth == pytest.approx(0.06)
    assert acc.std == pytest.approx(0.01 * DiscreteLaplace(Fraction(2)).std())
    assert acc.interval(1.0) == pytest.approx((0.94, 1.06))
    assert "discrete Laplace" in acc.method and acc.confidence == 0.95


@pytest.mark.statistical
@pytest.mark.parametrize(
    "noise",
    [
        DiscreteLaplace(Fraction(2)),
        DiscreteLaplace(Fraction(37, 3)),
        DiscreteGaussian(Fraction(10)),
    ],
    ids=["laplace-2", "laplace-37/3", "gaussian-10"],
)
def test_empirical_coverage(noise) -> None:
    n = 400_000
    a = interval_halfwidth(noise, 0.95)
    p = 1 - tail_probability(noise, a)
    assert p >= 0.95
    covered = int((np.abs(noise.sample(n)) <= a).sum())
    assert abs(covered - n * p) < 5.3 * math.sqrt(n * p * (1 - p))


# --------------------------------------------------------------------------- derived values


def test_per_component_confidence() -> None:
    assert per_component_confidence(0.95, 2) == pytest.approx(0.975)
    assert per_component_confidence(0.95, 3) == pytest.approx(1 - 0.05 / 3)
    with pytest.raises(ValueError):
        per_component_confidence(0.95, 0)


def test_joint_halfwidths_use_the_union_bound() -> None:
    s_noise, c_noise = DiscreteLaplace(Fraction(40)), DiscreteLaplace(Fraction(2))
    assert joint_halfwidths([s_noise, c_noise], 0.95) == [
        interval_halfwidth(s_noise, 0.975),
        interval_halfwidth(c_noise, 0.975),
    ]
    miss = sum(
        tail_probability(n, a)
        for n, a in zip([s_noise, c_noise], joint_halfwidths([s_noise, c_noise]))
    )
    assert miss <= 0.05


def test_ratio_interval_closed_forms() -> None:
    assert ratio_interval(100, 10, 10, 2) == pytest.approx((90 / 12, 110 / 8))
    assert ratio_interval(-100, 10, 10, 2) == pytest.approx((-110 / 8, -90 / 12))
    assert ratio_interval(5, 10, 10, 2) == pytest.approx((-5 / 8, 15 / 8))
    # C's interval crosses 0: a group with an average has C >= 1, so C is in [1, 4].
    assert ratio_interval(100, 10, 1, 3) == pytest.approx((90 / 4, 110 / 1))
    # C's interval below 1: no bound, unless the value bounds give one.
    assert ratio_interval(100, 10, -5, 3) == (-math.inf, math.inf)
    assert ratio_interval(100, 10, -5, 3, bounds=(0, 50)) == (0, 50)
    assert ratio_interval(100, 10, 10, 2, bounds=(0, 10)) == pytest.approx((90 / 12, 10))


_values = st.lists(st.integers(min_value=-50, max_value=50), min_size=1, max_size=30)
_half = st.floats(min_value=0, max_value=500)


@settings(max_examples=300, deadline=None)
@given(values=_values, s_half=_half, c_half=_half, u=st.floats(-1, 1), v=st.floats(-1, 1))
def test_ratio_interval_contains_the_true_average(values, s_half, c_half, u, v) -> None:
    s_true, c_true = sum(values), len(values)
    s_noisy, c_noisy = s_true + u * s_half, c_true + v * c_half  # both intervals hold
    lo, hi = ratio_interval(s_noisy, s_half, c_noisy, c_half, bounds=(-50, 50))
    avg = s_true / c_true
    assert lo - 1e-9 <= avg <= hi + 1e-9


@settings(max_examples=300, deadline=None)
@given(
    values=_values,
    halves=st.tuples(_half, _half, _half),
    shifts=st.tuples(st.floats(-1, 1), st.floats(-1, 1), st.floats(-1, 1)),
    ddof=st.sampled_from([0, 1]),
)
def test_variance_interval_contains_the_true_variance(values, halves, shifts, ddof) -> None:
    assume(len(values) > ddof)
    arr = np.array(values, dtype=np.float64)
    s2, s, c = float((arr * arr).sum()), float(arr.sum()), float(arr.size)
    h2, h1, h0 = halves
    noisy = (s2 + shifts[0] * h2, s + shifts[1] * h1, c + shifts[2] * h0)
    lo, hi = variance_interval(
        noisy[0], h2, noisy[1], h1, noisy[2], h0, bounds=(-50, 50), ddof=ddof
    )
    true_var = float(arr.var(ddof=ddof))
    assert lo - 1e-6 * (1 + true_var) <= true_var <= hi + 1e-6 * (1 + true_var)
    slo, shi = stddev_interval(
        noisy[0], h2, noisy[1], h1, noisy[2], h0, bounds=(-50, 50), ddof=ddof
    )
    assert slo - 1e-6 <= math.sqrt(true_var) <= shi + 1e-6


def test_variance_interval_closed_form() -> None:
    # Exact inputs (zero half-widths): values 1, 2, 3 -> S2 = 14, S = 6, C = 3, variance 2/3.
    assert variance_interval(14, 0, 6, 0, 3, 0) == pytest.approx((2 / 3, 2 / 3))
    assert variance_interval(14, 0, 6, 0, 3, 0, ddof=1) == pytest.approx((1.0, 1.0))
    # Popoviciu caps the variance of values in [0, 4] at 4.
    assert variance_interval(14, 1000, 6, 1000, 3, 2, bounds=(0, 4))[1] == 4
