"""Test-only switches for privplan's noise. NEVER use them on real data.

Both context managers defeat differential privacy inside their ``with`` block:

* :func:`seeded_noise` makes every noise sample a deterministic function of a seed, so anyone
  who knows (or guesses) the seed can subtract the noise;
* :func:`noise_disabled` makes every noise sample 0, so answers are the exact, private values.

They exist so that tests can reproduce runs and compare DP answers with plain SQL. They are not
reachable from SQL, a policy file or the command line: only code that imports
``privplan.testing`` and enters the context can use them. They act through context variables of
:mod:`privplan.mechanisms.samplers`, so they apply to the current thread / asyncio task only
(a thread started inside the block does *not* inherit them and gets secure noise).

>>> from fractions import Fraction
>>> from privplan.mechanisms.samplers import sample_discrete_laplace
>>> with noise_disabled():
...     sample_discrete_laplace(Fraction(2), 3).tolist()
[0, 0, 0]
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from privplan.mechanisms import samplers
from privplan.mechanisms.samplers import Int64Array

__all__ = ["SeededRandomSource", "noise_disabled", "seeded_noise"]


class SeededRandomSource:
    """Deterministic uniform integers from ``np.random.Generator(np.random.PCG64(seed))``.

    NOT cryptographically secure: for tests only. Never touches numpy's global RNG.
    ``Generator.integers`` draws exactly uniform integers (no modulo bias).
    """

    def __init__(self, seed: int) -> None:
        self._rng = np.random.Generator(np.random.PCG64(seed))

    def uniform_ints(self, n: int, bound: int) -> Int64Array:
        samplers._check_request(n, bound)
        return self._rng.integers(0, bound, size=n, dtype=np.int64)


@contextmanager
def seeded_noise(seed: int) -> Iterator[None]:
    """Within the block, noise is reproducible from ``seed``. TESTS ONLY: this removes privacy.

    >>> from fractions import Fraction
    >>> from privplan.mechanisms.samplers import sample_discrete_laplace
    >>> with seeded_noise(7):
    ...     a = sample_discrete_laplace(Fraction(2), 5)
    >>> with seeded_noise(7):
    ...     b = sample_discrete_laplace(Fraction(2), 5)
    >>> bool((a == b).all())
    True
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    token = samplers._SOURCE_OVERRIDE.set(SeededRandomSource(seed))
    try:
        yield
    finally:
        samplers._SOURCE_OVERRIDE.reset(token)


@contextmanager
def noise_disabled() -> Iterator[None]:
    """Within the block, every noise sample is 0. TESTS ONLY: answers are then not private."""
    token = samplers._NOISE_DISABLED.set(True)
    try:
        yield
    finally:
        samplers._NOISE_DISABLED.reset(token)
