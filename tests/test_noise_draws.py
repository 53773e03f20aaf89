"""Noise draws per measure (``assemble._draws``): measures with equal noise share one sampler
call, and each still gets its own independent values.

Oracle: under a seeded source, the draws of k measures with equal noise are exactly one call's
k*n values cut in measure order, so no two measures reuse a value position (reusing a slice
would add the same noise to two aggregates: their difference would be exact).
"""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import numpy as np

from privplan.assemble import _draws
from privplan.mechanisms.noise import DiscreteGaussian, DiscreteLaplace
from privplan.testing import seeded_noise


def _planned(*noises: object, kinds: tuple[str, ...] = ()) -> list:
    kinds = kinds or ("count",) * len(noises)
    return [SimpleNamespace(noise=n, measure=SimpleNamespace(kind=k))
            for n, k in zip(noises, kinds)]


def test_equal_noise_is_one_call_cut_in_order() -> None:
    a, b = DiscreteLaplace(Fraction(3)), DiscreteLaplace(Fraction(3))  # equal, not identical
    other = DiscreteGaussian(Fraction(4))
    planned = _planned(a, other, b)
    n = 50
    with seeded_noise(11):
        got = _draws(planned, n)  # type: ignore[arg-type]
    with seeded_noise(11):
        shared = a.sample(2 * n)
        separate = other.sample(n)
    assert set(got) == {0, 1, 2}
    np.testing.assert_array_equal(got[0], shared[:n])
    np.testing.assert_array_equal(got[2], shared[n:])
    np.testing.assert_array_equal(got[1], separate)
    assert not np.array_equal(got[0], got[2])


def test_quantiles_get_no_draws_and_sizes_are_exact() -> None:
    lap = DiscreteLaplace(Fraction(1))
    planned = _planned(lap, lap, object(), kinds=("count", "select_count", "quantile"))
    for n in (0, 1, 7):
        got = _draws(planned, n)  # type: ignore[arg-type]
        assert set(got) == {0, 1}
        assert all(len(v) == n and v.dtype == np.int64 for v in got.values())
