"""Does the quantile sampler's running time tell neighbouring datasets apart? And its speed.

Run: ``PYTHONPATH=src python benchmarks/quantile_timing.py [--timings 500] [--cells 1000]
[--speed-repeat 30] [--out PATH]``. Prints two tables and writes
``benchmarks/results/quantile_timing.json``. Never asserts on wall time.

**Timing channel.** MIN (q = 0, ε = 1, add/remove) over a grid of ``--cells`` cells, for two
neighbouring histograms: 12 rows vs 11 rows, all in the lowest cell (U(g) = rows below g: 0 at
the bound, 12 or 11 everywhere else). ``ExponentialMechanism.select`` is timed ``--timings``
times on each, interleaved in a random order, with the production randomness (os.urandom). A
threshold classifier on the time alone ("12 rows if t > θ", or "if t < θ") is fitted on one
half of the timings and scored on the other, both ways round (two-fold cross-validation); its
accuracy is reported (0.5: the time says nothing; the target is <= 0.53). The same is measured
for the rejection sampler privplan used before the exponential race (kept here, below, only for
this comparison; it drew ε·U/(2Δ) for MIN as the mechanism then did), whose number of
proposals follows the normalising constant.

**Speed.** The median time of ``select`` for 1, 5 and 20 groups of a 1,000-cell median
(q = 1/2, 1,000 rows per group spread over the grid), new and old sampler.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
from _common import git_revision, machine_info, write_json

from privplan.mechanisms import samplers
from privplan.mechanisms.exponential import ExponentialMechanism, quantile_utilities
from privplan.mechanisms.samplers import Int64Array, _bernoulli_exp, _Fractions

HERE = Path(__file__).resolve().parent
_PROPOSALS = 64


def old_select(epsilon: Fraction, utilities: list[np.ndarray], sensitivity: int) -> Int64Array:
    """The rejection sampler privplan used before (``ExponentialMechanism.select`` up to the
    exponential race): uniform proposals, each accepted with an exact Bernoulli(exp(-γ))."""
    groups = len(utilities)
    out = np.zeros(groups, dtype=np.int64)
    src = samplers._source()
    width = max(u.size for u in utilities)
    table = np.full((groups, width), -1, dtype=np.int64)
    for i, u in enumerate(utilities):
        table[i, : u.size] = u - u.min()
    sizes = np.array([u.size for u in utilities], dtype=np.int64)
    num, den = epsilon.numerator, 2 * sensitivity * epsilon.denominator
    pending = np.arange(groups)
    while pending.size:
        lanes = np.repeat(pending, _PROPOSALS)
        picks = np.empty(lanes.size, dtype=np.int64)
        for size in np.unique(sizes[pending]).tolist():
            on = sizes[lanes] == size
            picks[on] = src.uniform_ints(int(on.sum()), int(size))
        scaled = table[lanes, picks] * num
        accepted = _bernoulli_exp(src, scaled // den, _Fractions.of(scaled % den, den))
        done = []
        for j, group in enumerate(pending.tolist()):
            hits = np.flatnonzero(accepted[j * _PROPOSALS:(j + 1) * _PROPOSALS])
            if hits.size:
                out[group] = picks[j * _PROPOSALS + int(hits[0])]
                done.append(j)
        pending = np.delete(pending, done)
    return out


def _timings(select: Callable[[np.ndarray], object], utilities: tuple[np.ndarray, np.ndarray],
             per_side: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``per_side`` timings (ns) of ``select`` on each of the two utility vectors, in a random
    interleaved order (so drift in the machine's load hits both alike)."""
    order = rng.permutation(np.repeat([0, 1], per_side))
    for side in (0, 1):  # warm-up
        select(utilities[side])
    times: list[list[int]] = [[], []]
    for side in order.tolist():
        start = time.perf_counter_ns()
        select(utilities[side])
        times[side].append(time.perf_counter_ns() - start)
    return np.array(times[0]), np.array(times[1])


def _best_threshold(a: np.ndarray, b: np.ndarray) -> tuple[float, bool]:
    """The threshold θ and direction (True: "b if t > θ") that classify ``a`` vs ``b`` best."""
    values = np.sort(np.concatenate([a, b]))
    cuts = np.concatenate([[values[0] - 1], (values[:-1] + values[1:]) / 2, [values[-1] + 1]])
    a_sorted, b_sorted = np.sort(a), np.sort(b)
    a_below = np.searchsorted(a_sorted, cuts, side="right")  # a classified "a" when t <= θ
    b_above = b.size - np.searchsorted(b_sorted, cuts, side="right")
    up = (a_below + b_above) / (a.size + b.size)
    down = 1 - up
    i, j = int(np.argmax(up)), int(np.argmax(down))
    return (float(cuts[i]), True) if up[i] >= down[j] else (float(cuts[j]), False)


def _accuracy(a: np.ndarray, b: np.ndarray, threshold: float, up: bool) -> float:
    right = (a <= threshold).sum() + (b > threshold).sum()
    if not up:
        right = a.size + b.size - right
    return float(right / (a.size + b.size))


def classifier_accuracy(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Held-out accuracy (two-fold, halves by position in the interleaved run) of a threshold
    fitted on the other half; and the in-sample best, an optimistic bound."""
    ha, hb = a.size // 2, b.size // 2
    scores = []
    for train_a, train_b, test_a, test_b in ((a[:ha], b[:hb], a[ha:], b[hb:]),
                                             (a[ha:], b[hb:], a[:ha], b[:hb])):
        threshold, up = _best_threshold(train_a, train_b)
        scores.append(_accuracy(test_a, test_b, threshold, up))
    threshold, up = _best_threshold(a, b)
    return {"held_out": float(np.mean(scores)), "in_sample": _accuracy(a, b, threshold, up)}


def timing_channel(per_side: int, cells: int, seed: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    eps, q = Fraction(1), Fraction(0)
    hists = []
    for rows in (12, 11):
        counts = np.zeros(cells, dtype=np.int64)
        counts[0] = rows
        hists.append(quantile_utilities(counts, q))
    utilities = (hists[0], hists[1])
    new = ExponentialMechanism(eps, monotone=True)
    samplers_ = {
        "exponential race (now)": lambda u: new.select([u], 1),
        "rejection sampler (before)": lambda u: old_select(eps, [u], 1),
    }
    out = []
    for name, select in samplers_.items():
        t12, t11 = _timings(select, utilities, per_side, rng)
        acc = classifier_accuracy(t12, t11)
        out.append({"sampler": name, "timings_per_side": per_side, "cells": cells,
                    "median_us_12_rows": float(np.median(t12)) / 1e3,
                    "median_us_11_rows": float(np.median(t11)) / 1e3,
                    "accuracy_held_out": acc["held_out"], "accuracy_in_sample": acc["in_sample"]})
    return out


def speed(repeat: int, cells: int, seed: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    eps, q = Fraction(1), Fraction(1, 2)
    mech = ExponentialMechanism(eps)
    out = []
    for groups in (1, 5, 20):
        utilities = [quantile_utilities(np.bincount(rng.integers(0, cells, 1000),
                                                    minlength=cells), q)
                     for _ in range(groups)]
        row: dict[str, object] = {"groups": groups, "cells": cells}
        for name, fn in (("new_ms", lambda u=utilities: mech.select(u, 1)),
                         ("old_ms", lambda u=utilities: old_select(eps, u, 1))):
            fn()
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            row[name] = float(np.median(times)) * 1e3
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timings", type=int, default=500, help="timings per neighbour")
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--speed-repeat", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "quantile_timing.json")
    args = parser.parse_args()

    channel = timing_channel(args.timings, args.cells, args.seed)
    print(f"MIN over {args.cells} cells, 12 vs 11 rows at the bound, ε = 1, "
          f"{args.timings} timings each (threshold classifier on time alone; 0.5 = chance)")
    print(f"{'sampler':<28} {'median µs (12)':>15} {'median µs (11)':>15} "
          f"{'held-out acc.':>14} {'in-sample':>10}")
    for r in channel:
        print(f"{r['sampler']:<28} {r['median_us_12_rows']:>15.1f} {r['median_us_11_rows']:>15.1f}"
              f" {r['accuracy_held_out']:>14.3f} {r['accuracy_in_sample']:>10.3f}")
    rows = speed(args.speed_repeat, args.cells, args.seed)
    print(f"\nselect() on a {args.cells}-cell median, median of {args.speed_repeat} runs")
    print(f"{'groups':>6} {'now ms':>8} {'before ms':>10}")
    for r in rows:
        print(f"{r['groups']:>6} {r['new_ms']:>8.3f} {r['old_ms']:>10.3f}")
    write_json(args.out, {"benchmark": "quantile_timing", "machine": machine_info(),
                          "git": git_revision(), "timing_channel": channel, "speed": rows,
                          "args": {k: str(v) for k, v in vars(args).items()}})


if __name__ == "__main__":
    main()
