"""Speed of privplan's exact noise: draws per second and the time to noise an aggregate table.

Run: ``PYTHONPATH=src python benchmarks/noise.py [--draws N] [--repeat R]``.
Prints a table and writes ``benchmarks/results/noise.json``. Never asserts on wall time.
Randomness is the production source (os.urandom); single process, numpy only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np

from privplan.mechanisms.noise import DiscreteGaussian, DiscreteLaplace, noise_columns

LAPLACE_SCALES = [Fraction(1, 10), Fraction(2), Fraction(1000), Fraction(10**6)]
GAUSSIAN_SIGMA2 = [Fraction(1), Fraction(100), Fraction(10**6), Fraction(10**12)]


def _best_time(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--draws", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    rows: list[dict[str, object]] = []
    mechs = [DiscreteLaplace(s) for s in LAPLACE_SCALES] + [
        DiscreteGaussian(s) for s in GAUSSIAN_SIGMA2
    ]
    for mech in mechs:
        seconds = _best_time(lambda m=mech: m.sample(args.draws), args.repeat)
        rows.append(
            {
                "mechanism": mech.describe(),
                "draws": args.draws,
                "seconds": seconds,
                "draws_per_second": args.draws / seconds,
            }
        )

    table = {
        "count": np.arange(args.rows, dtype=np.int64) % 1000,
        "sum": np.arange(args.rows, dtype=np.int64) * 37,
        "sum_sq": np.arange(args.rows, dtype=np.int64) * 3,
    }
    noise = {
        "count": DiscreteLaplace(Fraction(2)),  # COUNT at epsilon = 0.5
        "sum": DiscreteLaplace(Fraction(2 * 10**6)),  # SUM, sensitivity 1e6, epsilon = 0.5
        "sum_sq": DiscreteGaussian(Fraction(10**12)),  # zCDP column, sigma = 1e6
    }
    table_seconds = _best_time(lambda: noise_columns(table, noise), args.repeat)

    width = max(len(str(r["mechanism"])) for r in rows)
    print(f"{'mechanism':<{width}}  {'draws':>9}  {'seconds':>8}  {'draws/s':>12}")
    for r in rows:
        print(
            f"{r['mechanism']!s:<{width}}  {r['draws']:>9}  {r['seconds']:>8.3f}  "
            f"{r['draws_per_second']:>12,.0f}"
        )
    print(
        f"\nnoise a {args.rows:,}-row aggregate table, 3 int64 columns "
        f"(Laplace t=2, Laplace t=2e6, Gaussian sigma=1e6): {table_seconds:.3f} s"
    )

    out = Path(__file__).resolve().parent / "results" / "noise.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "samplers": rows,
                "table": {
                    "rows": args.rows,
                    "columns": {k: v.describe() for k, v in noise.items()},
                    "seconds": table_seconds,
                },
                "repeat": args.repeat,
                "machine": {
                    "python": platform.python_version(),
                    "numpy": np.__version__,
                    "cpus": os.cpu_count(),
                    "platform": platform.platform(),
                },
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
