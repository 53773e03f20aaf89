"""Partition selection's threshold is the smallest whose δ fits (and it always fits).

A group that exists only because of one unit has a count of at most Δ; with discrete Laplace
noise Z of parameter p = exp(-ε/Δ) it passes the threshold Δ + a with probability
P(Z >= a) = p^a / (1 + p). Oracle: that tail at 100 digits (mpmath). The margin a must satisfy
P(Z >= a) <= δ (privacy), and P(Z >= a - 1) > δ (it is the smallest: the release probability is
within a factor p of δ, not a rounding margin below it).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import mpmath as mp
import pytest

import privplan as pp
from privplan.planning.costs import selection_margin

RATES = [Fraction(1, 10**6), Fraction(1, 1000), Fraction(1, 7), Fraction(1, 2), Fraction(1),
         Fraction(3), Fraction(20), Fraction(10**9)]
DELTAS = [Fraction(1, 2), Fraction(1, 20), Fraction(1, 10**6), Fraction(1, 10**12),
          Fraction(1, 10**300)]


def _tail(rate: Fraction, delta: Fraction, a: int) -> tuple[object, object]:
    with mp.workdps(100):
        p = mp.exp(-mp.mpf(rate.numerator) / rate.denominator)
        return p ** a / (1 + p), mp.mpf(delta.numerator) / delta.denominator


@pytest.mark.parametrize(("rate", "delta"), list(itertools.product(RATES, DELTAS)))
def test_the_margin_is_the_smallest_that_fits(rate: Fraction, delta: Fraction) -> None:
    a = selection_margin(rate, delta)
    tail, d = _tail(rate, delta, a)
    assert tail <= d
    if a > 0:
        before, _ = _tail(rate, delta, a - 1)
        assert before > d


@pytest.mark.invariant(5)
def test_a_group_of_one_unit_is_released_with_probability_near_delta() -> None:
    """The review's case, ε = 1 per group over Δ = 1 and δ = 0.05: the old threshold (a float
    bound plus one step of margin) released such a group with probability 0.0134, 3.7x below
    the δ charged; the exact one with 0.0364."""
    a = selection_margin(Fraction(1), Fraction(1, 20))
    tail, _ = _tail(Fraction(1), Fraction(1, 20), a)
    assert a == 3 and 0.036 < float(tail) <= 0.05


def test_the_planned_threshold_uses_it(demo_db, demo_policy) -> None:  # type: ignore[no-untyped-def]
    sess = pp.connect(demo_db, policy=demo_policy, budget=pp.ApproxDP(10, 1e-3))
    try:
        e = sess.explain("SELECT age, COUNT(*) AS n FROM visits GROUP BY age", epsilon=1,
                         delta=1e-6)
        [sel] = [m for m in e.mechanisms if m.threshold is not None]
        rate = Fraction(sel.cost.exact_epsilon) / sel.sensitivity
        assert sel.threshold == sel.sensitivity + selection_margin(
            rate, Fraction(sel.cost.exact_delta))
    finally:
        sess.close()
