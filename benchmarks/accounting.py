"""Accounting speed: compose n mechanisms from scratch, and admit one more against n.

Mechanisms have random range and equality predicates over three columns (an int ``age``, a
string ``region`` and a float ``amount``), a fifth of them GROUP BY ``region``; costs are
PureDP epsilons from {0.1, 0.25, 0.5, 1}. For each n the script times ``compose`` (from
scratch) under add/remove and replace, then builds an :class:`Accountant` holding the n
mechanisms and times ``preview``/``admit`` of one more (median over several new mechanisms).
It prints a table and writes ``benchmarks/results/accounting.json``. No assertions on time:
targets are 1,000 mechanisms in < 1 s and one admission against 1,000 in < 50 ms.

Run: ``PYTHONPATH=src python benchmarks/accounting.py [--sizes 10 100 1000 10000]``
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from pathlib import Path

from privplan.accounting.accountant import Accountant
from privplan.accounting.definitions import PureDP
from privplan.accounting.model import MechanismSpec, Partition, TableModel
from privplan.accounting.solver import compose
from privplan.analysis.regions import Region
from privplan.analysis.sets import ColumnSet

REGIONS = [f"r{i:02d}" for i in range(20)]
EPS = [0.1, 0.25, 0.5, 1.0]


def random_mechanism(rng: random.Random, i: int) -> MechanismSpec:
    constraints: dict[str, ColumnSet] = {}
    while not constraints:
        if rng.random() < 0.6:
            lo = rng.randrange(0, 100)
            constraints["age"] = ColumnSet.interval(lo, min(100, lo + rng.randrange(1, 40)))
        if rng.random() < 0.5:
            k = 1 if rng.random() < 0.8 else 2
            constraints["region"] = ColumnSet.points(rng.sample(REGIONS, k))
        if rng.random() < 0.4:
            cut = round(rng.uniform(0, 1000), 2)
            if rng.random() < 0.5:
                constraints["amount"] = ColumnSet.interval(None, cut, hi_closed=False)
            else:
                constraints["amount"] = ColumnSet.interval(cut, None)
    partition = Partition(("region",), ("region",)) if rng.random() < 0.2 else None
    return MechanismSpec(
        f"q{i}", "visits", Region.box(**constraints), PureDP(rng.choice(EPS)), partition
    )


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run(n: int, seed: int, trials: int) -> dict[str, object]:
    rng = random.Random(seed)
    mechs = [random_mechanism(rng, i) for i in range(n)]
    extra = [random_mechanism(rng, n + t) for t in range(trials)]
    row: dict[str, object] = {"n": n}
    for nb in ("add_remove", "replace"):
        tables = {"visits": TableModel(nb)}
        t, comp = timed(lambda tables=tables: compose(mechs, tables, PureDP))
        row[f"compose_{nb}_s"] = t
        row[f"cost_{nb}"] = comp.cost.epsilon
        row[f"exact_{nb}"] = comp.exact
        acc = Accountant(tables, PureDP)
        acc.admit(mechs)
        previews = []
        for m in extra:
            t0 = time.perf_counter()
            acc.preview([m])
            previews.append(time.perf_counter() - t0)
        row[f"admit_{nb}_ms"] = 1000 * statistics.median(previews)
        row[f"admit_{nb}_max_ms"] = 1000 * max(previews)
        t0 = time.perf_counter()
        acc.admit([extra[0]])
        row[f"admit_once_{nb}_ms"] = 1000 * (time.perf_counter() - t0)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "accounting.json"))
    args = parser.parse_args()
    rows = [run(n, args.seed, args.trials) for n in args.sizes]
    head = (
        f"{'n':>6} | {'compose a/r':>11} {'compose repl':>12} | {'admit a/r':>10} "
        f"{'(max)':>8} {'admit repl':>10} {'(max)':>8} | {'eps a/r':>7} {'eps repl':>8} exact"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['n']:>6} | {r['compose_add_remove_s']:>10.3f}s {r['compose_replace_s']:>11.3f}s | "
            f"{r['admit_add_remove_ms']:>8.1f}ms {r['admit_add_remove_max_ms']:>6.1f}ms "
            f"{r['admit_replace_ms']:>8.1f}ms {r['admit_replace_max_ms']:>6.1f}ms | "
            f"{r['cost_add_remove']:>7.2f} {r['cost_replace']:>8.2f} "
            f"{'yes' if r['exact_add_remove'] and r['exact_replace'] else 'no'}"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "seed": args.seed}
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
